// The events the analysis knows: the hooks of kmod/probes/ as
// slots of a command (kEvents), and the command's op and
// side.  A command's timestamps are stored by slot, not by event number.
#pragma once

#include <linux/nvmetrace.h>
#include <stddef.h>
#include <stdint.h>

#include <iterator>
#include <string_view>

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
    // nvme-tcp host (kmod/probes/nvme_tcp.c)
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
    // io_uring on a block device (kmod/probes/uring.c): the SQE taken (FILE_SUBMIT's aux), the
    // request queued to io-wq, the CQE posted and the io_uring_enter() return that saw it
    {NVMETRACE_EV_URING_SUBMIT, "io_uring_enter (entry) or SQPOLL", Side::host, 0, true},
    {NVMETRACE_EV_URING_WQ, "io_uring_queue_async_work", Side::host, 0, true},
    {NVMETRACE_EV_URING_CQE, "io_uring_complete (CQE posted)", Side::host, 11, true},
    {NVMETRACE_EV_URING_REAP, "io_uring_enter (return)", Side::host, 12, true},
    // a positioned synchronous read or write (pread64() ... pwritev2()) on a block device: the
    // call's entry (FILE_SUBMIT's aux) and its return
    {NVMETRACE_EV_SYNC_SUBMIT, "pread64/pwrite64/preadv2/pwritev2 (entry)", Side::host, 0, true},
    {NVMETRACE_EV_SYNC_RETURN, "pread64/pwrite64/preadv2/pwritev2 (return)", Side::host, 12, true},
    // a file on a file system (O_DIRECT through iomap): its file system took the I/O (the
    // FILE_SUBMIT record with NVMETRACE_REC_FS, written at the bio, says when)
    {NVMETRACE_EV_FS_SUBMIT, "__iomap_dio_rw (file system direct I/O)", Side::host, 0, true},
    // a buffered read of such a file that missed the page cache: the page cache took it (the
    // FILE_SUBMIT record with NVMETRACE_REC_FS | NVMETRACE_REC_PAGECACHE, written at the bio
    // that fills the pages the call asked for, says when)
    {NVMETRACE_EV_PAGECACHE_READ, "filemap_read (page cache read that missed)", Side::host, 0,
     true},
    // nvme-rdma host (kmod/probes/nvme_rdma.c)
    {NVMETRACE_EV_RDMA_POST_SEND, "nvme_rdma_post_send", Side::host, 4, true},
    {NVMETRACE_EV_RDMA_SEND_DONE, "nvme_rdma_send_done", Side::host, 5, true, false, true},
    {NVMETRACE_EV_RDMA_RECV_DONE, "nvme_rdma_recv_done", Side::host, 6, true},
    {NVMETRACE_EV_RDMA_COMPLETE, "nvme_rdma_complete_rq", Side::host, 8, true},
    // nvmet-rdma target (kmod/probes/nvmet_rdma.c)
    {NVMETRACE_EV_RDMAT_RECV, "nvmet_rdma_recv_done", Side::target, 0, true, false, false,
     NVMETRACE_EV_RDMAT_SEND_DONE},
    {NVMETRACE_EV_RDMAT_READ_DONE, "nvmet_rdma_read_data_done", Side::target, 5, true},
    {NVMETRACE_EV_RDMAT_RSP_POST, "nvmet_rdma_queue_response", Side::target, 9, true},
    {NVMETRACE_EV_RDMAT_SEND_DONE, "nvmet_rdma_send_done", Side::target, 10, true},
    // nvmet-tcp target (kmod/probes/nvmet_tcp.c)
    {NVMETRACE_EV_TCPT_CMD_RECV, "nvmet_tcp_data_ready (command arrival)", Side::target, 2, true,
     false, false, 0, true},
    {NVMETRACE_EV_TCPT_R2T_SEND, "nvmet_tcp_queue_response (R2T)", Side::target, 3, true, true},
    {NVMETRACE_EV_TCPT_DATA_RECV, "nvmet_tcp_build_pdu_iovec (in-capsule data)", Side::target, 4,
     true},
    {NVMETRACE_EV_TCPT_H2C_RECV, "nvmet_tcp_build_pdu_iovec (H2C data)", Side::target, 5, true,
     true},
    // SPDK's NVMe/TCP host driver, from its trace (record --spdk-host): no block layer and no
    // nvme-core, so a command with these has none of the host's required events
    {NVMETRACE_EV_SPDK_SUBMIT, "NVME_TCP_SUBMIT (SPDK)", Side::host, 4, true},
    {NVMETRACE_EV_SPDK_COMPLETE, "NVME_TCP_COMPLETE (SPDK)", Side::host, 9, true},
};
// Command::ts capacity, bits of Command::present; Stats keys a path by present << 8 | view
inline constexpr size_t kMaxEvents = 48;
static_assert(std::size(kEvents) <= kMaxEvents);

// A set of slots of kEvents, one bit each.
using EventMask = uint64_t;
static_assert(kMaxEvents <= 64 - 8);

// Slot of an event in kEvents, or -1 for an event this build does not know.
int event_slot(uint16_t event);

}  // namespace nvmetrace
