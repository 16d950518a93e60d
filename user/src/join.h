// Reading the recordings of both sides and joining them, streaming.
//
// `report h1.ntr h2.ntr t.ntr` and `compare` hand the files here: each file
// is read block by block through its own Assembler, the commands of all
// files are merged in completion order on the target's clock and matched by
// the Joiner (analysis.h) as they come, and every command (joined, or alone
// with the reason) goes to Stats.  Nothing holds a whole recording: memory is
// one block per file, the commands waiting for their partner, and the
// per-group accumulators.
#pragma once

#include "analysis.h"
#include "recfile.h"
#include "stats.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace nvmetrace {

struct JoinFilesOptions {
    uint64_t window_ns = Joiner::Options{}.window_ns;
    // Commands of each host recording read first to estimate its clock
    // offset against the target's (estimate_offset()).
    size_t calibration_commands = 4096;
    // Also called with every command handed to Stats (tests, --commands).
    std::function<void(const Command&)> on_command;
};

struct JoinedReport {
    Summary summary;
    AssemblyCounts counts;  // all files
    JoinCounts join;
    uint64_t lost_host = 0, lost_target = 0;
    std::string recorded_on;            // "host1 (kernel 6.1...) and target1 (kernel 6.12...)"
    std::vector<std::string> notes;     // per file, for stderr
    std::vector<std::string> problems;  // files that ended badly, for stderr
    bool corrupt = false;               // a file had a damaged block
    size_t host_files = 0, target_files = 0;
};

// Whether the files, by their META role, hold both sides between them.
bool files_hold_both_sides(const std::vector<std::string>& files);

// Joins and aggregates; throws Error for a file that is not a usable recording.
JoinedReport join_files(const std::vector<std::string>& files, const JoinFilesOptions& opts = {});

}  // namespace nvmetrace
