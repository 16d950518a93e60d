#include "report/printer.h"

#include "util/json_num.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nvmetrace {

namespace {

constexpr int kBarWidth = 24;      // '#' for 100 %
constexpr size_t kNameWidth = 38;  // the seed's name column

std::string_view view_name(View v) {
    switch (v) {
        case View::host_only:
            return "host_only";
        case View::target_only:
            return "target_only";
        case View::joined:
            return "joined";
    }
    return "?";
}

std::string_view side_note(View v) {
    switch (v) {
        case View::host_only:
            return "host side only";
        case View::target_only:
            return "target side only";
        case View::joined:
            return "all with the target's side";
    }
    return "";
}

void rtrim(std::string& s) {
    while (!s.empty() && s.back() == ' ')
        s.pop_back();
}

std::string sampling_phrase(uint32_t n) {
    return n <= 1 ? std::string("every command sampled")
                  : fmt::format("one command in {} sampled", n);
}

// kIOPS and MB/s as fio prints them, down to where they would read 0.0: a
// slow or short run is said in IOPS and kB/s.
std::string throughput_words(const OpThroughput& t) {
    const std::string iops = t.iops >= 999.95 ? fmt::format("{:.1f} kIOPS", t.iops / 1e3)
                                              : fmt::format("{:.1f} IOPS", t.iops);
    if (t.bytes_unknown)
        return iops + ", bytes not known (sizes in blocks of no known size)";
    const std::string bw = t.bytes_per_s >= 999.95e3
                               ? fmt::format("{:.1f} MB/s", t.bytes_per_s / 1e6)
                               : fmt::format("{:.1f} kB/s", t.bytes_per_s / 1e3);
    return iops + ", " + bw;
}

}  // namespace

std::string compact_rate(double r) {
    if (r < 999.5)
        return fmt::format("{:.0f}", r);
    if (r < 999.95e3)
        return fmt::format("{:.1f}k", r / 1e3);
    return fmt::format("{:.2f}M", r / 1e6);
}

// ----------------------------------------------------------------- live

std::string live_header(uint64_t interval_ns, bool not_recorded) {
    std::string out = fmt::format(
        "every {:g} s, per group: sampled commands, rate, latency, and each stage's share of "
        "the mean\n",
        static_cast<double>(interval_ns) / 1e9);
    if (not_recorded)
        out += "(*: network and target together; the target's side is not recorded)\n";
    // "host" centred over the host's block and driver columns, "target" over
    // the target's driver and storage; the network sits between.
    out += fmt::format("{:>78}{:>25}\n", "host", "target");
    out += fmt::format("{:>8}  {:<22}{:>7}{:>9}{:>10}{:>10}{:>8}{:>8}{:>8}{:>8}{:>8}\n", "time",
                       "group", "n", "cmds/s", "mean us", "p99 us", "block", "driver", "network",
                       "driver", "storage");
    return out;
}

std::string live_rows(const Interval& iv) {
    std::string out;
    for (const auto& r : iv.rows) {
        std::string line = fmt::format("{:>7.1f}s  {:<22}{:>7}{:>9}{:>10.2f}{:>10.2f}", iv.end_s,
                                       r.label, r.n, compact_rate(r.rate), r.mean_us, r.p99_us);
        // the seed's five columns; above the block layer (syscall, wake-up)
        // follows them, labelled, only where it was recorded
        constexpr auto kUser = static_cast<size_t>(StageColumn::host_user);
        for (size_t c = 0; c < kStageColumns; c++) {
            if (c == kUser) {
                if (r.share[c])
                    line += fmt::format("  user {:.0f}%", *r.share[c] * 100);
                continue;
            }
            if (!r.share[c]) {
                line += std::string(8, ' ');
                continue;
            }
            std::string cell = fmt::format("{:.0f}%", *r.share[c] * 100);
            if (r.marker[c])
                cell += r.marker[c];
            line += fmt::format("{:>8}", cell);
        }
        rtrim(line);
        out += line + "\n";
    }
    return out;
}

// ----------------------------------------------------------------- summary

namespace {

std::string percentile_name(double q) {
    return q >= 0.999 ? "p99.9" : "p99";
}

// --detail: where the tail comes from, per tail (TailSummary).
std::string tail_text(const GroupSummary& g) {
    if (g.tails.empty())
        return fmt::format("  tail: {} commands, too few for a p99 tail (100 or more)\n", g.n);
    std::string out;
    for (const auto& t : g.tails) {
        if (!t.n) {
            out += fmt::format(
                "  tail above {}: none; no command is more than a bin's width (3.1 %) above the "
                "{} ({:.2f} us)\n",
                percentile_name(t.q), percentile_name(t.q), t.quantile_us);
            continue;
        }
        out += fmt::format(
            "  tail above {}: the {} commands ({:.2f} %) at or above {:.2f} us ({} {:.2f}), "
            "mean {:.2f} us against a median of {:.2f}; beyond each median:\n",
            percentile_name(t.q), t.n, t.fraction * 100, t.threshold_us, percentile_name(t.q),
            t.quantile_us, t.mean_us, t.p50_us);
        size_t w = kNameWidth;
        for (const auto* rows : {&t.stages, &t.components})
            for (const auto& r : *rows)
                w = std::max(w, r.name.size() + 1);
        out += fmt::format("  {:<{}}{:>10}{:>11}{:>11}{:>7}   (us)\n", "stage, then component", w,
                           "p50", "tail mean", "beyond", "share");
        for (const auto* rows : {&t.stages, &t.components}) {
            for (const auto& r : *rows)
                out += fmt::format("  {:<{}}{:>10.2f}{:>11.2f}{:>+11.2f}{:>6.0f}%\n", r.name, w,
                                   r.p50_us, r.tail_mean_us, r.beyond_us, r.share * 100);
            if (rows == &t.stages && !t.components.empty())
                out += "  --\n";
        }
    }
    return out;
}

// --detail: the end to end per NVMe queue, the queue with the highest p99 marked.
std::string queues_text(const GroupSummary& g) {
    if (g.queues.empty())
        return "";
    std::string out = "  per queue: end to end (us)\n";
    out += fmt::format("  {:<20}{:>9}{:>10}{:>10}\n", "queue", "n", "mean", "p99");
    const QueueSummary* worst = nullptr;
    for (const auto& q : g.queues)
        if (!worst || q.p99_us > worst->p99_us)
            worst = &q;
    for (const auto& q : g.queues) {
        std::string name =
            q.cntlid ? fmt::format("cntlid {} q{}", q.cntlid, q.qid) : fmt::format("q{}", q.qid);
        std::string line =
            fmt::format("  {:<20}{:>9}{:>10.2f}{:>10.2f}{}", name, q.n, q.mean_us, q.p99_us,
                        g.queues.size() > 1 && &q == worst ? "  highest p99" : "");
        out += line + "\n";
    }
    return out;
}

}  // namespace

std::vector<GapsOfCpu> gaps_by_cpu(const std::vector<GapRun>& gaps) {
    std::map<uint32_t, GapsOfCpu> by;
    for (const GapRun& g : gaps) {
        auto [it, fresh] = by.try_emplace(g.cpu);
        GapsOfCpu& c = it->second;
        if (fresh) {
            c.cpu = g.cpu;
            c.first_ts = g.first_ts;
        }
        c.runs++;
        c.records += g.records;
        c.first_ts = std::min(c.first_ts, g.first_ts);
        c.last_ts = std::max(c.last_ts, g.last_ts);
    }
    std::vector<GapsOfCpu> out;
    for (const auto& [cpu, c] : by)
        out.push_back(c);
    return out;
}

std::string summary_text(const Summary& s, const AssemblyCounts& counts,
                         const ReportOptions& opts) {
    std::string out;
    if (!opts.recorded_on.empty()) {
        out += fmt::format("recorded on {}, {}\n\n", opts.recorded_on, sampling_phrase(s.sample_n));
    } else {
        out += fmt::format("=== {:.1f} s, {} ===\n", s.duration_s, sampling_phrase(s.sample_n));
        if (s.throughput.empty()) {
            out += "throughput: no command completed\n\n";
        } else {
            std::vector<std::string> parts;
            for (const auto& t : s.throughput)
                parts.push_back(fmt::format("{} {}", op_name(t.op), throughput_words(t)));
            out += fmt::format("throughput (estimated from the sampled commands): {}\n\n",
                               fmt::join(parts, "; "));
        }
    }

    for (const auto& g : s.groups) {
        out += fmt::format("== {}: {} commands sampled (from about {} commands/s), {}\n", g.label,
                           g.n, compact_rate(g.rate), side_note(g.view));
        if (!g.missing.empty())
            out += fmt::format(
                "  no {} record for these commands: the stages and components on either side "
                "of it are reported together\n",
                fmt::join(g.missing, ", "));
        if (g.span.from.empty())
            ;  // a summary made elsewhere (SPDK's), with no layout of ours
        else if (g.span.user_space)
            out += fmt::format("  end to end: {} to {}, as user space waits\n", g.span.from,
                               g.span.to);
        else
            out += fmt::format("  end to end: {} to {} only, not what user space waits: {}\n",
                               g.span.from, g.span.to, g.span.note);
        if (g.span.reap_ring)
            out += fmt::format(
                "  reap: user space took each CQE from the mapped ring with no system call, after "
                "the task's last io_uring_enter() return and before its next entry, where the "
                "kernel saw it taken and the end to end ends; that window: mean {:.2f} us, at "
                "most {:.2f}\n",
                g.reap_window_mean_us, g.reap_window_max_us);
        if (g.resent)
            out +=
                "  failed over: their bios went out first on a request that failed over (its "
                "path went down, as in a controller reset) and were sent again: the host block "
                "layer stage holds that request and the wait for a live path\n";
        out += fmt::format("  latency (us): mean {:.2f}, p50 {:.2f}, p99 {:.2f}, p99.9 {:.2f}\n",
                           g.mean_us, g.p50_us, g.p99_us, g.p999_us);
        // the seed's columns; a longer name widens its column for the whole table
        size_t w = kNameWidth;
        for (const auto& st : g.stages)
            w = std::max(w, st.name.size() + 1);
        out += fmt::format("  {:<{}}{:>9}{:>7}{:>9}\n", "stage", w, "mean us", "share", "avg QD");
        const StageSummary* largest = nullptr;
        for (const auto& st : g.stages) {
            auto bar = static_cast<size_t>(std::lround(std::clamp(st.share, 0.0, 1.0) * kBarWidth));
            std::string line =
                fmt::format("  {:<{}}{:>9.2f}{:>6.0f}%{:>9.2f}  {}", st.name, w, st.mean_us,
                            st.share * 100, st.avg_qd, std::string(bar, '#'));
            rtrim(line);
            out += line + "\n";
            if (!largest || st.mean_us > largest->mean_us)
                largest = &st;
        }
        if (largest)
            out += fmt::format("  largest: {}, {:.0f} % of the latency\n", largest->name,
                               largest->share * 100);
        if (opts.detail) {
            out += "  components, in path order (L: commands in each, by Little's law)\n";
            size_t cw = kNameWidth;
            for (const auto& c : g.components)
                cw = std::max(cw, 2 * static_cast<size_t>(c.depth) + c.name.size() + 1);
            out += fmt::format("  {:<{}}{:>9}{:>10}{:>8}{:>10}{:>10}   (us)\n", "component", cw,
                               "n", "mean", "L", "p50", "p99");
            for (const auto& c : g.components) {
                std::string name = std::string(2 * static_cast<size_t>(c.depth), ' ') + c.name;
                out += fmt::format("  {:<{}}{:>9}{:>10.2f}{:>8.2f}{:>10.2f}{:>10.2f}\n", name, cw,
                                   c.n, c.mean_us, c.avg_qd, c.p50_us, c.p99_us);
            }
            out += tail_text(g);
            out += queues_text(g);
        }
        out += "\n";
    }

    std::vector<std::string> recs;
    if (counts.records_host || !counts.records_target)
        recs.push_back(fmt::format("{} host", counts.records_host));
    if (counts.records_target)
        recs.push_back(fmt::format("{} target", counts.records_target));
    const JoinCounts& jc = opts.join;
    if (jc.active) {
        double pct = jc.host ? 100.0 * static_cast<double>(jc.matched) / jc.host : 0;
        out += fmt::format("records: {}; {} matched ({:.0f} % of the host's)\n",
                           fmt::join(recs, ", "), jc.matched, pct);
    } else {
        out += fmt::format("records: {}\n", fmt::join(recs, ", "));
    }
    if (jc.active) {
        for (Side side : {Side::host, Side::target}) {
            const auto& u = side == Side::host ? jc.host_unmatched : jc.target_unmatched;
            std::vector<std::string> why;
            uint64_t n = 0;
            for (size_t r = 0; r < kUnmatchedReasons; r++)
                if (u[r]) {
                    n += u[r];
                    why.push_back(fmt::format("{} {}", u[r],
                                              unmatched_reason(static_cast<Unmatched>(r), side)));
                }
            if (n)
                out += fmt::format("unmatched: {} {} commands, reported on their own side ({})\n",
                                   n, side == Side::host ? "host" : "target", fmt::join(why, ", "));
        }
        if (jc.negative_network)
            out += fmt::format(
                "negative network: {} joined commands spent longer in the target than the host "
                "waited for them (counted in the network component)\n",
                jc.negative_network);
        if (jc.ambiguous)
            out += fmt::format(
                "ambiguous: {} commands had several candidates with their key (qid, command id, "
                "LBA); the one at the expected time was taken\n",
                jc.ambiguous);
    }

    if (!counts.gaps.empty()) {
        uint64_t records = 0;
        std::vector<std::string> cpus;
        auto secs = [&](uint64_t ts) {
            return (static_cast<double>(ts) - static_cast<double>(opts.origin_ns)) / 1e9;
        };
        for (const GapsOfCpu& g : gaps_by_cpu(counts.gaps)) {
            records += g.records;
            cpus.push_back(fmt::format("cpu {}: {} run{} between {:.3f} s and {:.3f} s", g.cpu,
                                       g.runs, g.runs == 1 ? "" : "s", secs(g.first_ts),
                                       secs(g.last_ts)));
        }
        out += fmt::format(
            "lost: {} records in {} overflows ({}); {} commands that overlapped them were left "
            "out\n",
            records, counts.gaps.size(), fmt::join(cpus, ", "), counts.lost_in_gap);
    } else if (opts.lost_host || opts.lost_target)
        out += fmt::format(
            "lost: {} records (the ring was full): their commands are merged or left out as "
            "said here\n",
            opts.lost_host + opts.lost_target);
    if (counts.incomplete()) {
        std::vector<std::string> why;
        if (counts.cut_start)
            why.push_back(fmt::format("{} without their first record", counts.cut_start));
        if (counts.cut_end)
            why.push_back(fmt::format("{} still running at the end", counts.cut_end));
        if (counts.device_gone)
            why.push_back(
                fmt::format("{} in flight when their device went away", counts.device_gone));
        if (counts.lost_end)
            why.push_back(fmt::format("{} without their last record", counts.lost_end));
        out += fmt::format("incomplete: {} commands not reported ({})\n", counts.incomplete(),
                           fmt::join(why, ", "));
    }
    if (s.failed)
        out += fmt::format("failed: {} commands completed with an error, not reported\n", s.failed);
    if (s.failed_over || counts.failovers_unsent)
        out += fmt::format(
            "failed over: {} requests ended with their bios taken back to be sent again on "
            "another path or controller (nvme multipath); each I/O is reported once, on its "
            "last request{}\n",
            s.failed_over + counts.failovers_unsent,
            counts.failovers_unsent
                ? fmt::format(" ({} were not seen sent again: their I/O is not reported)",
                              counts.failovers_unsent)
                : "");
    if (counts.bios_unmatched)
        out += fmt::format(
            "unmatched: {} block_bio_queue records with no request of their own (merged into "
            "another request, or the request's records were lost)\n",
            counts.bios_unmatched);
    if (counts.superseded)
        out += fmt::format(
            "superseded: {} bios or file submissions were followed by another of the same "
            "sector before their request was issued (io_uring's nonblocking issue, then "
            "io-wq's; or a bio merged into another request): each command is timed from the "
            "last\n",
            counts.superseded);
    if (counts.late_times)
        out += fmt::format(
            "late: {} nvmet-tcp arrival times after their command's nvmet_req_init (another "
            "PDU's arrival): left out\n",
            counts.late_times);
    if (counts.records_unknown)
        out += fmt::format("ignored: {} records of events this version does not know\n",
                           counts.records_unknown);
    if (counts.records_bad_ts)
        out += fmt::format(
            "ignored: {} records with an impossible timestamp (2^60 ns or later, 36 years of "
            "uptime): the file is damaged there\n",
            counts.records_bad_ts);
    return out;
}

// ----------------------------------------------------------------- json

nlohmann::json summary_json(const Summary& s, const AssemblyCounts& counts,
                            const ReportOptions& opts) {
    using nlohmann::json;
    json j;
    j["schema"] = json_schema("report");
    j["duration_s"] = s.duration_s;
    j["sample_n"] = s.sample_n;
    if (!opts.recorded_on.empty())
        j["recorded_on"] = opts.recorded_on;
    j["percentiles"] = {{"method", "log-linear histogram, nearest rank"},
                        {"max_relative_error", Histogram::kMaxRelativeError}};
    j["throughput"] = json::array();
    for (const auto& t : s.throughput)
        j["throughput"].push_back(
            {{"op", op_name(t.op)},
             {"iops", t.iops},
             // null: some sizes are in blocks of no known size (SPDK's host alone)
             {"bytes_per_s", t.bytes_unknown ? nlohmann::json() : nlohmann::json(t.bytes_per_s)}});
    j["groups"] = json::array();
    for (const auto& g : s.groups) {
        json jg = {
            {"label", g.label},
            {"op", op_name(g.op)},
            {"size", g.size},
            {"size_label", g.size_label},
            {"device", g.device},
            {"passthrough", g.passthru},
            {"failed_over_before", g.resent},
            {"view", view_name(g.view)},
            {"spdk_target", g.spdk_target},  // its target side is SPDK's (record --spdk-target)
            {"missing", g.missing},
            {"span",
             {{"from", g.span.from},
              {"to", g.span.to},
              {"interface", g.span.interface},
              {"user_space", g.span.user_space},
              {"reap_from_ring", g.span.reap_ring},
              {"note", g.span.note}}},
            {"n", g.n},
            {"rate", g.rate},
            {"bytes_per_s", g.bytes_per_s},
            {"avg_qd", g.avg_qd},
            {"latency_us",
             {{"mean", g.mean_us}, {"p50", g.p50_us}, {"p99", g.p99_us}, {"p99.9", g.p999_us}}}};
        if (g.span.reap_ring)
            jg["reap_window_us"] = {{"mean", g.reap_window_mean_us}, {"max", g.reap_window_max_us}};
        jg["stages"] = json::array();
        for (const auto& st : g.stages)
            jg["stages"].push_back({{"name", st.name},
                                    {"id", st.id},
                                    {"mean_us", st.mean_us},
                                    {"share", st.share},
                                    {"avg_qd", st.avg_qd},
                                    {"merged", st.merged},
                                    {"not_recorded", st.not_recorded}});
        jg["components"] = json::array();
        for (const auto& c : g.components)
            jg["components"].push_back({{"name", c.name},
                                        {"id", c.id},
                                        {"depth", c.depth},
                                        {"merged", c.merged},
                                        {"n", c.n},
                                        {"mean_us", c.mean_us},
                                        {"avg_qd", c.avg_qd},
                                        {"p50_us", c.p50_us},
                                        {"p99_us", c.p99_us},
                                        {"min_us", c.min_us},
                                        {"negative", c.negative}});
        auto tail_rows = [](const std::vector<TailRow>& rows) {
            json a = json::array();
            for (const auto& r : rows)
                a.push_back({{"name", r.name},
                             {"id", r.id},
                             {"p50_us", r.p50_us},
                             {"tail_mean_us", r.tail_mean_us},
                             {"beyond_us", r.beyond_us},
                             {"share", r.share}});
            return a;
        };
        jg["tails"] = json::array();
        for (const auto& t : g.tails)
            jg["tails"].push_back({{"quantile", t.q},
                                   {"quantile_us", t.quantile_us},
                                   {"threshold_us", t.threshold_us},
                                   {"n", t.n},
                                   {"fraction", t.fraction},
                                   {"mean_us", t.mean_us},
                                   {"p50_us", t.p50_us},
                                   {"stages", tail_rows(t.stages)},
                                   {"components", tail_rows(t.components)}});
        jg["queues"] = json::array();
        for (const auto& q : g.queues)
            jg["queues"].push_back({{"cntlid", q.cntlid},
                                    {"qid", q.qid},
                                    {"n", q.n},
                                    {"mean_us", q.mean_us},
                                    {"p99_us", q.p99_us}});
        j["groups"].push_back(std::move(jg));
    }
    j["records"] = {{"host", counts.records_host},
                    {"target", counts.records_target},
                    {"unknown", counts.records_unknown},
                    {"bad_ts", counts.records_bad_ts},
                    {"out_of_order", counts.records_out_of_order},
                    {"lost_host", opts.lost_host},
                    {"lost_target", opts.lost_target}};
    if (!counts.gaps.empty()) {
        json cpus = json::array();
        uint64_t records = 0;
        auto secs = [&](uint64_t ts) {
            return (static_cast<double>(ts) - static_cast<double>(opts.origin_ns)) / 1e9;
        };
        for (const GapsOfCpu& g : gaps_by_cpu(counts.gaps)) {
            records += g.records;
            cpus.push_back({{"cpu", g.cpu},
                            {"runs", g.runs},
                            {"records", g.records},
                            {"first_ts", g.first_ts},
                            {"last_ts", g.last_ts},
                            {"first_s", secs(g.first_ts)},
                            {"last_s", secs(g.last_ts)}});
        }
        j["lost"] = {{"records", records},
                     {"overflows", counts.gaps.size()},
                     {"commands_left_out", counts.lost_in_gap},
                     {"cpus", std::move(cpus)}};
    }
    j["commands"] = {{"reported", counts.complete - s.failed - s.failed_over},
                     {"failed", s.failed},
                     {"failed_over", s.failed_over},
                     {"failovers_unsent", counts.failovers_unsent},
                     {"cut_start", counts.cut_start},
                     {"cut_end", counts.cut_end},
                     {"device_gone", counts.device_gone},
                     {"lost_end", counts.lost_end},
                     {"bios_unmatched", counts.bios_unmatched},
                     {"inserts_unmatched", counts.inserts_unmatched},
                     {"multipath_duplicates", counts.multipath_duplicates},
                     {"repeated_records", counts.repeats},
                     {"user_unmatched", counts.user_unmatched},
                     {"superseded", counts.superseded},
                     {"late_times", counts.late_times},
                     {"lost_in_gap", counts.lost_in_gap}};
    const JoinCounts& jc = opts.join;
    if (jc.active) {
        json hu = json::object(), tu = json::object();
        for (size_t r = 0; r < kUnmatchedReasons; r++) {
            std::string k(unmatched_key(static_cast<Unmatched>(r)));
            hu[k] = jc.host_unmatched[r];
            tu[k] = jc.target_unmatched[r];
        }
        j["join"] = {
            {"host", jc.host},
            {"target", jc.target},
            {"matched", jc.matched},
            {"matched_share_of_host", jc.host ? static_cast<double>(jc.matched) / jc.host : 0.0},
            {"negative_network", jc.negative_network},
            {"ambiguous", jc.ambiguous},
            {"host_unmatched", hu},
            {"target_unmatched", tu}};
    }
    return j;
}

nlohmann::json interval_json(const Interval& iv) {
    using nlohmann::json;
    json j = {{"schema", json_schema("interval")},
              {"start_s", iv.start_s},
              {"end_s", iv.end_s},
              {"groups", json::array()}};
    static constexpr const char* kColumns[] = {"host_block",    "host_driver", "network",
                                               "target_driver", "storage",     "host_user"};
    static_assert(std::size(kColumns) == kStageColumns);
    for (const auto& r : iv.rows) {
        json shares = json::object();
        for (size_t c = 0; c < kStageColumns; c++)
            if (r.share[c])
                shares[kColumns[c]] = *r.share[c];
        j["groups"].push_back({{"label", r.label},
                               {"n", r.n},
                               {"rate", r.rate},
                               {"mean_us", r.mean_us},
                               {"p99_us", r.p99_us},
                               {"shares", shares}});
    }
    return j;
}

}  // namespace nvmetrace
