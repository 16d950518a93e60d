#include "analysis/assembler.h"

#include "analysis/components.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <queue>
#include <tuple>

namespace nvmetrace {

namespace {

constexpr uint16_t kNoTag = 0xffff;  // (u16)BLK_MQ_NO_TAG: no driver tag yet

Op rec_op(const nvmetrace_rec& r) {
    return (r.flags & NVMETRACE_REC_WRITE) ? Op::write : Op::read;
}

uint64_t host_key(const nvmetrace_rec& r) {
    return uint64_t{r.dev} << 32 | uint64_t{r.qid} << 16 | r.tag;
}

uint64_t target_key(const nvmetrace_rec& r) {
    return uint64_t{r.cntlid} << 32 | uint64_t{r.qid} << 16 | r.cid;
}

// A record of `ev` for a command that already has the events up to
// f.max_rank: out of its order (the key was reused) if its rank is not above
// them, or, for an unordered event, if the command has it already.
template <typename InFlight>
bool out_of_order(const InFlight& f, const EventDef& ev, int slot) {
    if (ev.unordered)
        return f.cmd.has(slot);
    return ev.rank <= f.max_rank;
}

// Whether a command that has reached its view's last required event still
// waits for a trailing one (EventDef::ends_at).
bool awaits_trailing(const Command& c) {
    for (EventMask m = c.present; m; m &= m - 1) {
        const EventDef& ev = kEvents[std::countr_zero(m)];
        if (ev.ends_at && !c.has(event_slot(ev.ends_at)))
            return true;
    }
    return false;
}

}  // namespace

std::string_view submit_path_name(SubmitPath p) {
    switch (p) {
        case SubmitPath::none:
            return "";
        case SubmitPath::file:
            return "file";
        case SubmitPath::aio:
            return "aio";
        case SubmitPath::uring:
            return "io_uring";
        case SubmitPath::uring_iowq:
            return "io_uring, io-wq";
        case SubmitPath::uring_sqpoll:
            return "io_uring, SQPOLL";
        case SubmitPath::sync:
            return "pread/pwrite";
        case SubmitPath::uring_cmd:
            return "io_uring_cmd";
        case SubmitPath::kernel:
            return "kernel thread";
    }
    return "";
}

uint64_t Command::first_ts() const {
    uint64_t t = UINT64_MAX;
    for (EventMask m = present; m; m &= m - 1)
        t = std::min(t, ts[std::countr_zero(m)]);
    return present ? t : 0;
}

uint64_t Command::last_ts() const {
    uint64_t t = 0;
    for (EventMask m = present; m; m &= m - 1)
        t = std::max(t, ts[std::countr_zero(m)]);
    return t;
}

std::string_view event_name(const Command& c, int slot) {
    static const int file = event_slot(NVMETRACE_EV_FILE_SUBMIT);
    return slot == file && c.file_bio ? kFileBioEventName : kEvents[slot].name;
}

// ----------------------------------------------------------------- assembler

size_t Assembler::WaitKeyHash::operator()(const WaitKey& k) const {
    uint64_t h = k.lba * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t{k.dev} << 16 | uint64_t{k.op} << 8 | k.kind) * 0xbf58476d1ce4e5b9ull;
    return static_cast<size_t>(h ^ (h >> 29));
}

Assembler::Assembler(const DeviceTable& devices, Sink sink, uint64_t bio_horizon_ns)
    : devices_(devices), sink_(std::move(sink)), bio_horizon_ns_(bio_horizon_ns) {
    const ViewEnds h = required_ends_of(View::host_only), t = required_ends_of(View::target_only);
    host_ends_ = {h.first, h.last};
    target_ends_ = {t.first, t.last};
}

void Assembler::push(const nvmetrace_rec& rec) {
    if (rec.ts >= kMaxRecordTs) {
        counts_.records_bad_ts++;
        return;
    }
    if (counts_.first_ts == 0 && counts_.last_ts == 0)
        counts_.first_ts = rec.ts;
    if (rec.ts < counts_.last_ts)
        counts_.records_out_of_order++;
    else
        counts_.last_ts = rec.ts;

    if (rec.event == NVMETRACE_EV_GAP) {
        push_gap(rec);
        return;
    }
    int slot = event_slot(rec.event);
    if (slot < 0) {
        counts_.records_unknown++;
        return;
    }
    if (kEvents[slot].side == Side::target) {
        counts_.records_target++;
        push_target(rec, slot);
        return;
    }
    counts_.records_host++;
    expire_waiting(rec.ts);
    expire_tail(rec.ts);
    if (!retries_.empty() && rec.ts >= next_retry_expiry_) {
        expire_retries(rec.ts);
        next_retry_expiry_ = rec.ts + kRetryExpiryStepNs;
    }
    auto op = static_cast<uint8_t>(rec_op(rec));
    if (rec.event == NVMETRACE_EV_FILE_SUBMIT) {
        push_waiting(rec, WaitKey{rec.lba, devices_.head(rec.dev, rec.ts), op, 2});
    } else if (rec.event == NVMETRACE_EV_URING_WQ) {
        push_waiting(rec, WaitKey{rec.lba, devices_.head(rec.dev, rec.ts), op, 5});
    } else if (rec.event == NVMETRACE_EV_AIO_COMPLETE || rec.event == NVMETRACE_EV_URING_CQE) {
        push_aio_complete(rec, slot);
    } else if (rec.event == NVMETRACE_EV_AIO_REAP || rec.event == NVMETRACE_EV_URING_REAP) {
        push_aio_reap(rec, slot);
    } else if (rec.event == NVMETRACE_EV_SYNC_RETURN) {
        push_sync_return(rec, slot);
    } else if (rec.event == NVMETRACE_EV_BIO_QUEUE) {
        WaitKey key{rec.lba, devices_.head(rec.dev, rec.ts), op, 0};
        // NVMe multipath: the bio is queued on the head disk, then again on
        // the path disk it is sent to.  Keep the head's (the earliest).
        if (key.dev != rec.dev) {
            auto it = waiting_.find(key);
            if (it != waiting_.end() && !it->second.empty()) {
                counts_.multipath_duplicates++;
                return;
            }
        }
        push_waiting(rec, key);
    } else if (rec.event == NVMETRACE_EV_RQ_INSERT && rec.tag == kNoTag) {
        // Inserted into the I/O scheduler before it has a driver tag.
        push_waiting(rec, WaitKey{rec.lba, rec.dev, op, 1});
    } else {
        push_host_rq(rec, slot);
    }
}

void Assembler::set_gaps(std::vector<GapRun> gaps) {
    known_gaps_ = std::move(gaps);
}

// GAP: ts is the last dropped record's time, lba the first's, aux the count,
// dev the CPU.
void Assembler::push_gap(const nvmetrace_rec& rec) {
    const GapRun g{.cpu = rec.dev, .first_ts = rec.lba, .last_ts = rec.ts, .records = rec.aux};
    counts_.gaps.push_back(g);
    if (std::find(known_gaps_.begin(), known_gaps_.end(), g) == known_gaps_.end())
        known_gaps_.push_back(g);
}

bool Assembler::may_have_lost(const Command& c) {
    const uint32_t kind =
        uint32_t{c.side == Side::target} | uint32_t{c.op == Op::write} << 1 |
        uint32_t{c.passthru} << 2 |
        uint32_t{c.submit_path != SubmitPath::none && c.submit_path != SubmitPath::kernel} << 3;
    const uint64_t from = c.first_ts(), to = c.last_ts();
    const bool overlaps = std::any_of(known_gaps_.begin(), known_gaps_.end(), [&](const GapRun& g) {
        return g.first_ts <= to && g.last_ts >= from;
    });
    if (!overlaps) {
        PathCount& p = paths_[kind];
        p.n++;
        for (EventMask m = c.present; m; m &= m - 1)
            p.has[static_cast<size_t>(std::countr_zero(m))]++;
        return false;
    }
    // no whole command of its kind yet: nothing says it is whole either
    const auto it = paths_.find(kind);
    if (it == paths_.end())
        return true;
    const PathCount& p = it->second;
    for (size_t slot = 0; slot < p.has.size(); slot++)
        if (p.has[slot] * 2 > p.n && !(c.present >> slot & 1u))
            return true;
    return false;
}

void Assembler::push_waiting(const nvmetrace_rec& rec, const WaitKey& key) {
    Waiting w{next_wait_id_++, rec.ts, rec.len, rec.aux, rec.cid, rec.tag, rec.flags};
    waiting_[key].push_back(w);
    wait_order_.emplace_back(key, w);
    waiting_count_++;
}

bool Assembler::take_waiting(const WaitKey& key, Waiting* out) {
    auto it = waiting_.find(key);
    if (it == waiting_.end())
        return false;
    *out = it->second.front();
    it->second.pop_front();
    if (it->second.empty())
        waiting_.erase(it);
    waiting_count_--;
    return true;
}

bool Assembler::take_latest(const WaitKey& key, uint64_t before, Waiting* out) {
    if (!take_waiting(key, out))
        return false;
    for (auto it = waiting_.find(key);
         it != waiting_.end() && !it->second.empty() && it->second.front().ts <= before;
         it = waiting_.find(key)) {
        counts_.superseded++;
        take_waiting(key, out);
    }
    return true;
}

// Drops the order entries of records already taken, and the records that
// waited longer than the horizon.  Amortized O(1) per record.
void Assembler::expire_waiting(uint64_t now) {
    while (!wait_order_.empty()) {
        const auto& [key, w] = wait_order_.front();
        auto it = waiting_.find(key);
        bool taken = it == waiting_.end() || it->second.front().id != w.id;
        if (!taken) {
            if (w.ts + bio_horizon_ns_ >= now)
                break;
            (key.kind == 0   ? counts_.bios_unmatched
             : key.kind == 1 ? counts_.inserts_unmatched
                             : counts_.user_unmatched)++;
            it->second.pop_front();
            if (it->second.empty())
                waiting_.erase(it);
            waiting_count_--;
        }
        wait_order_.pop_front();
    }
}

void Assembler::push_host_rq(const nvmetrace_rec& rec, int slot) {
    const EventDef& ev = kEvents[slot];
    auto [it, fresh] = host_.try_emplace(host_key(rec));
    InFlight& f = it->second;
    if (!fresh && ev.repeats && f.cmd.has(slot) && f.cmd.lba == rec.lba) {
        counts_.repeats++;  // another R2T, H2C or C2H PDU: the first one counts
        return;
    }
    if (!fresh && (f.cmd.lba != rec.lba || out_of_order(f, ev, slot))) {
        // The tag was reused: the command before lost its last records.
        counts_.lost_end++;
        fresh = true;
    }
    if (fresh) {
        f = InFlight{};
        Command& c = f.cmd;
        c.side = Side::host;
        c.op = rec_op(rec);
        c.lba = rec.lba;
        c.size = rec.len;
        c.len_flags = rec.flags;
        c.dev = devices_.head(rec.dev, rec.ts);
        c.cntlid = devices_.cntlid(rec.dev, rec.ts);
        c.cntlid_next = devices_.cntlid_next(rec.dev, rec.ts, kCntlidChangeSeen_ns);
        if (rec.flags & NVMETRACE_REC_HAS_QID)
            c.qid = rec.qid;
        auto op = static_cast<uint8_t>(c.op);
        Waiting w;
        if (take_waiting(WaitKey{rec.lba, rec.dev, op, 1}, &w)) {
            int s = event_slot(NVMETRACE_EV_RQ_INSERT);
            c.ts[s] = w.ts;
            c.present |= EventMask{1} << s;
            f.max_rank = kEvents[s].rank;
        }
        if (take_retry(WaitKey{rec.lba, c.dev, op, 6}, WaitKey{rec.lba, c.dev, op, 0}, c)) {
            // the bios of a request that failed over: queued before that one
        } else if (take_latest(WaitKey{rec.lba, c.dev, op, 0}, rec.ts, &w)) {
            int s = event_slot(NVMETRACE_EV_BIO_QUEUE);
            c.ts[s] = w.ts;
            c.present |= EventMask{1} << s;
            // the file submission came before its bio
            const uint64_t bio_ts = w.ts, bio_aux = w.aux;
            if (take_latest(WaitKey{rec.lba, c.dev, op, 2}, bio_ts, &w)) {
                attach_file_submit(c, w, bio_ts);
            } else {
                // no system call of its own: who queued the bio (write-back is a kernel thread's)
                c.pid = static_cast<uint32_t>(bio_aux);
                if (bio_aux & NVMETRACE_BIO_KTHREAD)
                    c.submit_path = SubmitPath::kernel;
            }
        } else if (rec.event == NVMETRACE_EV_NVME_SETUP && (rec.flags & NVMETRACE_REC_PASSTHRU) &&
                   take_latest(WaitKey{rec.lba, c.dev, op, 2}, rec.ts, &w)) {
            // io_uring's passthrough: no bio; its submission is recorded at
            // the driver's setup, just before this record
            attach_file_submit(c, w, rec.ts);
        }
    }
    Command& c = f.cmd;
    c.ts[slot] = rec.ts;
    c.present |= EventMask{1} << slot;
    if (rec.flags & NVMETRACE_REC_PASSTHRU)
        c.passthru = true;
    if (!ev.unordered)
        f.max_rank = std::max(f.max_rank, ev.rank);
    if (rec.event == NVMETRACE_EV_SPDK_SUBMIT) {
        // SPDK's host driver: its command id and queue; no block layer, no nvme-core
        c.spdk_host = true;
        if (rec.flags & NVMETRACE_REC_HAS_CID) {
            c.cid = rec.cid;
            c.has_cid = true;
        }
    }
    if (rec.event == NVMETRACE_EV_SPDK_COMPLETE) {
        c.status = rec.aux;
        emit(c);
        host_.erase(it);
        return;
    }
    if (rec.event == NVMETRACE_EV_NVME_SETUP) {
        c.nsid = static_cast<uint32_t>(rec.aux);
        if (rec.flags & NVMETRACE_REC_HAS_CID) {
            c.cid = rec.cid;
            c.has_cid = true;
        }
        if (rec.flags & NVMETRACE_REC_HAS_QID)
            c.qid = rec.qid;
    }
    if (slot == host_ends_[1]) {
        c.status = rec.aux;
        if (rec.event == NVMETRACE_EV_RQ_COMPLETE && rec.len == 0 && c.size && !c.passthru) {
            // Ended with no bytes left: nvme multipath took its bios back
            // (blk_steal_bios()) to send them again once a path is live.
            c.failed_over = true;
            hold_retry(c);
            emit(c);
        } else if (c.has(event_slot(NVMETRACE_EV_FILE_SUBMIT))) {
            hold_for_user(c);
        } else {
            emit(c);
        }
        host_.erase(it);
    }
}

void Assembler::hold_retry(const Command& attempt) {
    retries_[WaitKey{attempt.lba, attempt.dev, static_cast<uint8_t>(attempt.op), 6}].push_back(
        attempt);
}

// The bios nvme multipath took back wait on the head's requeue list with
// those submitted while no path was live, and go again in the order they
// came: a bio queued before the attempt failed goes first.
bool Assembler::take_retry(const WaitKey& key, const WaitKey& bio_key, Command& c) {
    auto it = retries_.find(key);
    if (it == retries_.end())
        return false;
    if (auto b = waiting_.find(bio_key);
        b != waiting_.end() && b->second.front().ts < it->second.front().last_ts())
        return false;
    const Command a = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty())
        retries_.erase(it);
    // what came before the block layer's request: the bio, the file submission
    for (EventMask m = a.present; m; m &= m - 1) {
        const auto s = static_cast<size_t>(std::countr_zero(m));
        if (kEvents[s].side == Side::host && kEvents[s].rank == 0) {
            c.ts[s] = a.ts[s];
            c.present |= EventMask{1} << s;
        }
    }
    c.pid = a.pid;
    c.submit_path = a.submit_path;
    c.attempts_before = a.attempts_before == UINT8_MAX ? UINT8_MAX : a.attempts_before + 1;
    return true;
}

void Assembler::expire_retries(uint64_t now) {
    for (auto it = retries_.begin(); it != retries_.end();) {
        auto& q = it->second;
        while (!q.empty() && q.front().last_ts() + kRetryHoldNs < now) {
            counts_.failovers_unsent++;
            q.pop_front();
        }
        it = q.empty() ? retries_.erase(it) : std::next(it);
    }
}

// The file submission of a command and what its record says of the
// submission before it: when the kernel took it (io_submit() or
// io_uring_enter() entry, or the SQPOLL thread), and for io_uring's io-wq
// path when the request was queued there (its URING_WQ record, written
// right after the file submission, before the bio).
void Assembler::attach_file_submit(Command& c, const Waiting& file, uint64_t bio_ts) {
    auto set = [&c](uint16_t event, uint64_t ts) {
        int s = event_slot(event);
        c.ts[s] = ts;
        c.present |= EventMask{1} << s;
    };
    set(NVMETRACE_EV_FILE_SUBMIT, file.ts);
    c.file_bio = file.flags & NVMETRACE_REC_FS;
    c.pid = NVMETRACE_UAUX_PID(file.aux);
    const bool uring = file.cid == NVMETRACE_IFACE_URING;
    const bool sync = file.cid == NVMETRACE_IFACE_SYNC;
    // SQPOLL first: a passthrough SQE the SQPOLL thread took starts there, not at a call
    c.submit_path = uring  ? ((file.tag & NVMETRACE_URING_SQPOLL) ? SubmitPath::uring_sqpoll
                              : (file.tag & NVMETRACE_URING_CMD)  ? SubmitPath::uring_cmd
                              : (file.tag & NVMETRACE_URING_IOWQ) ? SubmitPath::uring_iowq
                                                                  : SubmitPath::uring)
                    : sync ? SubmitPath::sync
                    : file.cid == NVMETRACE_IFACE_AIO || NVMETRACE_UAUX_HI(file.aux)
                        ? SubmitPath::aio
                        : SubmitPath::file;
    // a file on a file system: recorded at its bio, len is the time since the file system
    // took it (NVMETRACE_REC_FS), or for a buffered read's page-cache miss since the page
    // cache took the read (with NVMETRACE_REC_PAGECACHE)
    if ((file.flags & NVMETRACE_REC_FS) && file.len && file.len <= file.ts)
        set((file.flags & NVMETRACE_REC_PAGECACHE) ? NVMETRACE_EV_PAGECACHE_READ
                                                   : NVMETRACE_EV_FS_SUBMIT,
            file.ts - file.len);
    uint64_t since = NVMETRACE_UAUX_HI(file.aux);
    if (since && since <= file.ts)
        set(uring  ? NVMETRACE_EV_URING_SUBMIT
            : sync ? NVMETRACE_EV_SYNC_SUBMIT
                   : NVMETRACE_EV_SYSCALL_SUBMIT,
            file.ts - since);
    Waiting q;
    if (!uring || !(file.tag & NVMETRACE_URING_IOWQ) ||
        !take_latest(WaitKey{c.lba, c.dev, static_cast<uint8_t>(c.op), 5}, bio_ts, &q) ||
        q.aux > file.ts)
        return;
    // The kernel reads the clock for "since" a moment before the record's
    // own, so the SQE's time found from it is late by that moment, and a
    // punt right after the SQE (the first of an io_uring_enter() call) can
    // look earlier than the SQE.  The request was taken no later than it was
    // punted: within kSinceSlackNs the punt's time is the SQE's too.
    const uint64_t sqe = since && since <= file.ts ? file.ts - since : 0;
    if (q.aux >= sqe) {
        set(NVMETRACE_EV_URING_WQ, q.aux);
    } else if (sqe - q.aux <= kSinceSlackNs) {
        set(NVMETRACE_EV_URING_SUBMIT, q.aux);
        set(NVMETRACE_EV_URING_WQ, q.aux);
    }
}

void Assembler::push_target(const nvmetrace_rec& rec, int slot) {
    const EventDef& ev = kEvents[slot];
    auto [it, fresh] = target_.try_emplace(target_key(rec));
    InFlight& f = it->second;
    if (!fresh && ev.repeats && f.cmd.has(slot) && f.cmd.lba == rec.lba) {
        counts_.repeats++;
        return;
    }
    if (!fresh && (f.cmd.lba != rec.lba || out_of_order(f, ev, slot))) {
        // The key was reused.  A command that had reached nvmet_req_complete
        // and waited only for a trailing event (ends_at) is done as it is.
        if (f.cmd.has(target_ends_[1]))
            emit(f.cmd);
        else
            counts_.lost_end++;
        fresh = true;
    }
    if (fresh) {
        f = InFlight{};
        Command& c = f.cmd;
        c.side = Side::target;
        c.op = rec_op(rec);
        c.lba = rec.lba;
        c.size = rec.len;
        c.len_flags = rec.flags;
        c.qid = rec.qid;
        c.cid = rec.cid;
        c.cntlid = rec.cntlid;
        // an SPDK target's records number its commands themselves: no NVMe command id
        c.has_cid = !(rec.flags & NVMETRACE_REC_SPDK);
        c.spdk_target = (rec.flags & NVMETRACE_REC_SPDK) != 0;
    }
    Command& c = f.cmd;
    if (ev.ts_in_aux) {
        // noted before the side's first event; later: another PDU's arrival
        const int first = target_ends_[0];
        if (!c.has(first) || rec.aux > c.at(first)) {
            counts_.late_times++;
            f.max_rank = std::max(f.max_rank, ev.rank);
            return;
        }
        c.ts[slot] = rec.aux;
    } else {
        c.ts[slot] = rec.ts;
    }
    c.present |= EventMask{1} << slot;
    if (!ev.unordered)
        f.max_rank = std::max(f.max_rank, ev.rank);
    if (rec.event == NVMETRACE_EV_NVMET_INIT)
        c.nsid = static_cast<uint32_t>(rec.aux);
    const int last = target_ends_[1];
    if (slot == last)
        c.status = rec.aux;
    if (c.has(last) && !awaits_trailing(c)) {
        emit(c);
        target_.erase(it);
    }
}

void Assembler::emit(Command& c) {
    // a passthrough command has no bio: it starts at nvme_setup_cmd
    const int first = c.side == Side::target ? target_ends_[0]
                      : c.spdk_host          ? event_slot(NVMETRACE_EV_SPDK_SUBMIT)
                      : c.passthru           ? event_slot(NVMETRACE_EV_NVME_SETUP)
                                             : host_ends_[0];
    if (!c.has(first)) {
        counts_.cut_start++;
        return;
    }
    if (may_have_lost(c)) {
        counts_.lost_in_gap++;
        return;
    }
    if (c.len_flags & kRecLenBlocks) {
        uint32_t bs = devices_.target_block_size(c.nsid);
        if (bs)
            c.size *= bs;
        else
            c.size_in_blocks = true;
    }
    counts_.complete++;
    sink_(c);
}

void Assembler::finish() {
    // held commands are complete at the block layer: hand them on as they are
    expire_tail(UINT64_MAX);
    // a command whose disk went away after its last record never completed
    // because of that, not because the recording ended first
    for (const auto& [key, f] : host_) {
        (devices_.gone_after(f.cmd.dev, f.cmd.last_ts()) ? counts_.device_gone : counts_.cut_end)++;
    }
    // target commands that waited only for a trailing event are done as they are
    for (auto& [key, f] : target_) {
        if (f.cmd.has(target_ends_[1]))
            emit(f.cmd);
        else
            counts_.cut_end++;
    }
    host_.clear();
    target_.clear();
    for (const auto& [key, q] : retries_)
        counts_.failovers_unsent += q.size();
    retries_.clear();
    for (const auto& [key, q] : waiting_)
        (key.kind == 0   ? counts_.bios_unmatched
         : key.kind == 1 ? counts_.inserts_unmatched
                         : counts_.user_unmatched) += q.size();
    waiting_.clear();
    wait_order_.clear();
    waiting_count_ = 0;
}

// How long a command past block_rq_complete waits for its aio completion
// and its reap (both normally follow within microseconds).
constexpr uint64_t kUserHorizonNs = 1'000'000'000ull;

void Assembler::hold_for_user(Command& c) {
    uint64_t id = next_tail_id_++;
    tail_by_key_[WaitKey{c.lba, c.dev, static_cast<uint8_t>(c.op), 3}].push_back(id);
    tail_order_.emplace_back(c.at(event_slot(NVMETRACE_EV_RQ_COMPLETE)), id);
    tail_cmds_.emplace(id, c);
}

// The held command rec (of kind 3: past block_rq_complete, 4: past its
// aio completion or CQE) belongs to, its id in *id; nullptr, counted as
// unmatched, when none is held.
Command* Assembler::take_user_tail(const nvmetrace_rec& rec, uint8_t kind, uint64_t* id) {
    const WaitKey key{rec.lba, devices_.head(rec.dev, rec.ts), static_cast<uint8_t>(rec_op(rec)),
                      kind};
    if (!take_tail(key, id)) {
        counts_.user_unmatched++;
        return nullptr;
    }
    return &tail_cmds_.at(*id);
}

void Assembler::push_aio_complete(const nvmetrace_rec& rec, int slot) {
    uint64_t id;
    Command* cp = take_user_tail(rec, 3, &id);
    if (!cp)
        return;
    Command& c = *cp;
    c.ts[slot] = rec.ts;
    c.present |= EventMask{1} << slot;
    if (rec.event == NVMETRACE_EV_URING_CQE && (rec.tag & NVMETRACE_URING_CQE_NO_REAP)) {
        // posted by an io thread (SQPOLL, io-wq): no reap will be recorded
        c.reap_unseen = true;
        hand_on_tail(id);
        return;
    }
    tail_by_key_[WaitKey{c.lba, c.dev, static_cast<uint8_t>(c.op), 4}].push_back(id);
}

// io_getevents() handed this command's event to user space: the module
// knows which by the iocb the event names (kmod/probes/aio.c).
void Assembler::push_aio_reap(const nvmetrace_rec& rec, int slot) {
    uint64_t id;
    Command* cp = take_user_tail(rec, 4, &id);
    if (!cp)
        return;
    Command& c = *cp;
    if (rec.event == NVMETRACE_EV_URING_REAP && (rec.aux & NVMETRACE_URING_REAP_RING)) {
        // user space took the CQE from the mapped ring within [ts - len, ts]
        // (kmod/probes/uring.c): the reap is when the kernel saw it taken,
        // as a waiting call's return is; how much earlier it may have been
        // taken is kept (never before the CQE)
        const uint64_t posted = c.at(event_slot(NVMETRACE_EV_URING_CQE));
        const uint64_t back = rec.ts > posted ? rec.ts - posted : 0;
        c.ts[slot] = rec.ts;
        c.present |= EventMask{1} << slot;
        c.reap_ring = true;
        c.reap_window_ns = static_cast<uint32_t>(std::min<uint64_t>(rec.len, back));
    } else if (rec.event == NVMETRACE_EV_URING_REAP &&
               (rec.aux & (NVMETRACE_URING_REAP_LATE | NVMETRACE_URING_REAP_NOWAIT))) {
        // posted before the io_uring_enter() call that returned (user space
        // may have taken it from the mapped ring earlier), or returned by a
        // call that did not wait for it (user space takes it from the ring
        // when it next looks): either way unseen
        c.reap_unseen = true;
    } else {
        c.ts[slot] = rec.ts;
        c.present |= EventMask{1} << slot;
    }
    hand_on_tail(id);
}

// A synchronous call returned: its command, held since block_rq_complete,
// ends there (the call's kretprobe kept the command's dev and LBA).
void Assembler::push_sync_return(const nvmetrace_rec& rec, int slot) {
    uint64_t id;
    Command* c = take_user_tail(rec, 3, &id);
    if (!c)
        return;
    c->ts[slot] = rec.ts;
    c->present |= EventMask{1} << slot;
    hand_on_tail(id);
}

void Assembler::hand_on_tail(uint64_t id) {
    auto c = tail_cmds_.find(id);
    emit(c->second);
    tail_cmds_.erase(c);
}

// The oldest held command under key that is still held.
bool Assembler::take_tail(const WaitKey& key, uint64_t* id) {
    auto it = tail_by_key_.find(key);
    if (it == tail_by_key_.end())
        return false;
    bool found = false;
    while (!it->second.empty() && !found) {
        *id = it->second.front();
        it->second.pop_front();
        found = tail_cmds_.count(*id) != 0;  // else handed on already (expired)
    }
    if (it->second.empty())
        tail_by_key_.erase(it);
    return found;
}

void Assembler::expire_tail(uint64_t now) {
    while (!tail_order_.empty()) {
        auto [ts, id] = tail_order_.front();
        if (now != UINT64_MAX && ts + kUserHorizonNs >= now)
            break;
        tail_order_.pop_front();
        auto c = tail_cmds_.find(id);
        if (c == tail_cmds_.end())
            continue;
        emit(c->second);
        tail_cmds_.erase(c);
    }
    if (tail_cmds_.empty())
        tail_by_key_.clear();
}

void merge_by_ts(std::span<const std::span<const nvmetrace_rec>> streams,
                 const std::function<void(const nvmetrace_rec&)>& sink) {
    using Head = std::tuple<uint64_t, size_t, size_t>;  // ts, stream, index
    std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
    for (size_t s = 0; s < streams.size(); s++)
        if (!streams[s].empty())
            heads.emplace(streams[s][0].ts, s, 0);
    while (!heads.empty()) {
        auto [ts, s, i] = heads.top();
        heads.pop();
        sink(streams[s][i]);
        if (i + 1 < streams[s].size())
            heads.emplace(streams[s][i + 1].ts, s, i + 1);
    }
}

}  // namespace nvmetrace
