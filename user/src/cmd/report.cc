#include "cmd/report.h"

#include "analysis/assembler.h"
#include "analysis/events.h"
#include "analysis/join.h"
#include "analysis/stats.h"
#include "format/recfile.h"
#include "kernel/devices.h"
#include "report/html.h"
#include "report/printer.h"
#include "util/error.h"
#include "util/json_num.h"

#include <algorithm>
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
    if (c.failed_over)
        j["failed_over"] = true;
    if (c.attempts_before)
        j["attempts_before"] = c.attempts_before;
    if (c.reap_unseen)
        j["reap_unseen"] = true;
    if (c.reap_ring)  // its reap event is when the kernel saw it taken; taken within this before
        j["reap_from_ring_window_ns"] = c.reap_window_ns;
    nlohmann::json ev = nlohmann::json::object();
    for (const auto& e : kEvents) {
        int slot = event_slot(e.event);
        if (c.has(slot))
            ev[std::string(event_name(c, slot))] = c.at(slot);
    }
    j["events"] = ev;
    fmt::print("{}\n", json_text(j));
}

// From the first command's first event to the last one's last event: what
// the latency-over-time plot covers.
struct CommandSpan {
    uint64_t first = UINT64_MAX, last = 0;
    void add(const Command& c) {
        first = std::min(first, c.first_ts());
        last = std::max(last, c.last_ts());
    }
    uint64_t ns() const { return last > first ? last - first : 0; }
};

// `report` of recordings that hold both roles between them (one file of
// host+target, or the hosts' files and the target's): host commands are
// joined with their target commands (join_files(), streaming) and reported
// together, on the host's clock.  Returns false, having printed nothing,
// when the files do not hold both sides.
JoinedReport joined(const ReportCommandOptions& opts, uint64_t interval_ns = 0,
                    Stats::IntervalSink sink = {}, CommandSpan* span = nullptr) {
    JoinFilesOptions jo;
    if (span)
        jo.on_command = [span](const Command& c) { span->add(c); };
    if (opts.join_window_s > 0)
        jo.window_ns = static_cast<uint64_t>(opts.join_window_s * 1e9);
    jo.interval_ns = interval_ns;
    jo.on_interval = std::move(sink);
    return join_files(opts.files, jo);
}

ReportOptions joined_options(const ReportCommandOptions& opts, const JoinedReport& r) {
    ReportOptions ro;
    ro.detail = opts.detail;
    ro.recorded_on = r.recorded_on;
    ro.lost_host = r.lost_host;
    ro.lost_target = r.lost_target;
    ro.join = r.join;
    // the drop runs' times: from the first recording's start
    ro.origin_ns =
        static_cast<uint64_t>(RecordingReader::open(opts.files.front()).meta().start_monotonic_ns);
    return ro;
}

nlohmann::json joined_json(const ReportCommandOptions& opts, const JoinedReport& r) {
    nlohmann::json j = summary_json(r.summary, r.counts, joined_options(opts, r));
    j["files"] = opts.files;
    j["role"] = "joined";
    return j;
}

bool report_joined(const ReportCommandOptions& opts, int* rc) {
    if (opts.commands || !files_hold_both_sides(opts.files))
        return false;
    JoinedReport r = joined(opts);
    const ReportOptions ro = joined_options(opts, r);
    if (opts.json) {
        nlohmann::json all = nlohmann::json::array();
        all.push_back(joined_json(opts, r));
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

// One recording, through its Assembler into Stats.
struct FileReport {
    RecordingReader reader;
    Summary summary;
    AssemblyCounts counts;
    ReportOptions ro;
    uint64_t duration_ns = 0;
    CommandSpan span;

    nlohmann::json json(const std::string& path) const {
        nlohmann::json j = summary_json(summary, counts, ro);
        j["file"] = path;
        j["role"] = reader.meta().role;
        if (reader.end() != RecordingEnd::clean)
            j["problem"] = reader.problem();
        return j;
    }
    // Notes and where the file ended, to stderr; false if it was corrupt.
    bool say_problems(const std::string& path) const {
        for (const auto& n : reader.notes())
            fmt::print(stderr, "nvmetrace: {}: {}\n", path, n);
        if (reader.end() != RecordingEnd::clean)
            // say where the file ended; the figures cover what came before
            fmt::print(stderr, "nvmetrace: {}\n", reader.problem());
        return reader.end() != RecordingEnd::corrupt;
    }
};

FileReport report_file(const ReportCommandOptions& opts, const std::string& path,
                       uint64_t interval_ns = 0, Stats::IntervalSink sink = {}) {
    FileReport f{RecordingReader::open(path), {}, {}, {}, 0, {}};
    RecordingReader& reader = f.reader;
    const RecordingMeta& meta = reader.meta();
    DeviceTable table;
    devices_from_json(meta.devices, table);
    const auto start = static_cast<uint64_t>(meta.start_monotonic_ns);
    const uint64_t every = sink ? interval_ns : 0;  // before sink is moved from
    Stats stats(table, {.sample_n = meta.sample, .interval_ns = every, .origin_ns = start},
                std::move(sink));
    Assembler assembler(table, [&](const Command& c) {
        if (opts.commands) {
            print_command(c);
        } else {
            f.span.add(c);
            stats.add(c);
        }
    });
    assembler.set_gaps(gap_runs_in(path));
    reader.for_each([&](std::span<const nvmetrace_rec> recs) {
        for (const auto& r : recs)
            assembler.push(r);
    });
    assembler.finish();

    uint64_t lost = 0;
    if (reader.trailer()) {
        f.duration_ns = reader.trailer()->duration_ns;
        lost = reader.trailer()->lost;
    } else if (assembler.counts().last_ts > start) {
        f.duration_ns = assembler.counts().last_ts - start;
    }
    f.ro.detail = opts.detail;
    f.ro.recorded_on = fmt::format("{} (kernel {})", meta.hostname, meta.kernel_release);
    f.ro.origin_ns = start;
    if (meta.role == "target")
        f.ro.lost_target = lost;
    else
        f.ro.lost_host = lost;
    stats.flush_interval(f.span.last);  // the last interval ends with the last command
    f.summary = stats.summary(f.duration_ns);
    f.counts = assembler.counts();
    return f;
}

// The figures come from a first pass, as `report --json` makes them; a
// second pass with interval snapshots (their length from the span of the
// first's commands) makes the latency over time.
int report_html_file(const ReportCommandOptions& opts) {
    // fail before the work: no plotting library, or nowhere to write
    if (builtin_html_assets().library_js.empty())
        report_html(nlohmann::json::array(), nlohmann::json::array());
    check_html_writable(opts.html);
    nlohmann::json reports = nlohmann::json::array();
    nlohmann::json plots = nlohmann::json::array();
    int rc = 0;
    std::vector<Interval> intervals;
    auto sink = [&](const Interval& iv) { intervals.push_back(iv); };
    if (!opts.no_join && files_hold_both_sides(opts.files)) {
        CommandSpan span;
        const JoinedReport r = joined(opts, 0, {}, &span);
        const uint64_t interval = html_interval_ns(span.ns());
        joined(opts, interval, sink);
        reports.push_back(joined_json(opts, r));
        plots.push_back(html_plot_json(r.summary, intervals, interval));
        for (const auto& n : r.notes)
            fmt::print(stderr, "nvmetrace: {}\n", n);
        for (const auto& p : r.problems)
            fmt::print(stderr, "nvmetrace: {}\n", p);
        if (r.corrupt)
            rc = 1;
    } else {
        for (const auto& path : opts.files) {
            const FileReport f = report_file(opts, path);
            const uint64_t interval = html_interval_ns(f.span.ns());
            intervals.clear();
            report_file(opts, path, interval, sink);
            reports.push_back(f.json(path));
            plots.push_back(html_plot_json(f.summary, intervals, interval));
            if (!f.say_problems(path))
                rc = 1;
        }
    }
    write_html_file(opts.html, report_html(reports, plots));
    return rc;
}

}  // namespace

int run_report(const ReportCommandOptions& opts) {
    if (opts.files.empty())
        throw Error("report: name at least one recording");
    if (!opts.html.empty()) {
        if (opts.json || opts.commands)
            throw Error("report: --html writes the page; it takes neither --json nor --commands");
        return report_html_file(opts);
    }
    nlohmann::json all = nlohmann::json::array();
    int rc = 0;
    if (!opts.no_join && report_joined(opts, &rc))
        return rc;
    for (size_t i = 0; i < opts.files.size(); i++) {
        const std::string& path = opts.files[i];
        const FileReport f = report_file(opts, path);
        if (opts.commands) {
            // the commands are out; only problems remain to be said
        } else if (opts.json) {
            all.push_back(f.json(path));
        } else {
            if (opts.files.size() > 1)
                fmt::print("{}== {} ({})\n", i ? "\n" : "", path, f.reader.meta().role);
            fmt::print("{}", summary_text(f.summary, f.counts, f.ro));
        }
        if (!f.say_problems(path))
            rc = 1;
    }
    if (opts.json)
        fmt::print("{}\n", json_text(all, 2));
    return rc;
}

}  // namespace nvmetrace
