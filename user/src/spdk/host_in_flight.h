// What SPDK's two host recorders share (HostCommands from the TCP driver's
// trace ring, RdmaHostCommands from the RDMA driver's uprobes): the sampled
// reads and writes in flight, by the object SPDK names each with (a PDU, a
// work request), and the two records a finished one becomes, SPDK_SUBMIT and
// SPDK_COMPLETE, handed on in time order.
#pragma once

#include "spdk/ordered_records.h"

#include <linux/nvmetrace.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace nvmetrace::spdk {

struct HostCmd {
    uint64_t ts = 0, lba = 0;
    uint32_t blocks = 0;
    uint16_t cid = 0, qid = 0;
    bool write = false;
};

class HostInFlight {
public:
    // Not completed within this long: given up (counted by the caller).
    static constexpr uint64_t kAbandonNs = 10'000'000'000ull;
    // Records are held this long behind the newest time seen, and before any
    // command in flight: nothing to come can precede what is handed on.
    static constexpr uint64_t kSettleNs = 100'000'000ull;

    explicit HostInFlight(uint32_t dev) : dev_(dev) {}

    // A time seen in the source, whatever it was.
    void saw(uint64_t ts) { newest_ = std::max(newest_, ts); }
    // A sampled command on `key`; false when one was in flight there (its
    // completion lost: replaced).
    bool submit(uint64_t key, const HostCmd& c) {
        auto [it, fresh] = cmds_.try_emplace(key, c);
        if (!fresh)
            it->second = c;
        return fresh;
    }
    const HostCmd* find(uint64_t key) const {
        const auto it = cmds_.find(key);
        return it == cmds_.end() ? nullptr : &it->second;
    }
    void drop(uint64_t key) { cmds_.erase(key); }
    // The command on `key` completed at `ts`; `status` is the completion's
    // last half-word (bit 0 the phase tag, not status).
    void complete(uint64_t key, uint64_t ts, uint16_t status) {
        const auto it = cmds_.find(key);
        if (it == cmds_.end())
            return;
        const HostCmd& c = it->second;
        nvmetrace_rec base{};
        base.dev = dev_;
        base.lba = c.lba;
        base.len = c.blocks;
        base.qid = c.qid;
        base.cid = c.cid;
        base.tag = c.cid;  // the assembler's key on the host: (dev, qid, tag)
        base.opcode = c.write ? 0x01 : 0x02;
        base.flags = NVMETRACE_REC_SPDK | NVMETRACE_REC_LEN_BLOCKS | NVMETRACE_REC_HAS_CID |
                     NVMETRACE_REC_HAS_QID | (c.write ? NVMETRACE_REC_WRITE : 0);
        nvmetrace_rec sub = base, done = base;
        sub.event = NVMETRACE_EV_SPDK_SUBMIT;
        sub.ts = c.ts;
        done.event = NVMETRACE_EV_SPDK_COMPLETE;
        done.ts = ts;
        done.aux = (status >> 1) & 0x7fffu;
        done_.add(sub);
        done_.add(done);
        cmds_.erase(it);
    }
    // Drops the commands submitted more than kAbandonNs before now; how many.
    uint64_t expire(uint64_t now_ns) {
        uint64_t n = 0;
        for (auto it = cmds_.begin(); it != cmds_.end();) {
            if (now_ns > it->second.ts + kAbandonNs) {
                n++;
                it = cmds_.erase(it);
            } else {
                ++it;
            }
        }
        return n;
    }
    std::vector<nvmetrace_rec> release() {
        uint64_t before = newest_ > kSettleNs ? newest_ - kSettleNs : 0;
        for (const auto& [key, c] : cmds_)
            before = std::min(before, c.ts);
        return done_.take_before(before);
    }
    // Every record; the commands still in flight are dropped (how many: in_flight() before).
    std::vector<nvmetrace_rec> release_all() {
        cmds_.clear();
        return done_.take_all();
    }
    size_t in_flight() const { return cmds_.size(); }

private:
    uint32_t dev_;
    std::unordered_map<uint64_t, HostCmd> cmds_;
    OrderedRecords done_;
    uint64_t newest_ = 0;
};

}  // namespace nvmetrace::spdk
