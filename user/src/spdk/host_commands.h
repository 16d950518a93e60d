// The commands of an app on SPDK's NVMe/TCP driver (spdk_nvme_perf, ...),
// from its trace ring's entries to nvmetrace records: what `nvmetrace record
// --spdk-host` writes.
//
// SPDK's NVMe/TCP driver traces a command when it hands it to its queue pair
// (NVME_TCP_SUBMIT: command id, opcode, CDW10-12) and when its response has
// been processed (NVME_TCP_COMPLETE: command id, status), both naming the
// request's PDU as their object and the queue pair's id as their owner.  A
// read or write of an I/O queue becomes two records, SPDK_SUBMIT and
// SPDK_COMPLETE, with the NVMe command id, queue id, LBA and length in
// blocks: the join matches them with a target's command exactly, as it does
// a kernel host's.  SPDK's entries name no namespace: the records have none.
#pragma once

#include "spdk/host_in_flight.h"
#include "spdk/trace_file.h"

#include <linux/nvmetrace.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace nvmetrace::spdk {

struct HostTpoints {
    std::optional<uint16_t> submit, complete;
    // argument positions: NVME_TCP_SUBMIT's cid, opc, dw10, dw11, dw12; NVME_TCP_COMPLETE's
    // cid and cpl
    size_t cid = 1, opc = 2, dw10 = 3, dw11 = 4, dw12 = 5, done_cid = 1, cpl = 2;
    // Looks them up in the trace file's descriptions; throws Error naming a
    // tracepoint whose arguments are not the ones SPDK v26.05 registers.
    static HostTpoints of(const TraceFile& layout);
};

struct HostCounts {
    uint64_t commands = 0;     // reads and writes made into records
    uint64_t not_sampled = 0;  // their LBA is not picked by 1-of-N
    uint64_t other = 0;        // admin commands and I/O commands other than read and write
    uint64_t unfinished = 0;   // a completion whose submission was not seen, or the reverse
    uint64_t abandoned = 0;    // not completed within kAbandonNs
    uint64_t cut_end = 0;      // in flight when the recording ended
};

class HostCommands {
public:
    // dev: the records' device (the recording's entry for the app); ns: a
    // TSC to CLOCK_MONOTONIC nanoseconds.
    HostCommands(HostTpoints tp, uint32_t sample, uint64_t seed, uint32_t dev,
                 std::function<uint64_t(uint64_t)> ns);

    void push(const TraceEntry& e);
    static constexpr uint64_t kAbandonNs = HostInFlight::kAbandonNs;
    void expire(uint64_t now_ns);
    // As TargetCommands: records in time order, those nothing to come can precede.
    static constexpr uint64_t kSettleNs = HostInFlight::kSettleNs;
    std::vector<nvmetrace_rec> release();
    std::vector<nvmetrace_rec> release_all();

    const HostCounts& counts() const { return counts_; }
    size_t in_flight() const { return cmds_.in_flight(); }

private:
    HostTpoints tp_;
    uint32_t sample_;
    uint64_t seed_;
    std::function<uint64_t(uint64_t)> ns_;
    HostInFlight cmds_;  // sampled reads and writes in flight, by PDU
    HostCounts counts_;
};

}  // namespace nvmetrace::spdk
