#include "analysis/join.h"

#include "analysis/components.h"
#include "analysis/sampling.h"
#include "format/recfile.h"
#include "kernel/devices.h"
#include "util/error.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nvmetrace {

// ----------------------------------------------------------------- joining

namespace {

// How long after a device was admitted a command on it may still have been
// issued before (host clock, with the offset estimate's error).
constexpr uint64_t kAdmitSlack_ns = 50'000'000;
// How long before a device was admitted a command on it may have begun and
// still been in flight then (a new disk's partition scan, under emulation).
constexpr uint64_t kAdmitLead_ns = 1'000'000'000;

int first_present(const Command& c, std::initializer_list<uint16_t> events) {
    for (uint16_t ev : events)
        if (c.has(event_slot(ev)))
            return event_slot(ev);
    return -1;
}

// Where a host command's send side ends, for ordering and window checks.
uint64_t host_anchor(const Command& c) {
    int s = host_send_slot(c);
    if (s < 0)
        s = first_present(c, {NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_BIO_QUEUE});
    return s < 0 ? c.first_ts() : c.at(s);
}

uint64_t target_anchor(const Command& c) {
    int s = event_slot(NVMETRACE_EV_NVMET_INIT);
    return c.has(s) ? c.at(s) : c.first_ts();
}

}  // namespace

int host_send_slot(const Command& c) {
    return first_present(c, {NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_RDMA_POST_SEND,
                             NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_SPDK_SUBMIT});
}

int host_receive_slot(const Command& c) {
    return first_present(
        c, {NVMETRACE_EV_TCP_C2H_RECV, NVMETRACE_EV_TCP_RSP_RECV, NVMETRACE_EV_RDMA_RECV_DONE,
            NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE, NVMETRACE_EV_SPDK_COMPLETE});
}

int target_receive_slot(const Command& c) {
    return first_present(
        c, {NVMETRACE_EV_RDMAT_RECV, NVMETRACE_EV_TCPT_CMD_RECV, NVMETRACE_EV_NVMET_INIT});
}

int target_send_slot(const Command& c) {
    return first_present(c, {NVMETRACE_EV_RDMAT_RSP_POST, NVMETRACE_EV_NVMET_COMPLETE});
}

Command join_commands(const Command& host, const Command& target, int64_t* network_ns) {
    Command j = host;
    j.spdk_target = target.spdk_target;
    if (j.size_in_blocks && !target.size_in_blocks && target.size) {
        // SPDK's host knows no block size; the target's namespace does
        j.size = target.size;
        j.size_in_blocks = false;
    }
    const int done = target_send_slot(target);
    const int init = target_receive_slot(target);
    const int recv = host_receive_slot(host);
    // target ts + shift = host ts; unsigned arithmetic wraps, as intended
    const uint64_t shift = recv >= 0 && done >= 0 ? host.at(recv) - target.at(done) : 0;
    for (EventMask m = target.present; m; m &= m - 1) {
        int s = std::countr_zero(m);
        if (kEvents[s].side != Side::target)
            continue;
        j.ts[static_cast<size_t>(s)] = target.ts[static_cast<size_t>(s)] + shift;
        j.present |= EventMask{1} << s;
    }
    if (network_ns) {
        int send = host_send_slot(host);
        *network_ns = send >= 0 && init >= 0 ? static_cast<int64_t>(j.at(init) - host.at(send)) : 0;
    }
    return j;
}

std::string_view unmatched_reason(Unmatched u, Side side) {
    bool h = side == Side::host;
    switch (u) {
        case Unmatched::no_command_id:
            return "no nvme_setup_cmd record, so no command id";
        case Unmatched::not_sampled:
            return h ? "not sampled on the target (its 1-of-N or seed differs)"
                     : "not sampled on the host (its 1-of-N or seed differs)";
        case Unmatched::outside_window:
            return h ? "outside the target recording's window"
                     : "outside the host recording's window";
        case Unmatched::not_found:
            return h ? "not in the target recording (records lost or cut)"
                     : "not in the host recording (records lost or cut)";
        case Unmatched::no_other_side:
            return h ? "no target recording" : "no host recording";
        case Unmatched::other_controller:
            return h ? "no target recording for that controller"
                     : "no host recording for that controller";
        case Unmatched::before_device:
            return h ? "in flight as this recording began to follow its device (its "
                       "nvme_setup_cmd came before)"
                     : "before or as the host recording began to follow its device";
        case Unmatched::failed_over:
            return h ? "failed over before the target had it or answered it (its bios went "
                       "again on a later request)"
                     : "run after its host request had failed over or before the host gave up "
                       "on it (the answer never reached the host)";
    }
    return "?";
}

std::string_view unmatched_key(Unmatched u) {
    static constexpr std::string_view kKeys[] = {
        "no_command_id", "not_sampled",      "outside_window", "not_found",
        "no_other_side", "other_controller", "before_device",  "failed_over"};
    static_assert(std::size(kKeys) == kUnmatchedReasons);
    return kKeys[static_cast<size_t>(u)];
}

uint64_t join_anchor(const Command& c) {
    return c.side == Side::host ? host_anchor(c) : target_anchor(c);
}

std::optional<int64_t> estimate_offset(std::span<const Command> host,
                                       std::span<const Command> target, KeyFields fields) {
    struct K {
        uint64_t lba;
        uint32_t nsid;
        uint16_t qid, cid, cntlid;
        uint8_t op;
        auto operator<=>(const K&) const = default;
    };
    // key -> (count, anchor) per side; cntlid 0 (unknown) on the host matches any
    std::map<K, std::pair<uint32_t, uint64_t>> h, t;
    auto key = [&fields](const Command& c) {
        return K{c.lba,
                 fields.nsid ? c.nsid : 0,
                 fields.qid ? c.qid : uint16_t{0},
                 fields.cid ? c.cid : uint16_t{0},
                 0,
                 static_cast<uint8_t>(c.op)};
    };
    for (const auto& c : host)
        if (c.has_cid) {
            auto& e = h[key(c)];
            e.first++;
            e.second = host_anchor(c);
        }
    for (const auto& c : target) {
        auto& e = t[key(c)];
        e.first++;
        e.second = target_anchor(c);
    }
    std::vector<int64_t> offsets;
    for (const auto& [k, hv] : h) {
        auto it = t.find(k);
        if (hv.first == 1 && it != t.end() && it->second.first == 1)
            offsets.push_back(static_cast<int64_t>(it->second.second - hv.second));
    }
    if (offsets.empty())
        return std::nullopt;
    std::nth_element(offsets.begin(), offsets.begin() + offsets.size() / 2, offsets.end());
    return offsets[offsets.size() / 2];
}

size_t Joiner::KeyHash::operator()(const Key& k) const {
    uint64_t h = k.lba * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t{k.qid} << 40 | uint64_t{k.cid} << 24 | uint64_t{k.op} << 16 | k.nsid) *
         0xbf58476d1ce4e5b9ull;
    return static_cast<size_t>(h ^ (h >> 31));
}

Joiner::Key Joiner::key_of(const Command& c) const {
    return Key{c.lba, keys_.nsid ? c.nsid : 0, keys_.qid ? c.qid : uint16_t{0},
               keys_.cid ? c.cid : uint16_t{0}, static_cast<uint8_t>(c.op)};
}

size_t Joiner::add_source(const Source& s) {
    // keys are computed as commands come: every source is added before the first
    if (pushed_)
        throw std::logic_error("Joiner::add_source after push");
    sources_.push_back(s);
    keys_ = keys_ & s.keys;
    bool host = false, target = false;
    for (const auto& x : sources_)
        (x.side == Side::host ? host : target) = true;
    jc_.active = host && target;
    return sources_.size() - 1;
}

void Joiner::set_window(size_t source, uint64_t first_ts, uint64_t last_ts) {
    sources_.at(source).first_ts = first_ts;
    sources_.at(source).last_ts = last_ts;
}

bool Joiner::compatible(const Command& h, uint16_t target_cntlid) {
    // 0 on either side: not known (SPDK's target records name no controller)
    return !h.cntlid || !target_cntlid || h.cntlid == target_cntlid ||
           (h.cntlid_next && h.cntlid_next == target_cntlid);
}

void Joiner::match(Entry& h, Entry& t, const Sink& sink) {
    int64_t net = 0;
    Command j = join_commands(h.cmd, t.cmd, &net);
    jc_.matched++;
    jc_.negative_network += net < 0;
    // Follow the clock: what this pair says the offset is, smoothed (the
    // network's one-way time is in it; it only has to be close, not exact).
    // A failed-over request's answer never came back: it says nothing of it.
    if (!h.cmd.failed_over) {
        auto& off = sources_[h.source].offset_ns;
        int64_t seen = static_cast<int64_t>(t.anchor) - static_cast<int64_t>(host_anchor(h.cmd));
        off += (seen - off) / 16;
    }
    sink(j);
}

void Joiner::push(size_t source, const Command& cmd, const Sink& sink) {
    pushed_ = true;
    const Source& src = sources_.at(source);
    const int me = src.side == Side::host ? 0 : 1;
    Entry e{cmd, static_cast<uint32_t>(source), false, 0, 0};
    e.anchor = join_anchor(cmd) + static_cast<uint64_t>(me == 0 ? src.offset_ns : 0);
    const uint64_t done = cmd.last_ts() + static_cast<uint64_t>(me == 0 ? src.offset_ns : 0);
    // A command waits from its end, not its start: one that took longer than
    // the window (held through a controller reset) still meets its partner,
    // which ends about when it does.
    e.until = std::max(done, e.anchor) + opts_.window_ns;
    (me == 0 ? jc_.host : jc_.target)++;
    if (jc_.active && (me == 1 || cmd.has_cid)) {
        // The partner: same key, same controller, nearest the expected time.
        Side_& other = pending_[1 - me];
        auto [lo, hi] = other.index.equal_range(key_of(cmd));
        auto best = other.index.end();
        uint64_t best_d = opts_.window_ns;
        size_t candidates = 0;
        for (auto it = lo; it != hi; ++it) {
            Entry& o = other.q[it->second - other.base];
            if (!(me == 0 ? compatible(e.cmd, o.cmd.cntlid) : compatible(o.cmd, e.cmd.cntlid)))
                continue;
            candidates++;
            uint64_t d = o.anchor > e.anchor ? o.anchor - e.anchor : e.anchor - o.anchor;
            if (d <= best_d) {
                best_d = d;
                best = it;
            }
        }
        if (best != other.index.end()) {
            Entry& o = other.q[best->second - other.base];
            jc_.ambiguous += candidates > 1;
            o.done = true;
            other.live--;
            other.index.erase(best);
            me == 0 ? match(e, o, sink) : match(o, e, sink);
            evict(std::max(now_, done), sink);
            return;
        }
    }
    if (me == 0 && !cmd.has_cid) {  // no command id: nothing can match it
        emit_unmatched(e, 0, sink);
        evict(std::max(now_, done), sink);
        return;
    }
    Side_& mine = pending_[me];
    mine.index.emplace(key_of(cmd), mine.base + mine.q.size());
    mine.q.push_back(std::move(e));
    mine.live++;
    jc_.peak_pending = std::max(jc_.peak_pending, pending());
    evict(std::max(now_, done), sink);
}

void Joiner::emit_unmatched(Entry& e, int side, const Sink& sink) {
    Side mine = side == 0 ? Side::host : Side::target;
    Unmatched why = Unmatched::not_found;
    if (!jc_.active) {
        why = Unmatched::no_other_side;
    } else if (mine == Side::host && !e.cmd.has_cid) {
        why = in_flight_at_admission(e) ? Unmatched::before_device : Unmatched::no_command_id;
    } else {
        // The other side's recordings of this controller, if any is known.
        bool any_ctrl = false, any_sampled = false, any_inside = false, any_followed = false;
        for (size_t i = 0; i < sources_.size(); i++) {
            const Source& o = sources_[i];
            if (o.side == mine)
                continue;
            const uint16_t id = e.cmd.cntlid;
            if (id && !o.cntlids.empty() &&
                std::find(o.cntlids.begin(), o.cntlids.end(), id) == o.cntlids.end())
                continue;
            any_ctrl = true;
            if (!sampled(e.cmd.lba, o.seed, o.sample_n))
                continue;
            any_sampled = true;
            // the command's time on the other recording's clock
            int64_t shift = mine == Side::host ? sources_[e.source].offset_ns : -o.offset_ns;
            uint64_t t = join_anchor(e.cmd) + static_cast<uint64_t>(shift);
            if (t < o.first_ts || t > o.last_ts)
                continue;
            any_inside = true;
            // A controller that came or went while the host recorded: its
            // commands are recorded from the instant its devices were
            // admitted until they went.  One that ran outside, or in flight
            // as the device was admitted, is not a loss; kAdmitSlack_ns
            // covers the clock estimate and the command's own time.
            const auto f = id ? o.followed.find({id, e.cmd.nsid}) : o.followed.end();
            if (f == o.followed.end())
                any_followed = true;
            else
                for (const auto& [from, to] : f->second)
                    if ((from == 0 || t >= from + kAdmitSlack_ns) && t < to)
                        any_followed = true;
        }
        why = !any_ctrl           ? Unmatched::other_controller
              : !any_sampled      ? Unmatched::not_sampled
              : !any_inside       ? Unmatched::outside_window
              : !any_followed     ? Unmatched::before_device
              : e.cmd.failed_over ? Unmatched::failed_over
                                  : Unmatched::not_found;
    }
    if (why == Unmatched::failed_over && take_lost_target(e)) {
        // the target's side of it waited out the window first: it was this
        jc_.target_unmatched[static_cast<size_t>(Unmatched::not_found)]--;
        jc_.target_unmatched[static_cast<size_t>(Unmatched::failed_over)]++;
    }
    if (side == 1 && why == Unmatched::not_found) {
        if (lost_target_.size() == kLostKept)
            lost_target_.pop_front();
        lost_target_.push_back(Lost{key_of(e.cmd), e.cmd.cntlid, e.anchor});
    }
    (side == 0 ? jc_.host_unmatched : jc_.target_unmatched)[static_cast<size_t>(why)]++;
    sink(e.cmd);
}

// A disk that appears while recording is admitted a little after the
// kernel sent its first commands (a partition scan, before any uevent): a
// head disk number the recording already had (a namespace connected again)
// records such a command's bio, and its new path disk, not admitted yet,
// not its nvme_setup_cmd.
bool Joiner::in_flight_at_admission(const Entry& h) const {
    const Source& s = sources_[h.source];
    const uint64_t t = h.anchor - static_cast<uint64_t>(s.offset_ns);  // its own clock
    for (const auto& [key, spans] : s.followed)
        for (const auto& [from, to] : spans)
            if (from && t + kAdmitLead_ns >= from && t < from + kAdmitSlack_ns)
                return true;
    return false;
}

bool Joiner::take_lost_target(const Entry& h) {
    const Key k = key_of(h.cmd);
    for (auto it = lost_target_.rbegin(); it != lost_target_.rend(); ++it) {
        const uint64_t d = it->anchor > h.anchor ? it->anchor - h.anchor : h.anchor - it->anchor;
        if (it->key == k && d <= opts_.window_ns && compatible(h.cmd, it->cntlid)) {
            lost_target_.erase(std::next(it).base());
            return true;
        }
    }
    return false;
}

void Joiner::evict(uint64_t now, const Sink& sink) {
    now_ = now;
    for (int side = 0; side < 2; side++) {
        Side_& p = pending_[side];
        while (!p.q.empty()) {
            Entry& e = p.q.front();
            if (!e.done) {
                if (e.until >= now)
                    break;
                auto [lo, hi] = p.index.equal_range(key_of(e.cmd));
                for (auto it = lo; it != hi; ++it)
                    if (it->second == p.base) {
                        p.index.erase(it);
                        break;
                    }
                p.live--;
                emit_unmatched(e, side, sink);
            }
            p.q.pop_front();
            p.base++;
        }
    }
}

JoinCounts Joiner::finish(const Sink& sink) {
    evict(UINT64_MAX, sink);
    JoinCounts out = jc_;
    bool active = jc_.active;
    jc_ = JoinCounts{};
    jc_.active = active;
    now_ = 0;
    return out;
}

void Joiner::add(size_t source, const Command& cmd) {
    buffered_.emplace_back(source, cmd);
}

JoinCounts Joiner::join(const Sink& sink) {
    // each host recording's offset, from the keys it shares with the targets
    std::vector<Command> targets;
    for (const auto& [s, c] : buffered_)
        if (sources_[s].side == Side::target)
            targets.push_back(c);
    for (size_t s = 0; s < sources_.size(); s++) {
        if (sources_[s].side != Side::host)
            continue;
        std::vector<Command> hosts;
        for (const auto& [src, c] : buffered_)
            if (src == s)
                hosts.push_back(c);
        if (auto off = estimate_offset(hosts, targets))
            sources_[s].offset_ns = *off;
    }
    auto done = [&](const std::pair<size_t, Command>& x) {
        const Source& src = sources_[x.first];
        return x.second.last_ts() +
               static_cast<uint64_t>(src.side == Side::host ? src.offset_ns : 0);
    };
    std::stable_sort(buffered_.begin(), buffered_.end(),
                     [&](const auto& a, const auto& b) { return done(a) < done(b); });
    for (const auto& [s, c] : buffered_)
        push(s, c, sink);
    buffered_.clear();
    return finish(sink);
}

// ----------------------------------------------------------------- files

// When a host recording followed each namespace of each controller
// ([from, to) on its clock, Source::followed), from its disks' appeared_ns
// and gone_ns; a path disk's namespace is its head's.  Only the namespaces
// with a disk that came or went while it recorded.
Followed host_followed(const RecordingMeta& m) {
    Followed spans;
    std::set<std::pair<uint16_t, uint32_t>> changed;
    if (!m.devices.is_array())
        return spans;
    const auto num = [](const nlohmann::json& d, const char* k, uint64_t dflt) {
        const auto it = d.find(k);
        if (it == d.end() || !it->is_number_integer())
            return dflt;
        if (it->is_number_unsigned())
            return it->get<uint64_t>();
        const int64_t v = it->get<int64_t>();  // written by this process: signed
        return v >= 0 ? static_cast<uint64_t>(v) : dflt;
    };
    const auto kind = [](const nlohmann::json& d) {
        const auto it = d.find("kind");
        return it != d.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    // head disk dev -> nsid, as of the entry at hand: entries are in the
    // order they appeared, and a dev number freed by one disk may be another
    // namespace's later
    std::map<uint64_t, uint64_t> nsid_of;
    for (const auto& d : m.devices) {
        if (!d.is_object())
            continue;
        const std::string k = kind(d);
        if (k == "disk")
            nsid_of[num(d, "dev", 0)] = num(d, "nsid", 0);
        const uint64_t id64 = num(d, "cntlid", 0);
        if ((k != "disk" && k != "path") || !id64 || id64 > UINT16_MAX)
            continue;
        const uint64_t ns = k == "disk"                            ? num(d, "nsid", 0)
                            : nsid_of.count(num(d, "head_dev", 0)) ? nsid_of[num(d, "head_dev", 0)]
                                                                   : 0;
        if (ns > UINT32_MAX)
            continue;
        const std::pair<uint16_t, uint32_t> key{static_cast<uint16_t>(id64),
                                                static_cast<uint32_t>(ns)};
        const uint64_t from = num(d, "appeared_ns", 0), to = num(d, "gone_ns", UINT64_MAX);
        if (from || to != UINT64_MAX)
            changed.insert(key);
        spans[key].emplace_back(from, to);
    }
    std::erase_if(spans, [&](const auto& kv) { return !changed.count(kv.first); });
    return spans;
}

namespace {

bool role_has(const std::string& role, std::string_view side) {
    return role.find(side) != std::string::npos;
}

// CLOCK_REALTIME - CLOCK_MONOTONIC at the recording's start: the machine's
// boot instant on the wall clock.  Equal (to the read jitter) for two
// recordings of one boot of one machine, whose monotonic clocks are then one.
// None when a damaged header's times overflow it.
std::optional<int64_t> boot_wall(const RecordingMeta& m) {
    int64_t w;
    if (__builtin_sub_overflow(m.start_realtime_ns, m.start_monotonic_ns, &w))
        return std::nullopt;
    return w;
}

}  // namespace

KeyFields key_fields(const RecordingMeta& m) {
    // "spdk": {"role": "target", "transport": "tcp", ...}: SPDK's target entries name no
    // command or namespace id; its TCP queue pairs name their queue id, its RDMA ones do not.
    // SPDK's host entries name the command id and queue, not the namespace.
    const auto it = m.extra.find("spdk");
    if (it == m.extra.end() || !it->is_object())
        return {};
    const auto role = it->find("role");
    if (role != it->end() && *role == "host")
        return {.cid = true, .nsid = false, .qid = true};
    if (role == it->end() || *role != "target")
        return {};
    const auto tr = it->find("transport");
    const bool tcp = tr != it->end() && *tr == "tcp";
    return {.cid = false, .nsid = false, .qid = tcp};
}

namespace {

bool same_clock(const RecordingMeta& a, const RecordingMeta& b) {
    const auto wa = boot_wall(a), wb = boot_wall(b);
    int64_t d;
    return a.hostname == b.hostname && wa && wb && !__builtin_sub_overflow(*wa, *wb, &d) &&
           d > -10'000'000 && d < 10'000'000;
}

// One recording, read block by block through its own Assembler.
struct FileStream {
    std::string path;
    RecordingReader reader;
    RecordingMeta meta;
    DeviceTable table;
    std::unique_ptr<Assembler> assembler;
    std::deque<Command> out[2];  // [0] host, [1] target
    int src[2] = {-1, -1};       // Joiner source per side
    bool eof = false;
    uint16_t origin = 0;

    explicit FileStream(const std::string& p) : path(p), reader(RecordingReader::open(p)) {
        meta = reader.meta();
        devices_from_json(meta.devices, table);
        assembler = std::make_unique<Assembler>(table, [this](const Command& c) {
            Command& x = out[c.side == Side::host ? 0 : 1].emplace_back(c);
            x.origin = origin;
        });
        assembler->set_gaps(gap_runs_in(p));
    }
    // Reads one more block; false at the end of the recording.
    bool pull() {
        std::span<const nvmetrace_rec> recs;
        if (eof)
            return false;
        if (!reader.next(recs)) {
            assembler->finish();
            eof = true;
            return false;
        }
        for (const auto& r : recs)
            assembler->push(r);
        return true;
    }
};

// The controllers of a host recording's devices (0, unknown, left out).
std::vector<uint16_t> host_cntlids(const RecordingMeta& m) {
    std::vector<uint16_t> ids;
    if (!m.devices.is_array())
        return ids;
    for (const auto& d : m.devices) {
        // as given in the file: fields of another type or null count as unknown
        if (!d.is_object())
            continue;
        const auto c = d.find("cntlid");
        const auto k = d.find("kind");
        const uint64_t id64 = c != d.end() && c->is_number_unsigned() ? c->get<uint64_t>() : 0;
        const std::string kind = k != d.end() && k->is_string() ? k->get<std::string>() : "";
        const auto id = id64 <= UINT16_MAX ? static_cast<uint16_t>(id64) : uint16_t{0};
        if (id && (kind == "disk" || kind == "path") &&
            std::find(ids.begin(), ids.end(), id) == ids.end())
            ids.push_back(id);
    }
    return ids;
}

// A host recording's clock offset onto the target's: the commands of its
// start against the target's (estimate_offset()), else the wall clocks.
int64_t calibrate(const std::string& host_path, const RecordingMeta& host_meta,
                  const std::vector<std::string>& target_paths, const RecordingMeta& target_meta,
                  size_t max_commands, KeyFields fields) {
    // the wall clocks' guess; none (0) when a damaged header's times overflow it
    const auto hw = boot_wall(host_meta), tw = boot_wall(target_meta);
    int64_t wall = 0;
    if (!hw || !tw || __builtin_sub_overflow(*hw, *tw, &wall))
        wall = 0;
    FileStream h(host_path);
    std::vector<Command> hosts;
    while (hosts.size() < max_commands) {
        const bool more = h.pull();
        for (const auto& c : h.out[0])
            if (c.has_cid && hosts.size() < max_commands)
                hosts.push_back(c);
        h.out[0].clear();
        h.out[1].clear();
        if (!more)
            break;
    }
    if (hosts.empty())
        return wall;
    auto key = [fields](const Command& c) {
        return c.lba * 0x9e3779b97f4a7c15ull ^
               (uint64_t{fields.qid ? c.qid : uint16_t{0}} << 48 |
                uint64_t{fields.cid ? c.cid : uint16_t{0}} << 32 |
                uint64_t{fields.nsid ? c.nsid : 0} << 1 | static_cast<uint64_t>(c.op));
    };
    std::unordered_set<uint64_t> keys;
    uint64_t last_anchor = 0;
    for (const auto& c : hosts) {
        keys.insert(key(c));
        last_anchor = std::max(last_anchor, join_anchor(c));
    }
    // Target commands with those keys, until well past the host's prefix
    // (on the wall clocks' guess, with a minute of slack) or the end.
    const uint64_t stop_at = last_anchor + static_cast<uint64_t>(wall) + 60'000'000'000ull;
    std::vector<Command> targets;
    for (const auto& tp : target_paths) {
        FileStream t(tp);
        bool past = false;
        while (!past) {
            const bool more = t.pull();
            for (const auto& c : t.out[1]) {
                if (join_anchor(c) > stop_at) {
                    past = true;
                    break;
                }
                if (keys.count(key(c)))
                    targets.push_back(c);
            }
            t.out[0].clear();
            t.out[1].clear();
            if (!more)
                break;
        }
    }
    auto off = estimate_offset(hosts, targets, fields);
    return off ? *off : wall;
}

}  // namespace

bool files_hold_both_sides(const std::vector<std::string>& files) {
    bool host = false, target = false;
    for (const auto& f : files) {
        RecordingReader r = RecordingReader::open(f);
        host = host || role_has(r.meta().role, "host");
        target = target || role_has(r.meta().role, "target");
    }
    return host && target;
}

std::vector<GapRun> gap_runs_in(const std::string& path) {
    std::vector<GapRun> out;
    RecordingReader reader = RecordingReader::open(path);
    reader.for_each([&](std::span<const nvmetrace_rec> recs) {
        for (const auto& r : recs)
            if (r.event == NVMETRACE_EV_GAP)
                out.push_back({.cpu = r.dev, .first_ts = r.lba, .last_ts = r.ts, .records = r.aux});
    });
    return out;
}

JoinedReport join_files(const std::vector<std::string>& files, const JoinFilesOptions& opts) {
    JoinedReport rep;
    std::vector<std::unique_ptr<FileStream>> streams;
    for (const auto& p : files)
        streams.push_back(std::make_unique<FileStream>(p));

    // The target's clock: every target file must share it.
    const FileStream* tclock = nullptr;
    std::vector<std::string> target_paths;
    for (const auto& s : streams) {
        if (!role_has(s->meta.role, "target"))
            continue;
        if (tclock && !same_clock(tclock->meta, s->meta))
            throw Error(fmt::format(
                "{} and {}: target recordings of two machines (or two boots); join each "
                "target's recordings in a report of their own",
                tclock->path, s->path));
        if (!tclock)
            tclock = s.get();
        target_paths.push_back(s->path);
    }

    Joiner joiner(Joiner::Options{opts.window_ns});
    KeyFields fields;  // what every recording's key holds
    for (const auto& s : streams)
        fields = fields & key_fields(s->meta);
    uint16_t next_origin = 0;
    std::vector<std::string> on;
    for (auto& s : streams) {
        const RecordingMeta& m = s->meta;
        std::string where = fmt::format("{} (kernel {})", m.hostname, m.kernel_release);
        if (std::find(on.begin(), on.end(), where) == on.end())
            on.push_back(where);
        const auto start = static_cast<uint64_t>(m.start_monotonic_ns);
        if (role_has(m.role, "host")) {
            rep.host_files++;
            s->origin = next_origin++;
            Joiner::Source src{Side::host, m.sample, m.seed,          start,
                               UINT64_MAX, 0,        host_cntlids(m), host_followed(m)};
            src.keys = key_fields(m);
            if (tclock && !same_clock(tclock->meta, m))
                src.offset_ns = calibrate(s->path, m, target_paths, tclock->meta,
                                          opts.calibration_commands, fields);
            s->src[0] = static_cast<int>(joiner.add_source(src));
        }
        if (role_has(m.role, "target")) {
            rep.target_files++;
            Joiner::Source src{Side::target, m.sample, m.seed, start, UINT64_MAX, 0, {}};
            src.keys = key_fields(m);
            s->src[1] = static_cast<int>(joiner.add_source(src));
        }
    }
    rep.recorded_on = fmt::format("{}", fmt::join(on, " and "));

    // Rates and origin: the first host recording's (else the first file's).
    const FileStream* lead = streams.front().get();
    for (const auto& s : streams)
        if (s->src[0] >= 0) {
            lead = s.get();
            break;
        }
    DeviceTable names;  // only for the labels of a single host's groups
    devices_from_json(lead->meta.devices, names);
    for (const auto& s : streams)
        if (s->src[1] >= 0)
            devices_from_json(s->meta.devices, names);
    Stats::Options so{.sample_n = lead->meta.sample,
                      .interval_ns = opts.on_interval ? opts.interval_ns : 0,
                      .origin_ns = static_cast<uint64_t>(lead->meta.start_monotonic_ns)};
    Stats stats(names, so, opts.on_interval);
    if (rep.host_files > 1) {
        // several hosts: their disks share names and numbers; say whose
        std::vector<const FileStream*> by_origin;
        for (const auto& s : streams)
            if (s->src[0] >= 0)
                by_origin.push_back(s.get());
        stats.set_device_label([by_origin](const Command& c) {
            const FileStream* f = by_origin.at(c.origin);
            std::string disk = f->table.disk_name(c.dev);
            return c.cntlid ? fmt::format("{}:{} (cntlid {})", f->meta.hostname, disk, c.cntlid)
                            : fmt::format("{}:{}", f->meta.hostname, disk);
        });
    }
    uint64_t last_end = 0;  // of the commands handed to Stats
    auto sink = [&](const Command& c) {
        if (opts.on_command)
            opts.on_command(c);
        last_end = std::max(last_end, c.last_ts());
        stats.add(c);
    };
    std::vector<std::vector<uint16_t>> target_ids(streams.size());

    // Merge: always take the command that completes first on the target's
    // clock; a file whose next command could come earlier is read first.
    for (;;) {
        FileStream* best = nullptr;
        int best_side = 0;
        bool best_pull = false;
        uint64_t best_t = UINT64_MAX;
        for (auto& s : streams) {
            for (int side = 0; side < 2; side++) {
                if (s->src[side] < 0)
                    continue;
                const int64_t off =
                    side == 0 ? joiner.source(static_cast<size_t>(s->src[0])).offset_ns : 0;
                uint64_t t;
                bool pull = false;
                if (!s->out[side].empty()) {
                    t = s->out[side].front().last_ts() + static_cast<uint64_t>(off);
                } else if (!s->eof) {
                    // nothing read yet: read it now (0 + a negative offset would wrap)
                    const uint64_t last = s->assembler->counts().last_ts;
                    t = last ? last + static_cast<uint64_t>(off) : 0;
                    pull = true;
                } else {
                    continue;
                }
                if (t < best_t || (t == best_t && best_pull && !pull)) {
                    best = s.get();
                    best_side = side;
                    best_pull = pull;
                    best_t = t;
                }
            }
        }
        if (!best)
            break;
        if (best_pull) {
            best->pull();
            // the window's end is known at the end of the file (its start is the META's)
            if (best->eof)
                for (int side = 0; side < 2; side++)
                    if (best->src[side] >= 0)
                        joiner.source(static_cast<size_t>(best->src[side])).last_ts =
                            best->assembler->counts().last_ts;
            continue;
        }
        Command c = std::move(best->out[best_side].front());
        best->out[best_side].pop_front();
        if (best_side == 1 && c.cntlid) {
            // the controllers this target served, as far as read
            auto& ids = joiner.source(static_cast<size_t>(best->src[1])).cntlids;
            if (std::find(ids.begin(), ids.end(), c.cntlid) == ids.end())
                ids.push_back(c.cntlid);
        }
        joiner.push(static_cast<size_t>(best->src[best_side]), c, sink);
    }
    rep.join = joiner.finish(sink);

    uint64_t duration = 0;
    for (auto& s : streams) {
        const AssemblyCounts& a = s->assembler->counts();
        AssemblyCounts& t = rep.counts;
        t.records_host += a.records_host;
        t.records_target += a.records_target;
        t.records_unknown += a.records_unknown;
        t.records_bad_ts += a.records_bad_ts;
        t.records_out_of_order += a.records_out_of_order;
        t.complete += a.complete;
        t.cut_start += a.cut_start;
        t.cut_end += a.cut_end;
        t.device_gone += a.device_gone;
        t.lost_end += a.lost_end;
        t.bios_unmatched += a.bios_unmatched;
        t.inserts_unmatched += a.inserts_unmatched;
        t.multipath_duplicates += a.multipath_duplicates;
        t.repeats += a.repeats;
        t.late_times += a.late_times;
        t.user_unmatched += a.user_unmatched;
        t.superseded += a.superseded;
        t.lost_in_gap += a.lost_in_gap;
        t.gaps.insert(t.gaps.end(), a.gaps.begin(), a.gaps.end());
        uint64_t lost = s->reader.trailer() ? s->reader.trailer()->lost : 0;
        // a file of both roles cannot tell whose ring lost its records
        (s->src[0] >= 0 ? rep.lost_host : rep.lost_target) += lost;
        if (s->src[0] >= 0) {
            uint64_t d = 0;
            const auto start = static_cast<uint64_t>(s->meta.start_monotonic_ns);
            if (s->reader.trailer())
                d = s->reader.trailer()->duration_ns;
            else if (a.last_ts > start)
                d = a.last_ts - start;
            duration = std::max(duration, d);
        }
        for (const auto& n : s->reader.notes())
            rep.notes.push_back(fmt::format("{}: {}", s->path, n));
        if (s->reader.end() != RecordingEnd::clean)
            rep.problems.push_back(s->reader.problem());
        rep.corrupt = rep.corrupt || s->reader.end() == RecordingEnd::corrupt;
    }
    // the last interval ends with the last command (not the recording, which
    // may go on idle for long)
    stats.flush_interval(last_end);
    rep.summary = stats.summary(duration);
    return rep;
}

}  // namespace nvmetrace
