/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * nvmetrace — user-space ABI of the nvmetrace module.
 *
 * Shared by the kernel module and the nvmetrace tool; included as
 * <linux/nvmetrace.h>.  Only fixed-width types, explicit padding, and a
 * static size check after every struct (see the end of this file).
 *
 * Two channels:
 *   - control: the generic netlink family NVMETRACE_GENL_NAME (commands and
 *     attributes below);
 *   - data: /dev/nvmetrace, mmap()ed once per possible CPU.  Each CPU's ring is
 *     one mapping of nvmetrace_status.map_size bytes at file offset
 *     cpu * map_size: a control page (struct nvmetrace_ring_ctrl) followed by
 *     nr_recs fixed-size records (struct nvmetrace_rec).  The ring protocol is
 *     described in Documentation/ring.md and kmod/ring_core.h.
 *
 * All timestamps are CLOCK_MONOTONIC nanoseconds (ktime_get_ns()).
 */
#ifndef _UAPI_LINUX_NVMETRACE_H
#define _UAPI_LINUX_NVMETRACE_H

#include <linux/types.h>

#define NVMETRACE_ABI_VERSION		8
#define NVMETRACE_DEVICE_NAME		"nvmetrace"	/* /dev/nvmetrace */
#define NVMETRACE_GENL_NAME		"nvmetrace"
#define NVMETRACE_GENL_VERSION		1

/* ------------------------------------------------------------------ ring */

#define NVMETRACE_RING_MAGIC		0x4e565452u	/* "NVTR" */
/*
 * 2: NVMETRACE_EV_GAP markers in the records, the pending drop run in the
 * control page (gap_recs, gap_first, gap_last)
 */
#define NVMETRACE_RING_VERSION		2
/* oldest ring version a reader of NVMETRACE_RING_VERSION can still read */
#define NVMETRACE_RING_COMPAT_VERSION	2
#define NVMETRACE_RING_CTRL_SIZE	4096
#define NVMETRACE_CACHELINE		64

/*
 * The control page at the head of each per-CPU ring.
 *
 * Line 0 is written once by the kernel before the ring is published and never
 * changes.  Line 1 belongs to the producer (the kernel): it writes head with
 * store-release after the record is complete, and lost and the gap_* fields
 * with plain stores.  gap_* describe the drop run that no NVMETRACE_EV_GAP
 * record covers yet (gap_recs 0: none); they are stable only while nothing
 * records (after STOP), when a reader may turn them into the missing marker.
 * Line 2 belongs to the consumer (user space): it writes tail with
 * store-release after it has copied the records out.  The kernel never trusts
 * anything user space writes here: it keeps its own copy of head, size and
 * mask, and treats a tail that makes no sense as "ring full".
 */
struct nvmetrace_ring_ctrl {
	/* line 0: description, read-only for user space */
	__u32 magic;		/* NVMETRACE_RING_MAGIC */
	__u16 version;		/* NVMETRACE_RING_VERSION of the writer */
	__u16 compat_version;	/* oldest reader version that can read it */
	__u32 size;		/* sizeof(struct nvmetrace_ring_ctrl) */
	__u32 rec_size;		/* sizeof(struct nvmetrace_rec) */
	__u32 nr_recs;		/* records in the ring, a power of two */
	__u32 cpu;		/* CPU this ring belongs to */
	__u64 data_offset;	/* bytes from the start of the mapping to record 0 */
	__u64 map_size;		/* bytes of this ring's mapping */
	__u8 __pad0[24];

	/* line 1: producer (kernel) */
	__u64 head;		/* records ever committed; store-release */
	__u64 lost;		/* records dropped because the ring was full */
	__u64 gap_recs;		/* records dropped since the last GAP marker */
	__u64 gap_first;	/* ts of the first of them */
	__u64 gap_last;		/* ts of the last of them */
	__u8 __pad1[24];

	/* line 2: consumer (user space) */
	__u64 tail;		/* records ever consumed; store-release */
	__u8 __pad2[56];

	__u8 __reserved[NVMETRACE_RING_CTRL_SIZE - 3 * NVMETRACE_CACHELINE];
};

/* ------------------------------------------------------------- records */

/*
 * Events.  Host events are numbered from 1 (block layer and nvme core, then
 * from 16 the file/syscall level above the block layer), target events from
 * 32, transport events from 64 (nvme-tcp host), 96 (nvmet-tcp), 128
 * (nvme-rdma) and 160 (nvmet-rdma), the ring's own from 192.  A number is
 * never reused for another meaning.
 */
enum nvmetrace_event {
	NVMETRACE_EV_NONE		= 0,

	/* host block layer and nvme core */
	NVMETRACE_EV_BIO_QUEUE		= 1,	/* block_bio_queue / block_io_start */
	NVMETRACE_EV_RQ_INSERT		= 2,	/* block_rq_insert */
	NVMETRACE_EV_RQ_ISSUE		= 3,	/* block_rq_issue */
	NVMETRACE_EV_NVME_SETUP		= 4,	/* nvme_setup_cmd */
	NVMETRACE_EV_NVME_COMPLETE	= 5,	/* nvme_complete_rq */
	NVMETRACE_EV_RQ_COMPLETE	= 6,	/* block_rq_complete */

	/*
	 * Host, above the block layer: the span user space sees (libaio on a
	 * block device opened with O_DIRECT).  They carry the command's dev
	 * (the whole disk) and starting LBA like block_bio_queue, and are
	 * sampled by the same predicate.
	 */
	/* io_submit() entry: never a record of its own; FILE_SUBMIT's aux says when */
	NVMETRACE_EV_SYSCALL_SUBMIT	= 16,
	/* blkdev_read_iter/blkdev_write_iter (O_DIRECT); aux: see NVMETRACE_UAUX_* */
	NVMETRACE_EV_FILE_SUBMIT	= 17,
	/* aio_complete_rw: the event is posted to the aio context; aux: result */
	NVMETRACE_EV_AIO_COMPLETE	= 19,
	/* io_getevents() returned this command's event; aux: see NVMETRACE_UAUX_* */
	NVMETRACE_EV_AIO_REAP		= 20,
	/*
	 * io_uring: an io-wq worker submits the request to the file (recorded
	 * right after its FILE_SUBMIT); aux: when it was queued to io-wq
	 */
	NVMETRACE_EV_URING_WQ		= 21,
	/* io_uring_complete: the CQE is posted; aux: the result (s64) */
	NVMETRACE_EV_URING_CQE		= 22,
	/* io_uring_enter() with GETEVENTS returned after the CQE; aux: below */
	NVMETRACE_EV_URING_REAP		= 23,
	/*
	 * io_uring: the kernel took the SQE (io_uring_enter() entry, or the
	 * SQPOLL thread): never a record of its own; FILE_SUBMIT's aux says when
	 */
	NVMETRACE_EV_URING_SUBMIT	= 24,
	/*
	 * A positioned synchronous read or write (pread64, pwrite64, preadv,
	 * pwritev, preadv2, pwritev2) of an O_DIRECT block device: the system
	 * call's entry, never a record of its own (FILE_SUBMIT's aux says
	 * when); and its return, with len the call's result (bytes) and aux
	 * the thread id (see NVMETRACE_UAUX_*)
	 */
	NVMETRACE_EV_SYNC_SUBMIT	= 25,
	NVMETRACE_EV_SYNC_RETURN	= 26,
	/*
	 * A file on a file system (O_DIRECT through iomap: ext4, XFS): the file
	 * system's direct I/O took the read or write (__iomap_dio_rw).  Never a
	 * record of its own: the FILE_SUBMIT with NVMETRACE_REC_FS, written at
	 * the command's bio, says when (its len)
	 */
	NVMETRACE_EV_FS_SUBMIT		= 27,
	/*
	 * A buffered read of such a file whose pages the page cache missed
	 * (pread64, preadv, preadv2, aio, io_uring): the page cache took it
	 * (filemap_read).
	 * Never a record of its own: the FILE_SUBMIT with NVMETRACE_REC_FS |
	 * NVMETRACE_REC_PAGECACHE, written at the bio that fills the pages the
	 * call asked for, says when (its len; 0: not seen)
	 */
	NVMETRACE_EV_PAGECACHE_READ	= 28,

	/* target: nvmet core and its block backend */
	NVMETRACE_EV_NVMET_INIT		= 32,	/* nvmet_req_init */
	NVMETRACE_EV_NVMET_EXEC		= 33,	/* nvmet_bdev_execute_rw */
	NVMETRACE_EV_NVMET_BIO_DONE	= 34,	/* nvmet_bio_done */
	NVMETRACE_EV_NVMET_COMPLETE	= 35,	/* nvmet_req_complete */

	/*
	 * nvme-tcp host (kmod/probes/nvme_tcp.c has the details).  Several H2C sends,
	 * R2Ts and C2H PDUs may be recorded for one command.
	 */
	NVMETRACE_EV_TCP_CMD_SEND	= 64,	/* command PDU handed to the socket */
	NVMETRACE_EV_TCP_H2C_SEND	= 65,	/* H2C data PDU handed to the socket; aux: offset */
	NVMETRACE_EV_TCP_R2T_RECV	= 66,	/* R2T PDU received; aux: r2t offset */
	NVMETRACE_EV_TCP_C2H_RECV	= 67,	/* C2H data PDU received; aux: see below */
	NVMETRACE_EV_TCP_RSP_RECV	= 68,	/* response capsule received */

	/*
	 * nvmet-tcp target (kmod/probes/nvmet_tcp.c).  All of them
	 * come before nvmet_bdev_execute_rw: nvmet-tcp's send side after
	 * nvmet_req_complete has no function of its own in both kernels.
	 */
	NVMETRACE_EV_TCPT_CMD_RECV	= 96,	/* command capsule arrived; aux: see below */
	NVMETRACE_EV_TCPT_R2T_SEND	= 97,	/* R2T queued for sending; aux: r2t offset */
	NVMETRACE_EV_TCPT_H2C_RECV	= 98,	/* H2C data PDU header received; aux: below */
	NVMETRACE_EV_TCPT_DATA_RECV	= 99,	/* in-capsule data follows; aux: its length */

	/*
	 * nvme-rdma host (kmod/probes/nvme_rdma.c).  The send completion may come
	 * before or after the response.
	 */
	NVMETRACE_EV_RDMA_POST_SEND	= 128,	/* command capsule posted (nvme_rdma_post_send) */
	NVMETRACE_EV_RDMA_SEND_DONE	= 129,	/* its send completed (nvme_rdma_send_done) */
	NVMETRACE_EV_RDMA_RECV_DONE	= 130,	/* response received (nvme_rdma_recv_done) */
	NVMETRACE_EV_RDMA_COMPLETE	= 131,	/* nvme_rdma_complete_rq */

	/* nvmet-rdma target (kmod/probes/nvmet_rdma.c) */
	NVMETRACE_EV_RDMAT_RECV		= 160,	/* command capsule received (nvmet_rdma_recv_done) */
	NVMETRACE_EV_RDMAT_READ_DONE	= 161,	/* RDMA READ of a write's data done */
	NVMETRACE_EV_RDMAT_RSP_POST	= 162,	/* response (RDMA WRITE of read data + SEND) posted */
	NVMETRACE_EV_RDMAT_SEND_DONE	= 163,	/* response send completed */

	/*
	 * The ring's own records (kmod/ring_core.h).  GAP, written by the
	 * ring, not by a hook: the records of one drop run (the ring was full)
	 * are gone, and this marker is the first record after them.  ts: the
	 * last dropped record's time; lba: the first one's; aux: how many were
	 * dropped; dev: the ring's CPU; every other field 0 (Documentation/ring.md).
	 */
	NVMETRACE_EV_GAP		= 192,

	/*
	 * SPDK's NVMe driver on the host (spdk_nvme_perf, or any app on it),
	 * written by the recorder (record --spdk-host), never by the module:
	 * over TCP from SPDK's trace, over RDMA from two uprobes; flags has
	 * NVMETRACE_REC_SPDK.  SUBMIT: the command handed to its queue pair
	 * (NVME_TCP_SUBMIT; spdk_rdma_provider_qp_queue_send_wrs); COMPLETE:
	 * its response processed, before the app's callback
	 * (NVME_TCP_COMPLETE; nvme_rdma_req_complete), aux the NVMe status.
	 */
	NVMETRACE_EV_SPDK_SUBMIT	= 208,
	NVMETRACE_EV_SPDK_COMPLETE	= 209,

	NVMETRACE_EV_MAX		= 255,
};

/* nvmetrace_rec.flags */
#define NVMETRACE_REC_WRITE		(1u << 0)	/* data moves host -> target */
#define NVMETRACE_REC_HAS_CID		(1u << 1)	/* cid is the NVMe command id */
#define NVMETRACE_REC_HAS_QID		(1u << 2)	/* qid is known */
#define NVMETRACE_REC_LEN_BLOCKS	(1u << 3)	/* len counts logical blocks, not bytes */
#define NVMETRACE_REC_PASSTHRU		(1u << 4)	/* a passthrough command: no bio */
#define NVMETRACE_REC_SPDK		(1u << 5)	/* from an SPDK app's trace, not the module */
/*
 * FILE_SUBMIT of a file on a file system: written at the command's first
 * sampled bio (block_bio_queue), len the nanoseconds since the file system
 * took the I/O (NVMETRACE_EV_FS_SUBMIT; saturated at 2^32 - 1), not bytes
 */
#define NVMETRACE_REC_FS		(1u << 6)
/*
 * with NVMETRACE_REC_FS: the FILE_SUBMIT of a buffered read's page-cache
 * miss, len the nanoseconds since the page cache took the read
 * (NVMETRACE_EV_PAGECACHE_READ), not since a file system's direct I/O
 */
#define NVMETRACE_REC_PAGECACHE		(1u << 7)

/*
 * aux of NVMETRACE_EV_TCP_C2H_RECV: the PDU's data offset in the low 32 bits,
 * its NVMe/TCP header flags (NVME_TCP_F_DATA_LAST 0x04, _SUCCESS 0x08) above.
 */
#define NVMETRACE_C2H_AUX_FLAGS_SHIFT	32
#define NVMETRACE_C2H_F_DATA_SUCCESS	0x08u

/*
 * aux of NVMETRACE_EV_TCPT_CMD_RECV: the CLOCK_MONOTONIC ns at which data last
 * arrived on the queue's socket (its sk_data_ready callback) before nvmet-tcp
 * read the command; the record itself is written just after nvmet_req_init.
 * aux of NVMETRACE_EV_TCPT_H2C_RECV: the PDU's data offset in the low 32
 * bits, its data length above.
 */
#define NVMETRACE_H2C_AUX_LEN_SHIFT	32

#define NVMETRACE_NO_LBA		(~(__u64)0)

/*
 * aux of NVMETRACE_EV_FILE_SUBMIT and _AIO_REAP: the thread id (kernel pid)
 * in the low 32 bits; above them FILE_SUBMIT holds the nanoseconds since the
 * system call's entry (io_submit(), or pread64() ... pwritev2()) (0: not
 * known, e.g. another task's entry took its
 * slot; saturated at 2^32 - 1), AIO_REAP the number of events that
 * io_getevents() returned.
 */
#define NVMETRACE_UAUX_PID(aux)		((__u32)(aux))
#define NVMETRACE_UAUX_HI(aux)		((__u32)((aux) >> 32))

/*
 * NVMETRACE_EV_FILE_SUBMIT: cid names the interface that submitted the
 * command (0: none of these, e.g. read(), or the kernel's own), tag its io_uring path
 * (NVMETRACE_URING_*: neither bit for the inline issue in io_uring_enter());
 * aux holds the nanoseconds since the kernel took the submission (the
 * io_submit(), pread64() ... pwritev2() or io_uring_enter() entry, or the
 * SQE taken by the SQPOLL thread).
 */
#define NVMETRACE_IFACE_AIO		1u	/* io_submit() */
#define NVMETRACE_IFACE_URING		2u	/* io_uring */
#define NVMETRACE_IFACE_SYNC		3u	/* pread64() ... pwritev2() */
#define NVMETRACE_URING_IOWQ		(1u << 0)	/* issued by an io-wq worker */
#define NVMETRACE_URING_SQPOLL		(1u << 1)	/* taken by the SQPOLL thread */
#define NVMETRACE_URING_CMD		(1u << 2)	/* NVMe passthrough, IORING_OP_URING_CMD */

/*
 * aux of NVMETRACE_EV_BIO_QUEUE: the queueing thread's id (low 32 bits), and
 * NVMETRACE_BIO_KTHREAD for a kernel thread (write-back, or another kernel
 * user of the disk).  0 in recordings made before it.
 */
#define NVMETRACE_BIO_KTHREAD		(1ull << 32)

/*
 * aux of NVMETRACE_EV_URING_REAP: the thread id in the low 32 bits, and
 * flags: LATE, the CQE was posted before the io_uring_enter() call that
 * returned began (user space may have taken it from the mapped ring before,
 * or it belongs to another ring than the call's: the return is not its
 * reap); NOWAIT, the call did not wait for completions (min_complete 0: the
 * return is not its reap either; written by modules before RING existed);
 * RING, user space took the CQE from the mapped ring without a system call:
 * at this io_uring_enter() entry the ring's CQ head had passed it.  With
 * RING, len holds the nanoseconds before the record's time since when the
 * CQE was known to be still in the ring (the task's last io_uring_enter()
 * return, or the CQE's posting if later), saturated at 2^32 - 1: user space
 * took it within [ts - len, ts].
 */
#define NVMETRACE_URING_REAP_LATE	(1ull << 32)
#define NVMETRACE_URING_REAP_NOWAIT	(1ull << 33)
#define NVMETRACE_URING_REAP_RING	(1ull << 34)

/* tag of NVMETRACE_EV_URING_CQE: posted by an io thread, no reap will be recorded */
#define NVMETRACE_URING_CQE_NO_REAP	(1u << 0)

/*
 * The premapped-buffer test pool: mmap() of /dev/nvmetrace at this offset maps
 * the whole pool (pool_nr buffers of pool_buf_kb KiB each, module parameters,
 * read in /sys/module/nvmetrace/parameters/), buffer i at i * buffer size.
 * The mapping is page-backed, so it can be registered as io_uring fixed buffers.
 */
#define NVMETRACE_POOL_MMAP_OFFSET	(1ULL << 40)

/*
 * nvmetrace_rec.dev of a hidden disk (an NVMe multipath path disk such as
 * nvme0c0n1, which has no dev_t): major 0, minor = the low 20 bits of its
 * disk sequence number (sysfs attribute "diskseq").
 */
#define NVMETRACE_DEV_HIDDEN(diskseq)	((__u32)((diskseq) & 0xfffffu))

/*
 * One sample: one hook firing for one sampled command.  A command's records
 * share (dev, qid, tag) on the host until nvme_setup_cmd names its command id,
 * and (cntlid, qid, cid) on the target; user space joins them.
 */
struct nvmetrace_rec {
	__u64 ts;		/* CLOCK_MONOTONIC ns */
	__u64 lba;		/* starting LBA in namespace blocks, or NVMETRACE_NO_LBA */
	__u64 aux;		/* event-specific: status on completions, ... */
	__u32 dev;		/* block device, kernel dev_t encoding (major << 20 | minor);
				 * see NVMETRACE_DEV_HIDDEN */
	__u32 len;		/* data bytes */
	__u16 event;		/* enum nvmetrace_event */
	__u16 qid;		/* NVMe queue id (0 = admin) */
	__u16 cid;		/* NVMe command id (with NVMETRACE_REC_HAS_CID) */
	__u16 tag;		/* block-layer tag on the host */
	__u16 cntlid;		/* NVMe controller id where the hook knows it */
	__u8 opcode;		/* NVMe opcode (nvme_cmd_read = 0x02, write = 0x01, ...) */
	__u8 flags;		/* NVMETRACE_REC_* */
	__u32 seq;		/* per-ring sequence number of this record */
};

/* ------------------------------------------------------ generic netlink */

enum nvmetrace_genl_cmd {
	NVMETRACE_CMD_UNSPEC,
	NVMETRACE_CMD_GET_VERSION,	/* -> ABI_VERSION, MODULE_VERSION, RING_VERSION */
	NVMETRACE_CMD_GET_STATUS,	/* -> STATE ... LOST (see attributes) */
	NVMETRACE_CMD_START,		/* ROLE, SAMPLE, SEED, DEVS -> STATE */
	NVMETRACE_CMD_STOP,		/* -> STATE */
	NVMETRACE_CMD_GET_HOOKS,	/* dump: one HOOK nest per hook */
	NVMETRACE_CMD_POOL_GET,		/* -> POOL: the premapped-buffer test pool */
	NVMETRACE_CMD_DMA_COST,		/* DEV -> DMA: dma map/unmap cost per size */
	NVMETRACE_CMD_ADMIT,		/* DEVS -> DEVS: devices added to a recording (ABI 5) */
	NVMETRACE_CMD_LAYOUT,		/* LAYOUT: a transport module loaded since START (ABI 6) */
	__NVMETRACE_CMD_MAX,
};
#define NVMETRACE_CMD_MAX (__NVMETRACE_CMD_MAX - 1)

enum nvmetrace_genl_attr {
	NVMETRACE_A_UNSPEC,
	NVMETRACE_A_ABI_VERSION,	/* u32 */
	NVMETRACE_A_MODULE_VERSION,	/* string */
	NVMETRACE_A_RING_VERSION,	/* u32 */
	NVMETRACE_A_STATE,		/* u32, enum nvmetrace_state */
	NVMETRACE_A_NR_RINGS,		/* u32: rings = possible CPUs (nr_cpu_ids) */
	NVMETRACE_A_RING_RECS,		/* u32: records per ring */
	NVMETRACE_A_RING_MAP_SIZE,	/* u64: bytes per ring mapping */
	NVMETRACE_A_REC_SIZE,		/* u32 */
	NVMETRACE_A_RECORDS,		/* u64: records committed, all rings */
	NVMETRACE_A_LOST,		/* u64: records dropped, all rings */
	NVMETRACE_A_ROLE,		/* u32, NVMETRACE_ROLE_* mask */
	NVMETRACE_A_SAMPLE,		/* u32: 1-of-N, N >= 1 */
	NVMETRACE_A_SEED,		/* u64: sampling hash seed */
	NVMETRACE_A_DEVS,		/* nest of NVMETRACE_A_DEV */
	NVMETRACE_A_DEV,		/* u32: dev_t (kernel encoding) */
	NVMETRACE_A_HOOK,		/* nest: HOOK_NAME, HOOK_KIND, HOOK_STATE, HOOK_ERROR, HOOK_HITS */
	NVMETRACE_A_HOOK_NAME,		/* string */
	NVMETRACE_A_HOOK_KIND,		/* u32, enum nvmetrace_hook_kind */
	NVMETRACE_A_HOOK_STATE,		/* u32, enum nvmetrace_hook_state */
	NVMETRACE_A_HOOK_ERROR,		/* s32: errno of the last failed attach */
	NVMETRACE_A_HOOK_HITS,		/* u64 */
	NVMETRACE_A_FLAGS,		/* u32: NVMETRACE_START_* (START only) */
	NVMETRACE_A_PAD,
	NVMETRACE_A_LAYOUT,		/* nest of NVMETRACE_L_*: private struct offsets */
	NVMETRACE_A_POOL,		/* nest of NVMETRACE_P_*: buffer pool state */
	NVMETRACE_A_DMA,		/* nest of NVMETRACE_D_*: dma mapping cost */
	NVMETRACE_A_FD,			/* u32: the sender's fd open for reading on DEV (ABI 7) */
	__NVMETRACE_A_MAX,
};
#define NVMETRACE_A_MAX (__NVMETRACE_A_MAX - 1)

/*
 * Offsets of the private fields the hooks read, in bytes, as user space found
 * them in the running kernel's BTF (/sys/kernel/btf/<module>, or vmlinux).
 * Each is a u32 inside NVMETRACE_A_LAYOUT, in groups: the nvmet group
 * (REQ_CMD .. CTRL_CNTLID) is needed by the target role, the nvme-tcp group
 * by the nvme-tcp hooks, the vmlinux group by the aio iocb identity; a group
 * is taken whole or not at all.
 */
enum nvmetrace_layout_attr {
	NVMETRACE_L_UNSPEC,
	NVMETRACE_L_REQ_CMD,		/* struct nvmet_req.cmd */
	NVMETRACE_L_REQ_CQE,		/* struct nvmet_req.cqe */
	NVMETRACE_L_REQ_SQ,		/* struct nvmet_req.sq */
	NVMETRACE_L_SQ_CTRL,		/* struct nvmet_sq.ctrl */
	NVMETRACE_L_SQ_QID,		/* struct nvmet_sq.qid (u16) */
	NVMETRACE_L_CTRL_CNTLID,	/* struct nvmet_ctrl.cntlid (u16) */

	/*
	 * nvme-tcp host (/sys/kernel/btf/nvme_tcp): all of them, or none.
	 * Without them the nvme-tcp hooks are refused, the others still run.
	 */
	NVMETRACE_L_TCP_QUEUE_REQUEST,	/* struct nvme_tcp_queue.request */
	NVMETRACE_L_TCP_QUEUE_SEND_LIST, /* .send_list (list_head) */
	NVMETRACE_L_TCP_QUEUE_REQ_LIST,	/* .req_list (llist_head) */
	NVMETRACE_L_TCP_QUEUE_PDU,	/* .pdu (void *) */
	NVMETRACE_L_TCP_QUEUE_PDU_REMAINING, /* .pdu_remaining (int) */
	NVMETRACE_L_TCP_QUEUE_PDU_OFFSET, /* .pdu_offset (int) */
	NVMETRACE_L_TCP_QUEUE_DATA_REMAINING, /* .data_remaining (size_t) */
	NVMETRACE_L_TCP_QUEUE_DDGST_REMAINING, /* .ddgst_remaining (size_t) */
	NVMETRACE_L_TCP_QUEUE_DATA_DIGEST, /* .data_digest (bool) */
	NVMETRACE_L_TCP_QUEUE_CTRL,	/* .ctrl */
	NVMETRACE_L_TCP_QUEUE_SIZE,	/* sizeof(struct nvme_tcp_queue) */
	NVMETRACE_L_TCP_CTRL_QUEUES,	/* struct nvme_tcp_ctrl.queues */
	NVMETRACE_L_TCP_CTRL_TAG_SET,	/* struct nvme_tcp_ctrl.tag_set */
	NVMETRACE_L_TCP_REQ_ENTRY,	/* struct nvme_tcp_request.entry (list_head) */
	NVMETRACE_L_TCP_REQ_LENTRY,	/* .lentry (llist_node) */
	NVMETRACE_L_TCP_REQ_STATE,	/* .state (enum, 4 bytes) */
	NVMETRACE_L_TCP_REQ_OFFSET,	/* .offset (size_t) */
	NVMETRACE_L_TCP_REQ_QUEUE,	/* .queue (struct nvme_tcp_queue *) */
	NVMETRACE_L_TCP_NVME_REQ_GENCTR, /* struct nvme_request.genctr (u8) */
	NVMETRACE_L_TCP_LAST		= NVMETRACE_L_TCP_NVME_REQ_GENCTR,

	/* further groups start at fixed numbers */
	NVMETRACE_L_NVMET_TCP_BASE	= 64,	/* nvmet-tcp target group */
	NVMETRACE_L_NVME_RDMA_BASE	= 96,	/* nvme-rdma host group */

	/*
	 * nvmet-tcp target (/sys/kernel/btf/nvmet_tcp): all of them, or none.
	 * Without them the nvmet-tcp hooks are refused, the others still run.
	 */
	NVMETRACE_L_NVMET_TCP_CMD_QUEUE	= NVMETRACE_L_NVMET_TCP_BASE, /* struct nvmet_tcp_cmd.queue */
	NVMETRACE_L_NVMET_TCP_CMD_REQ,	/* .req (struct nvmet_req) */
	NVMETRACE_L_NVMET_TCP_CMD_RBYTES_DONE, /* .rbytes_done (u32) */
	NVMETRACE_L_NVMET_TCP_CMD_PDU_LEN, /* .pdu_len (u32) */
	NVMETRACE_L_NVMET_TCP_CMD_SIZE,	/* sizeof(struct nvmet_tcp_cmd) */
	NVMETRACE_L_NVMET_TCP_QUEUE_PDU, /* struct nvmet_tcp_queue.pdu */
	NVMETRACE_L_NVMET_TCP_QUEUE_SIZE, /* sizeof(struct nvmet_tcp_queue) */
	NVMETRACE_L_NVMET_TCP_REQ_TRANSFER_LEN, /* struct nvmet_req.transfer_len (size_t) */
	NVMETRACE_L_NVMET_TCP_LAST	= NVMETRACE_L_NVMET_TCP_REQ_TRANSFER_LEN,

	/*
	 * nvme-rdma host (/sys/kernel/btf/nvme_rdma, which also carries the
	 * RDMA core's structs it uses): all of them, or none.
	 */
	NVMETRACE_L_RDMA_WC_WR_CQE	= NVMETRACE_L_NVME_RDMA_BASE, /* struct ib_wc.wr_cqe */
	NVMETRACE_L_RDMA_WC_STATUS,	/* struct ib_wc.status (enum, 4 bytes) */
	NVMETRACE_L_RDMA_WC_QP,		/* struct ib_wc.qp */
	NVMETRACE_L_RDMA_QP_CONTEXT,	/* struct ib_qp.qp_context */
	NVMETRACE_L_RDMA_QE_CQE,	/* struct nvme_rdma_qe.cqe (struct ib_cqe) */
	NVMETRACE_L_RDMA_QE_DATA,	/* struct nvme_rdma_qe.data (void *) */
	NVMETRACE_L_RDMA_REQ_SQE,	/* struct nvme_rdma_request.sqe */
	NVMETRACE_L_RDMA_QUEUE_CTRL,	/* struct nvme_rdma_queue.ctrl */
	NVMETRACE_L_RDMA_QUEUE_SIZE,	/* sizeof(struct nvme_rdma_queue) */
	NVMETRACE_L_RDMA_CTRL_QUEUES,	/* struct nvme_rdma_ctrl.queues */
	NVMETRACE_L_RDMA_CTRL_TAG_SET,	/* struct nvme_rdma_ctrl.tag_set */
	NVMETRACE_L_RDMA_NVME_REQ_GENCTR, /* struct nvme_request.genctr (u8) */
	NVMETRACE_L_RDMA_LAST		= NVMETRACE_L_RDMA_NVME_REQ_GENCTR,

	NVMETRACE_L_NVMET_RDMA_BASE	= 128,	/* nvmet-rdma target group */

	/* nvmet-rdma target (/sys/kernel/btf/nvmet_rdma): all, or none */
	NVMETRACE_L_RDMAT_WC_WR_CQE	= NVMETRACE_L_NVMET_RDMA_BASE, /* struct ib_wc.wr_cqe */
	NVMETRACE_L_RDMAT_WC_STATUS,	/* struct ib_wc.status (enum, 4 bytes) */
	NVMETRACE_L_RDMAT_WC_QP,	/* struct ib_wc.qp */
	NVMETRACE_L_RDMAT_QP_CONTEXT,	/* struct ib_qp.qp_context */
	NVMETRACE_L_RDMAT_CMD_CQE,	/* struct nvmet_rdma_cmd.cqe */
	NVMETRACE_L_RDMAT_CMD_NVME_CMD,	/* struct nvmet_rdma_cmd.nvme_cmd */
	NVMETRACE_L_RDMAT_QUEUE_NVME_SQ, /* struct nvmet_rdma_queue.nvme_sq (struct nvmet_sq) */
	NVMETRACE_L_RDMAT_RSP_SEND_CQE,	/* struct nvmet_rdma_rsp.send_cqe */
	NVMETRACE_L_RDMAT_RSP_READ_CQE,	/* struct nvmet_rdma_rsp.read_cqe */
	NVMETRACE_L_RDMAT_RSP_REQ,	/* struct nvmet_rdma_rsp.req (struct nvmet_req) */

	/*
	 * The identity of each module a group's offsets come from: the
	 * CRC-32C (Castagnoli; initial and final value ~0) of its BTF as
	 * /sys/kernel/btf/<module> exposes it, a u32, given only with that
	 * module's group.  When the module is loaded again during the
	 * recording, the hooks that read its layout re-attach only if the new
	 * module's BTF has the same identity; else they stay off
	 * (NVMETRACE_HOOK_STALE) until NVMETRACE_CMD_LAYOUT gives its new
	 * layout.  Absent: they stay off after any reload.
	 */
	NVMETRACE_L_BTF_BASE		= 144,
	NVMETRACE_L_BTF_NVMET		= NVMETRACE_L_BTF_BASE, /* nvmet (REQ_CMD .. CTRL_CNTLID) */
	NVMETRACE_L_BTF_NVME_TCP,	/* nvme_tcp (the NVMETRACE_L_TCP_* group) */
	NVMETRACE_L_BTF_NVMET_TCP,	/* nvmet_tcp (NVMETRACE_L_NVMET_TCP_*) */
	NVMETRACE_L_BTF_NVME_RDMA,	/* nvme_rdma (NVMETRACE_L_RDMA_*) */
	NVMETRACE_L_BTF_NVMET_RDMA,	/* nvmet_rdma (NVMETRACE_L_RDMAT_*) */
	NVMETRACE_L_BTF_LAST		= NVMETRACE_L_BTF_NVMET_RDMA,

	/*
	 * The kernel's own (/sys/kernel/btf/vmlinux): fs/aio.c's private
	 * struct aio_kiocb, whose kiocb a block device's read/write gets
	 * during io_submit() and whose io_event names the user's iocb: both,
	 * or neither.  Without them FILE_SUBMIT is recorded without the iocb,
	 * so no AIO_REAP.  No identity: vmlinux is never loaded again.
	 */
	NVMETRACE_L_VMLINUX_BASE	= 152,
	NVMETRACE_L_AIO_KIOCB_RW	= NVMETRACE_L_VMLINUX_BASE, /* struct aio_kiocb.rw (struct kiocb) */
	NVMETRACE_L_AIO_KIOCB_RES,	/* struct aio_kiocb.ki_res (struct io_event) */
	NVMETRACE_L_VMLINUX_LAST	= NVMETRACE_L_AIO_KIOCB_RES,

	/*
	 * The kernel's own, a group apart (ABI 8; kernels that have it, 7.3
	 * on): iomap's struct iomap_dio_simple, the fast path of a small
	 * O_DIRECT read, whose bio is a member of it beside the kiocb: both,
	 * or neither.  Without them such a read starts at its bio.
	 */
	NVMETRACE_L_DIO_SIMPLE_BASE	= 154,
	NVMETRACE_L_DIO_SIMPLE_IOCB	= NVMETRACE_L_DIO_SIMPLE_BASE, /* struct iomap_dio_simple.iocb */
	NVMETRACE_L_DIO_SIMPLE_BIO,	/* struct iomap_dio_simple.bio (struct bio) */
	NVMETRACE_L_DIO_SIMPLE_LAST	= NVMETRACE_L_DIO_SIMPLE_BIO,

	__NVMETRACE_L_MAX		= 160,
};
#define NVMETRACE_L_MAX (__NVMETRACE_L_MAX - 1)

/*
 * NVMETRACE_CMD_POOL_GET.  Request: optionally NVMETRACE_A_FD (and
 * NVMETRACE_A_DEV), a block device whose queue's own blk_iobuf pool
 * (CONFIG_BLK_IOBUF_POOL kernels) is reported too, taken as DMA_COST takes
 * it (below).  Reply: NVMETRACE_A_POOL, a nest of these.  The module's
 * pool is made of pool_nr buffers of pool_buf_kb KiB (module parameters),
 * each one large folio of order ORDER where the page allocator had one, else
 * several smaller folios (the buffer counts as a fallback).
 */
enum nvmetrace_pool_attr {
	NVMETRACE_P_UNSPEC,
	NVMETRACE_P_PAD,
	NVMETRACE_P_BUF_SIZE,		/* u64: bytes per buffer; 0: no pool */
	NVMETRACE_P_NR_BUFS,		/* u32: buffers asked for (pool_nr) */
	NVMETRACE_P_ALLOCATED,		/* u32: buffers allocated */
	NVMETRACE_P_FALLBACKS,		/* u32: buffers made of smaller folios than ORDER */
	NVMETRACE_P_BYTES,		/* u64: bytes allocated */
	NVMETRACE_P_ORDER,		/* u32: folio order asked for (buffer size) */
	NVMETRACE_P_MIN_ORDER,		/* u32: smallest folio order in the pool */
	NVMETRACE_P_FOLIOS,		/* u32: folios in the pool */
	NVMETRACE_P_NODE,		/* s32: NUMA node the buffers were asked on */
	NVMETRACE_P_MAPPINGS,		/* u32: user mappings of the pool right now */
	NVMETRACE_P_MMAP_OFFSET,	/* u64: NVMETRACE_POOL_MMAP_OFFSET */
	NVMETRACE_P_KPOOL,		/* u32: enum nvmetrace_kpool_state */
	NVMETRACE_P_KPOOL_ORDER,	/* u32: the kernel pool's folio order */
	NVMETRACE_P_KPOOL_FOLIO_SIZE,	/* u32: bytes */
	NVMETRACE_P_KPOOL_CAPACITY,	/* u32: folios */
	NVMETRACE_P_KPOOL_IN_USE,	/* u32: folios checked out */
	NVMETRACE_P_KPOOL_AVAILABLE,	/* u32 */
	NVMETRACE_P_KPOOL_HIGH_WATER,	/* u32 */
	NVMETRACE_P_KPOOL_ALLOC_FAILURES, /* u64 */
	__NVMETRACE_P_MAX,
};
#define NVMETRACE_P_MAX (__NVMETRACE_P_MAX - 1)

/* NVMETRACE_P_KPOOL: the kernel's own blk_iobuf pool. */
enum nvmetrace_kpool_state {
	NVMETRACE_KPOOL_ABSENT		= 0,	/* kernel built without CONFIG_BLK_IOBUF_POOL */
	NVMETRACE_KPOOL_BUILT		= 1,	/* it has one; no device asked about */
	NVMETRACE_KPOOL_NONE		= 2,	/* the device's queue has no pool */
	NVMETRACE_KPOOL_ACTIVE		= 3,	/* NVMETRACE_P_KPOOL_* describe it */
	NVMETRACE_KPOOL_UNKNOWN_API	= 4,	/* a blk_iobuf API this module does not know */
};

/*
 * NVMETRACE_CMD_DMA_COST.  Request: NVMETRACE_A_FD (a block device), and
 * optionally NVMETRACE_A_DEV and NVMETRACE_A_DMA holding NVMETRACE_D_ITERS.
 * Reply: NVMETRACE_A_DEV and NVMETRACE_A_DMA, a nest of the device's DMA facts and one
 * NVMETRACE_D_SIZE nest per I/O size (4 KiB .. 2 MiB, doubling) with the raw
 * times of every iteration: user space takes the medians.  One iteration maps
 * one I/O's scatterlist (one entry per 4 KiB page, as a scattered user buffer
 * gives) with dma_map_sg() and unmaps it; the premapped case is the same list
 * mapped once before the loop, each iteration only syncing it for the device
 * and back (what a retained mapping still costs per I/O); and the same size
 * as one entry of a physically contiguous folio (what an I/O from a pool
 * buffer maps: the block layer merges its pages into one segment).
 *
 * NVMETRACE_A_FD (ABI 7) is a file descriptor of the sending process, open
 * for reading on the block device: the module looks at no device its caller
 * could not open itself (the VFS, the device cgroup and any LSM have had
 * their say at that open).  A DEV without FD is refused (EINVAL), as is an FD
 * that is not a block device (ENOTBLK) or not open for reading (EBADF), and a
 * DEV that is not the device FD is open on (EINVAL).  The reply's DEV is the
 * device of FD.
 */
enum nvmetrace_dma_attr {
	NVMETRACE_D_UNSPEC,
	NVMETRACE_D_PAD,
	NVMETRACE_D_ITERS,		/* u32: iterations per size (request: 1..1024) */
	NVMETRACE_D_HAS_DMA,		/* u8: 1 if a DMA device was found */
	NVMETRACE_D_NO_DMA_REASON,	/* string: why not */
	NVMETRACE_D_WALK,		/* string: devices walked from the disk up */
	NVMETRACE_D_DEVICE,		/* string: the DMA device (e.g. 0000:00:04.0) */
	NVMETRACE_D_DRIVER,		/* string: its driver, if bound */
	NVMETRACE_D_NODE,		/* s32: its NUMA node */
	NVMETRACE_D_OPT_SIZE,		/* u64: dma_opt_mapping_size() */
	NVMETRACE_D_MAX_SIZE,		/* u64: dma_max_mapping_size() */
	NVMETRACE_D_MAX_SEG_SIZE,	/* u32: dma_get_max_seg_size() */
	NVMETRACE_D_IOMMU,		/* u32: enum nvmetrace_dma_iommu */
	NVMETRACE_D_IOMMU_DOMAIN_TYPE,	/* u32: the kernel's IOMMU_DOMAIN_* value */
	NVMETRACE_D_QUEUE_MAX_BYTES,	/* u32: the queue's max_hw_sectors in bytes */
	NVMETRACE_D_QUEUE_MAX_SEGMENTS,	/* u32: the queue's max_segments */
	NVMETRACE_D_SIZE,		/* nest, one per I/O size: */
	NVMETRACE_D_BYTES,		/*   u32: I/O size */
	NVMETRACE_D_NENTS,		/*   u32: scatterlist entries mapped */
	NVMETRACE_D_MAPPED_NENTS,	/*   u32: DMA segments dma_map_sg() returned */
	NVMETRACE_D_LIMITS,		/*   u32: NVMETRACE_DMA_OVER_* bits */
	NVMETRACE_D_ERROR,		/*   s32: -errno when the size was not measured */
	NVMETRACE_D_MAP_NS,		/*   binary: __u32 ns per iteration, map + unmap */
	NVMETRACE_D_PREMAP_NS,		/*   binary: __u32 ns per iteration, premapped (sync) */
	NVMETRACE_D_FOLIO_NS,		/*   binary: __u32 ns per iteration, map + unmap of one
					 *   entry in a 2 MiB folio (a pool buffer); absent when
					 *   no such folio could be had */
	__NVMETRACE_D_MAX,
};
#define NVMETRACE_D_MAX (__NVMETRACE_D_MAX - 1)

#define NVMETRACE_DMA_ITERS_DEFAULT	64
#define NVMETRACE_DMA_ITERS_MAX		1024
#define NVMETRACE_DMA_SIZE_MIN		4096u
#define NVMETRACE_DMA_SIZE_MAX		(2u << 20)

/* NVMETRACE_D_LIMITS: an I/O of this size exceeds ... */
#define NVMETRACE_DMA_OVER_MAX_MAPPING	(1u << 0)	/* dma_max_mapping_size(): not measured */
#define NVMETRACE_DMA_OVER_QUEUE_BYTES	(1u << 1)	/* max_hw_sectors: the block layer splits it */
#define NVMETRACE_DMA_OVER_QUEUE_SEGS	(1u << 2)	/* max_segments at 4 KiB pages: split */
#define NVMETRACE_DMA_OVER_OPT		(1u << 3)	/* dma_opt_mapping_size(): nvme clamps to it */

enum nvmetrace_dma_iommu {
	NVMETRACE_DMA_IOMMU_NONE	= 0,	/* no IOMMU in front of the device */
	NVMETRACE_DMA_IOMMU_IDENTITY	= 1,	/* behind one, passthrough (identity) domain */
	NVMETRACE_DMA_IOMMU_TRANSLATING	= 2,	/* DMA addresses are translated (IOVAs) */
	NVMETRACE_DMA_IOMMU_OTHER	= 3,	/* blocked or unmanaged domain */
};


enum nvmetrace_state {
	NVMETRACE_STATE_IDLE		= 0,
	NVMETRACE_STATE_RECORDING	= 1,
};

#define NVMETRACE_ROLE_HOST		(1u << 0)
#define NVMETRACE_ROLE_TARGET		(1u << 1)

/*
 * NVMETRACE_A_FLAGS of START.  DEV_FILTER (ABI 5): record only the devices
 * NVMETRACE_A_DEVS names, even when it names none yet; without it an empty
 * (or absent) DEVS means every device.
 */
#define NVMETRACE_START_DEV_FILTER	(1u << 0)
/* dev_t entries a recording may hold in all: START's and ADMIT's together */
#define NVMETRACE_MAX_DEVS		64

/*
 * NVMETRACE_CMD_ADMIT (ABI 5): the recording's owner adds devices that
 * appeared after START (NVMETRACE_A_DEVS) to a recording whose START set
 * NVMETRACE_START_DEV_FILTER.  The hooks record a device's commands from the
 * moment the reply is sent; a device already in the recording is not added
 * twice.  Reply: NVMETRACE_A_DEVS, every device of the recording.  Errors:
 * -ENOENT nothing is recording, -EBUSY another socket's recording, -EINVAL
 * START did not set DEV_FILTER, -ENOSPC more than NVMETRACE_MAX_DEVS.
 */

/*
 * NVMETRACE_CMD_LAYOUT (ABI 6): the recording's owner gives the layout of a
 * transport module (nvme_tcp, nvme_rdma, nvmet_tcp, nvmet_rdma) loaded after
 * START, whose hooks are off for the want of it: START did not carry its
 * group, or it was loaded again with other BTF (NVMETRACE_HOOK_STALE).
 * NVMETRACE_A_LAYOUT holds whole groups, each with its NVMETRACE_L_BTF_*
 * identity, which must be that of the module as it was loaded during the
 * recording (the module notifier takes it from the module's BTF while it
 * loads).  The module's hooks attach before the reply; a group the hooks
 * already read with that identity changes nothing.  Errors: -ENOENT nothing
 * is recording, -EBUSY another socket's recording or a group whose hooks
 * run with another layout, -EINVAL nvmet's or the kernel's group (START's
 * only), a group without its identity, of a role not recorded, or not
 * plausible, -ESTALE an identity that is not the loaded module's (or the
 * module was not loaded since START).  The hooks' states: GET_HOOKS.
 */

enum nvmetrace_hook_kind {
	NVMETRACE_HOOK_TRACEPOINT	= 1,
	NVMETRACE_HOOK_KPROBE		= 2,
	NVMETRACE_HOOK_FTRACE		= 3,	/* an ftrace_ops on the function's entry */
};

enum nvmetrace_hook_state {
	NVMETRACE_HOOK_DETACHED		= 0,	/* not asked for */
	NVMETRACE_HOOK_ATTACHED		= 1,
	NVMETRACE_HOOK_WAITING		= 2,	/* its module is not loaded (yet) */
	NVMETRACE_HOOK_ABSENT		= 3,	/* this kernel does not have it */
	NVMETRACE_HOOK_FAILED		= 4,	/* attach failed: see HOOK_ERROR */
	/*
	 * A hook on a function this kernel inlined (it is absent by design);
	 * its stand-in, a hook on the function it was inlined into, records
	 * its events instead.
	 */
	NVMETRACE_HOOK_INLINED		= 5,
	/*
	 * A stand-in not attached: every hook it stands in for is attached, so
	 * it has nothing to record.
	 */
	NVMETRACE_HOOK_SPARE		= 6,
	/*
	 * Off: its module was loaded again during the recording and the
	 * layout it reads (NVMETRACE_L_BTF_*) is not the one START carried
	 * (other BTF, or no identity to compare).  NVMETRACE_CMD_LAYOUT with
	 * the new module's layout (a transport's), or a new START, ends it.
	 */
	NVMETRACE_HOOK_STALE		= 7,
};

/* ------------------------------------------------------- size checks */

#ifdef __cplusplus
static_assert(sizeof(struct nvmetrace_ring_ctrl) == NVMETRACE_RING_CTRL_SIZE,
	      "nvmetrace_ring_ctrl size");
static_assert(sizeof(struct nvmetrace_rec) == 48, "nvmetrace_rec size");
#elif defined(__KERNEL__) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L)
_Static_assert(sizeof(struct nvmetrace_ring_ctrl) == NVMETRACE_RING_CTRL_SIZE,
	       "nvmetrace_ring_ctrl size");
_Static_assert(sizeof(struct nvmetrace_rec) == 48, "nvmetrace_rec size");
#endif

#endif /* _UAPI_LINUX_NVMETRACE_H */
