// From records to commands, and from commands to components.
//
// The module writes one record per hook firing (kmod/hooks.c); this file puts
// them back together.  An Assembler takes the records of one machine, merged
// by timestamp, one at a time, and hands each finished command to a sink: its
// op, size, group key and the timestamp of every event that was recorded for
// it.  Its memory is bounded by the commands in flight plus the bios waiting
// for their request, never by the length of the recording.
//
// Where a command's time goes is then a table (kComponents): each component
// is the time between two events, in path order.  A command whose record for
// an inner boundary is missing gets the two neighbouring components merged
// into one; it never gets a figure that was not measured.  Adding a hook
// (transport internals, say) means adding an event to kEvents and rows to
// kComponents, not code.
#pragma once

#include <linux/nvmetrace.h>
#include <stddef.h>
#include <stdint.h>

#include <array>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nvmetrace {

// Target `len` is in logical blocks when this flag is set (bytes otherwise).
// Defined here until the UAPI header carries it; the values must agree.
inline constexpr uint8_t kRecLenBlocks = 1u << 3;
#ifdef NVMETRACE_REC_LEN_BLOCKS
static_assert(NVMETRACE_REC_LEN_BLOCKS == kRecLenBlocks);
#endif

enum class Op : uint8_t { read, write };
std::string_view op_name(Op op);

enum class Side : uint8_t { host, target };

// ----------------------------------------------------------------- events

// Events the analysis knows, in path order within each side.  A command's
// timestamps are stored by slot (the index in kEvents), not by event number.
struct EventDef {
    uint16_t event;         // enum nvmetrace_event
    std::string_view name;  // the hook, for notes ("no nvme_setup_cmd record")
    Side side;
    uint8_t rank;  // order within its side: a smaller rank after a larger one
                   // on the same key means the key was reused
    // A transport event: not every command has one (reads have no R2T, a read
    // completing on the C2H SUCCESS flag has no response capsule) and the
    // transport may not be nvme-tcp at all.  Its absence picks other
    // components (kComponents); it is never a "missing" boundary.
    bool optional = false;
    // May be recorded several times for one command (several R2Ts, H2C or
    // C2H PDUs): the first one is kept, the others neither overwrite it nor
    // look like a reused key.
    bool repeats = false;
    // Comes anywhere after the events of a smaller rank (nvme-rdma's send
    // completion, before or after the response): its rank is not checked.
    bool unordered = false;
    // A command with this event ends at that event (0: at its view's last
    // required one): nvmet-rdma's response send completes after
    // nvmet_req_complete.
    uint16_t ends_at = 0;
    // The event's time is the record's aux, not its ts: the hook learns of
    // the event later (nvmet-tcp's command arrival, noted at the socket and
    // recorded after nvmet_req_init).  A time after the side's first
    // required event is another PDU's: the record is dropped.
    bool ts_in_aux = false;
};

inline constexpr EventDef kEvents[] = {
    {NVMETRACE_EV_BIO_QUEUE, "block_bio_queue", Side::host, 0},
    {NVMETRACE_EV_RQ_INSERT, "block_rq_insert", Side::host, 1},
    {NVMETRACE_EV_NVME_SETUP, "nvme_setup_cmd", Side::host, 2},
    {NVMETRACE_EV_RQ_ISSUE, "block_rq_issue", Side::host, 3},
    {NVMETRACE_EV_NVME_COMPLETE, "nvme_complete_rq", Side::host, 9},
    {NVMETRACE_EV_RQ_COMPLETE, "block_rq_complete", Side::host, 10},
    // target ranks follow the order the records are written in: nvmet-tcp's
    // command arrival is recorded after nvmet_req_init (its time is earlier)
    {NVMETRACE_EV_NVMET_INIT, "nvmet_req_init", Side::target, 1},
    {NVMETRACE_EV_NVMET_EXEC, "nvmet_bdev_execute_rw", Side::target, 6},
    {NVMETRACE_EV_NVMET_BIO_DONE, "nvmet_bio_done", Side::target, 7},
    {NVMETRACE_EV_NVMET_COMPLETE, "nvmet_req_complete", Side::target, 8},
    // nvme-tcp host (kmod/hooks.c)
    {NVMETRACE_EV_TCP_CMD_SEND, "nvme_tcp_try_send (command PDU)", Side::host, 4, true},
    {NVMETRACE_EV_TCP_R2T_RECV, "nvme_tcp_recv_skb (R2T)", Side::host, 5, true, true},
    {NVMETRACE_EV_TCP_H2C_SEND, "nvme_tcp_try_send (H2C data)", Side::host, 6, true, true},
    {NVMETRACE_EV_TCP_C2H_RECV, "nvme_tcp_recv_skb (C2H data)", Side::host, 7, true, true},
    {NVMETRACE_EV_TCP_RSP_RECV, "nvme_tcp_recv_skb (response)", Side::host, 8, true},
    // Above the block layer (libaio on a block device, O_DIRECT): optional, a
    // command of the kernel's own or of another interface has none of them.
    // They are attached by the Assembler, not by (dev, qid, tag).
    {NVMETRACE_EV_SYSCALL_SUBMIT, "io_submit (entry)", Side::host, 0, true},
    {NVMETRACE_EV_FILE_SUBMIT, "blkdev_read_iter/blkdev_write_iter", Side::host, 0, true},
    {NVMETRACE_EV_AIO_COMPLETE, "aio_complete_rw", Side::host, 11, true},
    {NVMETRACE_EV_AIO_REAP, "io_getevents (return)", Side::host, 12, true},
    // nvme-rdma host (kmod/hooks_rdma.c)
    {NVMETRACE_EV_RDMA_POST_SEND, "nvme_rdma_post_send", Side::host, 4, true},
    {NVMETRACE_EV_RDMA_SEND_DONE, "nvme_rdma_send_done", Side::host, 5, true, false, true},
    {NVMETRACE_EV_RDMA_RECV_DONE, "nvme_rdma_recv_done", Side::host, 6, true},
    {NVMETRACE_EV_RDMA_COMPLETE, "nvme_rdma_complete_rq", Side::host, 8, true},
    // nvmet-rdma target (kmod/hooks_rdma.c)
    {NVMETRACE_EV_RDMAT_RECV, "nvmet_rdma_recv_done", Side::target, 0, true, false, false,
     NVMETRACE_EV_RDMAT_SEND_DONE},
    {NVMETRACE_EV_RDMAT_READ_DONE, "nvmet_rdma_read_data_done", Side::target, 5, true},
    {NVMETRACE_EV_RDMAT_RSP_POST, "nvmet_rdma_queue_response", Side::target, 9, true},
    {NVMETRACE_EV_RDMAT_SEND_DONE, "nvmet_rdma_send_done", Side::target, 10, true},
    // nvmet-tcp target (kmod/hooks.c)
    {NVMETRACE_EV_TCPT_CMD_RECV, "nvmet_tcp_data_ready (command arrival)", Side::target, 2, true,
     false, false, 0, true},
    {NVMETRACE_EV_TCPT_R2T_SEND, "nvmet_tcp_queue_response (R2T)", Side::target, 3, true, true},
    {NVMETRACE_EV_TCPT_DATA_RECV, "nvmet_tcp_build_pdu_iovec (in-capsule data)", Side::target, 4,
     true},
    {NVMETRACE_EV_TCPT_H2C_RECV, "nvmet_tcp_build_pdu_iovec (H2C data)", Side::target, 5, true,
     true},
};
inline constexpr size_t kMaxEvents = 32;  // Command::ts capacity, bits of Command::present
static_assert(std::size(kEvents) <= kMaxEvents);

// Slot of an event in kEvents, or -1 for an event this build does not know.
int event_slot(uint16_t event);

// ----------------------------------------------------------------- devices

// What the recording says about the machine's block devices and target
// namespaces.  Host dev numbers use the kernel encoding (major << 20 | minor).
class DeviceTable {
public:
    // A namespace disk (nvme1n1), or an NVMe multipath head.  cntlid: the
    // controller id of its controller (0: unknown, or a multipath head).
    void add_disk(uint32_t dev, std::string name, uint32_t block_size = 0, uint16_t cntlid = 0);
    // A path disk (nvme1c1n1) of the multipath head `head`, on controller cntlid.
    void add_path(uint32_t path_dev, uint32_t head_dev, std::string name = {}, uint16_t cntlid = 0);
    // A target namespace (the nsid in nvmet_req_init's record).
    void add_target_namespace(uint32_t nsid, std::string name, uint32_t block_size);

    // The head of a path disk; any other disk is its own head.
    uint32_t head(uint32_t dev) const;
    // "nvme1n1", or "dev 259:3" for a disk the table does not know.
    std::string disk_name(uint32_t dev) const;
    std::string target_name(uint32_t nsid) const;
    uint32_t target_block_size(uint32_t nsid) const;  // 0: unknown
    // The controller id of the controller a (path) disk belongs to; 0: unknown.
    uint16_t cntlid(uint32_t dev) const;

private:
    struct Disk {
        std::string name;
        uint32_t head = 0;
        uint32_t block_size = 0;
        uint16_t cntlid = 0;
    };
    struct TargetNs {
        std::string name;
        uint32_t block_size = 0;
    };
    std::unordered_map<uint32_t, Disk> disks_;
    std::unordered_map<uint32_t, TargetNs> target_ns_;
};

// ----------------------------------------------------------------- commands

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
    uint16_t origin = 0;          // which host recording (several hosts in one report)
    bool has_cid = false;         // host: nvme_setup_cmd was recorded; target: always
    bool passthru = false;        // host: a passthrough command (no bio; starts at the setup)
    uint32_t present = 0;         // bit per slot of kEvents
    std::array<uint64_t, kMaxEvents> ts{};  // by slot, valid where present

    bool has(int slot) const { return slot >= 0 && (present >> slot & 1u); }
    uint64_t at(int slot) const { return ts[static_cast<size_t>(slot)]; }
    uint64_t first_ts() const;
    uint64_t last_ts() const;
};

// What the Assembler saw, for the report's notes.
struct AssemblyCounts {
    uint64_t records_host = 0;
    uint64_t records_target = 0;
    uint64_t records_unknown = 0;        // events this build does not know (ignored)
    uint64_t records_out_of_order = 0;   // ts before the previous record's
    uint64_t complete = 0;               // commands handed to the sink
    uint64_t cut_start = 0;              // no first event (recording began mid-command,
                                         // or the record was lost)
    uint64_t cut_end = 0;                // still in flight at the end of the recording
    uint64_t lost_end = 0;               // its key was reused before its last event
    uint64_t bios_unmatched = 0;         // block_bio_queue never followed by its request
                                         // (merged into another request, or lost)
    uint64_t inserts_unmatched = 0;      // untagged block_rq_insert never followed by its request
    uint64_t multipath_duplicates = 0;   // path-disk block_bio_queue of a head bio
    uint64_t repeats = 0;                // further records of a repeating event (EventDef)
    uint64_t user_unmatched = 0;         // aio completions or file submissions without
                                         // their command (lost records, other I/O)
    uint64_t late_times = 0;             // ts_in_aux events dropped: time after the first event
    uint64_t first_ts = 0, last_ts = 0;  // of all records

    uint64_t incomplete() const { return cut_start + cut_end + lost_end; }
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

    Assembler(const DeviceTable& devices, Sink sink,
              uint64_t bio_horizon_ns = kDefaultBioHorizonNs);

    void push(const nvmetrace_rec& rec);
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
                       // 3: their aio completion, 4: their reap
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
    };
    struct InFlight {
        Command cmd;
        uint8_t max_rank = 0;
    };

    void push_waiting(const nvmetrace_rec& rec, const WaitKey& key);
    void push_host_rq(const nvmetrace_rec& rec, int slot);
    void push_target(const nvmetrace_rec& rec, int slot);
    bool take_waiting(const WaitKey& key, Waiting* out);
    void expire_waiting(uint64_t now);
    void emit(Command& cmd);
    // Above the block layer: a command past block_rq_complete that had a
    // file submission waits for its aio completion, then for its thread's
    // reap; after the horizon it is handed on without them.
    void hold_for_user(Command& cmd);
    void push_aio_complete(const nvmetrace_rec& rec, int slot);
    void push_aio_reap(const nvmetrace_rec& rec, int slot);
    void expire_tail(uint64_t now);
    bool take_tail(const WaitKey& key, uint64_t* id);

    const DeviceTable& devices_;
    Sink sink_;
    uint64_t bio_horizon_ns_;
    // the slots of each side's first and last required event (looked up once)
    std::array<int, 2> host_ends_{}, target_ends_{};
    AssemblyCounts counts_;

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
};

// Merges per-CPU streams, each already in ts order, into one in ts order
// (ties: lower stream first).  For recordings read from files.
void merge_by_ts(std::span<const std::span<const nvmetrace_rec>> streams,
                 const std::function<void(const nvmetrace_rec&)>& sink);

// ----------------------------------------------------------------- components

// Which sides a command has: decides which rows of kComponents apply.
enum class View : uint8_t { host_only = 1, target_only = 2, joined = 4 };

// A component: the time from one event to the next.  The depth-0 rows of a
// view are the edges of its path, in order of preference: a command's path
// starts at the `from` of the view's first row and ends at the `to` of its
// last; from each event it follows the first row (in table order) whose `to`
// the command has, or else the first whose `to` is a required (not
// optional) event, which is then a missing boundary and merges the two
// components around it.  So the components of each command tile its end to
// end, whatever the transport recorded.  Consecutive rows of one name make
// one component.  Depth-1 rows are details inside the depth-0 row before
// them, reported where both their events are present, and not summed; one
// whose `from` is NVMETRACE_EV_NONE is the path's hop into its `to` from a
// nvme-tcp host event, where the path has one.
struct ComponentDef {
    std::string_view name;
    uint16_t from;  // enum nvmetrace_event
    uint16_t to;
    std::string_view stage;  // a name in kStages
    uint8_t views;           // View bits
    uint8_t depth;
    // Joined view: the seam where the target's timestamps meet the host's.
    // The target's are shifted onto the host's clock so that its
    // nvmet_req_complete falls on the host's first receive-side event
    // (join_commands()), so the row is 0 by construction and not reported;
    // the computed network is the row before the target's first event.
    bool seam = false;
};

// Columns of the live lines.
enum class StageColumn : uint8_t {
    host_block,
    host_driver,
    network,
    target_driver,
    storage,
    host_user,  // above the block layer: syscall, file submission, wake-up, reap
};
inline constexpr size_t kStageColumns = 6;

// Stages: the short table, each a sum of components.
struct StageDef {
    std::string_view name;
    StageColumn column;
    bool not_recorded;  // "network and target": the target's side is not recorded
};

inline constexpr StageDef kStages[] = {
    {"host block layer", StageColumn::host_block, false},
    {"host driver", StageColumn::host_driver, false},
    {"network and target (not recorded)", StageColumn::network, true},
    {"network", StageColumn::network, false},
    {"target driver", StageColumn::target_driver, false},
    {"storage", StageColumn::storage, false},
    {"syscall and file submission (before the block layer)", StageColumn::host_user, false},
    {"completion to user space (wake-up, reap)", StageColumn::host_user, false},
};

inline constexpr uint8_t kHost = static_cast<uint8_t>(View::host_only);
inline constexpr uint8_t kTarget = static_cast<uint8_t>(View::target_only);
inline constexpr uint8_t kJoined = static_cast<uint8_t>(View::joined);

inline constexpr ComponentDef kComponents[] = {
    // above the block layer (optional events: a command without them starts
    // at block_bio_queue and ends at block_rq_complete)
    {"syscall: io_submit entry to the file", NVMETRACE_EV_SYSCALL_SUBMIT, NVMETRACE_EV_FILE_SUBMIT,
     "syscall and file submission (before the block layer)", kHost | kJoined, 0},
    {"file submission to the block layer", NVMETRACE_EV_FILE_SUBMIT, NVMETRACE_EV_BIO_QUEUE,
     "syscall and file submission (before the block layer)", kHost | kJoined, 0},
    {"host block layer, submission", NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_NVME_SETUP,
     "host block layer", kHost | kJoined, 0},
    {"host driver, submission", NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_RQ_ISSUE, "host driver",
     kHost | kJoined, 0},
    // nvme-tcp: on to the socket (adjacent rows of one name are one component)
    {"host driver, submission", NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_TCP_CMD_SEND, "host driver",
     kHost | kJoined, 0},
    {"host driver, to the NIC (nvme-rdma)", NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_RDMA_POST_SEND,
     "host driver", kHost | kJoined, 0},
    {"network and target (not recorded)", NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_NVME_COMPLETE,
     "network and target (not recorded)", kHost, 0},
    // Joined: the host's span from its last send-side event to its first
    // receive-side event, minus the target's residence (join_commands()).
    {"network: wire and NICs (computed)", NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_TCPT_CMD_RECV,
     "network", kJoined, 0},
    {"network: wire and NICs (computed)", NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_NVMET_INIT, "network",
     kJoined, 0},
    // nvme-tcp host, target not recorded
    {"net+target, to the R2T (not recorded)", NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_TCP_R2T_RECV,
     "network and target (not recorded)", kHost, 0},
    {"net+target, to the data (not recorded)", NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_TCP_C2H_RECV,
     "network and target (not recorded)", kHost, 0},
    {"network and target (not recorded)", NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_TCP_RSP_RECV,
     "network and target (not recorded)", kHost, 0},
    {"network and target (not recorded)", NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_NVME_COMPLETE,
     "network and target (not recorded)", kHost, 0},
    {"network: wire and NICs (computed)", NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_TCPT_CMD_RECV,
     "network", kJoined, 0},
    {"network: wire and NICs (computed)", NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_NVMET_INIT,
     "network", kJoined, 0},
    // nvme-rdma host: from the posted command capsule
    {"network and target (not recorded)", NVMETRACE_EV_RDMA_POST_SEND, NVMETRACE_EV_RDMA_RECV_DONE,
     "network and target (not recorded)", kHost, 0},
    {"network and target (not recorded)", NVMETRACE_EV_RDMA_POST_SEND, NVMETRACE_EV_NVME_COMPLETE,
     "network and target (not recorded)", kHost, 0},
    {"network: wire and NICs (computed)", NVMETRACE_EV_RDMA_POST_SEND, NVMETRACE_EV_RDMAT_RECV,
     "network", kJoined, 0},
    {"network: wire and NICs (computed)", NVMETRACE_EV_RDMA_POST_SEND, NVMETRACE_EV_NVMET_INIT,
     "network", kJoined, 0},
    // the capsule's send completion, before or after the response
    {"command posted to send done (RDMA)", NVMETRACE_EV_RDMA_POST_SEND, NVMETRACE_EV_RDMA_SEND_DONE,
     "network", kHost | kJoined, 1},
    {"host driver, R2T to H2C data", NVMETRACE_EV_TCP_R2T_RECV, NVMETRACE_EV_TCP_H2C_SEND,
     "host driver", kHost, 0},
    {"net+target, after the R2T (not recorded)", NVMETRACE_EV_TCP_R2T_RECV,
     NVMETRACE_EV_TCP_RSP_RECV, "network and target (not recorded)", kHost, 0},
    {"net+target, after the R2T (not recorded)", NVMETRACE_EV_TCP_R2T_RECV,
     NVMETRACE_EV_NVME_COMPLETE, "network and target (not recorded)", kHost, 0},
    {"net+target, after the H2C (not recorded)", NVMETRACE_EV_TCP_H2C_SEND,
     NVMETRACE_EV_TCP_RSP_RECV, "network and target (not recorded)", kHost, 0},
    {"net+target, after the H2C (not recorded)", NVMETRACE_EV_TCP_H2C_SEND,
     NVMETRACE_EV_NVME_COMPLETE, "network and target (not recorded)", kHost, 0},
    // target
    // nvmet-rdma: the capsule's receive completion to nvmet_req_init, and a
    // write's data pulled from the host with RDMA READ
    {"network: target receive path", NVMETRACE_EV_RDMAT_RECV, NVMETRACE_EV_NVMET_INIT, "network",
     kTarget | kJoined, 0},
    // nvmet-tcp: likewise, from the command's arrival on the target's socket until
    // nvmet-tcp has read it (io_work scheduled, socket read, PDU parsed)
    {"network: target receive path", NVMETRACE_EV_TCPT_CMD_RECV, NVMETRACE_EV_NVMET_INIT, "network",
     kTarget | kJoined, 0},
    {"network: RDMA READ of data (target)", NVMETRACE_EV_NVMET_INIT, NVMETRACE_EV_RDMAT_READ_DONE,
     "network", kTarget | kJoined, 0},
    {"data transfer (RDMA, at the target)", NVMETRACE_EV_RDMAT_RECV, NVMETRACE_EV_RDMAT_READ_DONE,
     "network", kTarget | kJoined, 1},
    {"target driver, submission", NVMETRACE_EV_RDMAT_READ_DONE, NVMETRACE_EV_NVMET_EXEC,
     "target driver", kTarget | kJoined, 0},
    // target; a write's data: solicited by an R2T, or in the capsule
    {"target driver, submission", NVMETRACE_EV_NVMET_INIT, NVMETRACE_EV_TCPT_R2T_SEND,
     "target driver", kTarget | kJoined, 0},
    {"target driver, submission", NVMETRACE_EV_NVMET_INIT, NVMETRACE_EV_TCPT_DATA_RECV,
     "target driver", kTarget | kJoined, 0},
    {"target driver, submission", NVMETRACE_EV_NVMET_INIT, NVMETRACE_EV_NVMET_EXEC, "target driver",
     kTarget | kJoined, 0},
    {"network: R2T to H2C data (wire and host)", NVMETRACE_EV_TCPT_R2T_SEND,
     NVMETRACE_EV_TCPT_H2C_RECV, "network", kTarget | kJoined, 0},
    {"network: R2T to data (wire and host)", NVMETRACE_EV_TCPT_R2T_SEND, NVMETRACE_EV_NVMET_EXEC,
     "network", kTarget | kJoined, 0},
    {"network: target receive path, H2C data", NVMETRACE_EV_TCPT_H2C_RECV, NVMETRACE_EV_NVMET_EXEC,
     "network", kTarget | kJoined, 0},
    {"network: target receive path, in-capsule data", NVMETRACE_EV_TCPT_DATA_RECV,
     NVMETRACE_EV_NVMET_EXEC, "network", kTarget | kJoined, 0},
    {"storage: target block layer and drive", NVMETRACE_EV_NVMET_EXEC, NVMETRACE_EV_NVMET_BIO_DONE,
     "storage", kTarget | kJoined, 0},
    {"target driver, completion", NVMETRACE_EV_NVMET_BIO_DONE, NVMETRACE_EV_NVMET_COMPLETE,
     "target driver", kTarget | kJoined, 0},
    // nvmet-rdma: the response (a read's RDMA WRITE and the SEND) posted,
    // and its send completion (after the host has the response: on the
    // joined path a detail)
    {"target driver, response (nvmet-rdma)", NVMETRACE_EV_NVMET_COMPLETE,
     NVMETRACE_EV_RDMAT_RSP_POST, "target driver", kTarget | kJoined, 0},
    {"response posted to send done (RDMA)", NVMETRACE_EV_RDMAT_RSP_POST,
     NVMETRACE_EV_RDMAT_SEND_DONE, "network", kJoined, 1},
    {"target driver, response to send done", NVMETRACE_EV_NVMET_COMPLETE,
     NVMETRACE_EV_RDMAT_SEND_DONE, "target driver", kTarget, 0},
    {"network: response send done (RDMA)", NVMETRACE_EV_RDMAT_RSP_POST,
     NVMETRACE_EV_RDMAT_SEND_DONE, "network", kTarget, 0},
    {"network (seam)", NVMETRACE_EV_RDMAT_RSP_POST, NVMETRACE_EV_RDMA_RECV_DONE, "network", kJoined,
     0, true},
    {"network (seam)", NVMETRACE_EV_RDMAT_RSP_POST, NVMETRACE_EV_NVME_COMPLETE, "network", kJoined,
     0, true},
    {"network (seam)", NVMETRACE_EV_NVMET_COMPLETE, NVMETRACE_EV_RDMA_RECV_DONE, "network", kJoined,
     0, true},
    // the seam: to the host's first receive-side event, 0 by construction
    {"network (seam)", NVMETRACE_EV_NVMET_COMPLETE, NVMETRACE_EV_TCP_C2H_RECV, "network", kJoined,
     0, true},
    {"network (seam)", NVMETRACE_EV_NVMET_COMPLETE, NVMETRACE_EV_TCP_RSP_RECV, "network", kJoined,
     0, true},
    {"network (seam)", NVMETRACE_EV_NVMET_COMPLETE, NVMETRACE_EV_NVME_COMPLETE, "network", kJoined,
     0, true},
    // nvme-tcp host receive path: the C2H data, then the response capsule;
    // or the C2H data whose SUCCESS flag completes the command
    {"network: host receive path", NVMETRACE_EV_TCP_C2H_RECV, NVMETRACE_EV_TCP_RSP_RECV, "network",
     kHost | kJoined, 0},
    {"network: host receive path", NVMETRACE_EV_TCP_C2H_RECV, NVMETRACE_EV_NVME_COMPLETE, "network",
     kHost | kJoined, 0},
    {"host driver, completion", NVMETRACE_EV_TCP_RSP_RECV, NVMETRACE_EV_NVME_COMPLETE,
     "host driver", kHost | kJoined, 0},
    // nvme-rdma host receive path: the response's receive completion to
    // blk-mq's complete op, which unmaps the data
    {"network: host receive path", NVMETRACE_EV_RDMA_RECV_DONE, NVMETRACE_EV_RDMA_COMPLETE,
     "network", kHost | kJoined, 0},
    {"network: host receive path", NVMETRACE_EV_RDMA_RECV_DONE, NVMETRACE_EV_NVME_COMPLETE,
     "network", kHost | kJoined, 0},
    {"host driver, completion", NVMETRACE_EV_RDMA_COMPLETE, NVMETRACE_EV_NVME_COMPLETE,
     "host driver", kHost | kJoined, 0},
    {"host block layer, completion", NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE,
     "host block layer", kHost | kJoined, 0},
    {"completion posted to the aio context", NVMETRACE_EV_RQ_COMPLETE, NVMETRACE_EV_AIO_COMPLETE,
     "completion to user space (wake-up, reap)", kHost | kJoined, 0},
    {"wake-up and reap (io_getevents)", NVMETRACE_EV_AIO_COMPLETE, NVMETRACE_EV_AIO_REAP,
     "completion to user space (wake-up, reap)", kHost | kJoined, 0},
    // The path's hop into nvme_complete_rq from an nvme-tcp event (from NONE:
    // the row of the path that ends there): the transport's completion handed
    // to nvme-core.
    {"handoff to nvme_complete_rq", NVMETRACE_EV_NONE, NVMETRACE_EV_NVME_COMPLETE, "host driver",
     kHost | kJoined, 1},
};

View view_of(const Command& cmd);

// How one group of commands splits its time: the components of its view, with
// the rows around each missing boundary merged.  Every command of a group has
// the same layout (the layout is part of the group key), so per-group sums of
// segments add up to the sum of end-to-end times, exactly.
struct Layout {
    struct Segment {
        std::string name;        // "a + b" when merged
        int from_slot, to_slot;  // events that bound it
        size_t stage;            // index in stages
        bool merged;             // spans a missing boundary
        bool seam = false;       // a ComponentDef::seam row, alone: 0, not reported
    };
    struct Stage {
        std::string name;  // "a + b" when merged
        StageColumn column;
        bool not_recorded;
        bool merged;
    };
    struct Detail {  // depth-1 rows
        std::string name;
        int from_slot, to_slot;
        size_t segment;  // listed after this segment (its depth-0 row in the table)
    };
    View view = View::host_only;
    int first_slot = -1, last_slot = -1;  // end to end
    std::vector<Segment> segments;        // path order, tiling end to end
    std::vector<Stage> stages;            // in order of first appearance
    std::vector<Detail> details;
    std::vector<std::string> missing;  // hooks with no record ("nvme_setup_cmd")
    uint32_t missing_mask = 0;         // slots of the missing boundaries

    bool complete() const { return missing_mask == 0; }
};

// The path of a command of `view` that has the events in `present` (slot
// bits), as rows of `table`: leading optional events it lacks are skipped,
// and it ends early where only optional events it lacks follow; *missing gets the required
// boundaries it went through without a record.  Throws std::logic_error if the table has no path
// for it, or names an unknown event or stage.
std::vector<const ComponentDef*> path_of(View view, uint32_t present,
                                         std::span<const ComponentDef> table,
                                         uint32_t* missing = nullptr);

// The events of `present` that shape a command's layout: those on its path.
// Commands with the same view and key have the same layout.
uint32_t layout_key(View view, uint32_t present, std::span<const ComponentDef> table);

// The layout of a command of `view` with the events `present` (a
// layout_key()).
Layout layout_for(View view, uint32_t present, std::span<const ComponentDef> table);

// The inner boundaries of a view's path when only its required events are
// recorded (slot bits): all but its first and last event.
uint32_t interior_boundaries(View view, std::span<const ComponentDef> table);

// The required boundaries on cmd's path that cmd has no record of (slot
// bits); a command missing its view's first or last event never reaches this
// point (the Assembler counts it as incomplete).
uint32_t missing_boundaries(const Command& cmd, std::span<const ComponentDef> table);

// The layout of `view` with only required events, those in `missing_mask`
// merged away.
Layout make_layout(View view, uint32_t missing_mask, std::span<const ComponentDef> table);

// ----------------------------------------------------------------- joining

// The host's last send-side event before the target (nvme-tcp command PDU
// to the socket, or block_rq_issue) and its first receive-side event after it
// (C2H data, response capsule, nvme_complete_rq, or block_rq_complete), as
// slots; -1 when the command has none.
int host_send_slot(const Command& host);
int host_receive_slot(const Command& host);
// The target's first receive-side event (nvmet-rdma's capsule receive, or
// nvmet_req_init) and its last send-side one (nvmet-rdma's response posted,
// or nvmet_req_complete): its residence as the host sees it.
int target_receive_slot(const Command& target);
int target_send_slot(const Command& target);

// A host command and its target command as one command of the joined view,
// on the host's clock.  The clocks of the two sides are never compared: the
// target's timestamps are shifted so that its nvmet_req_complete falls on the
// host's first receive-side event, which makes the row before the target's
// first event the computed network, (receive - send) on the host minus
// (send - receive) on the target (target_send_slot(), target_receive_slot()).  *network_ns gets it
// (negative when the target's residence is longer than the host's span).
Command join_commands(const Command& host, const Command& target, int64_t* network_ns = nullptr);

// Why a command found no partner on the other side.
enum class Unmatched : uint8_t {
    no_command_id,     // host: no nvme_setup_cmd record, so no command id
    not_sampled,       // the other side's 1-of-N predicate does not pick its LBA
    outside_window,    // it ran before or after the other recording
    not_found,         // inside the other recording, but not in it (records lost, cut)
    no_other_side,     // no recording of the other side
    other_controller,  // the other side's recordings are not of its controller
};
inline constexpr size_t kUnmatchedReasons = 6;
std::string_view unmatched_reason(Unmatched u, Side side);
std::string_view unmatched_key(Unmatched u);  // "not_sampled", for JSON

struct JoinCounts {
    bool active = false;            // both sides were recorded: the join ran
    uint64_t host = 0, target = 0;  // completed commands offered
    uint64_t matched = 0;
    uint64_t negative_network = 0;  // matched commands whose computed network is < 0
    uint64_t ambiguous = 0;         // matches chosen among several candidates (by time)
    std::array<uint64_t, kUnmatchedReasons> host_unmatched{}, target_unmatched{};
    size_t peak_pending = 0;  // commands waiting for a partner at most, both sides
};

// Matches host commands with target commands, streaming, in bounded memory.
//
// Key: (controller id, qid, command id, LBA, op, namespace): the host's
// command id and qid come from nvme_setup_cmd, its controller id from the
// recording's devices (0: unknown, matches any); the target's from its
// records.  The clocks of the machines are never used in a figure: each host
// recording gets an offset onto the target's clock (`Source::offset_ns`,
// estimated by estimate_offset() from commands whose key occurs once on each
// side, then followed as matches come: clocks drift), and it is used only to
// pick, among the commands with the same key (command ids are reused: a 4-bit
// generation over the tag), the one at the expected time -- which is the
// per-queue order, as both sides see a queue's commands in the same order.
//
// Feed commands with push() in the order of their completion on the target's
// clock (host: ts + offset_ns), all recordings interleaved (see merge in
// run_report's join); each is matched as it comes or waits, at most `window`
// past its send, for its partner.  Memory: the commands waiting, i.e. about
// the command rate times the window for unmatched ones, and times the offset
// error (small after the first matches) for matched ones.
class Joiner {
public:
    struct Source {
        Side side = Side::host;
        uint32_t sample_n = 1;
        uint64_t seed = 0;
        uint64_t first_ts = 0, last_ts = UINT64_MAX;  // the recording's window, its own clock
        // host: added to its timestamps to land on the target's clock
        int64_t offset_ns = 0;
        // host: the controllers of its devices; target: the controllers it
        // served.  Empty: unknown (then no command is "other_controller").
        std::vector<uint16_t> cntlids;
    };
    struct Options {
        uint64_t window_ns = 2'000'000'000;  // how long a command waits for its partner
    };
    using Sink = std::function<void(const Command&)>;

    Joiner() : Joiner(Options{}) {}
    explicit Joiner(Options opts) : opts_(opts) {}

    // A recording; returns its index for push() and add().
    size_t add_source(const Source& s);
    Source& source(size_t i) { return sources_.at(i); }
    // The window of a source once known (a file's last record is known at its end).
    void set_window(size_t source, uint64_t first_ts, uint64_t last_ts);

    // Streaming: one command, in completion order on the target's clock.
    // Hands matched (joined) commands and those whose wait ran out to sink.
    void push(size_t source, const Command& cmd, const Sink& sink);
    // Everything still waiting is unmatched; returns the counts.
    JoinCounts finish(const Sink& sink);

    // Buffered, for tests and small inputs: add() every command, then join()
    // estimates each host recording's offset from all of them, sorts by
    // completion and streams them through push()/finish().
    void add(size_t source, const Command& cmd);
    JoinCounts join(const Sink& sink);

    size_t pending() const { return pending_[0].live + pending_[1].live; }

private:
    struct Key {
        uint64_t lba;
        uint32_t nsid;
        uint16_t qid, cid;
        uint8_t op;
        bool operator==(const Key&) const = default;
    };
    struct KeyHash {
        size_t operator()(const Key& k) const;
    };
    struct Entry {
        Command cmd;
        uint32_t source;
        bool done;
        uint64_t anchor;  // on the target's clock
    };
    struct Side_ {
        std::deque<Entry> q;  // arrival order; q[i] has id base + i
        uint64_t base = 0;
        size_t live = 0;
        std::unordered_multimap<Key, uint64_t, KeyHash> index;
    };

    static Key key_of(const Command& c);
    bool compatible(const Entry& host, const Entry& target) const;
    void emit_unmatched(Entry& e, int side, const Sink& sink);
    void evict(uint64_t now, const Sink& sink);
    void match(Entry& host, Entry& target, const Sink& sink);

    Options opts_;
    std::vector<Source> sources_;
    Side_ pending_[2];  // [0] host, [1] target
    uint64_t now_ = 0;
    JoinCounts jc_;
    std::vector<std::pair<size_t, Command>> buffered_;
};

// The anchor of a command for matching: the host's last send-side event, the
// target's nvmet_req_init.
uint64_t join_anchor(const Command& c);

// The offset (target clock - host clock) that the commands whose key occurs
// exactly once in `host` and once in `target` agree on (their median), or
// nullopt when there are none.
std::optional<int64_t> estimate_offset(std::span<const Command> host,
                                       std::span<const Command> target);

}  // namespace nvmetrace
