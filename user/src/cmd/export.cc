#include "cmd/export.h"

#include "analysis/assembler.h"
#include "analysis/components.h"
#include "analysis/events.h"
#include "analysis/join.h"
#include "analysis/stats.h"
#include "format/recfile.h"
#include "kernel/devices.h"
#include "util/error.h"
#include "util/json_num.h"
#include "version.h"

#include <errno.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace nvmetrace {

namespace {

// The trace file: the opening of the object, one event at a time, and the
// closing with the metadata.  Written to PATH.part and renamed at the end,
// so that a failed export leaves no half file under the name asked for.
class TraceOut {
public:
    explicit TraceOut(const std::string& path) : path_(path) {
        if (path == "-") {
            f_ = stdout;
        } else {
            part_ = path + ".part";
            f_ = fopen(part_.c_str(), "w");
            if (!f_)
                throw errno_error(fmt::format("export: cannot write {}", part_), errno);
        }
        put("{\"traceEvents\":[\n");
    }
    ~TraceOut() {
        if (f_ && f_ != stdout) {
            fclose(f_);
            std::remove(part_.c_str());
        }
    }
    TraceOut(const TraceOut&) = delete;
    TraceOut& operator=(const TraceOut&) = delete;

    void event(const nlohmann::json& e) {
        if (events_++)
            put(",\n");
        put(json_text(e));
    }
    void finish(const nlohmann::json& metadata) {
        put(fmt::format("\n],\"displayTimeUnit\":\"ns\",\"metadata\":{}}}\n", json_text(metadata)));
        if (f_ == stdout) {
            if (fflush(f_) != 0)
                throw errno_error("export: writing the trace to stdout", errno);
            f_ = nullptr;
            return;
        }
        const int rc = fclose(f_);
        f_ = nullptr;
        if (rc != 0) {
            const int e = errno;
            std::remove(part_.c_str());
            throw errno_error(fmt::format("export: writing {}", part_), e);
        }
        std::error_code ec;
        std::filesystem::rename(part_, path_, ec);
        if (ec) {
            std::remove(part_.c_str());
            throw Error(
                fmt::format("export: cannot rename {} to {}: {}", part_, path_, ec.message()));
        }
    }
    uint64_t events() const { return events_; }

private:
    void put(std::string_view s) {
        if (fwrite(s.data(), 1, s.size(), f_) != s.size())
            throw errno_error(fmt::format("export: writing {}", path_ == "-" ? "stdout" : part_),
                              errno);
    }

    std::string path_, part_;
    FILE* f_ = nullptr;
    uint64_t events_ = 0;
};

// ns past a recording's start as the format's microseconds, rounded to a
// multiple of 1/1024 us: within half a ns, so ns precision stays (a reader
// rounding to ns gets NS back), and exact in binary, so that a viewer which
// adds ts and dur or subtracts one ts from another (speedscope does) gets
// exactly the ts of the next stage, where ns / 1000.0 is off by an ulp and
// makes touching stages overlap.
double us(uint64_t ns) {
    // 128-bit: ns * 128 does not wrap for any 64-bit ns
    __extension__ typedef unsigned __int128 Wide;
    return static_cast<double>((static_cast<Wide>(ns) * 128 + 62) / 125) / 1024.0;
}

// A machine's side in the trace: one process.
struct Proc {
    int pid = 0;
    uint64_t origin_ns = 0;  // its recording's start: ts 0
    const DeviceTable* table = nullptr;
};

// The queues' tracks.  Commands of one queue overlap at a queue depth over
// one, and slices on one track must nest: each queue has sub-tracks, and a
// command takes the first whose last command ended by its start.  Commands
// come in about completion order, so a sub-track is free for good once it is
// past: one end time per sub-track is all that is kept.
class Tracks {
public:
    explicit Tracks(TraceOut& out) : out_(out) {}

    int take(int pid, uint32_t unit, uint16_t qid, const std::string& name, uint64_t start,
             uint64_t end) {
        Queue& q = queues_[{pid, unit, qid}];
        size_t sub = 0;
        while (sub < q.ends.size() && q.ends[sub] > start)
            sub++;
        if (sub == q.ends.size()) {
            q.ends.push_back(end);
            q.tids.push_back(next_tid_++);
            const int tid = q.tids.back();
            const std::string tname = sub ? fmt::format("{} #{}", name, sub + 1) : name;
            out_.event({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", pid},
                        {"tid", tid},
                        {"args", {{"name", tname}}}});
            out_.event({{"ph", "M"},
                        {"name", "thread_sort_index"},
                        {"pid", pid},
                        {"tid", tid},
                        {"args",
                         {{"sort_index",
                           int{qid} * 1000 + static_cast<int>(std::min(sub, size_t{999}))}}}});
        } else {
            q.ends[sub] = end;
        }
        return q.tids[sub];
    }
    size_t tracks() const { return static_cast<size_t>(next_tid_ - 1); }

private:
    struct Key {
        int pid;
        uint32_t unit;  // host: the disk's dev_t; target: the controller id
        uint16_t qid;
        auto operator<=>(const Key&) const = default;
    };
    struct Queue {
        std::vector<uint64_t> ends;
        std::vector<int> tids;
    };
    TraceOut& out_;
    std::map<Key, Queue> queues_;
    int next_tid_ = 1;
};

// What was drawn and what was not, for the trace's metadata and stderr.
struct ExportCounts {
    uint64_t commands = 0;
    uint64_t joined = 0;
    uint64_t target_unmatched = 0;  // joined view: alone on the target's clock, left out
    uint64_t before_start = 0;      // a first event before its recording's start, left out
    uint64_t no_path = 0;           // no layout for its events, left out
    uint64_t not_drawn = 0;         // components of 0 or negative length, not drawn

    nlohmann::json json() const {
        return {{"commands", commands},
                {"joined", joined},
                {"left_out",
                 {{"target_unmatched", target_unmatched},
                  {"before_start", before_start},
                  {"no_path", no_path}}},
                {"components_not_drawn", not_drawn}};
    }
};

// Commands to slices.
class Exporter {
public:
    explicit Exporter(TraceOut& out) : out_(out), tracks_(out) {}

    // A process named after its recording's META.
    int process(const RecordingMeta& m, std::string_view side) {
        const int pid = next_pid_++;
        out_.event(
            {{"ph", "M"},
             {"name", "process_name"},
             {"pid", pid},
             {"tid", 0},
             {"args",
              {{"name", fmt::format("{} {} (kernel {})", side, m.hostname, m.kernel_release)},
               {"hostname", m.hostname},
               {"kernel", m.kernel_release},
               {"role", std::string(side)}}}});
        out_.event({{"ph", "M"},
                    {"name", "process_sort_index"},
                    {"pid", pid},
                    {"tid", 0},
                    {"args", {{"sort_index", pid}}}});
        return pid;
    }

    // One command: host-only and joined ones on `host`'s queue track (a
    // joined one's target part on `target`'s), target-only ones on `target`'s.
    void add(const Command& c, const Proc& host, const Proc& target) {
        const View view = view_of(c);
        const Layout* layout = layout_of(view, c.present);
        if (!layout || !c.has(layout->first_slot) || !c.has(layout->last_slot)) {
            counts_.no_path++;
            return;
        }
        const Proc& own = view == View::target_only ? target : host;
        const uint64_t start = c.at(layout->first_slot);
        const uint64_t end = std::max(start, c.at(layout->last_slot));
        if (start < own.origin_ns) {
            counts_.before_start++;
            return;
        }
        const uint64_t origin = own.origin_ns;

        // the segments of each track, in path order
        std::vector<Piece> on_host, on_target;
        for (const auto& s : layout->segments) {
            const bool t =
                view == View::target_only || (kEvents[s.from_slot].side == Side::target &&
                                              kEvents[s.to_slot].side == Side::target);
            (t ? on_target : on_host)
                .push_back({&s, &layout->stages[s.stage], c.at(s.from_slot), c.at(s.to_slot)});
        }

        const std::string group = group_of(c, view == View::target_only ? target : host);
        std::string name = fmt::format("{} {} lba {}", op_name(c.op), size_of(c), c.lba);
        if (c.has_cid)
            name += fmt::format(" cid {}", c.cid);
        nlohmann::json args = {{"op", std::string(op_name(c.op))},
                               {"lba", c.lba},
                               {c.size_in_blocks ? "blocks" : "bytes", c.size},
                               {"qid", c.qid},
                               {"status", c.status},
                               {"group", group},
                               {"view", view == View::joined        ? "joined"
                                        : view == View::target_only ? "target"
                                                                    : "host"}};
        args["cid"] = c.has_cid ? nlohmann::json(c.cid) : nlohmann::json();
        args["cntlid"] = c.cntlid ? nlohmann::json(c.cntlid) : nlohmann::json();
        if (c.nsid)
            args["nsid"] = c.nsid;
        if (c.failed_over) {  // its bios went again on a later request: the I/O is that one
            name += " (failed over)";
            args["failed_over"] = true;
        }
        if (c.attempts_before)
            args["attempts_before"] = c.attempts_before;
        if (!layout->missing.empty())
            args["missing"] = layout->missing;
        std::vector<std::string> notes;

        if (view == View::target_only) {
            const int tid = tracks_.take(target.pid, c.cntlid, c.qid, target_queue(c), start, end);
            emit_part(c, target.pid, tid, name, "command", args, origin, start, end, on_target,
                      notes);
        } else {
            const int tid = tracks_.take(host.pid, c.dev, c.qid, host_queue(c, host), start, end);
            // the target part: the span of its segments, inside the command's
            std::vector<Slice> tslices;
            uint64_t ts0 = 0, ts1 = 0;
            if (!on_target.empty()) {
                ts0 = std::clamp(on_target.front().from, start, end);
                ts1 = std::clamp(on_target.back().to, ts0, end);
                tslices = place(on_target, ts0, ts1, notes);
            }
            const std::vector<Slice> hslices = place(on_host, start, end, notes);
            if (!notes.empty())
                args["not_drawn"] = notes;
            write(c, host.pid, tid, name, "command", args, origin, start, end, hslices);
            if (!on_target.empty()) {
                nlohmann::json targs = {{"host_command", name}, {"group", group}};
                const int ttid =
                    tracks_.take(target.pid, c.cntlid, c.qid, target_queue(c), ts0, ts1);
                write(c, target.pid, ttid, "target: " + name, "command.target", targs, origin, ts0,
                      ts1, tslices);
                counts_.joined++;
            }
        }
        counts_.commands++;
    }

    ExportCounts& counts() { return counts_; }
    size_t tracks() const { return tracks_.tracks(); }

private:
    struct Piece {
        const Layout::Segment* seg;
        const Layout::Stage* stage;
        uint64_t from, to;
    };
    struct Slice {
        const Piece* piece;
        uint64_t from, to;
    };

    // The pieces of one track inside [lo, hi], each after the one before
    // it: a piece of 0 or negative length (the joined view's seam, a
    // computed network that came out negative), or clamped to nothing, is
    // not drawn and gets a note.  Pieces of the path tile it, so nothing is
    // clamped when every one is positive.
    std::vector<Slice> place(const std::vector<Piece>& pieces, uint64_t lo, uint64_t hi,
                             std::vector<std::string>& notes) {
        std::vector<Slice> out;
        uint64_t cursor = lo;
        for (const auto& p : pieces) {
            const uint64_t a = std::clamp(p.from, cursor, hi);
            const uint64_t b = std::clamp(p.to, a, hi);
            if (b == a || p.to <= p.from) {
                const int64_t len = ts_span(p.from, p.to);
                if (p.seg->seam && len == 0) {
                    notes.push_back(fmt::format("{}: 0 ns by construction", p.seg->name));
                } else {
                    notes.push_back(fmt::format("{}: {} ns", p.seg->name, len));
                    counts_.not_drawn++;
                }
                continue;
            }
            if (a != p.from || b != p.to)
                notes.push_back(fmt::format("{}: clamped by {} ns", p.seg->name,
                                            ts_span(p.from, p.to) - ts_span(a, b)));
            out.push_back({&p, a, b});
            cursor = b;
        }
        return out;
    }

    void emit_part(const Command& c, int pid, int tid, const std::string& name,
                   std::string_view cat, nlohmann::json& args, uint64_t origin, uint64_t start,
                   uint64_t end, const std::vector<Piece>& pieces,
                   std::vector<std::string>& notes) {
        const std::vector<Slice> slices = place(pieces, start, end, notes);
        if (!notes.empty())
            args["not_drawn"] = notes;
        write(c, pid, tid, name, cat, args, origin, start, end, slices);
    }

    // A slice and, nested inside it, its stages (runs of consecutive slices
    // of one stage), each with its components.
    // c: the command the slices are of (its events' names)
    void write(const Command& c, int pid, int tid, const std::string& name, std::string_view cat,
               const nlohmann::json& args, uint64_t origin, uint64_t start, uint64_t end,
               const std::vector<Slice>& slices) {
        auto x = [&](const std::string& n, std::string_view k, uint64_t a, uint64_t b,
                     nlohmann::json xargs) {
            out_.event({{"ph", "X"},
                        {"name", n},
                        {"cat", std::string(k)},
                        {"pid", pid},
                        {"tid", tid},
                        {"ts", us(a - origin)},
                        {"dur", us(b - origin) - us(a - origin)},  // exact: ts + dur is the end's
                        {"args", std::move(xargs)}});
        };
        x(name, cat, start, end, args);
        for (size_t i = 0; i < slices.size();) {
            size_t j = i + 1;
            while (j < slices.size() && slices[j].piece->stage == slices[i].piece->stage)
                j++;
            const Layout::Stage& st = *slices[i].piece->stage;
            x(st.name, "stage", slices[i].from, slices[j - 1].to,
              {{"id", stage_id(st.name)}, {"not_recorded", st.not_recorded}});
            for (size_t k = i; k < j; k++) {
                const Piece& p = *slices[k].piece;
                nlohmann::json cargs = {{"id", component_id(p.seg->name)},
                                        {"stage", st.name},
                                        {"from", std::string(event_name(c, p.seg->from_slot))},
                                        {"to", std::string(event_name(c, p.seg->to_slot))}};
                if (p.seg->merged)
                    cargs["merged"] = true;
                x(p.seg->name, "component", slices[k].from, slices[k].to, std::move(cargs));
            }
            i = j;
        }
    }

    const Layout* layout_of(View view, EventMask present) {
        EventMask key = 0;
        try {
            key = layout_key(view, present, kComponents);
        } catch (const std::logic_error&) {
            return nullptr;
        }
        auto [it, fresh] = layouts_.try_emplace({view, key});
        if (fresh) {
            try {
                it->second = std::make_unique<Layout>(layout_for(view, key, kComponents));
            } catch (const std::logic_error&) {
                it->second.reset();
            }
        }
        return it->second.get();
    }

    static std::string size_of(const Command& c) {
        return c.size_in_blocks ? fmt::format("{} blocks", c.size) : size_label(c.size);
    }
    static std::string group_of(const Command& c, const Proc& p) {
        const std::string dev =
            c.side == Side::target ? p.table->target_name(c.nsid) : p.table->disk_name(c.dev);
        return fmt::format("{} {} {}", op_name(c.op), size_of(c), dev);
    }
    static std::string host_queue(const Command& c, const Proc& p) {
        return fmt::format("{} q{}", p.table->disk_name(c.dev), c.qid);
    }
    static std::string target_queue(const Command& c) {
        return c.cntlid ? fmt::format("target q{} (cntlid {})", c.qid, c.cntlid)
                        : fmt::format("target q{}", c.qid);
    }

    TraceOut& out_;
    Tracks tracks_;
    int next_pid_ = 1;
    ExportCounts counts_;
    std::map<std::pair<View, EventMask>, std::unique_ptr<Layout>> layouts_;
};

bool role_has(const std::string& role, std::string_view side) {
    return role.find(side) != std::string::npos;
}

// The recordings' METAs and device tables, opened before anything is
// written: a file that is not a recording is said before the trace exists.
struct Input {
    std::string path;
    RecordingMeta meta;
    DeviceTable table;
};

}  // namespace

std::string default_export_path(const std::string& first) {
    std::filesystem::path p = std::filesystem::path(first).filename();
    if (p.extension() == ".ntr")
        p = p.stem();
    if (p.empty() || p == "." || p == "..")
        p = "nvmetrace";
    return p.string() + ".trace.json";
}

int run_export(const ExportOptions& opts, FILE* err) {
    if (opts.files.empty())
        throw Error("export: name at least one recording");
    std::vector<std::unique_ptr<Input>> inputs;
    for (const auto& path : opts.files) {
        auto in = std::make_unique<Input>();
        in->path = path;
        in->meta = RecordingReader::open(path).meta();
        devices_from_json(in->meta.devices, in->table);
        inputs.push_back(std::move(in));
    }
    const bool joined = !opts.no_join && files_hold_both_sides(opts.files);
    const std::string path = opts.output.empty() ? default_export_path(opts.files[0]) : opts.output;

    TraceOut out(path);
    Exporter ex(out);
    nlohmann::json meta = {
        {"tool", "nvmetrace"},
        {"version", kToolVersion},
        {"files", opts.files},
        {"joined", joined},
        {"clock", joined ? "CLOCK_MONOTONIC of each host, ts 0 at its recording's "
                           "start; joined target parts shifted onto it"
                         : "CLOCK_MONOTONIC of each recording, ts 0 at its start"}};
    int rc = 0;
    if (joined) {
        // as join_files() numbers them: Command::origin is the host
        // recording's index among the host recordings, in file order
        std::vector<Proc> hosts;
        for (const auto& in : inputs)
            if (role_has(in->meta.role, "host"))
                hosts.push_back({ex.process(in->meta, "host"),
                                 static_cast<uint64_t>(in->meta.start_monotonic_ns), &in->table});
        Proc target;
        for (const auto& in : inputs)
            if (role_has(in->meta.role, "target")) {
                target = {ex.process(in->meta, "target"),
                          static_cast<uint64_t>(in->meta.start_monotonic_ns), &in->table};
                break;
            }
        JoinFilesOptions jo;
        if (opts.join_window_s > 0)
            jo.window_ns = static_cast<uint64_t>(opts.join_window_s * 1e9);
        jo.on_command = [&](const Command& c) {
            if (view_of(c) == View::target_only) {
                // on the target's clock, which no host track shares
                ex.counts().target_unmatched++;
                return;
            }
            const Proc& h = hosts.at(c.origin);
            ex.add(c, h, {target.pid, h.origin_ns, target.table});
        };
        JoinedReport r = join_files(opts.files, jo);
        meta["recorded_on"] = r.recorded_on;
        meta["join"] = {{"host", r.join.host},
                        {"target", r.join.target},
                        {"matched", r.join.matched},
                        {"negative_network", r.join.negative_network}};
        for (const auto& n : r.notes)
            fmt::print(err, "nvmetrace: {}\n", n);
        for (const auto& p : r.problems)
            fmt::print(err, "nvmetrace: {}\n", p);
        if (r.corrupt)
            rc = 1;
    } else {
        for (const auto& in : inputs) {
            RecordingReader reader = RecordingReader::open(in->path);
            const auto origin = static_cast<uint64_t>(in->meta.start_monotonic_ns);
            Proc host, target;
            if (role_has(in->meta.role, "host") || !role_has(in->meta.role, "target"))
                host = {ex.process(in->meta, "host"), origin, &in->table};
            if (role_has(in->meta.role, "target"))
                target = {ex.process(in->meta, "target"), origin, &in->table};
            if (!target.table)
                target = host;
            if (!host.table)
                host = target;
            Assembler assembler(in->table, [&](const Command& c) { ex.add(c, host, target); });
            assembler.set_gaps(gap_runs_in(in->path));
            reader.for_each([&](std::span<const nvmetrace_rec> recs) {
                for (const auto& r : recs)
                    assembler.push(r);
            });
            assembler.finish();
            for (const auto& n : reader.notes())
                fmt::print(err, "nvmetrace: {}: {}\n", in->path, n);
            if (reader.end() != RecordingEnd::clean) {
                fmt::print(err, "nvmetrace: {}\n", reader.problem());
                if (reader.end() == RecordingEnd::corrupt)
                    rc = 1;
            }
        }
    }
    const ExportCounts& n = ex.counts();
    meta["schema"] = json_schema("trace");
    meta["counts"] = n.json();
    meta["tracks"] = ex.tracks();
    out.finish(meta);

    const std::string where = path == "-" ? "stdout" : path;
    if (n.commands == 0)
        fmt::print(err,
                   "nvmetrace: export: no complete commands in {}; {} holds only the metadata\n",
                   fmt::join(opts.files, ", "), where);
    else if (path != "-")
        fmt::print(err, "nvmetrace: export: {} commands ({} joined) on {} tracks in {}\n",
                   n.commands, n.joined, ex.tracks(), where);
    if (n.target_unmatched)
        fmt::print(err,
                   "nvmetrace: export: {} target commands without their host command left out "
                   "(they are on the target's clock)\n",
                   n.target_unmatched);
    if (n.before_start || n.no_path)
        fmt::print(err,
                   "nvmetrace: export: {} commands left out ({} before their recording's start, "
                   "{} with no path through the components)\n",
                   n.before_start + n.no_path, n.before_start, n.no_path);
    return rc;
}

}  // namespace nvmetrace
