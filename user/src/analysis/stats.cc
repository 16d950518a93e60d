#include "analysis/stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nvmetrace {

// ----------------------------------------------------------------- stats

std::string size_label(uint64_t bytes) {
    constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;
    if (bytes && bytes % GiB == 0)
        return fmt::format("{}GiB", bytes / GiB);
    if (bytes && bytes % MiB == 0)
        return fmt::format("{}MiB", bytes / MiB);
    if (bytes && bytes % KiB == 0)
        return fmt::format("{}KiB", bytes / KiB);
    return fmt::format("{}B", bytes);
}

struct Stats::Group {
    size_t id = 0;  // creation order (GroupSummary::id, IntervalRow::group)
    Layout layout;
    std::string label, size_label, device;
    bool passthru = false;  // passthrough commands (their layout has no bio)
    bool resent = false;    // host: their bios failed over on an earlier request first
    Span span;
    uint64_t reap_window_sum = 0, reap_window_max = 0;  // ns, commands reaped from the ring
    Op op;
    Side side;
    uint64_t size;
    uint64_t bytes = 0;  // sum of sizes
    Accumulator e2e;
    double e2e_sq = 0;             // sum of squares (us^2), for the standard deviation
    std::vector<double> stage_sq;  // per stage, likewise
    std::vector<Histogram> stage_hist;
    std::vector<DurationSum> stage_now;  // scratch: this command's time per stage
    std::vector<Accumulator> segments;
    std::vector<Accumulator> details;
    // the current interval
    uint64_t i_n = 0;
    DurationSum i_sum = 0;
    Histogram i_hist;
    std::vector<DurationSum> i_segments;
    // the tail: per CoarseHistogram bucket of the end to end, its commands'
    // time per segment (allocated for the buckets that have commands)
    struct TailBin {
        uint64_t n = 0;
        DurationSum e2e = 0;
        std::vector<DurationSum> segments;
    };
    std::vector<TailBin> tail_bins;
    struct Queue {
        uint64_t n = 0;
        DurationSum sum = 0;
        CoarseHistogram hist;
    };
    std::map<uint32_t, Queue> queues;  // cntlid << 16 | qid
};

Stats::Stats(const DeviceTable& devices, Options opts, IntervalSink sink)
    : devices_(devices), opts_(opts), sink_(std::move(sink)) {
    if (opts_.sample_n == 0)
        opts_.sample_n = 1;
}

Stats::~Stats() = default;

Stats::Group& Stats::group_for(const Command& cmd) {
    View view = view_of(cmd);
    // A command's path depends only on its view and events: computed once each.
    const uint64_t pk = uint64_t{cmd.present} << 8 | static_cast<uint8_t>(view);
    auto pit = paths_.find(pk);
    if (pit == paths_.end())
        pit = paths_
                  .emplace(pk, std::pair{missing_boundaries(cmd, opts_.table),
                                         layout_key(view, cmd.present, opts_.table)})
                  .first;
    Key key{cmd.op,
            cmd.size_in_blocks,
            cmd.size,
            cmd.side,
            cmd.side == Side::host ? cmd.dev : 0,
            cmd.side == Side::host ? cmd.origin : uint16_t{0},
            cmd.side == Side::host && device_label_ ? cmd.cntlid : uint16_t{0},
            cmd.side == Side::target ? cmd.nsid : 0,
            cmd.side == Side::host ? cmd.submit_path : SubmitPath::none,
            cmd.side == Side::host && cmd.reap_unseen,
            cmd.side == Side::host && cmd.reap_ring,
            cmd.side == Side::host && cmd.attempts_before > 0,
            cmd.spdk_target,
            view,
            pit->second.first,
            pit->second.second};
    if (last_ && key.tie() == last_key_.tie())
        return *last_;
    auto& slot = groups_[key];
    if (!slot) {
        auto g = std::make_unique<Group>();
        g->id = groups_.size() - 1;  // the slot is already in the map
        g->layout = layout_for(view, key.present, opts_.table);
        g->op = cmd.op;
        g->side = cmd.side;
        g->size = cmd.size;
        g->size_label =
            cmd.size_in_blocks ? fmt::format("{} blocks", cmd.size) : size_label(cmd.size);
        g->device = cmd.side == Side::target ? devices_.target_name(cmd.nsid)
                    : device_label_          ? device_label_(cmd)
                                             : devices_.disk_name(cmd.dev);
        g->label = fmt::format("{} {} {}", op_name(cmd.op), g->size_label, g->device);
        if (!g->layout.missing.empty())
            g->label += fmt::format(" (no {})", fmt::join(g->layout.missing, ", "));
        g->passthru = cmd.passthru;
        if (cmd.passthru)
            g->label += " (passthrough)";
        g->span = span_of(g->layout, key.path, key.reap_unseen, key.reap_ring);
        if (!g->span.interface.empty())
            g->label += fmt::format(" ({})", g->span.interface);
        if (g->span.reap_ring)
            g->label += " (reaped from the CQ ring)";
        g->resent = key.resent;
        if (key.resent)
            g->label += " (failed over, sent again)";
        g->segments.resize(g->layout.segments.size());
        g->stage_sq.resize(g->layout.stages.size());
        g->stage_hist.resize(g->layout.stages.size());
        g->stage_now.resize(g->layout.stages.size());
        g->i_segments.resize(g->layout.segments.size());
        g->details.resize(g->layout.details.size());
        slot = std::move(g);
    }
    last_ = slot.get();
    last_key_ = key;
    return *slot;
}

void Stats::add(const Command& cmd) {
    uint64_t end = cmd.last_ts();
    if (!started_) {
        origin_ = opts_.origin_ns ? opts_.origin_ns : cmd.first_ts();
        interval_start_ = origin_;
        started_ = true;
    }
    advance(end);
    if (cmd.failed_over) {  // its bios' later request is the I/O
        failed_over_++;
        return;
    }
    if (cmd.status != 0) {
        failed_++;
        return;
    }
    Group& g = group_for(cmd);
    const Layout& l = g.layout;
    commands_++;
    first_ts_ = std::min(first_ts_, cmd.first_ts());
    last_ts_ = std::max(last_ts_, end);

    auto span = [&](int from, int to) { return ts_span(cmd.at(from), cmd.at(to)); };
    int64_t e2e = span(l.first_slot, l.last_slot);
    g.e2e.add(e2e);
    g.reap_window_sum += cmd.reap_window_ns;
    g.reap_window_max = std::max<uint64_t>(g.reap_window_max, cmd.reap_window_ns);
    g.bytes += cmd.size;
    g.i_n++;
    g.i_sum += e2e;
    g.i_hist.add(e2e);
    const double e2e_us = static_cast<double>(e2e) / 1e3;
    g.e2e_sq += e2e_us * e2e_us;
    std::fill(g.stage_now.begin(), g.stage_now.end(), 0);
    const size_t bin = CoarseHistogram::bucket(e2e < 0 ? 0 : static_cast<uint64_t>(e2e));
    if (bin >= g.tail_bins.size())
        g.tail_bins.resize(bin + 1);
    Group::TailBin& tb = g.tail_bins[bin];
    if (tb.segments.empty())
        tb.segments.resize(l.segments.size());
    tb.n++;
    tb.e2e += e2e;
    for (size_t j = 0; j < l.segments.size(); j++) {
        int64_t d = span(l.segments[j].from_slot, l.segments[j].to_slot);
        g.segments[j].add(d);
        g.i_segments[j] += d;
        g.stage_now[l.segments[j].stage] += d;
        tb.segments[j] += d;
    }
    if (cmd.qid) {
        Group::Queue& q = g.queues[uint32_t{cmd.cntlid} << 16 | cmd.qid];
        q.n++;
        q.sum += e2e;
        q.hist.add(e2e);
    }
    for (size_t st = 0; st < g.stage_now.size(); st++) {
        const double v = static_cast<double>(g.stage_now[st]) / 1e3;
        g.stage_sq[st] += v * v;
        g.stage_hist[st].add(
            static_cast<int64_t>(std::clamp<DurationSum>(g.stage_now[st], INT64_MIN, INT64_MAX)));
    }
    for (size_t j = 0; j < l.details.size(); j++)
        if (cmd.has(l.details[j].from_slot) && cmd.has(l.details[j].to_slot))
            g.details[j].add(span(l.details[j].from_slot, l.details[j].to_slot));
}

void Stats::advance(uint64_t now_ns) {
    if (!started_ || !opts_.interval_ns)
        return;
    while (now_ns >= interval_start_ + opts_.interval_ns) {
        close_interval(interval_start_ + opts_.interval_ns);
        interval_start_ += opts_.interval_ns;
    }
}

void Stats::flush_interval(uint64_t end_ns) {
    if (!started_ || !opts_.interval_ns)
        return;
    advance(end_ns);
    if (end_ns > interval_start_) {
        close_interval(end_ns);
        interval_start_ = end_ns;
    }
}

void Stats::close_interval(uint64_t end_ns) {
    Interval iv;
    iv.start_s = static_cast<double>(interval_start_ - origin_) / 1e9;
    iv.end_s = static_cast<double>(end_ns - origin_) / 1e9;
    double len_s = iv.end_s - iv.start_s;
    for (auto& [key, gp] : groups_) {
        Group& g = *gp;
        if (!g.i_n)
            continue;
        IntervalRow r;
        r.group = g.id;
        r.label = g.label;
        r.view = g.layout.view;
        r.n = g.i_n;
        r.rate = len_s > 0 ? static_cast<double>(g.i_n) * opts_.sample_n / len_s : 0;
        r.mean_us = static_cast<double>(g.i_sum) / static_cast<double>(g.i_n) / 1e3;
        r.p50_us = g.i_hist.quantile(0.5) / 1e3;
        r.p99_us = g.i_hist.quantile(0.99) / 1e3;
        for (size_t s = 0; s < g.layout.stages.size(); s++) {
            DurationSum sum = 0;
            for (size_t j = 0; j < g.layout.segments.size(); j++)
                if (g.layout.segments[j].stage == s)
                    sum += g.i_segments[j];
            const auto& st = g.layout.stages[s];
            auto c = static_cast<size_t>(st.column);
            double share = g.i_sum ? static_cast<double>(sum) / static_cast<double>(g.i_sum) : 0;
            r.share[c] = r.share[c].value_or(0) + share;
            r.marker[c] = st.merged ? '+' : st.not_recorded ? '*' : r.marker[c];
        }
        iv.rows.push_back(std::move(r));
        g.i_n = 0;
        g.i_sum = 0;
        g.i_hist.clear();
        std::fill(g.i_segments.begin(), g.i_segments.end(), 0);
    }
    if (sink_)
        sink_(iv);
}

namespace {

// The sample standard deviation from n, the mean and the sum of squares.
double sample_sd(uint64_t n, double mean, double sum_sq) {
    if (n < 2)
        return 0;
    const double var = (sum_sq - static_cast<double>(n) * mean * mean) / static_cast<double>(n - 1);
    return var > 0 ? std::sqrt(var) : 0;
}

}  // namespace

// The commands of g above its end-to-end quantile q, by bins (TailSummary);
// nullopt when no command is above it or the group has too few for one.
std::optional<TailSummary> Stats::tail_of(const Group& g, double q) {
    const uint64_t n = g.e2e.n;
    if (n == 0 || static_cast<double>(n) * (1.0 - q) < 1.0 - 1e-9)
        return std::nullopt;
    // the bins above the one that holds the quantile's command
    const uint64_t rank = CoarseHistogram::nearest_rank(q, n);
    size_t first = 0;
    for (uint64_t seen = 0; first < g.tail_bins.size();) {
        seen += g.tail_bins[first++].n;
        if (seen >= rank)
            break;
    }
    TailSummary t;
    t.q = q;
    t.quantile_us = g.e2e.hist.quantile(q) / 1e3;
    t.threshold_us = static_cast<double>(CoarseHistogram::bucket_low(first)) / 1e3;
    t.p50_us = g.e2e.hist.quantile(0.5) / 1e3;
    const Layout& l = g.layout;
    std::vector<DurationSum> seg(l.segments.size());
    DurationSum e2e = 0;
    for (size_t b = first; b < g.tail_bins.size(); b++) {
        const auto& bin = g.tail_bins[b];
        if (!bin.n)
            continue;
        t.n += bin.n;
        e2e += bin.e2e;
        for (size_t j = 0; j < seg.size(); j++)
            seg[j] += bin.segments[j];
    }
    if (!t.n)
        return t;  // none clearly above the quantile: all within its bin
    const auto tn = static_cast<double>(t.n);
    t.fraction = tn / static_cast<double>(n);
    t.mean_us = static_cast<double>(e2e) / tn / 1e3;
    auto shares = [](std::vector<TailRow>& rows) {
        double sum = 0;
        for (const auto& r : rows)
            sum += r.beyond_us;
        for (auto& r : rows)
            r.share = sum > 0 ? r.beyond_us / sum : 0;
    };
    for (size_t st = 0; st < l.stages.size(); st++) {
        DurationSum sum = 0;
        for (size_t j = 0; j < l.segments.size(); j++)
            if (l.segments[j].stage == st)
                sum += seg[j];
        TailRow r;
        r.name = l.stages[st].name;
        r.id = stage_id(r.name);
        r.p50_us = g.stage_hist[st].quantile(0.5) / 1e3;
        r.tail_mean_us = static_cast<double>(sum) / tn / 1e3;
        r.beyond_us = r.tail_mean_us - r.p50_us;
        t.stages.push_back(std::move(r));
    }
    for (size_t j = 0; j < l.segments.size(); j++) {
        if (l.segments[j].seam)
            continue;
        TailRow r;
        r.name = l.segments[j].name;
        r.id = component_id(r.name);
        r.p50_us = g.segments[j].hist.quantile(0.5) / 1e3;
        r.tail_mean_us = static_cast<double>(seg[j]) / tn / 1e3;
        r.beyond_us = r.tail_mean_us - r.p50_us;
        t.components.push_back(std::move(r));
    }
    shares(t.stages);
    shares(t.components);
    return t;
}

namespace {

// Groups of one op, size, device and interface whose commands took different
// paths (nvmet-tcp records a command's arrival only when it starts a socket
// read, say) would print under one label: each gets the recorded events it
// lacks and another group of that label has, and a number if that is not
// enough.
void distinguish_labels(std::vector<GroupSummary>& groups, const std::vector<EventMask>& presents) {
    std::map<std::string, std::vector<size_t>> by_label;
    for (size_t i = 0; i < groups.size(); i++)
        by_label[groups[i].label].push_back(i);
    for (const auto& [label, idx] : by_label) {
        if (idx.size() < 2)
            continue;
        EventMask all = 0;
        for (size_t i : idx)
            all |= presents[i];
        for (size_t i : idx) {
            std::vector<std::string_view> lacks;
            for (EventMask m = all & ~presents[i]; m; m &= m - 1)
                lacks.push_back(kEvents[static_cast<size_t>(std::countr_zero(m))].name);
            if (!lacks.empty())
                groups[i].label += fmt::format(" (without {})", fmt::join(lacks, ", "));
        }
        std::map<std::string, int> seen;
        for (size_t i : idx)
            if (int n = ++seen[groups[i].label]; n > 1)
                groups[i].label += fmt::format(" #{}", n);
    }
}

}  // namespace

Summary Stats::summary(uint64_t duration_ns) const {
    Summary s;
    std::vector<EventMask> presents;  // per group of s.groups: its layout key
    s.sample_n = opts_.sample_n;
    s.failed = failed_;
    s.failed_over = failed_over_;
    if (!duration_ns && commands_)
        duration_ns = last_ts_ - first_ts_;
    s.duration_s = static_cast<double>(duration_ns) / 1e9;
    const double N = opts_.sample_n;
    auto rate_of = [&](uint64_t n) {
        return s.duration_s > 0 ? static_cast<double>(n) * N / s.duration_s : 0.0;
    };

    bool any_host = false;
    for (const auto& [key, g] : groups_)
        any_host = any_host || g->side == Side::host;

    for (const auto& [key, gp] : groups_) {
        const Group& g = *gp;
        const Layout& l = g.layout;
        GroupSummary gs;
        gs.id = g.id;
        gs.label = g.label;
        gs.op = g.op;
        gs.size = g.size;
        gs.size_label = g.size_label;
        gs.device = g.device;
        gs.passthru = g.passthru;
        gs.resent = g.resent;
        gs.spdk_target = key.spdk;
        gs.view = l.view;
        gs.missing = l.missing;
        gs.span = g.span;
        gs.n = g.e2e.n;
        if (key.reap_ring && gs.n) {
            gs.reap_window_mean_us = static_cast<double>(g.reap_window_sum) / gs.n / 1e3;
            gs.reap_window_max_us = static_cast<double>(g.reap_window_max) / 1e3;
        }
        gs.rate = rate_of(gs.n);
        gs.bytes_per_s = s.duration_s > 0 && !key.size_in_blocks ? g.bytes * N / s.duration_s : 0;
        gs.mean_us = g.e2e.mean_us();
        gs.p50_us = g.e2e.hist.quantile(0.50) / 1e3;
        gs.p99_us = g.e2e.hist.quantile(0.99) / 1e3;
        gs.p999_us = g.e2e.hist.quantile(0.999) / 1e3;
        gs.avg_qd = gs.rate * gs.mean_us / 1e6;
        gs.sd_us = sample_sd(gs.n, gs.mean_us, g.e2e_sq);
        gs.hist = g.e2e.hist;

        for (size_t st = 0; st < l.stages.size(); st++) {
            DurationSum sum = 0;
            for (size_t j = 0; j < l.segments.size(); j++)
                if (l.segments[j].stage == st)
                    sum += g.segments[j].sum;
            StageSummary ss;
            ss.name = l.stages[st].name;
            ss.id = stage_id(ss.name);
            ss.column = l.stages[st].column;
            ss.not_recorded = l.stages[st].not_recorded;
            ss.merged = l.stages[st].merged;
            ss.mean_us = gs.n ? static_cast<double>(sum) / gs.n / 1e3 : 0;
            ss.share = g.e2e.sum ? static_cast<double>(sum) / static_cast<double>(g.e2e.sum) : 0;
            ss.avg_qd = gs.rate * ss.mean_us / 1e6;
            ss.sd_us = sample_sd(gs.n, ss.mean_us, g.stage_sq[st]);
            ss.hist = g.stage_hist[st];
            gs.stages.push_back(std::move(ss));
        }

        auto row = [&](std::string name, int depth, bool merged, const Accumulator& a) {
            ComponentSummary c;
            c.name = std::move(name);
            c.id = component_id(c.name);
            c.depth = depth;
            c.merged = merged;
            c.n = a.n;
            c.mean_us = a.mean_us();
            c.avg_qd = rate_of(a.n) * c.mean_us / 1e6;
            c.p50_us = a.hist.quantile(0.50) / 1e3;
            c.p99_us = a.hist.quantile(0.99) / 1e3;
            c.min_us = a.n ? static_cast<double>(a.min) / 1e3 : 0;
            c.negative = a.negative;
            return c;
        };
        for (size_t j = 0; j < l.segments.size(); j++) {
            if (l.segments[j].seam)
                continue;  // joined view: 0 by construction (ComponentDef::seam)
            gs.components.push_back(
                row(l.segments[j].name, 0, l.segments[j].merged, g.segments[j]));
            for (size_t d = 0; d < l.details.size(); d++)
                if (l.details[d].segment == j && g.details[d].n)  // recorded for some
                    gs.components.push_back(row(l.details[d].name, 1, false, g.details[d]));
        }
        gs.components.push_back(row("end to end", 0, false, g.e2e));
        for (double q : {0.99, 0.999})
            if (auto t = tail_of(g, q))
                gs.tails.push_back(std::move(*t));
        for (const auto& [k, q] : g.queues) {
            QueueSummary qs;
            qs.cntlid = static_cast<uint16_t>(k >> 16);
            qs.qid = static_cast<uint16_t>(k & 0xffff);
            qs.n = q.n;
            qs.mean_us = static_cast<double>(q.sum) / static_cast<double>(q.n) / 1e3;
            qs.p99_us = q.hist.quantile(0.99) / 1e3;
            gs.queues.push_back(qs);
        }

        if (g.side == Side::host || !any_host) {
            auto it = std::find_if(s.throughput.begin(), s.throughput.end(),
                                   [&](const OpThroughput& t) { return t.op == g.op; });
            if (it == s.throughput.end())
                it = s.throughput.insert(s.throughput.end(), OpThroughput{g.op, 0, 0});
            it->iops += gs.rate;
            it->bytes_per_s += gs.bytes_per_s;
            it->bytes_unknown = it->bytes_unknown || key.size_in_blocks;
        }
        if (key.spdk) {
            for (auto& st : gs.stages)
                st.name = spdk_target_name(st.name);
            for (auto& c : gs.components)
                c.name = spdk_target_name(c.name);
            for (auto& t : gs.tails) {
                for (auto& r : t.stages)
                    r.name = spdk_target_name(r.name);
                for (auto& r : t.components)
                    r.name = spdk_target_name(r.name);
            }
            spdk_target_span(gs.span);
        }
        s.groups.push_back(std::move(gs));
        presents.push_back(key.present);
    }
    distinguish_labels(s.groups, presents);
    return s;
}

}  // namespace nvmetrace
