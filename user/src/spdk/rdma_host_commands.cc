#include "spdk/rdma_host_commands.h"

#include "analysis/sampling.h"

namespace nvmetrace::spdk {

namespace {

constexpr uint32_t kIbvWrSend = 2;  // enum ibv_wr_opcode IBV_WR_SEND
constexpr uint8_t kNvmeWrite = 0x01;
constexpr uint8_t kNvmeRead = 0x02;
constexpr uint8_t kFabrics = 0x7f;

}  // namespace

RdmaHostCommands::RdmaHostCommands(uint64_t wr_offset, uint32_t sample, uint64_t seed, uint32_t dev)
    : wr_offset_(wr_offset), sample_(sample), seed_(seed), cmds_(dev) {}

void RdmaHostCommands::submit(const RdmaSubmit& s) {
    cmds_.saw(s.ts);
    if (s.wr_opcode != kIbvWrSend)
        return;
    // the admin queue's opcodes mean other things; Fabrics commands (Connect, ...) are not I/O
    if (s.qid == 0 || s.opc == kFabrics || (s.opc != kNvmeRead && s.opc != kNvmeWrite)) {
        counts_.other++;
        return;
    }
    HostCmd c;
    c.ts = s.ts;
    c.lba = s.cdw10;
    c.blocks = (s.cdw12 & 0xffffu) + 1;
    c.cid = s.cid;
    c.qid = s.qid;
    c.write = s.opc == kNvmeWrite;
    if (!sampled(c.lba, seed_, sample_)) {
        counts_.not_sampled++;
        return;
    }
    if (!cmds_.submit(s.wr, c))
        counts_.unfinished++;  // its completion was not seen: the request is in use again
}

void RdmaHostCommands::complete(const RdmaComplete& d) {
    cmds_.saw(d.ts);
    const uint64_t key = d.rdma_req + wr_offset_;
    const HostCmd* c = cmds_.find(key);
    if (!c)
        return;  // not sampled, not a read or write, or submitted before the recording
    if (d.cid != c->cid) {
        counts_.mismatched++;
        cmds_.drop(key);
        return;
    }
    counts_.commands++;
    cmds_.complete(key, d.ts, d.status);
}

void RdmaHostCommands::expire(uint64_t now_ns) {
    counts_.abandoned += cmds_.expire(now_ns);
}

std::vector<nvmetrace_rec> RdmaHostCommands::release() {
    return cmds_.release();
}

std::vector<nvmetrace_rec> RdmaHostCommands::release_all() {
    counts_.cut_end += cmds_.in_flight();
    return cmds_.release_all();
}

}  // namespace nvmetrace::spdk
