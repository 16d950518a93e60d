#include "spdk/target_commands.h"

#include "analysis/sampling.h"
#include "util/error.h"

#include <algorithm>
#include <charconv>

#include <fmt/core.h>

namespace nvmetrace::spdk {

namespace {

// SPDK's enum spdk_bdev_io_type
constexpr uint64_t kBdevRead = 1;
constexpr uint64_t kBdevWrite = 2;

constexpr uint8_t kNvmeRead = 0x02;
constexpr uint8_t kNvmeWrite = 0x01;

}  // namespace

TargetTpoints TargetTpoints::of(const TraceFile& layout) {
    TargetTpoints tp;
    auto id = [&](std::string_view name) -> std::optional<uint16_t> {
        const Tpoint* t = layout.find(name);
        return t ? std::optional<uint16_t>(t->id) : std::nullopt;
    };
    tp.tcp_new = id("TCP_REQ_NEW");
    tp.tcp_respond = id("TCP_REQ_RDY_TO_COMPLETE");
    tp.rdma_new = id("RDMA_REQ_NEW");
    tp.rdma_respond = id("RDMA_REQ_RDY_TO_COMPL");
    if (const Tpoint* s = layout.find("BDEV_IO_START")) {
        tp.bdev_start = s->id;
        tp.start_type = s->arg("type");
        tp.start_ctx = s->arg("ctx");
        tp.start_offset = s->arg("offset");
    }
    if (const Tpoint* d = layout.find("BDEV_IO_DONE")) {
        tp.bdev_done = d->id;
        tp.done_ctx = d->arg("ctx");
    }
    return tp;
}

std::optional<uint16_t> qid_of_owner(std::string_view d) {
    // the last "qid:N" word: the subsystem's NQN comes before it and may hold anything
    const size_t at = d.rfind("qid:");
    if (at == std::string_view::npos || (at > 0 && d[at - 1] != ' '))
        return std::nullopt;
    const char* b = d.data() + at + 4;
    const char* e = d.data() + d.size();
    uint32_t v = 0;
    const auto [p, ec] = std::from_chars(b, e, v);
    if (ec != std::errc() || p == b || (p != e && *p != ' ') || v > UINT16_MAX)
        return std::nullopt;
    return static_cast<uint16_t>(v);
}

TargetCommands::TargetCommands(TargetTpoints tp, uint32_t sample, uint64_t seed,
                               std::function<uint64_t(uint64_t)> ns,
                               std::function<std::string(uint16_t)> owner,
                               std::function<uint32_t(const std::string&)> nsid)
    : tp_(tp),
      sample_(sample),
      seed_(seed),
      ns_(std::move(ns)),
      owner_(std::move(owner)),
      nsid_(std::move(nsid)) {}

void TargetCommands::push(const TraceEntry& e) {
    const uint16_t id = e.tpoint_id;
    auto is = [id](const std::optional<uint16_t>& t) { return t && *t == id; };
    const uint64_t ts = ns_(e.tsc);
    newest_ = std::max(newest_, ts);
    if (is(tp_.tcp_new) || is(tp_.rdma_new)) {
        auto [it, fresh] = reqs_.try_emplace(e.object_id);
        if (!fresh) {
            // its response's entry was lost: the object is in use again
            counts_.unfinished++;
            if (it->second.has_io)
                by_bdev_.erase(it->second.bdev_io);
            it->second = Req{};
        }
        it->second.ts_new = ts;
        // TCP: the queue pair is the entry's owner; RDMA's entries name none
        if (is(tp_.tcp_new))
            it->second.qid = qid_of_owner(owner_(e.owner_id));
    } else if (is(tp_.bdev_start)) {
        if (e.args.size() <= std::max({tp_.start_type, tp_.start_ctx, tp_.start_offset}))
            return;
        const auto it = reqs_.find(e.args[tp_.start_ctx]);
        const uint64_t type = e.args[tp_.start_type];
        // a bdev I/O of another user of the bdev, or of a request begun before the recording
        if (it == reqs_.end() || it->second.has_io)
            return;
        if (type != kBdevRead && type != kBdevWrite)
            return;  // flush, unmap, ...: not a read or write
        Req& r = it->second;
        r.has_io = true;
        r.bdev_io = e.object_id;
        r.write = type == kBdevWrite;
        r.lba = e.args[tp_.start_offset];
        r.blocks = e.size;
        r.ts_start = ts;
        if (nsid_) {
            // the bdev's trace owner is described as "bdev_" and its name
            std::string d = owner_(e.owner_id);
            if (d.starts_with("bdev_"))
                d.erase(0, 5);
            r.nsid = nsid_(d);
        }
        by_bdev_[e.object_id] = it->first;
    } else if (is(tp_.bdev_done)) {
        const auto b = by_bdev_.find(e.object_id);
        if (b == by_bdev_.end())
            return;
        const auto it = reqs_.find(b->second);
        by_bdev_.erase(b);
        if (it != reqs_.end() && !it->second.io_done) {
            it->second.io_done = true;
            it->second.ts_done = ts;
        }
    } else if (is(tp_.tcp_respond) || is(tp_.rdma_respond)) {
        const auto it = reqs_.find(e.object_id);
        if (it == reqs_.end()) {
            counts_.unfinished++;
            return;
        }
        finish(it->second, ts);
        reqs_.erase(it);
    }
}

void TargetCommands::finish(Req& r, uint64_t ts) {
    if (!r.has_io) {
        counts_.no_bdev_io++;
        return;
    }
    if (!r.io_done) {
        by_bdev_.erase(r.bdev_io);
        counts_.unfinished++;
        return;
    }
    if (!sampled(r.lba, seed_, sample_)) {
        counts_.not_sampled++;
        return;
    }
    counts_.commands++;
    if (!r.qid)
        counts_.no_qid++;
    if (!r.nsid)
        counts_.no_nsid++;
    nvmetrace_rec base{};
    base.lba = r.lba;
    base.len = static_cast<uint32_t>(std::min<uint64_t>(r.blocks, UINT32_MAX));
    base.qid = r.qid.value_or(0);
    base.cid = next_key_++;
    base.opcode = r.write ? kNvmeWrite : kNvmeRead;
    base.flags = NVMETRACE_REC_SPDK | NVMETRACE_REC_LEN_BLOCKS |
                 (r.write ? NVMETRACE_REC_WRITE : 0) | (r.qid ? NVMETRACE_REC_HAS_QID : 0);
    const std::pair<uint16_t, uint64_t> events[] = {
        {NVMETRACE_EV_NVMET_INIT, r.ts_new},
        {NVMETRACE_EV_NVMET_EXEC, r.ts_start},
        {NVMETRACE_EV_NVMET_BIO_DONE, r.ts_done},
        {NVMETRACE_EV_NVMET_COMPLETE, ts},
    };
    for (const auto& [ev, t] : events) {
        nvmetrace_rec rec = base;
        rec.event = ev;
        rec.ts = t;
        if (ev == NVMETRACE_EV_NVMET_INIT)
            rec.aux = r.nsid;  // as nvmet_req_init's record has it
        done_.add(rec);
    }
}

void TargetCommands::expire(uint64_t now_ns) {
    for (auto it = reqs_.begin(); it != reqs_.end();) {
        if (now_ns > it->second.ts_new + kAbandonNs) {
            // one without a bdev I/O is an admin command that waits by design (an
            // asynchronous event request), not a lost read or write
            if (it->second.has_io) {
                counts_.abandoned++;
                by_bdev_.erase(it->second.bdev_io);
            }
            it = reqs_.erase(it);
        } else {
            ++it;
        }
    }
}

std::vector<nvmetrace_rec> TargetCommands::release() {
    const uint64_t settled = newest_ > kSettleNs ? newest_ - kSettleNs : 0;
    uint64_t before = settled;
    // a request in flight holds back what came after its beginning; one that has
    // had no bdev I/O for kSettleNs is not a read or write (those start theirs at
    // once), so it holds back nothing
    for (const auto& [obj, r] : reqs_)
        if (r.has_io || r.ts_new >= settled)
            before = std::min(before, r.ts_new);
    return done_.take_before(before);
}

std::vector<nvmetrace_rec> TargetCommands::release_all() {
    for (const auto& [obj, r] : reqs_)
        counts_.cut_end += r.has_io;
    reqs_.clear();
    by_bdev_.clear();
    return done_.take_all();
}

}  // namespace nvmetrace::spdk
