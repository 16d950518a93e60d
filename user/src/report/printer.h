// Text and JSON output of `nvmetrace record` (live lines, summary) and
// `nvmetrace report` (summary, --detail components).
//
// The text follows the predecessor tool's layout column for column, so its
// users can read it unchanged: live lines every -i seconds, one block per
// group with the stage table, the components with --detail, and the record
// counts with what was left out and why.  The JSON carries the same numbers
// (unrounded) for scripts.
#pragma once

#include "analysis/join.h"
#include "analysis/stats.h"

#include <stdint.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvmetrace {

struct ReportOptions {
    bool detail = false;  // the component table (--detail)
    // "madracks-gnode4 (kernel 5.15.143)": a report of saved recordings
    // starts with "recorded on ..." instead of the "=== ... ===" line that
    // ends a live recording.
    std::string recorded_on;
    uint64_t lost_host = 0;  // records the rings dropped (ring full)
    uint64_t lost_target = 0;
    // CLOCK_MONOTONIC ns of the recording's start: the drop runs' times are
    // said in seconds since (0: as they are)
    uint64_t origin_ns = 0;
    // Host and target commands joined (Joiner): the "records: ...; K
    // matched" line, why the others were not, negative computed networks.
    JoinCounts join;
};

// The drop runs of one CPU's ring (GAP markers), for the "lost" line.
struct GapsOfCpu {
    uint32_t cpu = 0;
    uint64_t runs = 0;
    uint64_t records = 0;
    uint64_t first_ts = 0;  // of the first run's first dropped record
    uint64_t last_ts = 0;   // of the last run's last one
};
std::vector<GapsOfCpu> gaps_by_cpu(const std::vector<GapRun>& gaps);

// The lines before the first live line.  not_recorded: host-only recording,
// explain the '*'.
std::string live_header(uint64_t interval_ns, bool not_recorded);
// One line per group with commands in the interval.
std::string live_rows(const Interval& iv);

// The summary: header, throughput, one block per group, record counts and
// notes.
std::string summary_text(const Summary& s, const AssemblyCounts& counts, const ReportOptions& opts);

nlohmann::json summary_json(const Summary& s, const AssemblyCounts& counts,
                            const ReportOptions& opts);
nlohmann::json interval_json(const Interval& iv);

// "950", "15.2k", "1.25M"
std::string compact_rate(double per_s);

}  // namespace nvmetrace
