// An SPDK NVMe-oF target's commands, from its trace ring's entries to
// nvmetrace records: what `nvmetrace record --spdk-target` writes.
//
// SPDK's target traces a request object through its states (TCP_REQ_NEW ...
// TCP_REQ_RDY_TO_COMPLETE ... TCP_REQ_COMPLETED, or RDMA_REQ_*), and the
// bdev I/O it starts (BDEV_IO_START, BDEV_IO_DONE).  The request object is a struct
// spdk_nvmf_tcp_req (or _rdma_request) whose first member is the struct
// spdk_nvmf_request that the target hands to the bdev as the I/O's caller
// context: BDEV_IO_START's "ctx" argument is the request's object id, so the
// bdev I/O is tied to its request exactly, not by order.
//
// One command becomes four records, the kernel target's events whose place in
// the path they share (NVMETRACE_REC_SPDK marks them): nvmet_req_init at the
// request's NEW (its capsule received), nvmet_bdev_execute_rw at
// BDEV_IO_START, nvmet_bio_done at BDEV_IO_DONE, and nvmet_req_complete at
// the request's READY_TO_COMPLETE, recorded just before SPDK hands the
// response to the socket or the NIC, as nvmet_req_complete hands it to its
// transport.  (COMPLETED comes when the send has finished, which may be
// after the host has the response: as an end it would make the computed
// network negative.)  SPDK's entries carry no NVMe
// command id or status: the records say so (no NVMETRACE_REC_HAS_CID; status
// 0), and the join matches them by queue, LBA and direction.  The namespace
// is the one the bdev serves (the bdev I/O's owner names the bdev; the
// recorder asks SPDK which namespace it backs).  The queue id is the TCP queue pair's, from its
// trace owner's description ("... qid:N"); SPDK's RDMA target names no owner,
// so its records have none.
#pragma once

#include "spdk/ordered_records.h"
#include "spdk/trace_file.h"

#include <linux/nvmetrace.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nvmetrace::spdk {

// The tracepoint ids of one transport's request states, and the bdev's.
struct TargetTpoints {
    std::optional<uint16_t> tcp_new, tcp_respond;    // TCP_REQ_NEW, TCP_REQ_RDY_TO_COMPLETE
    std::optional<uint16_t> rdma_new, rdma_respond;  // RDMA_REQ_NEW, RDMA_REQ_RDY_TO_COMPL
    std::optional<uint16_t> bdev_start, bdev_done;
    // Argument positions (BDEV_IO_START: type, ctx, offset; BDEV_IO_DONE: ctx).
    size_t start_type = 0, start_ctx = 1, start_offset = 2, done_ctx = 0;

    // Looks them up in the trace file's descriptions; throws Error naming a
    // tracepoint whose arguments are not the ones SPDK v26.05 registers.
    static TargetTpoints of(const TraceFile& layout);
};

// The queue id in an nvmf TCP queue pair's owner description
// ("10.0.0.1:50342 nqn... 10.0.0.2:4420 qid:1"), if it names one.
std::optional<uint16_t> qid_of_owner(std::string_view description);

struct TargetCounts {
    uint64_t commands = 0;     // read or write commands made into records
    uint64_t not_sampled = 0;  // their LBA is not picked by 1-of-N
    uint64_t no_bdev_io = 0;   // completed without a read or write bdev I/O (admin, flush, ...)
    uint64_t unfinished = 0;   // a request state or bdev I/O whose start was never seen
                               // (before the recording began, or lost in the ring)
    uint64_t abandoned = 0;    // reads and writes that did not complete within kAbandonNs
    uint64_t cut_end = 0;      // reads and writes in flight when the recording ended
    uint64_t no_qid = 0;       // commands whose queue pair's description had no qid
    uint64_t no_nsid = 0;      // commands whose bdev serves no namespace known
};

class TargetCommands {
public:
    // ns: a TSC of the trace to CLOCK_MONOTONIC nanoseconds.  owner: the
    // description of a trace owner id ("" when unknown), read when a
    // request begins and when its bdev I/O starts (the bdev's name).
    // nsid: the namespace a bdev serves (0: not known).
    TargetCommands(TargetTpoints tp, uint32_t sample, uint64_t seed,
                   std::function<uint64_t(uint64_t)> ns, std::function<std::string(uint16_t)> owner,
                   std::function<uint32_t(const std::string&)> nsid = {});

    // One entry; each core's entries in their order (cores may interleave:
    // a request's states are all on its queue pair's core).
    void push(const TraceEntry& e);
    // Requests that began more than kAbandonNs before `now_ns` and are not
    // done are given up (a lost entry, or a stuck request).
    static constexpr uint64_t kAbandonNs = 10'000'000'000ull;
    void expire(uint64_t now_ns);
    // Records of the commands done, in time order: those that no request in
    // flight, and no entry still to come (kSettleNs before the newest entry
    // seen: the cores' rings are read one after the other), can precede.
    // release_all(): at the end, all of them.
    static constexpr uint64_t kSettleNs = 100'000'000ull;
    std::vector<nvmetrace_rec> release();
    std::vector<nvmetrace_rec> release_all();

    const TargetCounts& counts() const { return counts_; }
    size_t in_flight() const { return reqs_.size(); }

private:
    struct Req {
        uint64_t ts_new = 0, ts_start = 0, ts_done = 0;
        uint64_t lba = 0, blocks = 0;
        uint64_t bdev_io = 0;
        uint32_t nsid = 0;
        bool has_io = false, io_done = false;
        bool write = false;
        std::optional<uint16_t> qid;
    };
    void finish(Req& r, uint64_t ts);

    TargetTpoints tp_;
    uint32_t sample_;
    uint64_t seed_;
    std::function<uint64_t(uint64_t)> ns_;
    std::function<std::string(uint16_t)> owner_;
    std::function<uint32_t(const std::string&)> nsid_;
    std::unordered_map<uint64_t, Req> reqs_;          // by request object
    std::unordered_map<uint64_t, uint64_t> by_bdev_;  // bdev I/O object -> request object
    OrderedRecords done_;                             // records of finished commands
    uint64_t newest_ = 0;                             // the newest entry's time
    uint16_t next_key_ = 0;  // the records' cid: one number per command (not NVMe's)
    TargetCounts counts_;
};

}  // namespace nvmetrace::spdk
