#include "cmd/report.h"

#include "analysis/assembler.h"
#include "analysis/events.h"
#include "analysis/join.h"
#include "analysis/stats.h"
#include "format/recfile.h"
#include "kernel/devices.h"
#include "report/printer.h"
#include "util/error.h"
#include "util/json_num.h"

#include <span>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace nvmetrace {

namespace {

// One JSON object per line for each assembled command: its identity and the
// timestamp of every event it has (for scripts, tests and other tools).
void print_command(const Command& c) {
    nlohmann::json j;
    j["schema"] = json_schema("command");
    j["side"] = c.side == Side::host ? "host" : "target";
    j["op"] = c.op == Op::read ? "read" : "write";
    j["lba"] = c.lba;
    j[c.size_in_blocks ? "blocks" : "bytes"] = c.size;
    if (c.dev)
        j["dev"] = c.dev;
    if (c.nsid)
        j["nsid"] = c.nsid;
    j["status"] = c.status;
    if (c.qid)
        j["qid"] = c.qid;
    if (c.has_cid)
        j["cid"] = c.cid;
    if (c.side == Side::target)
        j["cntlid"] = c.cntlid;
    nlohmann::json ev = nlohmann::json::object();
    for (const auto& e : kEvents) {
        int slot = event_slot(e.event);
        if (c.has(slot))
            ev[std::string(e.name)] = c.at(slot);
    }
    j["events"] = ev;
    fmt::print("{}\n", json_text(j));
}

// `report` of recordings that hold both roles between them (one file of
// host+target, or the hosts' files and the target's): host commands are
// joined with their target commands (join_files(), streaming) and reported
// together, on the host's clock.  Returns false, having printed nothing,
// when the files do not hold both sides.
bool report_joined(const ReportCommandOptions& opts, int* rc) {
    if (opts.commands || !files_hold_both_sides(opts.files))
        return false;
    JoinFilesOptions jo;
    if (opts.join_window_s > 0)
        jo.window_ns = static_cast<uint64_t>(opts.join_window_s * 1e9);
    JoinedReport r = join_files(opts.files, jo);
    ReportOptions ro;
    ro.detail = opts.detail;
    ro.recorded_on = r.recorded_on;
    ro.lost_host = r.lost_host;
    ro.lost_target = r.lost_target;
    ro.join = r.join;
    // the drop runs' times: from the first recording's start
    ro.origin_ns =
        static_cast<uint64_t>(RecordingReader::open(opts.files.front()).meta().start_monotonic_ns);
    if (opts.json) {
        nlohmann::json j = summary_json(r.summary, r.counts, ro);
        j["files"] = opts.files;
        j["role"] = "joined";
        nlohmann::json all = nlohmann::json::array();
        all.push_back(j);
        fmt::print("{}\n", json_text(all, 2));
    } else {
        fmt::print("{}", summary_text(r.summary, r.counts, ro));
    }
    for (const auto& n : r.notes)
        fmt::print(stderr, "nvmetrace: {}\n", n);
    for (const auto& p : r.problems)
        fmt::print(stderr, "nvmetrace: {}\n", p);
    if (r.corrupt)
        *rc = 1;
    return true;
}

}  // namespace

int run_report(const ReportCommandOptions& opts) {
    if (opts.files.empty())
        throw Error("report: name at least one recording");
    nlohmann::json all = nlohmann::json::array();
    int rc = 0;
    if (!opts.no_join && report_joined(opts, &rc))
        return rc;
    for (size_t i = 0; i < opts.files.size(); i++) {
        const std::string& path = opts.files[i];
        RecordingReader reader = RecordingReader::open(path);
        const RecordingMeta& meta = reader.meta();
        DeviceTable table;
        devices_from_json(meta.devices, table);
        Stats stats(table, {.sample_n = meta.sample,
                            .origin_ns = static_cast<uint64_t>(meta.start_monotonic_ns)});
        Assembler assembler(table, [&](const Command& c) {
            if (opts.commands)
                print_command(c);
            else
                stats.add(c);
        });
        assembler.set_gaps(gap_runs_in(path));
        reader.for_each([&](std::span<const nvmetrace_rec> recs) {
            for (const auto& r : recs)
                assembler.push(r);
        });
        assembler.finish();

        uint64_t duration = 0;
        uint64_t lost = 0;
        if (reader.trailer()) {
            duration = reader.trailer()->duration_ns;
            lost = reader.trailer()->lost;
        } else if (assembler.counts().last_ts > static_cast<uint64_t>(meta.start_monotonic_ns)) {
            duration = assembler.counts().last_ts - static_cast<uint64_t>(meta.start_monotonic_ns);
        }
        ReportOptions ro;
        ro.detail = opts.detail;
        ro.recorded_on = fmt::format("{} (kernel {})", meta.hostname, meta.kernel_release);
        ro.origin_ns = static_cast<uint64_t>(meta.start_monotonic_ns);
        if (meta.role == "target")
            ro.lost_target = lost;
        else
            ro.lost_host = lost;
        const Summary summary = stats.summary(duration);
        if (opts.commands) {
            // the commands are out; only problems remain to be said
        } else if (opts.json) {
            nlohmann::json j = summary_json(summary, assembler.counts(), ro);
            j["file"] = path;
            j["role"] = meta.role;
            if (reader.end() != RecordingEnd::clean)
                j["problem"] = reader.problem();
            all.push_back(j);
        } else {
            if (opts.files.size() > 1)
                fmt::print("{}== {} ({})\n", i ? "\n" : "", path, meta.role);
            fmt::print("{}", summary_text(summary, assembler.counts(), ro));
        }
        for (const auto& n : reader.notes())
            fmt::print(stderr, "nvmetrace: {}: {}\n", path, n);
        if (reader.end() != RecordingEnd::clean) {
            // say where the file ended; the figures above cover what came before
            fmt::print(stderr, "nvmetrace: {}\n", reader.problem());
            if (reader.end() == RecordingEnd::corrupt)
                rc = 1;
        }
    }
    if (opts.json)
        fmt::print("{}\n", json_text(all, 2));
    return rc;
}

}  // namespace nvmetrace
