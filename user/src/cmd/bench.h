// `nvmetrace bench`: one measurement, a profile matrix (AISIO, KV crossover)
// written as CSV + .meta, the premap proof, and a recording per cell.
#pragma once

#include "bench/bench_io.h"

#include <stdint.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvmetrace {

struct BenchOptions {
    std::string device;
    std::string pattern = "randread";
    std::string size = "4k";
    uint32_t qd = 1;
    uint32_t threads = 1;
    double duration_s = 5;
    uint64_t ios = 0;
    double ramp_s = 0;
    std::string buf = "malloc";
    bool fixed = false;
    std::string cpus;         // pin list, e.g. "2,3"
    std::string target_cpus;  // left out of busy_cores
    std::string offset = "0";
    std::string span;  // "": to the end of the device
    uint64_t seed = 1;
    // matrix
    std::string profile;  // "", "aisio", "kv"
    std::string sizes, qds, thread_list;
    uint32_t reps = 1;
    double warmup_s = 0;
    std::string output;  // CSV; .meta next to it
    bool record = false;
    uint32_t record_sample = 1;
    bool premap_proof = false;
    bool json = false;
    std::vector<std::string> command_line;
    std::string pool_node = "/dev/nvmetrace";
    // the control arm: SPDK's user-space initiator on the same cells
    std::string spdk_perf;  // spdk_nvme_perf; "": none
    std::string spdk_trid;  // "": from the device's controller
    std::string spdk_args;  // its own arguments, split at spaces
};

int run_bench(const BenchOptions& opts);

namespace bench {

// One row of the matrix.
struct Cell {
    uint32_t index = 0;
    std::string profile;  // "single", "aisio", "kv"
    uint32_t rep = 1;
    Pattern pattern = Pattern::randread;
    uint64_t size = 0;
    uint32_t qd = 1;
    uint32_t threads = 1;
};

// The cells of a profile ("" = the single spec), in run order; overrides
// (empty = the profile's own list) replace its sizes, QDs or thread counts.
std::vector<Cell> expand_profile(const std::string& profile, Pattern pattern, uint64_t size,
                                 uint32_t qd, uint32_t threads, const std::vector<uint64_t>& sizes,
                                 const std::vector<uint32_t>& qds,
                                 const std::vector<uint32_t>& thread_list, uint32_t reps);

// A cell's outcome: ok (measured, no failures), failed (measured with failed
// commands, or could not run), skipped (not applicable to this device).
struct CellRow {
    Cell cell;
    std::string status;  // ok | failed | skipped
    std::string note;    // why skipped / failed
    RunResult r;
    std::string recording;  // file name, "" without --record
    // the control arm's row: spdk_nvme_perf on the cell, against `trid`
    bool control = false;
    std::string trid;
};

// The CSV's columns, in order (Documentation/bench.md documents each).
const std::vector<std::string>& csv_columns();
std::string csv_header();
std::string csv_row(const CellRow& row, const Device& dev, const RunSpec& spec);
std::string csv_quote(const std::string& s);

// The .meta sidecar of a run.
nlohmann::json run_meta(const BenchOptions& opts, const Device& dev, const PoolParams& pool);

}  // namespace bench
}  // namespace nvmetrace
