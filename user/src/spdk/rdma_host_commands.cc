#include "spdk/rdma_host_commands.h"

#include "analysis/sampling.h"

#include <algorithm>

namespace nvmetrace::spdk {

namespace {

constexpr uint32_t kIbvWrSend = 2;  // enum ibv_wr_opcode IBV_WR_SEND
constexpr uint8_t kNvmeWrite = 0x01;
constexpr uint8_t kNvmeRead = 0x02;
constexpr uint8_t kFabrics = 0x7f;

}  // namespace

RdmaHostCommands::RdmaHostCommands(uint64_t wr_offset, uint32_t sample, uint64_t seed, uint32_t dev)
    : wr_offset_(wr_offset), sample_(sample), seed_(seed), dev_(dev) {}

void RdmaHostCommands::submit(const RdmaSubmit& s) {
    newest_ = std::max(newest_, s.ts);
    if (s.wr_opcode != kIbvWrSend)
        return;
    // the admin queue's opcodes mean other things; Fabrics commands (Connect, ...) are not I/O
    if (s.qid == 0 || s.opc == kFabrics || (s.opc != kNvmeRead && s.opc != kNvmeWrite)) {
        counts_.other++;
        return;
    }
    Cmd c;
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
    auto [it, fresh] = cmds_.try_emplace(s.wr, c);
    if (!fresh) {
        counts_.unfinished++;  // its completion was not seen: the request is in use again
        it->second = c;
    }
}

void RdmaHostCommands::complete(const RdmaComplete& d) {
    newest_ = std::max(newest_, d.ts);
    const auto it = cmds_.find(d.rdma_req + wr_offset_);
    if (it == cmds_.end())
        return;  // not sampled, not a read or write, or submitted before the recording
    const Cmd& c = it->second;
    if (d.cid != c.cid) {
        counts_.mismatched++;
        cmds_.erase(it);
        return;
    }
    counts_.commands++;
    nvmetrace_rec base{};
    base.dev = dev_;
    base.lba = c.lba;
    base.len = c.blocks;
    base.qid = c.qid;
    base.cid = c.cid;
    base.tag = c.cid;
    base.opcode = c.write ? kNvmeWrite : kNvmeRead;
    base.flags = NVMETRACE_REC_SPDK | NVMETRACE_REC_LEN_BLOCKS | NVMETRACE_REC_HAS_CID |
                 NVMETRACE_REC_HAS_QID | (c.write ? NVMETRACE_REC_WRITE : 0);
    nvmetrace_rec sub = base, done = base;
    sub.event = NVMETRACE_EV_SPDK_SUBMIT;
    sub.ts = c.ts;
    done.event = NVMETRACE_EV_SPDK_COMPLETE;
    done.ts = d.ts;
    done.aux = (d.status >> 1) & 0x7fffu;
    done_.add(sub);
    done_.add(done);
    cmds_.erase(it);
}

void RdmaHostCommands::expire(uint64_t now_ns) {
    for (auto it = cmds_.begin(); it != cmds_.end();) {
        if (now_ns > it->second.ts + kAbandonNs) {
            counts_.abandoned++;
            it = cmds_.erase(it);
        } else {
            ++it;
        }
    }
}

std::vector<nvmetrace_rec> RdmaHostCommands::release() {
    uint64_t before = newest_ > kSettleNs ? newest_ - kSettleNs : 0;
    for (const auto& [wr, c] : cmds_)
        before = std::min(before, c.ts);
    return done_.take_before(before);
}

std::vector<nvmetrace_rec> RdmaHostCommands::release_all() {
    counts_.cut_end += cmds_.size();
    cmds_.clear();
    return done_.take_all();
}

}  // namespace nvmetrace::spdk
