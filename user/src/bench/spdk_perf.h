// The control arm of `nvmetrace bench`: SPDK's user-space NVMe-oF initiator
// (spdk_nvme_perf) run on the same cell (pattern, size, QD, threads as
// cores) against the same target as the kernel path, so one CSV holds both.
//
// spdk_nvme_perf is run as it is, with its own arguments: -q QD -o SIZE
// -w PATTERN -t SECONDS -c [CORES] -Q 1 -r TRID, plus what the user adds
// (--no-huge -s MB where there are no huge pages).  Its output is read
// through a pseudo-terminal, so its lines come as it prints them: the CPU
// accounting starts when it says it launches its workers and ends when it
// prints its results, the window in which its pollers run.
#pragma once

#include "bench/bench_io.h"

#include <stdint.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace nvmetrace::bench {

// The SPDK transport ID of the fabrics controller behind dev, from sysfs
// (transport, address, subsysnqn, nsid as inspect_device() read them):
// "trtype:TCP adrfam:IPv4 traddr:10.0.0.1 trsvcid:4420 subnqn:NQN ns:1".
// Throws Error when dev is not on an NVMe-oF transport SPDK's initiator
// speaks (tcp, rdma).
std::string trid_from_device(const Device& dev);
// The same from the sysfs attribute values themselves.
std::string trid_from_attrs(std::string_view transport, std::string_view address,
                            std::string_view subsysnqn, uint32_t nsid);

// "[1,2,5]": SPDK's core-list syntax (a bare number would be a hex mask).
std::string spdk_core_list(const std::vector<int>& cores);

struct PerfSpec {
    std::string binary;              // spdk_nvme_perf
    std::string trid;                // -r
    std::vector<std::string> extra;  // the user's own arguments, first
    Pattern pattern = Pattern::randread;
    uint64_t size = 4096;
    uint32_t qd = 1;         // per worker (core)
    std::vector<int> cores;  // one worker each
    uint32_t seconds = 1;    // -t
    uint32_t warmup_s = 0;   // -a, not in its figures
    std::set<int> exclude;   // CPUs left out of busy_cores (the target's)
    int timeout_s = 300;     // beyond seconds + warm-up: startup, connect, teardown
};

std::vector<std::string> perf_argv(const PerfSpec& spec);

// What spdk_nvme_perf printed.
struct PerfOutput {
    bool launched = false;  // "Initialization complete. Launching workers."
    bool has_total = false;
    double iops = 0, mib_s = 0, lat_mean_us = 0, lat_min_us = 0, lat_max_us = 0;
    // Commands that completed with an error or could not be started (-Q 1
    // prints each one).
    uint64_t failed = 0;
    std::string first_error;
    std::string last_line;  // the last non-empty line, for a failure's message
};
PerfOutput parse_perf_output(std::string_view text);

// Runs spdk_nvme_perf for spec: its figures, failed commands and the cores
// busy while its workers ran (outside spec.exclude).  *log gets everything
// it printed.  Throws Error when it could not run or printed no results
// (saying what its last line was).
RunResult run_spdk_perf(const PerfSpec& spec, std::string* log);

}  // namespace nvmetrace::bench
