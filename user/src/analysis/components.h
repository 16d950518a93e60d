// From commands to components: where a command's time goes is a table
// (kComponents), each component the time between two events, in path order.
// Where a command's time goes is then a table (kComponents): each component
// is the time between two events, in path order.  A command whose record for
// an inner boundary is missing gets the two neighbouring components merged
// into one; it never gets a figure that was not measured.  Adding a hook
// (transport internals, say) means adding an event to kEvents and rows to
// kComponents, not code.
#pragma once

#include "analysis/assembler.h"
#include "analysis/events.h"

#include <stddef.h>
#include <stdint.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nvmetrace {

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
    {"file system: direct I/O (before the block layer)", StageColumn::host_user, false},
    {"page cache: a read that missed (before the block layer)", StageColumn::host_user, false},
    {"completion to user space (wake-up, reap)", StageColumn::host_user, false},
    {"queued in io-wq", StageColumn::host_user, false},
};

inline constexpr uint8_t kHost = static_cast<uint8_t>(View::host_only);
inline constexpr uint8_t kTarget = static_cast<uint8_t>(View::target_only);
inline constexpr uint8_t kJoined = static_cast<uint8_t>(View::joined);

inline constexpr ComponentDef kComponents[] = {
    // above the block layer (optional events: a command without them starts
    // at block_bio_queue and ends at block_rq_complete)
    // A file on a file system (O_DIRECT through iomap): from the system call to its file
    // system's direct I/O, then the file system (mapping the file to disk blocks) to the bio.
    // Of the rows from one event, one to an optional event comes before the row that skips it.
    {"syscall: io_submit entry to the file system", NVMETRACE_EV_SYSCALL_SUBMIT,
     NVMETRACE_EV_FS_SUBMIT, "syscall and file submission (before the block layer)",
     kHost | kJoined, 0},
    {"syscall: io_submit entry to the page cache", NVMETRACE_EV_SYSCALL_SUBMIT,
     NVMETRACE_EV_PAGECACHE_READ, "syscall and file submission (before the block layer)",
     kHost | kJoined, 0},
    {"syscall: io_submit entry to the file", NVMETRACE_EV_SYSCALL_SUBMIT, NVMETRACE_EV_FILE_SUBMIT,
     "syscall and file submission (before the block layer)", kHost | kJoined, 0},
    {"syscall: pread/pwrite entry to the file system", NVMETRACE_EV_SYNC_SUBMIT,
     NVMETRACE_EV_FS_SUBMIT, "syscall and file submission (before the block layer)",
     kHost | kJoined, 0},
    // a buffered read that missed the page cache: from the call to the page cache, then the
    // page cache (looking up, allocating the pages, the file system mapping them) to the bio
    {"syscall: pread entry to the page cache", NVMETRACE_EV_SYNC_SUBMIT,
     NVMETRACE_EV_PAGECACHE_READ, "syscall and file submission (before the block layer)",
     kHost | kJoined, 0},
    {"syscall: pread/pwrite entry to the file", NVMETRACE_EV_SYNC_SUBMIT, NVMETRACE_EV_FILE_SUBMIT,
     "syscall and file submission (before the block layer)", kHost | kJoined, 0},
    // io_uring: the SQE taken, through io-wq when the inline issue would block
    {"io_uring: SQE taken to io-wq", NVMETRACE_EV_URING_SUBMIT, NVMETRACE_EV_URING_WQ,
     "syscall and file submission (before the block layer)", kHost | kJoined, 0},
    {"io_uring: SQE taken to the file system", NVMETRACE_EV_URING_SUBMIT, NVMETRACE_EV_FS_SUBMIT,
     "syscall and file submission (before the block layer)", kHost | kJoined, 0},
    {"io_uring: SQE taken to the page cache", NVMETRACE_EV_URING_SUBMIT,
     NVMETRACE_EV_PAGECACHE_READ, "syscall and file submission (before the block layer)",
     kHost | kJoined, 0},
    {"io_uring: SQE taken to the file", NVMETRACE_EV_URING_SUBMIT, NVMETRACE_EV_FILE_SUBMIT,
     "syscall and file submission (before the block layer)", kHost | kJoined, 0},
    {"queued in io-wq", NVMETRACE_EV_URING_WQ, NVMETRACE_EV_FS_SUBMIT, "queued in io-wq",
     kHost | kJoined, 0},
    {"queued in io-wq", NVMETRACE_EV_URING_WQ, NVMETRACE_EV_PAGECACHE_READ, "queued in io-wq",
     kHost | kJoined, 0},
    {"queued in io-wq", NVMETRACE_EV_URING_WQ, NVMETRACE_EV_FILE_SUBMIT, "queued in io-wq",
     kHost | kJoined, 0},
    {"file system: direct I/O to the block layer", NVMETRACE_EV_FS_SUBMIT, NVMETRACE_EV_BIO_QUEUE,
     "file system: direct I/O (before the block layer)", kHost | kJoined, 0},
    {"page cache: read miss to the block layer", NVMETRACE_EV_PAGECACHE_READ,
     NVMETRACE_EV_BIO_QUEUE, "page cache: a read that missed (before the block layer)",
     kHost | kJoined, 0},
    {"file submission to the block layer", NVMETRACE_EV_FILE_SUBMIT, NVMETRACE_EV_BIO_QUEUE,
     "syscall and file submission (before the block layer)", kHost | kJoined, 0},
    // io_uring's passthrough: no bio; its submission is recorded at the driver's setup
    {"passthrough submission to nvme_setup_cmd", NVMETRACE_EV_FILE_SUBMIT, NVMETRACE_EV_NVME_SETUP,
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
    // SPDK's NVMe/TCP host driver: from the command handed to its queue pair to its response
    // processed; before the target's rows, so that its path starts here
    {"network and target (not recorded)", NVMETRACE_EV_SPDK_SUBMIT, NVMETRACE_EV_SPDK_COMPLETE,
     "network and target (not recorded)", kHost, 0},
    {"network: wire and NICs (computed)", NVMETRACE_EV_SPDK_SUBMIT, NVMETRACE_EV_TCPT_CMD_RECV,
     "network", kJoined, 0},
    {"network: wire and NICs (computed)", NVMETRACE_EV_SPDK_SUBMIT, NVMETRACE_EV_RDMAT_RECV,
     "network", kJoined, 0},
    {"network: wire and NICs (computed)", NVMETRACE_EV_SPDK_SUBMIT, NVMETRACE_EV_NVMET_INIT,
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
    {"network (seam)", NVMETRACE_EV_RDMAT_RSP_POST, NVMETRACE_EV_SPDK_COMPLETE, "network", kJoined,
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
    {"network (seam)", NVMETRACE_EV_NVMET_COMPLETE, NVMETRACE_EV_SPDK_COMPLETE, "network", kJoined,
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
    {"completion to the CQE (io_uring task work)", NVMETRACE_EV_RQ_COMPLETE, NVMETRACE_EV_URING_CQE,
     "completion to user space (wake-up, reap)", kHost | kJoined, 0},
    {"wake-up and reap (io_uring_enter)", NVMETRACE_EV_URING_CQE, NVMETRACE_EV_URING_REAP,
     "completion to user space (wake-up, reap)", kHost | kJoined, 0},
    {"wake-up and return (pread/pwrite)", NVMETRACE_EV_RQ_COMPLETE, NVMETRACE_EV_SYNC_RETURN,
     "completion to user space (wake-up, reap)", kHost | kJoined, 0},
    // The path's hop into nvme_complete_rq from an nvme-tcp event (from NONE:
    // the row of the path that ends there): the transport's completion handed
    // to nvme-core.
    {"handoff to nvme_complete_rq", NVMETRACE_EV_NONE, NVMETRACE_EV_NVME_COMPLETE, "host driver",
     kHost | kJoined, 1},
};

// Stable ids of the stages and components: `report --json` carries them
// beside the names, and `compare` matches rows by them, so that a name is a
// label only and may be reworded.  Every name of kStages and kComponents has
// one (a unit test checks it), plus the report's own "end to end" row.
struct NamedId {
    std::string_view name;
    std::string_view id;
};

inline constexpr NamedId kStageIds[] = {
    {"host block layer", "host.block"},
    {"host driver", "host.driver"},
    {"network and target (not recorded)", "net_target.unrecorded"},
    {"network", "network"},
    {"target driver", "target.driver"},
    {"storage", "storage"},
    {"syscall and file submission (before the block layer)", "host.user.submit"},
    {"file system: direct I/O (before the block layer)", "host.user.fs"},
    {"page cache: a read that missed (before the block layer)", "host.user.pagecache"},
    {"completion to user space (wake-up, reap)", "host.user.complete"},
    {"queued in io-wq", "host.user.iowq"},
};

inline constexpr NamedId kComponentIds[] = {
    {"syscall: io_submit entry to the file", "host.syscall.submit"},
    {"syscall: pread/pwrite entry to the file", "host.sync.submit"},
    {"io_uring: SQE taken to the file", "host.uring.submit"},
    {"io_uring: SQE taken to io-wq", "host.uring.to_iowq"},
    {"queued in io-wq", "host.uring.iowq"},
    {"file submission to the block layer", "host.file.submit"},
    {"syscall: io_submit entry to the file system", "host.syscall.to_fs"},
    {"syscall: pread/pwrite entry to the file system", "host.sync.to_fs"},
    {"io_uring: SQE taken to the file system", "host.uring.to_fs"},
    {"file system: direct I/O to the block layer", "host.fs.submit"},
    {"syscall: pread entry to the page cache", "host.sync.to_pagecache"},
    {"syscall: io_submit entry to the page cache", "host.syscall.to_pagecache"},
    {"io_uring: SQE taken to the page cache", "host.uring.to_pagecache"},
    {"page cache: read miss to the block layer", "host.pagecache.submit"},
    {"passthrough submission to nvme_setup_cmd", "host.passthru.submit"},
    {"host block layer, submission", "host.block.submit"},
    {"host driver, submission", "host.driver.submit"},
    {"host driver, to the NIC (nvme-rdma)", "host.driver.rdma_post"},
    {"network and target (not recorded)", "net_target.unrecorded"},
    {"network: wire and NICs (computed)", "network.wire"},
    {"net+target, to the R2T (not recorded)", "net_target.unrecorded.to_r2t"},
    {"net+target, to the data (not recorded)", "net_target.unrecorded.to_data"},
    {"command posted to send done (RDMA)", "network.rdma.cmd_send_done"},
    {"host driver, R2T to H2C data", "host.driver.r2t_to_h2c"},
    {"net+target, after the R2T (not recorded)", "net_target.unrecorded.after_r2t"},
    {"net+target, after the H2C (not recorded)", "net_target.unrecorded.after_h2c"},
    {"network: target receive path", "network.target.receive"},
    {"network: RDMA READ of data (target)", "network.rdma.read"},
    {"data transfer (RDMA, at the target)", "network.rdma.data"},
    {"target driver, submission", "target.driver.submit"},
    {"network: R2T to H2C data (wire and host)", "network.r2t_to_h2c"},
    {"network: R2T to data (wire and host)", "network.r2t_to_data"},
    {"network: target receive path, H2C data", "network.target.receive_h2c"},
    {"network: target receive path, in-capsule data", "network.target.receive_incapsule"},
    {"storage: target block layer and drive", "storage.target"},
    {"target driver, completion", "target.driver.complete"},
    {"target driver, response (nvmet-rdma)", "target.driver.rdma_response"},
    {"response posted to send done (RDMA)", "network.rdma.rsp_send_done"},
    {"target driver, response to send done", "target.driver.rsp_send_done"},
    {"network: response send done (RDMA)", "network.rdma.rsp_send"},
    {"network (seam)", "network.seam"},
    {"network: host receive path", "network.host.receive"},
    {"host driver, completion", "host.driver.complete"},
    {"host block layer, completion", "host.block.complete"},
    {"completion posted to the aio context", "host.aio.complete"},
    {"wake-up and reap (io_getevents)", "host.aio.reap"},
    {"completion to the CQE (io_uring task work)", "host.uring.cqe"},
    {"wake-up and reap (io_uring_enter)", "host.uring.reap"},
    {"wake-up and return (pread/pwrite)", "host.sync.return"},
    {"handoff to nvme_complete_rq", "host.driver.handoff"},
    {"end to end", "e2e"},
};

// The id of a stage or component row by its name; a merged row ("a + b")
// gets "id_a+id_b".  "" for a name no table has.
std::string stage_id(std::string_view name);
std::string component_id(std::string_view name);

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
    EventMask missing_mask = 0;        // slots of the missing boundaries

    bool complete() const { return missing_mask == 0; }
};

// The path of a command of `view` that has the events in `present` (slot
// bits), as rows of `table`: leading optional events it lacks are skipped,
// and it ends early where only optional events it lacks follow; *missing gets the required
// boundaries it went through without a record.  Throws std::logic_error if the table has no path
// for it, or names an unknown event or stage.
std::vector<const ComponentDef*> path_of(View view, EventMask present,
                                         std::span<const ComponentDef> table,
                                         EventMask* missing = nullptr);

// The events of `present` that shape a command's layout: those on its path.
// Commands with the same view and key have the same layout.
EventMask layout_key(View view, EventMask present, std::span<const ComponentDef> table);

// The layout of a command of `view` with the events `present` (a
// layout_key()).
Layout layout_for(View view, EventMask present, std::span<const ComponentDef> table);

// The inner boundaries of a view's path when only its required events are
// recorded (slot bits): all but its first and last event.
EventMask interior_boundaries(View view, std::span<const ComponentDef> table);

// The required boundaries on cmd's path that cmd has no record of (slot
// bits); a command missing its view's first or last event never reaches this
// point (the Assembler counts it as incomplete).
EventMask missing_boundaries(const Command& cmd, std::span<const ComponentDef> table);

// What a group's end to end runs from and to, said plainly: whether it is
// the span user space sees (a system call's entry to the return that hands
// the completion back) or only part of it, and which part is not recorded.
struct Span {
    std::string from, to;     // "io_submit() entry", "the block layer's completion"
    std::string interface;    // "aio", "io_uring", "io_uring, io-wq", ...; "" if none
    bool user_space = false;  // from a system call's entry to the return that reaps
    bool reap_ring = false;   // io_uring: ends where the kernel saw the CQE taken from the
                              // mapped ring (the task's next io_uring_enter() entry)
    std::string note;         // what is not recorded, "" when user_space
};
Span span_of(const Layout& layout, SubmitPath path, bool reap_unseen, bool reap_ring = false);

// A stage's or component's name where the target is SPDK's: its records are
// of the kernel target's events that share their place in the path
// (Documentation/spdk.md), so the rows are the same, named for what they
// measure there ("storage (SPDK bdev, drive)").  Other names are returned as
// they are.  The ids (stage_id(), component_id()) stay the kernel's rows'.
std::string spdk_target_name(std::string_view name);
// A target-only span's ends where the target is SPDK's.
void spdk_target_span(Span& span);

// The layout of `view` with only required events, those in `missing_mask`
// merged away.
Layout make_layout(View view, EventMask missing_mask, std::span<const ComponentDef> table);

// The first and last events (slots) of a view's path when it has only its
// required events (host: block_bio_queue and block_rq_complete): where every
// command of the view starts and ends without optional events around them.
struct ViewEnds {
    int first = -1, last = -1;
};
ViewEnds required_ends_of(View view);

}  // namespace nvmetrace
