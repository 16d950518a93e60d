// Finding an SPDK application and its trace ring, and what nvmetrace needs of
// it: `probe --spdk-target` / `--spdk-host`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nvmetrace::spdk {

struct Process {
    int pid = 0;
    std::string trace;  // the /dev/shm trace file it maps, "" when it runs without -e
};

// What --spdk-target / --spdk-host named: a binary (its running processes are
// found through /proc/PID/exe), a pid, or a trace file (/dev/shm/<app>_trace.*).
struct Source {
    std::string binary;  // "" when a pid or a trace file was named
    std::vector<Process> processes;
};

// Resolves `arg`; throws Error when it names nothing (no such file, no such
// process).  `proc` and `shm` are /proc and /dev/shm (tests pass others).
Source find_source(const std::string& arg, const std::string& proc = "/proc",
                   const std::string& shm = "/dev/shm");

// The trace file process `pid` maps, found in /proc/PID/maps: "" if none.
std::string trace_of(int pid, const std::string& proc = "/proc");

// A tracepoint a role needs, and the group that `-e` must enable for it.
struct Need {
    std::string_view tpoint;
    std::string_view group;
    std::string_view what;  // what nvmetrace takes from it
};

// What the target (nvmf_tgt) or the host (spdk_nvme_perf and other apps on
// SPDK's NVMe driver) needs over `transport` ("tcp" or "rdma").  Empty for
// the RDMA host: SPDK's NVMe/RDMA initiator has no tracepoints.
std::vector<Need> needs(bool target, std::string_view transport);

// Prints the SPDK section of `nvmetrace probe` for one role; returns whether
// recording can take what it needs from every transport asked for.
bool probe_role(bool target, const std::string& arg, const std::vector<std::string>& transports);

}  // namespace nvmetrace::spdk
