/* SPDX-License-Identifier: GPL-2.0 */
/*
 * probe.h — what the probe files (kmod/probes/) share with each other and
 * with the attach core (kmod/hooks.c).
 *
 * Each probe file holds the hooks of one probed subsystem: its handlers and
 * its rows of the hook table (struct nvmetrace_hook_group), which the attach
 * core walks at load, START, STOP and in the hook dump; the hot path never
 * looks at the table.  The helpers below are __always_inline: a handler
 * compiles to the same code as when every probe lived in one file.  The one
 * exception is the ring write, nvmetrace_emit(), out of line on purpose.
 *
 * Hot-path rules: no sleeping, no allocation, no lock but the local interrupt
 * disable inside the ring write, no printing.
 */
#ifndef NVMETRACE_PROBE_H
#define NVMETRACE_PROBE_H

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/kprobes.h>
#include <linux/nvme.h>
#include <linux/tracepoint.h>
#include <linux/types.h>

#include "../gate_core.h"
#include "../nvmetrace.h"
#include "../sample_core.h"

/* ------------------------------------------------------------ the table */

/* struct nvmetrace_hook.needs */
#define NEEDS_TCP_HOST		(1u << 0)	/* cfg.layout.tcp */
#define NEEDS_RDMA_HOST		(1u << 2)	/* cfg.layout.rdma */
#define NEEDS_RDMA_TARGET	(1u << 3)	/* cfg.layout.rdmat */
#define NEEDS_TCP_TARGET	(1u << 1)	/* cfg.layout.tcpt (and nvmet's) */
#define NEEDS_NVMET		(1u << 4)	/* cfg.layout's nvmet group (valid) */

struct nvmetrace_hook {
	const char *name;	/* tracepoint or function */
	const char *module;	/* NULL: built in */
	u32 kind;		/* NVMETRACE_HOOK_*: the mechanism asked for */
	u32 role;		/* NVMETRACE_ROLE_* it serves */
	void *probe;		/* tracepoint probe */
	kprobe_pre_handler_t pre;	/* kprobe handler */
	/*
	 * Stand-ins: rows of one probe file with the same nonzero alt are a
	 * set.  Its rows without standin hook functions a kernel may inline
	 * (absent by design: NVMETRACE_HOOK_INLINED); its standin row hooks
	 * the function they are inlined into, and attaches only where one of
	 * them cannot (else NVMETRACE_HOOK_SPARE).  Its handler records only
	 * what the unattached ones would have (nvmetrace_hook_runs()).
	 */
	u8 alt;
	bool standin;
	u32 needs;		/* NEEDS_*: layout groups it reads */
	/* a kretprobe (reported as a kprobe): handlers at entry and return */
	kretprobe_handler_t ret_entry, ret;
	size_t ret_data;	/* per-instance data of the kretprobe */
	int ret_maxactive;	/* its instances; 0: the kernel's default */

	/* state, under the attach core's hooks_lock */
	struct tracepoint *tp;
	struct kprobe kp;
	struct kretprobe krp;
	struct nvmetrace_fhook fh;
	u32 used;		/* the mechanism attached: NVMETRACE_HOOK_FTRACE or _KPROBE */
	u32 state;		/* NVMETRACE_HOOK_* state */
	int err;
};

/*
 * One probe file's rows (rows[0..nr)).  reset, if set, clears the file's
 * per-recording state; START calls it under hooks_lock before anything
 * attaches.  attached, if set, runs under hooks_lock once START attached
 * the built-in function hooks, before anything is emitted: process
 * context, where a probe file learns what its handlers must not look up.
 */
struct nvmetrace_hook_group {
	struct nvmetrace_hook *rows;
	unsigned int nr;
	void (*reset)(void);
	void (*attached)(void);
};

/*
 * hooks_lock held: the address of the function an attached function-entry
 * hook h is in (its ftrace location or its kprobe's address), 0 when h is
 * not attached.
 */
static inline unsigned long nvmetrace_hook_addr(const struct nvmetrace_hook *h)
{
	if (h->state != NVMETRACE_HOOK_ATTACHED || h->kind == NVMETRACE_HOOK_TRACEPOINT)
		return 0;
	if (h->used == NVMETRACE_HOOK_FTRACE)
		return h->fh.ip;
	return h->ret ? (unsigned long)h->krp.kp.addr : (unsigned long)h->kp.addr;
}

/*
 * Whether h is attached: for a stand-in's handler, which records only what
 * the rows it stands in for do not.  States change under hooks_lock while
 * handlers run; they settle before START ends (nothing is emitted before)
 * and while a module is coming (none of its code runs yet).
 */
static __always_inline bool nvmetrace_hook_runs(const struct nvmetrace_hook *h)
{
	return READ_ONCE(h->state) == NVMETRACE_HOOK_ATTACHED;
}

/* The groups, in the order of the hook dump (hooks.c lists them). */
extern struct nvmetrace_hook_group nvmetrace_blk_hooks;		/* probes/blk.c */
extern struct nvmetrace_hook_group nvmetrace_nvme_hooks;	/* probes/nvme.c */
extern struct nvmetrace_hook_group nvmetrace_nvmet_hooks;	/* probes/nvmet.c */
extern struct nvmetrace_hook_group nvmetrace_aio_hooks;		/* probes/aio.c */
extern struct nvmetrace_hook_group nvmetrace_uring_hooks;	/* probes/uring.c */
extern struct nvmetrace_hook_group nvmetrace_nvme_tcp_hooks;	/* probes/nvme_tcp.c */
extern struct nvmetrace_hook_group nvmetrace_nvme_rdma_hooks;	/* probes/nvme_rdma.c */
extern struct nvmetrace_hook_group nvmetrace_nvmet_rdma_hooks;	/* probes/nvmet_rdma.c */
extern struct nvmetrace_hook_group nvmetrace_nvmet_tcp_hooks;	/* probes/nvmet_tcp.c */

/* ------------------------------------------------------- configuration */

/*
 * Written by the attach core only while no hook is registered (START), read
 * without locks by the hooks.
 */
extern struct nvmetrace_config nvmetrace_cfg;
extern u64 nvmetrace_sample_threshold;	/* hash <= threshold: sampled */

/*
 * Hooks attach and detach in several steps (and unregistering the tracepoint
 * module notifier detaches nvme-core's and nvmet's first), so probes emit
 * only between the end of START and the beginning of STOP: a recording never
 * holds commands that some hooks saw and others could not.
 */
extern bool nvmetrace_emitting;

static __always_inline bool nvmetrace_sampled(u64 lba)
{
	/* 1 of 1: every hash passes, so skip it */
	if (nvmetrace_sample_threshold == U64_MAX)
		return true;
	return nvmetrace_sample_pick(lba, nvmetrace_cfg.seed,
				     nvmetrace_sample_threshold);
}

/*
 * Whether a host device is in the recording.  ADMIT may append to devs[]
 * meanwhile: nr_devs is read with acquire, so every entry below it is whole
 * (on x86-64 a plain load: one load and a compare, as before devices could
 * be added); NVMETRACE_DEVS_ANY: no filter.
 */
static __always_inline bool host_dev_wanted(u32 dev)
{
	/* pairs with nvmetrace_hooks_admit()'s release: entries below n whole */
	u32 i, n = smp_load_acquire(&nvmetrace_cfg.nr_devs);

	if (n == NVMETRACE_DEVS_ANY)
		return true;
	for (i = 0; i < n; i++)
		if (nvmetrace_cfg.devs[i] == dev)
			return true;
	return false;
}

/* ---------------------------------------------------------- target gate */
/*
 * The target gate (probes/nvmet.c): the nvmet requests of sampled commands
 * between their nvmet_req_init and nvmet_req_complete tracepoints.  A
 * target hook that records only within that span (nvmet's bdev backend,
 * nvmet-tcp's receive of a command and of its data, its R2T) leaves at once
 * while the gate is shut: then no sampled command is there to record.
 */
enum nvmetrace_nvmet_row {
	NVMETRACE_NVMET_ROW_INIT,
	NVMETRACE_NVMET_ROW_EXEC,
	NVMETRACE_NVMET_ROW_BIO_DONE,
	NVMETRACE_NVMET_ROW_COMPLETE,
	NVMETRACE_NVMET_ROWS
};

extern struct nvmetrace_ptrset nvmetrace_target_sampled;

/*
 * Whether a target command between its init and its completion may be
 * sampled: the set is not empty, or there is no gate (every command
 * sampled, or the tracepoints that keep the set not both attached).
 */
static __always_inline bool nvmetrace_target_gate_open(void)
{
	const struct nvmetrace_hook *rows = nvmetrace_nvmet_hooks.rows;

	return nvmetrace_ptrset_any(&nvmetrace_target_sampled) ||
	       nvmetrace_sample_threshold == U64_MAX ||
	       !nvmetrace_hook_runs(&rows[NVMETRACE_NVMET_ROW_INIT]) ||
	       !nvmetrace_hook_runs(&rows[NVMETRACE_NVMET_ROW_COMPLETE]);
}

/* ------------------------------------------------------ owned timestamps */
/*
 * A time kept for an owner (a task, a queue) in a table slot that another
 * owner may take, O(1) and without a lock.  The writer clears the owner
 * around the time; a reader takes it only when it sees its owner before and
 * after, so it gets its own owner's time or none, never another's.  A cache
 * line each, so owners on other CPUs write lines of their own.
 */
struct nvmetrace_owned_ts {
	const void *owner;	/* NULL while ts changes */
	u64 ts;
} ____cacheline_aligned_in_smp;

static __always_inline void nvmetrace_owned_ts_set(struct nvmetrace_owned_ts *e,
						   const void *owner, u64 ts)
{
	WRITE_ONCE(e->owner, NULL);
	smp_wmb();	/* the owner cleared before ts changes */
	WRITE_ONCE(e->ts, ts);
	smp_wmb();	/* ts written before the owner is back */
	WRITE_ONCE(e->owner, owner);
}

/* owner's time in e, 0: none (another owner's, or changing) */
static __always_inline u64 nvmetrace_owned_ts_get(const struct nvmetrace_owned_ts *e,
						  const void *owner)
{
	u64 ts;

	if (READ_ONCE(e->owner) != owner)
		return 0;
	smp_rmb();	/* the owner, then ts */
	ts = READ_ONCE(e->ts);
	smp_rmb();	/* ts, then the owner again */
	return READ_ONCE(e->owner) == owner ? ts : 0;
}

/* ---------------------------------------------------------------- emit */

/*
 * One record into this CPU's ring (hooks.c).  Out of line: a handler's
 * common path is a command that is not sampled, and with the ring write
 * inlined it would save and restore the registers the write needs on every
 * hit, sampled or not.  Returns the record's timestamp (ktime_get_ns()),
 * for a handler that needs the time again; 0 when nothing was written (not
 * recording, ring full).
 */
u64 nvmetrace_emit(u16 event, u64 lba, u32 dev, u32 len, u16 qid, u16 cid,
		   u16 tag, u16 cntlid, u8 opcode, u8 flags, u64 aux);

/*
 * A private field: its offset comes from BTF through user space (struct
 * nvmetrace_layout), never from a guess.
 */
#define FIELD_AT(type, base, off) (*(type *)((const char *)(base) + (off)))

/* ------------------------------------------------------------ host side */

/*
 * The in-kernel dev_t (major << 20 | minor), as the UAPI header says.  A
 * hidden disk (an NVMe multipath path such as nvme0c0n1) has no device node,
 * so it is named by its disk sequence number under major 0 instead, which
 * no real disk uses; user space reads the same number from sysfs.
 */
static __always_inline u32 disk_dev(const struct gendisk *disk)
{
	if (unlikely(disk->flags & GENHD_FL_HIDDEN))
		return NVMETRACE_DEV_HIDDEN(disk->diskseq);
	return (u32)disk_devt((struct gendisk *)disk);
}

/* LBA of a sector, in the namespace's logical blocks. */
static __always_inline u64 sector_to_lba(struct request_queue *q, sector_t s)
{
	return s >> (__ffs(queue_logical_block_size(q)) - SECTOR_SHIFT);
}

/* The whole disk's dev and the LBA of byte pos of a block device file. */
static __always_inline bool nvmetrace_file_lba(const struct file *file, loff_t pos,
					       u32 *dev, u64 *lba)
{
	struct block_device *bdev = I_BDEV(file->f_mapping->host);
	struct gendisk *disk = bdev->bd_disk;

	if (!disk || pos < 0)
		return false;
	*dev = disk_dev(disk);
	if (!host_dev_wanted(*dev))
		return false;
	*lba = sector_to_lba(disk->queue, (pos >> SECTOR_SHIFT) + bdev->bd_start_sect);
	return true;
}

/*
 * A sampled bio queued (probes/blk.c, before its BIO_QUEUE): the file
 * submission of a file's direct I/O if the bio is its first sampled one
 * (probes/aio.c).
 */
void nvmetrace_fs_bio(const struct bio *bio, u64 lba, u32 dev, u8 op);

static __always_inline u8 rq_opcode(const struct request *rq)
{
	switch (req_op(rq)) {
	case REQ_OP_READ:
		return nvme_cmd_read;
	case REQ_OP_WRITE:
		return nvme_cmd_write;
	default:
		return 0;
	}
}

/*
 * Passthrough requests (NVMe commands from an NVMe generic char device,
 * /dev/ngXnY, through ioctl or io_uring_cmd) carry no block-layer op or
 * LBA: the command itself has them, and nvme_setup_cmd is the one hook that
 * sees it.  There a sampled passthrough read or write is noted by its
 * request (probes/nvme.c), and the request's later events (issue, the
 * transport's, the completions) find its op and LBA here.  Fixed size, no
 * lock: an entry is written by the request's own setup, published last, and
 * checked again after it is read; an unsampled setup of the same request
 * drops its entry, so a stale one never names a later command.  Two requests
 * in flight whose slots collide (beyond pt_slot()'s range) lose the older
 * one's later records.
 */
struct nvmetrace_pt {
	const struct request *rq;	/* 0: free; written last */
	u64 lba;
	u8 op;
};

#define NVMETRACE_PT_SIZE	2048
#define NVMETRACE_PT_TAGS	128	/* slots per hardware queue before they wrap */
extern struct nvmetrace_pt nvmetrace_pt_cmds[NVMETRACE_PT_SIZE];	/* probes/nvme.c */

/*
 * By hardware queue and driver tag, which no two requests in flight share:
 * no collision up to 16 queues of 128 tags (a pointer hash would collide
 * at any depth).
 */
static __always_inline struct nvmetrace_pt *pt_slot(const struct request *rq)
{
	u32 q = rq->mq_hctx ? rq->mq_hctx->queue_num : 0;

	return &nvmetrace_pt_cmds[(q * NVMETRACE_PT_TAGS + (u32)rq->tag) &
				  (NVMETRACE_PT_SIZE - 1)];
}

static __always_inline bool pt_find(const struct request *rq, u8 *op, u64 *lba)
{
	struct nvmetrace_pt *e = pt_slot(rq);

	if (smp_load_acquire(&e->rq) != rq)	/* rq, then the fields (pt_note()) */
		return false;
	*lba = e->lba;
	*op = e->op;
	smp_rmb();	/* the fields, then rq again */
	return READ_ONCE(e->rq) == rq;
}

/*
 * rq's NVMe opcode (read or write) and LBA: from the block layer, or for a
 * sampled passthrough request from its command (pt_find()).  false: neither
 * a read nor a write, or a passthrough request that is not sampled.
 */
static __always_inline bool rq_op_lba(struct request *rq, u8 *op, u64 *lba)
{
	*op = rq_opcode(rq);
	if (likely(*op)) {
		*lba = sector_to_lba(rq->q, blk_rq_pos(rq));
		return true;
	}
	return blk_rq_is_passthrough(rq) && pt_find(rq, op, lba);
}

static __always_inline u16 rq_qid(const struct request *rq)
{
	return rq->mq_hctx ? rq->mq_hctx->queue_num + 1 : 0;
}

/*
 * rq's event.  sampled: the caller has already tested rq's LBA with the
 * sampling predicate (a hook that tests it first, to leave early), so it is
 * not tested twice.
 */
static __always_inline void rq_event(u16 event, struct request *rq, u64 aux, bool sampled)
{
	struct gendisk *disk = rq->q->disk;
	u64 lba;
	u32 dev;
	u8 op;

	if (!disk || !rq_op_lba(rq, &op, &lba))
		return;
	dev = disk_dev(disk);
	if (!host_dev_wanted(dev))
		return;
	if (!sampled && !nvmetrace_sampled(lba))
		return;
	nvmetrace_emit(event, lba, dev, blk_rq_bytes(rq), rq_qid(rq), 0, (u16)rq->tag, 0,
		       op, NVMETRACE_REC_HAS_QID |
		       (blk_rq_is_passthrough(rq) ? NVMETRACE_REC_PASSTHRU : 0) |
		       (op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0), aux);
}

static __always_inline void host_rq_event(u16 event, struct request *rq, u64 aux)
{
	rq_event(event, rq, aux, false);
}

/*
 * The request a command id from the wire names in tags, found as
 * nvme_find_rq() finds it: in flight, and sent with the id's generation (its
 * top 4 bits against nvme_request.genctr at genctr_off of the request's PDU).
 * NULL for a stale or bogus id, before any other field of the request (its
 * queue, its disk) is read.
 */
static __always_inline struct request *host_rq_by_cid(struct blk_mq_tags *tags, u16 cid,
						      u32 genctr_off)
{
	u16 tag = cid & 0xfff;	/* nvme_tag_from_cid() */
	struct request *rq;

	if (tag >= tags->nr_tags)
		return NULL;
	rq = READ_ONCE(tags->rqs[tag]);
	if (!rq || blk_mq_rq_state(rq) != MQ_RQ_IN_FLIGHT)
		return NULL;
	if ((FIELD_AT(u8, blk_mq_rq_to_pdu(rq), genctr_off) & 0xf) != cid >> 12)
		return NULL;	/* nvme_genctr_mask() != nvme_genctr_from_cid() */
	return rq;
}

/*
 * rq's event while it is in flight (a fabrics transport's hooks: nvme-tcp,
 * nvme-rdma); sampled: as rq_event()
 */
static __always_inline void tcp_rq_event(u16 event, struct request *rq, u64 aux, bool sampled)
{
	if (blk_mq_rq_state(rq) != MQ_RQ_IN_FLIGHT)
		return;
	rq_event(event, rq, aux, sampled);
}

/* A work completion's status (0: IB_WC_SUCCESS) and its wr_cqe (RDMA). */
static __always_inline const void *rdma_wc_cqe(const void *wc, u32 status_off,
					       u32 cqe_off)
{
	if (FIELD_AT(u32, wc, status_off))
		return NULL;	/* flushed or failed: the queue is going down */
	return FIELD_AT(const void *, wc, cqe_off);
}

/* ---------------------------------------------------------- target side */

/*
 * nvmet's request and queue structs are private.  User space reads their
 * layout from the running kernel's BTF (/sys/kernel/btf/nvmet) and passes the
 * offsets at START; without them the target hooks are refused (see
 * nvmetrace_hooks_start()), never guessed.
 */

/*
 * req's event.  sampled: the caller has already found cmd a read or write
 * whose LBA the sampling predicate picks (tcpt_sampled()), so neither is
 * tested twice.
 */
static __always_inline void req_cmd_event(u16 event, const void *req,
					  const struct nvme_command *cmd, u64 aux, bool sampled)
{
	const struct nvmetrace_layout *l = &nvmetrace_cfg.layout;
	const void *sq, *ctrl;
	u8 op = cmd->common.opcode;
	u64 lba = le64_to_cpu(cmd->rw.slba);
	u16 qid, cntlid;

	if (!sampled && ((op != nvme_cmd_read && op != nvme_cmd_write) || !nvmetrace_sampled(lba)))
		return;
	sq = FIELD_AT(const void *, req, l->req_sq);
	qid = FIELD_AT(u16, sq, l->sq_qid);
	if (!qid)
		return;
	ctrl = FIELD_AT(const void *, sq, l->sq_ctrl);
	cntlid = ctrl ? FIELD_AT(u16, ctrl, l->ctrl_cntlid) : 0;
	/* nvmet's namespace block size is private: len counts blocks */
	nvmetrace_emit(event, lba, 0, le16_to_cpu(cmd->rw.length) + 1, qid,
		       cmd->common.command_id, 0, cntlid, op,
		       NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID |
		       NVMETRACE_REC_LEN_BLOCKS |
		       (op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0), aux);
}

static __always_inline void target_event(u16 event, const void *req,
					 const struct nvme_command *cmd, u64 aux)
{
	req_cmd_event(event, req, cmd, aux, false);
}

/* an event of an nvmet_req whose command is found through the req's layout */
static __always_inline void req_event(u16 event, const void *req)
{
	target_event(event, req,
		     FIELD_AT(const struct nvme_command *, req,
			      nvmetrace_cfg.layout.req_cmd), 0);
}

#endif /* NVMETRACE_PROBE_H */
