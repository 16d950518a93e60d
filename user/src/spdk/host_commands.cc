#include "spdk/host_commands.h"

#include "analysis/sampling.h"
#include "util/error.h"

#include <algorithm>

#include <fmt/core.h>

namespace nvmetrace::spdk {

namespace {

constexpr uint8_t kNvmeWrite = 0x01;
constexpr uint8_t kNvmeRead = 0x02;

}  // namespace

HostTpoints HostTpoints::of(const TraceFile& layout) {
    HostTpoints tp;
    if (const Tpoint* s = layout.find("NVME_TCP_SUBMIT")) {
        tp.submit = s->id;
        tp.cid = s->arg("cid");
        tp.opc = s->arg("opc");
        tp.dw10 = s->arg("dw10");
        tp.dw11 = s->arg("dw11");
        tp.dw12 = s->arg("dw12");
    }
    if (const Tpoint* c = layout.find("NVME_TCP_COMPLETE")) {
        tp.complete = c->id;
        tp.done_cid = c->arg("cid");
        tp.cpl = c->arg("cpl");
    }
    return tp;
}

HostCommands::HostCommands(HostTpoints tp, uint32_t sample, uint64_t seed, uint32_t dev,
                           std::function<uint64_t(uint64_t)> ns)
    : tp_(tp), sample_(sample), seed_(seed), dev_(dev), ns_(std::move(ns)) {}

void HostCommands::push(const TraceEntry& e) {
    const uint64_t ts = ns_(e.tsc);
    newest_ = std::max(newest_, ts);
    if (tp_.submit && e.tpoint_id == *tp_.submit) {
        if (e.args.size() <= std::max({tp_.cid, tp_.opc, tp_.dw10, tp_.dw11, tp_.dw12}))
            return;
        const auto opc = static_cast<uint8_t>(e.args[tp_.opc]);
        // the owner is the queue pair's id: 0 is the admin queue, whose opcodes mean other things
        if (e.owner_id == 0 || (opc != kNvmeRead && opc != kNvmeWrite)) {
            counts_.other++;
            return;
        }
        Cmd c;
        c.ts = ts;
        c.lba = (e.args[tp_.dw11] & 0xffffffffu) << 32 | (e.args[tp_.dw10] & 0xffffffffu);
        c.blocks = static_cast<uint32_t>((e.args[tp_.dw12] & 0xffffu) + 1);
        c.cid = static_cast<uint16_t>(e.args[tp_.cid]);
        c.qid = e.owner_id;
        c.write = opc == kNvmeWrite;
        if (!sampled(c.lba, seed_, sample_)) {
            counts_.not_sampled++;
            return;
        }
        auto [it, fresh] = cmds_.try_emplace(e.object_id, c);
        if (!fresh) {
            counts_.unfinished++;  // its completion was lost: the PDU is in use again
            it->second = c;
        }
    } else if (tp_.complete && e.tpoint_id == *tp_.complete) {
        const auto it = cmds_.find(e.object_id);
        // not sampled, not a read or write, or submitted before the recording: nothing to do
        if (it == cmds_.end())
            return;
        const Cmd& c = it->second;
        if (e.args.size() <= std::max(tp_.done_cid, tp_.cpl) ||
            static_cast<uint16_t>(e.args[tp_.done_cid]) != c.cid) {
            // another command on its PDU: the sampled one's completion was lost
            counts_.unfinished++;
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
        base.tag = c.cid;  // the assembler's key on the host: (dev, qid, tag)
        base.opcode = c.write ? kNvmeWrite : kNvmeRead;
        base.flags = NVMETRACE_REC_SPDK | NVMETRACE_REC_LEN_BLOCKS | NVMETRACE_REC_HAS_CID |
                     NVMETRACE_REC_HAS_QID | (c.write ? NVMETRACE_REC_WRITE : 0);
        nvmetrace_rec sub = base, done = base;
        sub.event = NVMETRACE_EV_SPDK_SUBMIT;
        sub.ts = c.ts;
        done.event = NVMETRACE_EV_SPDK_COMPLETE;
        done.ts = ts;
        // the completion's status half-word: its bit 0 is the phase tag, not status
        done.aux = (e.args[tp_.cpl] >> 1) & 0x7fffu;
        done_.add(sub);
        done_.add(done);
        cmds_.erase(it);
    }
}

void HostCommands::expire(uint64_t now_ns) {
    for (auto it = cmds_.begin(); it != cmds_.end();) {
        if (now_ns > it->second.ts + kAbandonNs) {
            counts_.abandoned++;
            it = cmds_.erase(it);
        } else {
            ++it;
        }
    }
}

std::vector<nvmetrace_rec> HostCommands::release() {
    uint64_t before = newest_ > kSettleNs ? newest_ - kSettleNs : 0;
    for (const auto& [pdu, c] : cmds_)
        before = std::min(before, c.ts);
    return done_.take_before(before);
}

std::vector<nvmetrace_rec> HostCommands::release_all() {
    counts_.cut_end += cmds_.size();
    cmds_.clear();
    return done_.take_all();
}

}  // namespace nvmetrace::spdk
