// Synthetic host and target recordings in the real file format, for the
// join and compare tests and the join-speed benchmark (user/bench).
//
// Commands start every interval_ns, round robin over the queues; each takes
// a tag of its queue (reused only after queues * depth commands, so never
// while in flight) and the command id nvme-core gives it, (genctr << 12) |
// tag.  Their host and target records are what the module writes: the host's
// block and nvme-core events, the target's nvmet events, on two clocks
// target_offset_ns apart.  Every stage gets its mean time times (1 +/-
// jitter), uniformly.
#pragma once

#include "analysis/components.h"
#include "analysis/join.h"
#include "analysis/sampling.h"
#include "format/recfile.h"

#include <linux/nvmetrace.h>

#include <cstdint>
#include <queue>
#include <random>
#include <string>
#include <vector>

namespace nvmetrace::synth {

inline constexpr uint32_t kDev = 259u << 20 | 0;  // nvme0n1

struct Options {
    uint64_t commands = 1000;
    uint64_t host_start_ns = 1'000'000'000;
    int64_t target_offset_ns = 3'600'000'000'000;  // target clock - host clock
    uint64_t interval_ns = 20'000;                 // between command starts
    uint16_t queues = 2, depth = 8, cntlid = 1;
    uint32_t sample = 1;         // the host's 1-of-N (META only: it records every command)
    uint32_t target_sample = 1;  // the target records only the commands this picks
    uint64_t seed = 0;
    uint64_t rng_seed = 1;
    double jitter = 0.2;
    // wall clock = wall_base_ns + the host's clock; the host's META may say
    // otherwise by host_wall_error_ns (clocks that are not synchronized)
    int64_t wall_base_ns = 1'700'000'000'000'000'000;
    int64_t host_wall_error_ns = 0;
    // stage means, ns
    uint64_t host_submit = 2'000, net_out = 10'000, target_submit = 1'000, storage = 50'000,
             target_complete = 1'000, net_back = 10'000, host_complete = 1'000;
    // target: commands before the host's recording and after it (2 ms away
    // from its window on each side)
    uint64_t target_extra_before = 0, target_extra_after = 0;
    uint32_t block_records = 64 * 1024;
};

// Writes records in timestamp order (a heap holds the records of the
// commands still in flight).
class OrderedWriter {
public:
    explicit OrderedWriter(RecordingWriter& w) : w_(w) {}
    void add(const nvmetrace_rec& r) { heap_.push(r); }
    // Every record before `ts` can go: nothing earlier is still to come.
    void release_before(uint64_t ts) {
        while (!heap_.empty() && heap_.top().ts < ts) {
            buf_.push_back(heap_.top());
            heap_.pop();
            if (buf_.size() == 4096)
                flush();
        }
    }
    void finish() {
        release_before(UINT64_MAX);
        flush();
    }

private:
    struct Later {
        bool operator()(const nvmetrace_rec& a, const nvmetrace_rec& b) const {
            return a.ts > b.ts;
        }
    };
    void flush() {
        w_.append(buf_);
        buf_.clear();
    }
    RecordingWriter& w_;
    std::priority_queue<nvmetrace_rec, std::vector<nvmetrace_rec>, Later> heap_;
    std::vector<nvmetrace_rec> buf_;
};

// A host record of a 4 KiB read of nvme0n1 (kDev): queue and tag from the
// request's records on, the command id on nvme_setup_cmd's.
inline nvmetrace_rec host_record(uint16_t ev, uint64_t ts, uint64_t lba, uint16_t qid, uint16_t tag,
                                 uint16_t cid, uint32_t len = 4096) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.lba = lba;
    r.dev = kDev;
    r.len = len;
    r.event = ev;
    r.opcode = 0x02;
    if (ev != NVMETRACE_EV_BIO_QUEUE) {
        r.qid = qid;
        r.tag = tag;
        r.flags = NVMETRACE_REC_HAS_QID;
    }
    if (ev == NVMETRACE_EV_NVME_SETUP) {
        r.cid = cid;
        r.aux = 1;
        r.flags |= NVMETRACE_REC_HAS_CID;
    }
    return r;
}

inline RecordingMeta meta_for(const Options& o, bool host, uint64_t start) {
    RecordingMeta m = make_recording_meta();
    m.hostname = host ? "synth-host" : "synth-target";
    m.role = host ? "host" : "target";
    m.transport = "tcp";
    m.sample = host ? o.sample : o.target_sample;
    m.seed = o.seed;
    m.start_monotonic_ns = static_cast<int64_t>(start);
    // one wall clock: the target's monotonic clock is target_offset_ns ahead
    m.start_realtime_ns = o.wall_base_ns + static_cast<int64_t>(start) +
                          (host ? o.host_wall_error_ns : -o.target_offset_ns);
    if (host)
        m.devices = nlohmann::json::array({{{"kind", "disk"},
                                            {"name", "nvme0n1"},
                                            {"dev", kDev},
                                            {"lbs", 512},
                                            {"nsid", 1},
                                            {"ctrl", "nvme0"},
                                            {"cntlid", o.cntlid},
                                            {"transport", "tcp"},
                                            {"subsysnqn", "nqn.synth"}}});
    else
        m.devices = nlohmann::json::array({{{"kind", "target_ns"},
                                            {"subsysnqn", "nqn.synth"},
                                            {"nsid", 1},
                                            {"device_path", "/dev/nullb0"},
                                            {"lbs", 512},
                                            {"enabled", true}}});
    return m;
}

// Writes both recordings; returns the records written (host, target).
inline std::pair<uint64_t, uint64_t> write(const std::string& host_path,
                                           const std::string& target_path, const Options& o) {
    RecordingWriterOptions wo;
    wo.block_records = o.block_records;
    RecordingWriter hw = RecordingWriter::open(host_path, wo);
    RecordingWriter tw = RecordingWriter::open(target_path, wo);
    const uint64_t off = static_cast<uint64_t>(o.target_offset_ns);
    constexpr uint64_t kGap = 2'000'000;
    const uint64_t t_begin = o.host_start_ns - o.target_extra_before * o.interval_ns -
                             (o.target_extra_before ? kGap : 0);
    hw.write_meta(meta_for(o, true, o.host_start_ns - kGap / 2));
    tw.write_meta(meta_for(o, false, t_begin - kGap / 2 + off));
    OrderedWriter ho(hw), to(tw);
    std::mt19937_64 rng(o.rng_seed);
    std::uniform_real_distribution<double> u(1 - o.jitter, 1 + o.jitter);
    auto d = [&](uint64_t mean) {
        return static_cast<uint64_t>(static_cast<double>(mean) * u(rng));
    };
    const uint64_t total = o.target_extra_before + o.commands + o.target_extra_after;
    for (uint64_t n = 0; n < total; n++) {
        const bool on_host = n >= o.target_extra_before && n < o.target_extra_before + o.commands;
        const uint64_t t0 = t_begin + n * o.interval_ns +
                            (n >= o.target_extra_before && o.target_extra_before ? kGap : 0) +
                            (n >= o.target_extra_before + o.commands ? kGap : 0);
        const auto qid = static_cast<uint16_t>(1 + n % o.queues);
        const auto tag = static_cast<uint16_t>(n / o.queues % o.depth);
        const auto gen = static_cast<uint16_t>(n / (uint64_t{o.queues} * o.depth) & 0xf);
        const auto cid = static_cast<uint16_t>(gen << 12 | tag);
        const uint64_t lba = (rng() % (1u << 20)) * 8;
        const uint64_t setup = t0 + 500, issue = t0 + d(o.host_submit);
        const uint64_t init = issue + d(o.net_out), exec = init + d(o.target_submit);
        const uint64_t bio_done = exec + d(o.storage), done = bio_done + d(o.target_complete);
        const uint64_t nvme_done = done + d(o.net_back), rq_done = nvme_done + d(o.host_complete);
        if (on_host) {
            auto h = [&](uint16_t ev, uint64_t ts) {
                ho.add(host_record(ev, ts, lba, qid, tag, cid));
            };
            h(NVMETRACE_EV_BIO_QUEUE, t0);
            h(NVMETRACE_EV_NVME_SETUP, setup);
            h(NVMETRACE_EV_RQ_ISSUE, issue);
            h(NVMETRACE_EV_NVME_COMPLETE, nvme_done);
            h(NVMETRACE_EV_RQ_COMPLETE, rq_done);
        }
        const bool on_target = sampled(lba, o.seed, o.target_sample);
        auto t = [&](uint16_t ev, uint64_t ts) {
            if (!on_target)
                return;
            nvmetrace_rec r{};
            r.ts = ts + off;
            r.lba = lba;
            r.len = 8;
            r.event = ev;
            r.qid = qid;
            r.cid = cid;
            r.cntlid = o.cntlid;
            r.opcode = 0x02;
            r.aux = ev == NVMETRACE_EV_NVMET_INIT ? 1 : 0;
            r.flags = NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID | kRecLenBlocks;
            to.add(r);
        };
        t(NVMETRACE_EV_NVMET_INIT, init);
        t(NVMETRACE_EV_NVMET_EXEC, exec);
        t(NVMETRACE_EV_NVMET_BIO_DONE, bio_done);
        t(NVMETRACE_EV_NVMET_COMPLETE, done);
        ho.release_before(t0);
        to.release_before(t0 + off);
    }
    ho.finish();
    to.finish();
    hw.close();
    tw.close();
    return {hw.records_written(), tw.records_written()};
}

// Two runs of 3000 commands a side, for compare: run A, and run B from other
// random draws (later, on other clocks) with `change` applied, as
// DIR/ha.ntr + DIR/ta.ntr and DIR/hb.ntr + DIR/tb.ntr.
inline void write_ab(const std::string& dir, void (*change)(Options&)) {
    Options a;
    a.commands = 3000;
    Options b = a;
    b.rng_seed = 99;
    b.host_start_ns = 9'000'000'000;
    change(b);
    write(dir + "/ha.ntr", dir + "/ta.ntr", a);
    write(dir + "/hb.ntr", dir + "/tb.ntr", b);
}

// ------------------------------------------------------------------ one machine's stream

// What `record -r host -r target -s 1` drains from one CPU's ring while fio
// runs 4k random reads at QD1 on an nvme-tcp loopback namespace (nvmet on
// null_blk): 16 records a command, in the order and with the fields a 6.12
// guest's recording has (40-tcp-components' rr4k.ntr), on one clock.
struct TcpLoopback {
    static constexpr uint32_t kHead = 259u << 20 | 1;  // nvme0n1
    static constexpr uint32_t kPath = 2;               // nvme0c0n1 (hidden: diskseq)
    static constexpr uint32_t kPid = 226;
    static constexpr uint16_t kQid = 2, kCntlid = 1, kDepth = 128;

    static nlohmann::json devices() {
        return nlohmann::json::array({{{"kind", "disk"},
                                       {"name", "nvme0n1"},
                                       {"dev", kHead},
                                       {"lbs", 512},
                                       {"nsid", 1},
                                       {"ctrl", "nvme0"},
                                       {"cntlid", kCntlid},
                                       {"transport", "tcp"},
                                       {"subsysnqn", "nqn.synth"}},
                                      {{"kind", "path"},
                                       {"name", "nvme0c0n1"},
                                       {"dev", kPath},
                                       {"head_dev", kHead},
                                       {"ctrl", "nvme0"},
                                       {"cntlid", kCntlid}},
                                      {{"kind", "target_ns"},
                                       {"subsysnqn", "nqn.synth"},
                                       {"nsid", 1},
                                       {"device_path", "/dev/nullb0"},
                                       {"lbs", 512},
                                       {"enabled", true}}});
    }

    // 1: the guest's times (a command every ~370 us); the benchmark's
    // icount guest runs ~5x faster
    double time_scale = 1.0;
    std::mt19937_64 rng{1};
    uint64_t n = 0;  // commands so far
    uint64_t now = 1'000'000'000;
    uint32_t seq = 0;  // the ring's sequence numbers

    uint64_t scaled(uint64_t ns) const {
        return static_cast<uint64_t>(static_cast<double>(ns) * time_scale);
    }

    // Appends one command's records; the next one starts after it.
    void command(std::vector<nvmetrace_rec>& out) {
        const uint64_t lba = (rng() % (1u << 26)) * 8;
        const auto tag = static_cast<uint16_t>(n % kDepth);
        const uint64_t t0 = now;
        auto rec = [&](uint16_t ev, uint64_t at, uint32_t dev, uint8_t flags, uint64_t aux = 0) {
            nvmetrace_rec r{};
            r.ts = t0 + scaled(at);
            r.lba = lba;
            r.aux = aux;
            r.dev = dev;
            r.len = 4096;
            r.event = ev;
            r.opcode = 0x02;
            r.flags = flags;
            r.seq = seq++;
            if (flags & NVMETRACE_REC_HAS_QID) {
                r.qid = kQid;
                r.tag = tag;
            }
            if (flags & NVMETRACE_REC_HAS_CID)
                r.cid = tag;
            return r;
        };
        auto target = [&](uint16_t ev, uint64_t at, uint64_t aux = 0) {
            nvmetrace_rec r{};
            r.ts = t0 + scaled(at);
            r.lba = lba;
            r.aux = aux;
            r.len = 8;
            r.event = ev;
            r.qid = kQid;
            r.cid = tag;
            r.cntlid = kCntlid;
            r.opcode = 0x02;
            r.flags = NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID | kRecLenBlocks;
            r.seq = seq++;
            return r;
        };
        constexpr uint8_t q = NVMETRACE_REC_HAS_QID, qc = q | NVMETRACE_REC_HAS_CID;
        const uint64_t j = rng() % 2000;  // ns of jitter
        out.push_back(rec(NVMETRACE_EV_FILE_SUBMIT, 0, kHead, 0, uint64_t{9'000 + j} << 32 | kPid));
        out.push_back(rec(NVMETRACE_EV_BIO_QUEUE, 12'000, kHead, 0));
        out.push_back(rec(NVMETRACE_EV_NVME_SETUP, 31'000, kPath, qc, 1));
        out.push_back(rec(NVMETRACE_EV_RQ_ISSUE, 34'500, kPath, q));
        out.push_back(rec(NVMETRACE_EV_TCP_CMD_SEND, 37'000 + j, kPath, q));
        out.push_back(target(NVMETRACE_EV_NVMET_INIT, 157'000 + j, 1));
        out.push_back(target(NVMETRACE_EV_TCPT_CMD_RECV, 160'000 + j, t0 + scaled(156'500 + j)));
        out.push_back(target(NVMETRACE_EV_NVMET_EXEC, 176'000 + j));
        out.push_back(target(NVMETRACE_EV_NVMET_BIO_DONE, 194'000 + j));
        out.push_back(target(NVMETRACE_EV_NVMET_COMPLETE, 196'000 + j));
        out.push_back(rec(NVMETRACE_EV_TCP_C2H_RECV, 273'000 + 2 * j, kPath, q, 1ull << 34));
        out.push_back(rec(NVMETRACE_EV_TCP_RSP_RECV, 274'000 + 2 * j, kPath, q));
        out.push_back(rec(NVMETRACE_EV_NVME_COMPLETE, 281'500 + 2 * j, kPath, q));
        out.push_back(rec(NVMETRACE_EV_RQ_COMPLETE, 284'500 + 2 * j, kPath, q));
        out.push_back(rec(NVMETRACE_EV_AIO_COMPLETE, 288'000 + 2 * j, kHead, 0, 4096));
        out.push_back(rec(NVMETRACE_EV_AIO_REAP, 338'000 + 2 * j, kHead, 0, 1ull << 32 | kPid));
        out.back().len = 0;
        n++;
        now = t0 + scaled(368'000 + 3 * j);
    }
};

}  // namespace nvmetrace::synth
