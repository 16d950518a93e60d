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
    : tp_(tp), sample_(sample), seed_(seed), ns_(std::move(ns)), cmds_(dev) {}

void HostCommands::push(const TraceEntry& e) {
    const uint64_t ts = ns_(e.tsc);
    cmds_.saw(ts);
    if (tp_.submit && e.tpoint_id == *tp_.submit) {
        if (e.args.size() <= std::max({tp_.cid, tp_.opc, tp_.dw10, tp_.dw11, tp_.dw12}))
            return;
        const auto opc = static_cast<uint8_t>(e.args[tp_.opc]);
        // the owner is the queue pair's id: 0 is the admin queue, whose opcodes mean other things
        if (e.owner_id == 0 || (opc != kNvmeRead && opc != kNvmeWrite)) {
            counts_.other++;
            return;
        }
        HostCmd c;
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
        if (!cmds_.submit(e.object_id, c))
            counts_.unfinished++;  // its completion was lost: the PDU is in use again
    } else if (tp_.complete && e.tpoint_id == *tp_.complete) {
        const HostCmd* c = cmds_.find(e.object_id);
        // not sampled, not a read or write, or submitted before the recording: nothing to do
        if (!c)
            return;
        if (e.args.size() <= std::max(tp_.done_cid, tp_.cpl) ||
            static_cast<uint16_t>(e.args[tp_.done_cid]) != c->cid) {
            // another command on its PDU: the sampled one's completion was lost
            counts_.unfinished++;
            cmds_.drop(e.object_id);
            return;
        }
        counts_.commands++;
        cmds_.complete(e.object_id, ts, static_cast<uint16_t>(e.args[tp_.cpl]));
    }
}

void HostCommands::expire(uint64_t now_ns) {
    counts_.abandoned += cmds_.expire(now_ns);
}

std::vector<nvmetrace_rec> HostCommands::release() {
    return cmds_.release();
}

std::vector<nvmetrace_rec> HostCommands::release_all() {
    counts_.cut_end += cmds_.in_flight();
    return cmds_.release_all();
}

}  // namespace nvmetrace::spdk
