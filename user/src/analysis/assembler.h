// From records to commands, and from commands to components.
//
// The module writes one record per hook firing (kmod/probes/); this file puts
// them back together.  An Assembler takes the records of one machine, merged
// by timestamp, one at a time, and hands each finished command to a sink: its
// op, size, group key and the timestamp of every event that was recorded for
// it.  Its memory is bounded by the commands in flight plus the bios waiting
// for their request, never by the length of the recording.
#pragma once

#include "analysis/device_table.h"
#include "analysis/events.h"

#include <linux/nvmetrace.h>
#include <stddef.h>
#include <stdint.h>

#include <array>
#include <deque>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

namespace nvmetrace {

// How a host command reached the block device file (FILE_SUBMIT's record).
enum class SubmitPath : uint8_t {
    none,          // no file submission recorded
    file,          // another path (a synchronous read or write): no syscall entry recorded
    aio,           // io_submit()
    uring,         // io_uring, issued inline in io_uring_enter()
    uring_iowq,    // io_uring, issued by an io-wq worker
    uring_sqpoll,  // io_uring, taken by the SQPOLL thread
    sync,          // pread64(), pwrite64(), preadv(), pwritev(), preadv2(), pwritev2()
    uring_cmd,     // io_uring NVMe passthrough (IORING_OP_URING_CMD), set up by the driver
    kernel,        // no file submission; its bio was queued by a kernel thread (write-back)
};
std::string_view submit_path_name(SubmitPath p);

// One finished command.
struct Command {
    Side side = Side::host;
    Op op = Op::read;
    uint64_t lba = 0;
    uint64_t size = 0;            // bytes, or blocks when size_in_blocks
    bool size_in_blocks = false;  // target record in blocks, block size unknown
    uint8_t len_flags = 0;        // flags of the record that gave the size
    uint32_t dev = 0;             // host: the head disk; target: 0
    uint32_t pid = 0;             // host: the submitting thread (with a file submission)
    uint32_t nsid = 0;            // target: from nvmet_req_init; host: from nvme_setup_cmd
    uint64_t status = 0;          // block status (host) or NVMe status (target); 0: success
    uint16_t qid = 0;             // NVMe queue id (host: hctx + 1; target: the sq's)
    uint16_t cid = 0;             // NVMe command id, valid with has_cid
    uint16_t cntlid = 0;          // controller id (target: recorded; host: its disk's, from the
                                  // recording's devices; 0: unknown)
    uint16_t cntlid_next = 0;     // host: the id its disk's controller got right after it
                                  // began, when the recorder saw the change only then (the
                                  // command may have run on the new controller); 0: none
    uint16_t origin = 0;          // which host recording (several hosts in one report)
    bool has_cid = false;         // host: nvme_setup_cmd was recorded; target: always
    bool passthru = false;        // host: a passthrough command (no bio; starts at the setup)
    SubmitPath submit_path = SubmitPath::none;  // host: who submitted it to the file
    bool reap_unseen = false;  // host: its completion was taken by user space unseen (io_uring:
                               // from the mapped CQ ring, or posted by an io thread)
    bool reap_ring = false;    // host: io_uring: taken from the mapped CQ ring, seen by its head:
                               // the reap's slot holds when the kernel saw it taken
    uint32_t reap_window_ns = 0;  // with reap_ring: how much earlier it may have been taken
    bool file_bio = false;     // host: a file's on a file system: its file submission (FILE_SUBMIT,
                               // NVMETRACE_REC_FS) was recorded at its first bio
    bool spdk_target = false;  // its target side was SPDK's (records of NVMETRACE_REC_SPDK)
    bool spdk_host = false;    // host: SPDK's NVMe driver (SPDK_SUBMIT): no block layer
    bool failed_over = false;  // host: a request whose bios were taken back at block_rq_complete
                               // (nvme multipath failover: its path failed, e.g. a controller
                               // reset) and sent again on a later request; not a finished I/O
    uint8_t attempts_before = 0;  // host: how many requests of its bios failed over before it
    EventMask present = 0;        // bit per slot of kEvents
    std::array<uint64_t, kMaxEvents> ts{};  // by slot, valid where present

    bool has(int slot) const { return slot >= 0 && (present >> slot & 1u); }
    uint64_t at(int slot) const { return ts[static_cast<size_t>(slot)]; }
    uint64_t first_ts() const;
    uint64_t last_ts() const;
};

// The name of the event in slot of c: kEvents' (the hook), but a file's file submission
// (file_bio) is its first bio, not blkdev_read_iter/blkdev_write_iter.
std::string_view event_name(const Command& c, int slot);
inline constexpr std::string_view kFileBioEventName = "the file's first bio (file submission)";

// What the Assembler saw, for the report's notes.
// CLOCK_MONOTONIC past 2^60 ns is 36 years of uptime: a record that says so is
// damaged, and is left out before its time takes part in any span. Below it, the
// difference of two times, and the sum of a few, cannot overflow an int64.
inline constexpr uint64_t kMaxRecordTs = 1ull << 60;

// How long after a controller change the recorder may see it: a reset or a
// reconnect sends a uevent (NVME_EVENT=connected), on which its device watch
// looks at once; without uevents it looks every second.  A host command
// that began that close before a change its disk had may carry either id.
// Measured: up to 2.6 s between the reconnect and the look, on a debug
// (KASAN) kernel beside other guests, where 1.5 s left 16 commands unjoined.
// A wider span risks nothing: the other id must also hold a command of the
// same queue, command id, LBA and direction, the nearest in time wins.
inline constexpr uint64_t kCntlidChangeSeen_ns = 5'000'000'000ull;

// to - from in ns, saturated to the int64 range: times shifted onto another
// clock by a joined recording's offset are no longer bounded by kMaxRecordTs.
inline int64_t ts_span(uint64_t from, uint64_t to) {
    if (to >= from) {
        const uint64_t d = to - from;
        return d > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(d);
    }
    const uint64_t d = from - to;
    return d > static_cast<uint64_t>(INT64_MAX) ? INT64_MIN : -static_cast<int64_t>(d);
}

// One drop run of a ring, as its GAP marker says (NVMETRACE_EV_GAP).
struct GapRun {
    uint32_t cpu = 0;
    uint64_t first_ts = 0;  // the first and the last dropped record's times
    uint64_t last_ts = 0;
    uint64_t records = 0;  // dropped
    bool operator==(const GapRun&) const = default;
};

struct AssemblyCounts {
    uint64_t records_host = 0;
    uint64_t records_target = 0;
    uint64_t records_unknown = 0;       // events this build does not know (ignored)
    uint64_t records_bad_ts = 0;        // ts of kMaxRecordTs or more: no clock reads that (ignored)
    uint64_t records_out_of_order = 0;  // ts before the previous record's
    uint64_t complete = 0;              // commands handed to the sink
    uint64_t cut_start = 0;             // no first event (recording began mid-command,
                                        // or the record was lost)
    uint64_t cut_end = 0;               // still in flight at the end of the recording
    uint64_t device_gone = 0;           // in flight when its device went away (DEVICES)
    uint64_t lost_end = 0;              // its key was reused before its last event
    uint64_t bios_unmatched = 0;        // block_bio_queue never followed by its request
                                        // (merged into another request, or lost)
    uint64_t inserts_unmatched = 0;     // untagged block_rq_insert never followed by its request
    uint64_t multipath_duplicates = 0;  // path-disk block_bio_queue of a head bio
    uint64_t repeats = 0;               // further records of a repeating event (EventDef)
    uint64_t superseded = 0;            // bios or file submissions tried again (io_uring's
                                        // nonblocking issue, then io-wq's)
    uint64_t user_unmatched = 0;        // aio completions or file submissions without
                                        // their command (lost records, other I/O)
    uint64_t late_times = 0;            // ts_in_aux events dropped: time after the first event
    uint64_t lost_in_gap = 0;           // overlapped a drop run and lacked a record of its
                                        // path: may have lost it (left out)
    uint64_t failovers_unsent = 0;      // failed-over requests whose bios were not seen on a
                                        // later request within kRetryHoldNs
    std::vector<GapRun> gaps;           // the drop runs, in the order their markers came
    uint64_t first_ts = 0, last_ts = 0;  // of all records

    uint64_t incomplete() const { return cut_start + cut_end + device_gone + lost_end; }
};

// A FIFO that keeps its first element inline and allocates only for more:
// the Assembler's per-key queues almost always hold one element, and a
// std::deque allocates (a map and a 512-byte node) as soon as it exists.
template <class T>
class SmallFifo {
public:
    [[nodiscard]] bool empty() const { return !has_first_ && head_ == rest_.size(); }
    [[nodiscard]] size_t size() const { return (has_first_ ? 1 : 0) + rest_.size() - head_; }
    [[nodiscard]] const T& front() const { return has_first_ ? first_ : rest_[head_]; }
    void push_back(const T& x) {
        if (empty()) {
            rest_.clear();
            head_ = 0;
            first_ = x;
            has_first_ = true;
        } else {
            rest_.push_back(x);
        }
    }
    void pop_front() {
        if (has_first_) {
            has_first_ = false;
        } else if (++head_ == rest_.size()) {
            rest_.clear();
            head_ = 0;
        } else if (head_ >= 16 && head_ * 2 >= rest_.size()) {
            rest_.erase(rest_.begin(), rest_.begin() + static_cast<std::ptrdiff_t>(head_));
            head_ = 0;
        }
    }

private:
    T first_{};
    bool has_first_ = false;
    std::vector<T> rest_;  // after first_, from rest_[head_]
    size_t head_ = 0;
};

// Joins records into commands.  Feed it one machine's records in timestamp
// order (see merge_by_ts()); call finish() at the end of the recording.
// Not thread-safe.
class Assembler {
public:
    using Sink = std::function<void(const Command&)>;

    // A block_bio_queue record waits this long for its request's first record
    // before it is counted as unmatched and dropped (bounds the memory when
    // bios are merged into requests started by another LBA).
    static constexpr uint64_t kDefaultBioHorizonNs = 5'000'000'000ull;
    // A failed-over request waits this long for the request that sends its
    // bios again: nvme multipath keeps them until a path is live, which may
    // be after a reconnect, or until the controller is given up
    // (ctrl_loss_tmo, 600 s unless set).
    static constexpr uint64_t kRetryHoldNs = 900'000'000'000ull;

    Assembler(const DeviceTable& devices, Sink sink,
              uint64_t bio_horizon_ns = kDefaultBioHorizonNs);

    void push(const nvmetrace_rec& rec);
    // The recording's drop runs, known before its records are pushed (a
    // GAP marker comes after the records it stands beside): a command is
    // judged against every run, also one whose marker comes after the
    // command's last record.  Markers pushed later that match one of these
    // are not counted twice.
    void set_gaps(std::vector<GapRun> gaps);
    // Counts what is still in flight as cut at the end.  The Assembler can
    // be fed again afterwards (a new recording).
    void finish();

    const AssemblyCounts& counts() const { return counts_; }
    size_t in_flight() const { return host_.size() + target_.size() + tail_cmds_.size(); }
    size_t waiting() const { return waiting_count_; }  // bios and untagged inserts

private:
    // A record that precedes its request's first tagged record: a bio
    // (keyed by head disk) or an untagged block_rq_insert (keyed by disk).
    struct WaitKey {
        uint64_t lba;
        uint32_t dev;
        uint8_t op;
        uint8_t kind;  // 0: bio, 1: insert, 2: file submission, held commands awaiting
                       // 3: their aio completion or CQE, 4: their reap; 5: io-wq queueing;
                       // 6: a failed-over request's bios, awaiting their next request
        bool operator==(const WaitKey&) const = default;
    };
    struct WaitKeyHash {
        size_t operator()(const WaitKey& k) const;
    };
    struct Waiting {
        uint64_t id;
        uint64_t ts;
        uint32_t len;
        uint64_t aux = 0;
        uint16_t cid = 0, tag = 0;  // a file submission's interface and io_uring path
        uint8_t flags = 0;          // the record's NVMETRACE_REC_*
    };
    struct InFlight {
        Command cmd;
        uint8_t max_rank = 0;
    };

    void push_waiting(const nvmetrace_rec& rec, const WaitKey& key);
    void push_host_rq(const nvmetrace_rec& rec, int slot);
    void push_target(const nvmetrace_rec& rec, int slot);
    bool take_waiting(const WaitKey& key, Waiting* out);
    // The newest record under key from before `before`: the older ones were
    // tried again (io_uring's nonblocking issue, then io-wq's), counted as superseded.
    bool take_latest(const WaitKey& key, uint64_t before, Waiting* out);
    void expire_waiting(uint64_t now);
    void emit(Command& cmd);
    void push_gap(const nvmetrace_rec& rec);
    // A command whose time overlaps a drop run and that lacks an event of
    // its kind's path: it may have lost a record there.
    bool may_have_lost(const Command& c);
    // Above the block layer: a command past block_rq_complete that had a
    // file submission waits for its aio completion, then for its thread's
    // reap; after the horizon it is handed on without them.
    void hold_for_user(Command& cmd);
    void push_aio_complete(const nvmetrace_rec& rec, int slot);
    void push_aio_reap(const nvmetrace_rec& rec, int slot);
    void push_sync_return(const nvmetrace_rec& rec, int slot);
    Command* take_user_tail(const nvmetrace_rec& rec, uint8_t kind, uint64_t* id);
    void hand_on_tail(uint64_t id);
    void attach_file_submit(Command& c, const Waiting& file, uint64_t bio_ts);
    void expire_tail(uint64_t now);
    bool take_tail(const WaitKey& key, uint64_t* id);
    // A failed-over request (Command::failed_over): its bios go back to the
    // multipath head and come again on a later request of the same sector,
    // without a block_bio_queue record of their own (the block layer traces
    // a bio's queueing once).  The later request takes what came before the
    // block layer's request from it: the bio, the file submission.
    void hold_retry(const Command& attempt);
    bool take_retry(const WaitKey& key, const WaitKey& bio_key, Command& c);
    void expire_retries(uint64_t now);

    const DeviceTable& devices_;
    Sink sink_;
    uint64_t bio_horizon_ns_;
    // the slots of each side's first and last required event (looked up once)
    std::array<int, 2> host_ends_{}, target_ends_{};
    AssemblyCounts counts_;
    std::vector<GapRun> known_gaps_;  // set_gaps() and markers seen
    // Per kind of command (side, op, passthrough, file submission): how many
    // were seen with no drop run overlapping them, and how many of those had
    // each event.  Its path: the events more than half of them had.
    struct PathCount {
        uint64_t n = 0;
        std::array<uint64_t, kMaxEvents> has{};
    };
    std::unordered_map<uint32_t, PathCount> paths_;

    std::unordered_map<WaitKey, SmallFifo<Waiting>, WaitKeyHash> waiting_;
    std::deque<std::pair<WaitKey, Waiting>> wait_order_;  // for expiry, oldest first
    size_t waiting_count_ = 0;
    uint64_t next_wait_id_ = 0;
    // (dev, qid, tag) and (cntlid, qid, cid) -> the command in flight
    std::unordered_map<uint64_t, InFlight> host_;
    std::unordered_map<uint64_t, InFlight> target_;
    // commands held for their aio completion and reap, by id
    std::unordered_map<uint64_t, Command> tail_cmds_;
    std::unordered_map<WaitKey, SmallFifo<uint64_t>, WaitKeyHash> tail_by_key_;
    std::deque<std::pair<uint64_t, uint64_t>> tail_order_;  // (ts held, id), oldest first
    uint64_t next_tail_id_ = 0;
    // failed-over requests awaiting their bios' next request (kind 6), oldest first
    std::unordered_map<WaitKey, std::deque<Command>, WaitKeyHash> retries_;
    // held retries are looked over once a second of recording, not per record
    static constexpr uint64_t kRetryExpiryStepNs = 1'000'000'000ull;
    uint64_t next_retry_expiry_ = 0;
    // how much later than the punt to io-wq a SQE time found from a file
    // submission's "since" may be and still be the punt's (attach_file_submit)
    static constexpr uint64_t kSinceSlackNs = 10'000;
};

// Merges per-CPU streams, each already in ts order, into one in ts order
// (ties: lower stream first).  For recordings read from files.
void merge_by_ts(std::span<const std::span<const nvmetrace_rec>> streams,
                 const std::function<void(const nvmetrace_rec&)>& sink);

}  // namespace nvmetrace
