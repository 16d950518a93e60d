// The commands of an app on SPDK's NVMe/RDMA driver (spdk_nvme_perf, ...),
// from two uprobes' hits to nvmetrace records: what `nvmetrace record
// --spdk-host -t rdma` writes.  SPDK's RDMA initiator has no tracepoints.
//
// Submission: spdk_rdma_provider_qp_queue_send_wrs(qp, wr), where the
// driver hands a command capsule to its RDMA queue pair.  The work request
// is the request's own (struct spdk_nvme_rdma_req's send_wr) and its first
// scatter entry is the 64-byte command: opcode, command id, namespace,
// CDW10-12 (rdma-core's and the NVMe specification's layouts); through the
// request that holds the work request, its queue pair's queue id (offsets
// from SPDK's debug information).
//
// Completion: nvme_rdma_req_complete(rdma_req, cpl), where the driver
// completes the request to the app: its command id and status.  The request
// is found by address: its send_wr lies `wr_offset` bytes into it (read from
// SPDK's debug information), so the submission's work request is
// rdma_req + wr_offset, exactly.
#pragma once

#include "spdk/host_in_flight.h"

#include <linux/nvmetrace.h>

#include <cstdint>
#include <vector>

namespace nvmetrace::spdk {

// One hit of the submission probe (times CLOCK_MONOTONIC ns).
struct RdmaSubmit {
    uint64_t ts = 0;
    uint64_t wr = 0;         // struct ibv_send_wr *
    uint32_t wr_opcode = 0;  // enum ibv_wr_opcode: IBV_WR_SEND (2) for a capsule
    uint16_t qid = 0;        // the queue pair's: 0 is the admin queue
    uint8_t opc = 0;
    uint16_t cid = 0;
    uint32_t nsid = 0;   // for a Fabrics command, byte 0 is its type
    uint64_t cdw10 = 0;  // CDW10 and CDW11
    uint32_t cdw12 = 0;
};

// One hit of the completion probe.
struct RdmaComplete {
    uint64_t ts = 0;
    uint64_t rdma_req = 0;  // struct spdk_nvme_rdma_req *
    uint16_t cid = 0;
    uint16_t status = 0;  // the completion's last half-word: bit 0 is the phase
};

struct RdmaHostCounts {
    uint64_t commands = 0;     // reads and writes made into records
    uint64_t not_sampled = 0;  // their LBA is not picked by 1-of-N
    uint64_t other = 0;        // admin and Fabrics commands, I/O other than read and write
    uint64_t unfinished = 0;   // a request reused before its completion was seen
    uint64_t mismatched = 0;   // a completion whose command id is not its request's
    uint64_t abandoned = 0;    // not completed within kAbandonNs
    uint64_t cut_end = 0;      // in flight when the recording ended
};

class RdmaHostCommands {
public:
    // wr_offset: offsetof(struct spdk_nvme_rdma_req, send_wr) in the app's
    // SPDK; dev: the records' device (the recording's entry for the app).
    RdmaHostCommands(uint64_t wr_offset, uint32_t sample, uint64_t seed, uint32_t dev);

    // Hits in time order.
    void submit(const RdmaSubmit& s);
    void complete(const RdmaComplete& c);

    static constexpr uint64_t kAbandonNs = HostInFlight::kAbandonNs;
    void expire(uint64_t now_ns);
    // Records in time order, those nothing to come can precede.
    static constexpr uint64_t kSettleNs = HostInFlight::kSettleNs;
    std::vector<nvmetrace_rec> release();
    std::vector<nvmetrace_rec> release_all();

    const RdmaHostCounts& counts() const { return counts_; }
    size_t in_flight() const { return cmds_.in_flight(); }

private:
    uint64_t wr_offset_;
    uint32_t sample_;
    uint64_t seed_;
    HostInFlight cmds_;  // sampled reads and writes, by work request
    RdmaHostCounts counts_;
};

}  // namespace nvmetrace::spdk
