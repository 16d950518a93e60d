#include "join.h"

#include "devices.h"
#include "error.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <memory>
#include <set>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nvmetrace {

namespace {

bool role_has(const std::string& role, std::string_view side) {
    return role.find(side) != std::string::npos;
}

// CLOCK_REALTIME - CLOCK_MONOTONIC at the recording's start: the machine's
// boot instant on the wall clock.  Equal (to the read jitter) for two
// recordings of one boot of one machine, whose monotonic clocks are then one.
int64_t boot_wall(const RecordingMeta& m) {
    return m.start_realtime_ns - m.start_monotonic_ns;
}

bool same_clock(const RecordingMeta& a, const RecordingMeta& b) {
    return a.hostname == b.hostname && std::llabs(boot_wall(a) - boot_wall(b)) < 10'000'000;
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
        auto id = static_cast<uint16_t>(d.value("cntlid", 0u));
        std::string kind = d.value("kind", "");
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
                  size_t max_commands) {
    const int64_t wall = boot_wall(host_meta) - boot_wall(target_meta);
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
    auto key = [](const Command& c) {
        return c.lba * 0x9e3779b97f4a7c15ull ^
               (uint64_t{c.qid} << 48 | uint64_t{c.cid} << 32 | uint64_t{c.nsid} << 1 |
                static_cast<uint64_t>(c.op));
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
    auto off = estimate_offset(hosts, targets);
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
            Joiner::Source src{Side::host, m.sample, m.seed, start, UINT64_MAX, 0, host_cntlids(m)};
            if (tclock && !same_clock(tclock->meta, m))
                src.offset_ns =
                    calibrate(s->path, m, target_paths, tclock->meta, opts.calibration_commands);
            s->src[0] = static_cast<int>(joiner.add_source(src));
        }
        if (role_has(m.role, "target")) {
            rep.target_files++;
            s->src[1] = static_cast<int>(
                joiner.add_source({Side::target, m.sample, m.seed, start, UINT64_MAX, 0, {}}));
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
                      .origin_ns = static_cast<uint64_t>(lead->meta.start_monotonic_ns)};
    Stats stats(names, so);
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
    auto sink = [&](const Command& c) {
        if (opts.on_command)
            opts.on_command(c);
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
        t.records_out_of_order += a.records_out_of_order;
        t.complete += a.complete;
        t.cut_start += a.cut_start;
        t.cut_end += a.cut_end;
        t.lost_end += a.lost_end;
        t.bios_unmatched += a.bios_unmatched;
        t.inserts_unmatched += a.inserts_unmatched;
        t.multipath_duplicates += a.multipath_duplicates;
        t.repeats += a.repeats;
        t.late_times += a.late_times;
        t.user_unmatched += a.user_unmatched;
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
    rep.summary = stats.summary(duration);
    return rep;
}

}  // namespace nvmetrace
