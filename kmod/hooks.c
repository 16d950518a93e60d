// SPDX-License-Identifier: GPL-2.0
/*
 * hooks.c — where nvmetrace attaches to the kernel, and what each hook records.
 *
 * Hooks are tracepoints found by name (built-in ones with
 * for_each_kernel_tracepoint(), ones in nvme-core and nvmet through the
 * tracepoint module notifier, which also replays modules already loaded) and
 * function-entry hooks (all in one shared ftrace_ops, ftrace_hook.c, else a
 * kprobe each; re-armed by a module notifier when their module comes back).
 * Nothing needs to be exported by the kernel and the load order
 * of nvme-core, nvmet and nvmetrace does not matter.
 *
 * Hooks are registered at START and removed at STOP, so an idle nvmetrace
 * costs nothing on the I/O path.  The configuration (struct
 * nvmetrace_config) is written only while no hook is registered and read
 * without locks by the hooks.
 *
 * Every hook decides on its own whether its command is sampled: the predicate
 * is a hash of the command's starting LBA (in namespace blocks), which host
 * and target both know, so both sides sample the same commands with no
 * per-command state in the kernel.  A sampled hook writes one record into its
 * CPU's ring; user space joins records into commands.
 *
 * Hot-path rules: no sleeping, no allocation, no lock but the local interrupt
 * disable inside the ring write, no printing.
 */
#include <linux/aio_abi.h>
#include <linux/atomic.h>
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/fs.h>
#include <linux/hash.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/nvme.h>
#include <linux/nvme-tcp.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/skbuff.h>
#include <linux/uaccess.h>
#include <linux/uio.h>
#include <linux/tracepoint.h>
#include <net/sock.h>
#include <net/genetlink.h>
#include <trace/events/block.h>
#include <asm/syscall.h>

#include "nvmetrace.h"
#include "sample_core.h"

/* ------------------------------------------------------- configuration */

static struct nvmetrace_config cfg;
static u64 sample_threshold;	/* hash <= threshold: sampled */

/* Serializes START/STOP against each other and against module notifiers. */
static DEFINE_MUTEX(hooks_lock);
static bool recording;

static __always_inline bool nvmetrace_sampled(u64 lba)
{
	/* 1 of 1: every hash passes, so skip it */
	if (sample_threshold == U64_MAX)
		return true;
	return nvmetrace_sample_pick(lba, cfg.seed, sample_threshold);
}

static __always_inline bool host_dev_wanted(u32 dev)
{
	u32 i;

	if (!cfg.nr_devs)
		return true;
	for (i = 0; i < cfg.nr_devs; i++)
		if (cfg.devs[i] == dev)
			return true;
	return false;
}

/* ---------------------------------------------------------------- emit */

/*
 * Hooks attach and detach in several steps (and unregistering the tracepoint
 * module notifier detaches nvme-core's and nvmet's first), so probes emit
 * only between the end of START and the beginning of STOP: a recording never
 * holds commands that some hooks saw and others could not.
 */
static bool emitting;

static __always_inline void emit(u16 event, u64 lba, u32 dev, u32 len,
				 u16 qid, u16 cid, u16 tag, u16 cntlid,
				 u8 opcode, u8 flags, u64 aux)
{
	unsigned long irqflags;
	struct nvmetrace_rec *r;

	if (unlikely(!READ_ONCE(emitting)))
		return;
	r = nvmetrace_ring_local_reserve(&irqflags);
	if (!r)
		return;		/* ring full: counted in its lost counter */
	/* taken inside the reserve, so a ring's records are in time order */
	r->ts = ktime_get_ns();
	r->lba = lba;
	r->aux = aux;
	r->dev = dev;
	r->len = len;
	r->event = event;
	r->qid = qid;
	r->cid = cid;
	r->tag = tag;
	r->cntlid = cntlid;
	r->opcode = opcode;
	r->flags = flags;
	nvmetrace_ring_local_commit(r, irqflags);
}

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
 * request, and the request's later events (issue, the transport's, the
 * completions) find its op and LBA here.  Fixed size, no lock: an entry is
 * written by the request's own setup, published last, and checked again
 * after it is read; an unsampled setup of the same request drops its
 * entry, so a stale one never names a later command.  Two requests in
 * flight whose slots collide (beyond pt_slot()'s range) lose the older
 * one's later records.
 */
struct nvmetrace_pt {
	const struct request *rq;	/* 0: free; written last */
	u64 lba;
	u8 op;
};
#define NVMETRACE_PT_SIZE	2048
#define NVMETRACE_PT_TAGS	128	/* slots per hardware queue before they wrap */
static struct nvmetrace_pt pt_cmds[NVMETRACE_PT_SIZE];

/*
 * By hardware queue and driver tag, which no two requests in flight share:
 * no collision up to 16 queues of 128 tags (a pointer hash would collide
 * at any depth).
 */
static __always_inline struct nvmetrace_pt *pt_slot(const struct request *rq)
{
	u32 q = rq->mq_hctx ? rq->mq_hctx->queue_num : 0;

	return &pt_cmds[(q * NVMETRACE_PT_TAGS + (u32)rq->tag) & (NVMETRACE_PT_SIZE - 1)];
}

/* nvme_setup_cmd of passthrough rq: note it when sampled, else forget it */
static __always_inline void pt_note(const struct request *rq, u8 op, u64 lba, bool sampled)
{
	struct nvmetrace_pt *e = pt_slot(rq);

	if (!sampled) {
		if (READ_ONCE(e->rq) == rq)
			WRITE_ONCE(e->rq, NULL);
		return;
	}
	WRITE_ONCE(e->rq, NULL);
	smp_wmb();
	e->lba = lba;
	e->op = op;
	smp_store_release(&e->rq, rq);
}

static __always_inline bool pt_find(const struct request *rq, u8 *op, u64 *lba)
{
	struct nvmetrace_pt *e = pt_slot(rq);

	if (smp_load_acquire(&e->rq) != rq)
		return false;
	*lba = e->lba;
	*op = e->op;
	smp_rmb();
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

static void probe_bio_queue(void *data, struct bio *bio)
{
	struct gendisk *disk = bio->bi_bdev->bd_disk;
	u8 op;
	u64 lba;
	u32 dev;

	switch (bio_op(bio)) {
	case REQ_OP_READ:
		op = nvme_cmd_read;
		break;
	case REQ_OP_WRITE:
		op = nvme_cmd_write;
		break;
	default:
		return;
	}
	dev = disk_dev(disk);
	if (!host_dev_wanted(dev))
		return;
	lba = sector_to_lba(disk->queue, bio->bi_iter.bi_sector);
	if (!nvmetrace_sampled(lba))
		return;
	emit(NVMETRACE_EV_BIO_QUEUE, lba, dev, bio->bi_iter.bi_size, 0, 0, 0,
	     0, op, op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0, 0);
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
	emit(event, lba, dev, blk_rq_bytes(rq), rq_qid(rq), 0, (u16)rq->tag, 0,
	     op, NVMETRACE_REC_HAS_QID |
	     (blk_rq_is_passthrough(rq) ? NVMETRACE_REC_PASSTHRU : 0) |
	     (op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0), aux);
}

static __always_inline void host_rq_event(u16 event, struct request *rq, u64 aux)
{
	rq_event(event, rq, aux, false);
}

static void probe_rq_insert(void *data, struct request *rq)
{
	host_rq_event(NVMETRACE_EV_RQ_INSERT, rq, 0);
}

static void probe_rq_issue(void *data, struct request *rq)
{
	host_rq_event(NVMETRACE_EV_RQ_ISSUE, rq, 0);
}

static void probe_rq_complete(void *data, struct request *rq,
			      blk_status_t error, unsigned int nr_bytes)
{
	host_rq_event(NVMETRACE_EV_RQ_COMPLETE, rq, (__force u64)error);
}

static void probe_nvme_complete(void *data, struct request *rq)
{
	host_rq_event(NVMETRACE_EV_NVME_COMPLETE, rq, 0);
}

/* nvme_setup_cmd: the command id is known from here on. */
static void probe_nvme_setup(void *data, struct request *rq,
			     struct nvme_command *cmd)
{
	struct gendisk *disk = rq->q->disk;
	u8 op = cmd->common.opcode;
	u64 lba;
	u32 dev;

	if (!disk)
		return;
	if (op != nvme_cmd_read && op != nvme_cmd_write) {
		if (unlikely(blk_rq_is_passthrough(rq)))
			pt_note(rq, op, 0, false);
		return;
	}
	dev = disk_dev(disk);
	if (!host_dev_wanted(dev))
		return;
	lba = le64_to_cpu(cmd->rw.slba);
	if (!nvmetrace_sampled(lba)) {
		if (unlikely(blk_rq_is_passthrough(rq)))
			pt_note(rq, op, lba, false);
		return;
	}
	if (unlikely(blk_rq_is_passthrough(rq)))
		pt_note(rq, op, lba, true);
	emit(NVMETRACE_EV_NVME_SETUP, lba, dev, blk_rq_bytes(rq), rq_qid(rq),
	     cmd->common.command_id, (u16)rq->tag, 0, op,
	     NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID |
	     (blk_rq_is_passthrough(rq) ? NVMETRACE_REC_PASSTHRU : 0) |
	     (op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0),
	     le32_to_cpu(cmd->common.nsid));
}

/* ------------------------------------------- host, above the block layer */

/*
 * The span user space sees: fio's latency starts before io_submit() and ends
 * when io_getevents() has handed the completion back.  These hooks time the
 * parts of it outside the block layer, for libaio on a block device opened
 * with O_DIRECT:
 *
 *  - kprobe on io_submit(): its entry time and the user's iocb array are
 *    kept for the task (no record).
 *  - kprobes on blkdev_read_iter/blkdev_write_iter (the file-level submission,
 *    before any bio): FILE_SUBMIT, with the io_submit() entry in its aux.
 *    io_submit() submits the array in order, so the n-th file submission of
 *    the call is the n-th iocb: its user address is read (without faulting)
 *    for a sampled command and kept in a small table with the command's dev
 *    and LBA.
 *  - kprobe on aio_complete_rw: AIO_COMPLETE, the completion posted to the
 *    aio context (right after block_rq_complete, in the same context).
 *  - kretprobe on do_io_getevents: AIO_REAP when it returns: each event it
 *    copied to user space names its iocb (io_event.obj); one whose iocb is in
 *    the table gives a record with that command's dev and LBA.  The aio ring
 *    is handed over oldest first, possibly over several calls, so only the
 *    iocb says which reap took which command.  While no sampled command is
 *    in the table the return is not probed at all.
 *
 * The LBA of FILE_SUBMIT and AIO_COMPLETE is the file position in the whole
 * disk's logical blocks, the number block_bio_queue samples by, so they pick
 * the same commands.  aio_complete_rw runs after the block device advanced
 * ki_pos by the result (blkdev_bio_end_io_async), so it steps back by it.
 *
 * State, all O(1) and racy only in ways that lose a record: the io_submit()
 * stash (by a hash of the task) and the iocb table (a collision drops the
 * older entry).
 */
struct nvmetrace_submit {
	const struct task_struct *task;	/* in io_submit() since entry_ts */
	u64 entry_ts;
	unsigned long iocbpp;		/* its struct iocb __user * __user * */
	u32 nsub;			/* file submissions so far in this call */
};
/*
 * By task, not by CPU: the task may migrate between io_submit()'s entry and
 * its file submissions.  Only the task itself writes and reads its slot; two
 * tasks in io_submit() at once whose slots collide lose their entry times.
 */
#define NVMETRACE_SUBMIT_BITS	6
static struct nvmetrace_submit submit_stash[1 << NVMETRACE_SUBMIT_BITS];

static __always_inline struct nvmetrace_submit *task_stash(void)
{
	return &submit_stash[hash_ptr(current, NVMETRACE_SUBMIT_BITS)];
}

struct nvmetrace_uiocb {
	u64 uptr;	/* user address of the iocb, 0: free; written last */
	u64 lba;
	u32 dev;
	u8 op;
};
#define NVMETRACE_UIOCB_BITS	8
static struct nvmetrace_uiocb uiocbs[1 << NVMETRACE_UIOCB_BITS];
static atomic_t uiocbs_live;	/* entries in use, about */

/* events per io_getevents() return looked at, at most */
#define NVMETRACE_REAP_EVENTS_MAX	64

static __always_inline u64 uaux(u32 pid, u64 hi)
{
	return (u64)pid | (u64)min_t(u64, hi, U32_MAX) << 32;
}

/* kprobe at __x64_sys_io_submit(const struct pt_regs *regs): the user's registers */
static int kp_submit(struct kprobe *kp, struct pt_regs *regs)
{
	struct pt_regs *uregs = (struct pt_regs *)regs_get_kernel_argument(regs, 0);
	struct nvmetrace_submit *st = task_stash();

	if (unlikely(!READ_ONCE(emitting)))
		return 0;
	st->task = current;
	st->entry_ts = ktime_get_ns();
	st->iocbpp = regs_get_kernel_argument(uregs, 2);	/* io_submit(ctx, nr, iocbpp) */
	st->nsub = 0;
	return 0;
}

/* The whole disk's dev and the LBA of byte pos of a block device file. */
static __always_inline bool file_lba(const struct file *file, loff_t pos,
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

static __always_inline void file_submit(struct pt_regs *regs, u8 op)
{
	const struct kiocb *iocb = (const struct kiocb *)regs_get_kernel_argument(regs, 0);
	const struct iov_iter *iter = (const struct iov_iter *)regs_get_kernel_argument(regs, 1);
	struct nvmetrace_submit *st = task_stash();
	u64 lba, since = 0, uptr = 0;
	/* the stash is this call's: same task, still inside io_submit() */
	bool in_submit = st->task == current &&
			 syscall_get_nr(current, task_pt_regs(current)) == __NR_io_submit;
	u32 dev, idx = 0;

	if (unlikely(!READ_ONCE(emitting)))
		return;
	if (in_submit)
		idx = st->nsub++;
	if (!(iocb->ki_flags & IOCB_DIRECT) ||
	    !file_lba(iocb->ki_filp, iocb->ki_pos, &dev, &lba) ||
	    !nvmetrace_sampled(lba))
		return;
	if (in_submit) {
		since = ktime_get_ns() - st->entry_ts;
		if (!copy_from_user_nofault(&uptr, (const void __user *)(st->iocbpp +
					    idx * sizeof(u64)), sizeof(uptr)) && uptr) {
			struct nvmetrace_uiocb *u = &uiocbs[hash_64(uptr, NVMETRACE_UIOCB_BITS)];

			if (!READ_ONCE(u->uptr))
				atomic_inc(&uiocbs_live);
			WRITE_ONCE(u->uptr, 0);
			u->lba = lba;
			u->dev = dev;
			u->op = op;
			smp_store_release(&u->uptr, uptr);
		}
	}
	emit(NVMETRACE_EV_FILE_SUBMIT, lba, dev, iov_iter_count(iter), 0, 0, 0,
	     0, op, op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0,
	     uaux(current->pid, since));
}

/* kprobes at blkdev_read_iter/blkdev_write_iter(struct kiocb *, struct iov_iter *) */
static int kp_file_read(struct kprobe *kp, struct pt_regs *regs)
{
	file_submit(regs, nvme_cmd_read);
	return 0;
}

static int kp_file_write(struct kprobe *kp, struct pt_regs *regs)
{
	file_submit(regs, nvme_cmd_write);
	return 0;
}

/* kprobe at aio_complete_rw(struct kiocb *iocb, long res) */
static int kp_aio_complete(struct kprobe *kp, struct pt_regs *regs)
{
	const struct kiocb *iocb = (const struct kiocb *)regs_get_kernel_argument(regs, 0);
	long res = (long)regs_get_kernel_argument(regs, 1);
	const struct file *file = iocb->ki_filp;
	loff_t pos = iocb->ki_pos;
	u64 lba;
	u32 dev;
	u8 op;

	if (unlikely(!READ_ONCE(emitting)))
		return 0;
	if (!(iocb->ki_flags & IOCB_DIRECT) || !S_ISBLK(file_inode(file)->i_mode))
		return 0;
	if (res > 0)
		pos -= res;	/* the block device advanced ki_pos by the result */
	if (!file_lba(file, pos, &dev, &lba) || !nvmetrace_sampled(lba))
		return 0;
	op = (iocb->ki_flags & IOCB_WRITE) ? nvme_cmd_write : nvme_cmd_read;
	emit(NVMETRACE_EV_AIO_COMPLETE, lba, dev, res > 0 ? res : 0, 0, 0, 0, 0,
	     op, op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0, (u64)res);
	return 0;
}

/* do_io_getevents(ctx_id, min_nr, nr, struct io_event __user *events, ts) */
static int krp_reap_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	if (!READ_ONCE(emitting) || atomic_read(&uiocbs_live) <= 0)
		return 1;	/* no sampled command to reap: no return probe */
	*(unsigned long *)ri->data = regs_get_kernel_argument(regs, 3);
	return 0;
}

static int krp_reap_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	const struct io_event __user *events = *(const struct io_event __user **)ri->data;
	long ret = (long)regs_return_value(regs);
	long i;

	for (i = 0; i < min_t(long, ret, NVMETRACE_REAP_EVENTS_MAX); i++) {
		struct nvmetrace_uiocb *u;
		struct io_event ev;
		u64 lba;
		u32 dev;
		u8 op;

		if (copy_from_user_nofault(&ev, &events[i], sizeof(ev)))
			return 0;
		u = &uiocbs[hash_64(ev.obj, NVMETRACE_UIOCB_BITS)];
		if (!ev.obj || smp_load_acquire(&u->uptr) != ev.obj)
			continue;
		lba = u->lba;
		dev = u->dev;
		op = u->op;
		if (cmpxchg(&u->uptr, ev.obj, 0) != ev.obj)
			continue;	/* taken over by another command meanwhile */
		atomic_dec(&uiocbs_live);
		emit(NVMETRACE_EV_AIO_REAP, lba, dev, 0, 0, 0, 0, 0, op,
		     op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0,
		     uaux(current->pid, ret));
	}
	return 0;
}

/*
 * A private field: its offset comes from BTF through user space (struct
 * nvmetrace_layout), never from a guess.
 */
#define FIELD_AT(type, base, off) (*(type *)((const char *)(base) + (off)))

/* ------------------------------------------------------- nvme-tcp host */

/*
 * nvme-tcp's functions are static and most of the per-PDU ones are inlined
 * (nvme_tcp_try_send_cmd_pdu on 6.1, nvme_tcp_recv_pdu, nvme_tcp_handle_r2t,
 * nvme_tcp_process_nvme_cqe on both), so the hooks sit on the two that have
 * their address taken and exist in both kernels:
 *
 *  - nvme_tcp_try_send(queue), the send state machine, called with the
 *    queue's send_mutex held: the request it is about to send is
 *    queue->request, or the one nvme_tcp_fetch_request() will take.  At
 *    offset 0 of state SEND_CMD_PDU its command PDU (and any in-capsule
 *    data) is being handed to the socket, of SEND_H2C_PDU an H2C data PDU.
 *  - nvme_tcp_recv_skb(desc, skb, offset, len), the socket's read_sock
 *    actor: the PDU headers that start in this skb are parsed from the
 *    queue's receive state and the skb (skb_copy_bits(), no allocation),
 *    and each R2T, C2H data and response PDU recorded for its request.
 *
 * The private fields come from BTF (struct nvmetrace_tcp_layout); these
 * hooks are refused without them.  Requests are preallocated and live as
 * long as the queue, so reading them is safe; only commands in flight are
 * recorded.
 */
#define TCP_OFF(name) NVMETRACE_TCP_OFF(&cfg.layout, name)

/* nvme-tcp's enum nvme_tcp_send_state, the same in 6.1 and 6.12 */
#define NVMETRACE_TCP_SEND_CMD_PDU	0
#define NVMETRACE_TCP_SEND_H2C_PDU	1
/* requests nvmetrace follows down nvme_tcp_queue.req_list, at most */
#define NVMETRACE_TCP_REQ_LIST_MAX	64
/* PDU headers nvmetrace parses in one skb, at most */
#define NVMETRACE_TCP_SKB_PDUS_MAX	64

/* The I/O queue id of an nvme_tcp_queue (its index in ctrl->queues), 0: admin. */
static __always_inline u16 tcp_queue_qid(const void *queue, const void **ctrl)
{
	const char *queues;

	*ctrl = FIELD_AT(const void *, queue, TCP_OFF(QUEUE_CTRL));
	if (!*ctrl)
		return 0;
	queues = FIELD_AT(const char *, *ctrl, TCP_OFF(CTRL_QUEUES));
	if (!queues || (const char *)queue < queues)
		return 0;
	return ((const char *)queue - queues) / TCP_OFF(QUEUE_SIZE);
}

/* Whether queue is the admin queue (ctrl->queues[0]); no division. */
static __always_inline bool tcp_queue_is_admin(const void *queue)
{
	const void *ctrl = FIELD_AT(const void *, queue, TCP_OFF(QUEUE_CTRL));

	return !ctrl || FIELD_AT(const void *, ctrl, TCP_OFF(CTRL_QUEUES)) == queue;
}

/*
 * The sampling predicate on a request's LBA: the first thing the nvme-tcp
 * hooks test once they hold a request, so that a command that is not sampled
 * costs a few loads and one hash.
 */
static __always_inline bool tcp_rq_sampled(struct request *rq)
{
	u64 lba;
	u8 op;

	return rq_op_lba(rq, &op, &lba) && nvmetrace_sampled(lba);
}

/* rq's event while it is in flight; sampled: as rq_event() */
static __always_inline void tcp_rq_event(u16 event, struct request *rq, u64 aux, bool sampled)
{
	if (blk_mq_rq_state(rq) != MQ_RQ_IN_FLIGHT)
		return;
	rq_event(event, rq, aux, sampled);
}

/*
 * The request nvme_tcp_try_send() will work on: the current one, else the
 * head of send_list, else the oldest on req_list (the llist is newest
 * first).  send_mutex is held, so nobody else takes requests off the lists;
 * llist_add() only changes the head.
 */
static __always_inline const void *tcp_next_send(const void *queue)
{
	const struct list_head *sl;
	const struct llist_node *n;
	const void *req;
	int i;

	req = FIELD_AT(const void *, queue, TCP_OFF(QUEUE_REQUEST));
	if (req)
		return req;
	sl = (const struct list_head *)((const char *)queue + TCP_OFF(QUEUE_SEND_LIST));
	if (!list_empty(sl))
		return (const char *)READ_ONCE(sl->next) - TCP_OFF(REQ_ENTRY);
	n = READ_ONCE(((const struct llist_head *)((const char *)queue +
						   TCP_OFF(QUEUE_REQ_LIST)))->first);
	for (i = 0; n && i < NVMETRACE_TCP_REQ_LIST_MAX; i++) {
		const struct llist_node *next = READ_ONCE(n->next);

		if (!next)
			return (const char *)n - TCP_OFF(REQ_LENTRY);
		n = next;
	}
	return NULL;	/* empty, or too long to follow here */
}

/*
 * kprobe at nvme_tcp_try_send(struct nvme_tcp_queue *queue).  It runs
 * several times per command (from queue_rq and from every io_work round),
 * so the common cases leave early: nothing to send, the middle of a send, a
 * state without a PDU to note, then the sampling predicate.
 */
static int kp_tcp_try_send(struct kprobe *kp, struct pt_regs *regs)
{
	const void *queue = (const void *)regs_get_kernel_argument(regs, 0);
	struct request *rq;
	const void *req;
	u32 state;

	req = tcp_next_send(queue);
	if (!req || FIELD_AT(size_t, req, TCP_OFF(REQ_OFFSET)))
		return 0;	/* nothing to send, or the rest of a partial send */
	state = FIELD_AT(u32, req, TCP_OFF(REQ_STATE));
	if (state != NVMETRACE_TCP_SEND_CMD_PDU && state != NVMETRACE_TCP_SEND_H2C_PDU)
		return 0;
	if (tcp_queue_is_admin(queue))
		return 0;	/* its async event request has no struct request */
	rq = blk_mq_rq_from_pdu((void *)req);
	if (!tcp_rq_sampled(rq))
		return 0;
	tcp_rq_event(state == NVMETRACE_TCP_SEND_CMD_PDU ? NVMETRACE_EV_TCP_CMD_SEND :
		     NVMETRACE_EV_TCP_H2C_SEND, rq, 0, true);
	return 0;
}

/*
 * len bytes of skb at pos: in place when they lie in the linear part or in
 * one page fragment (the common case, no copy), else copied into buf by
 * skb_copy_bits().  NULL when the skb is shorter.
 */
static __always_inline const u8 *tcp_skb_peek(const struct sk_buff *skb, size_t pos,
					      u8 *buf, size_t len)
{
	const struct skb_shared_info *sh = skb_shinfo(skb);
	size_t head = skb_headlen(skb);
	int i;

	if (pos + len <= head)
		return skb->data + pos;
	if (pos >= head) {
		size_t off = pos - head;

		for (i = 0; i < sh->nr_frags; i++) {
			const skb_frag_t *f = &sh->frags[i];
			size_t fl = skb_frag_size(f);

			if (off < fl) {
				const u8 *p = off + len <= fl ? skb_frag_address_safe(f) : NULL;

				if (p)
					return p + off;
				break;
			}
			off -= fl;
		}
	}
	return skb_copy_bits(skb, pos, buf, len) ? NULL : buf;
}

/* One received PDU header (the first 24 bytes, enough for each type). */
static __always_inline void tcp_recv_pdu(struct blk_mq_tags *tags, const u8 *h)
{
	const struct nvme_tcp_hdr *hdr = (const void *)h;
	struct request *rq;
	u16 event, cid;
	u64 aux = 0;
	u32 tag;

	switch (hdr->type) {
	case nvme_tcp_c2h_data: {
		const struct nvme_tcp_data_pdu *p = (const void *)h;

		event = NVMETRACE_EV_TCP_C2H_RECV;
		cid = p->command_id;
		aux = le32_to_cpu(p->data_offset) |
		      (u64)hdr->flags << NVMETRACE_C2H_AUX_FLAGS_SHIFT;
		break;
	}
	case nvme_tcp_r2t: {
		const struct nvme_tcp_r2t_pdu *p = (const void *)h;

		event = NVMETRACE_EV_TCP_R2T_RECV;
		cid = p->command_id;
		aux = le32_to_cpu(p->r2t_offset);
		break;
	}
	case nvme_tcp_rsp:
		event = NVMETRACE_EV_TCP_RSP_RECV;
		cid = ((const struct nvme_tcp_rsp_pdu *)h)->cqe.command_id;
		break;
	default:
		return;
	}
	tag = cid & 0xfff;	/* nvme_tag_from_cid() */
	if (tag >= tags->nr_tags)
		return;
	rq = READ_ONCE(tags->rqs[tag]);
	if (rq && tcp_rq_sampled(rq))
		tcp_rq_event(event, rq, aux, true);
}

/* kprobe at nvme_tcp_recv_skb(desc, skb, offset, len) */
static int kp_tcp_recv_skb(struct kprobe *kp, struct pt_regs *regs)
{
	const read_descriptor_t *desc =
		(const read_descriptor_t *)regs_get_kernel_argument(regs, 0);
	const struct sk_buff *skb =
		(const struct sk_buff *)regs_get_kernel_argument(regs, 1);
	size_t pos = regs_get_kernel_argument(regs, 2);
	size_t end = pos + regs_get_kernel_argument(regs, 3);
	const void *queue = desc->arg.data;
	const struct blk_mq_tag_set *set;
	struct blk_mq_tags *tags;
	const void *ctrl;
	u8 h[sizeof(struct nvme_tcp_rsp_pdu)];
	int pdu_offset, i;
	u16 qid;

	BUILD_BUG_ON(sizeof(struct nvme_tcp_data_pdu) != sizeof(h) ||
		     sizeof(struct nvme_tcp_r2t_pdu) != sizeof(h));
	qid = tcp_queue_qid(queue, &ctrl);
	if (!qid)
		return 0;
	set = (const struct blk_mq_tag_set *)((const char *)ctrl + TCP_OFF(CTRL_TAG_SET));
	if (qid > set->nr_hw_queues || !set->tags)
		return 0;
	tags = READ_ONCE(set->tags[qid - 1]);
	if (!tags)
		return 0;

	/*
	 * Where the first PDU header that starts in this skb is (see
	 * nvme_tcp_recv_state(): pdu, else digest, else data).
	 */
	if (FIELD_AT(int, queue, TCP_OFF(QUEUE_PDU_REMAINING))) {
		pdu_offset = FIELD_AT(int, queue, TCP_OFF(QUEUE_PDU_OFFSET));
		if (pdu_offset > 0) {
			/* a header split across skbs: its start is in queue->pdu */
			const u8 *pdu = FIELD_AT(const u8 *, queue, TCP_OFF(QUEUE_PDU));
			int have = min_t(int, pdu_offset, sizeof(h));

			memcpy(h, pdu, have);
			if (have < sizeof(h) &&
			    (pos + sizeof(h) - have > end ||
			     skb_copy_bits(skb, pos, h + have, sizeof(h) - have)))
				return 0;
			tcp_recv_pdu(tags, h);
			pos += le32_to_cpu(((struct nvme_tcp_hdr *)h)->plen) - pdu_offset;
		}
	} else if (FIELD_AT(size_t, queue, TCP_OFF(QUEUE_DDGST_REMAINING))) {
		pos += FIELD_AT(size_t, queue, TCP_OFF(QUEUE_DDGST_REMAINING));
	} else {
		pos += FIELD_AT(size_t, queue, TCP_OFF(QUEUE_DATA_REMAINING));
		if (FIELD_AT(bool, queue, TCP_OFF(QUEUE_DATA_DIGEST)))
			pos += NVME_TCP_DIGEST_LENGTH;
	}
	for (i = 0; i < NVMETRACE_TCP_SKB_PDUS_MAX && pos + sizeof(h) <= end; i++) {
		const u8 *p = tcp_skb_peek(skb, pos, h, sizeof(h));
		u32 plen;

		if (!p)
			return 0;
		tcp_recv_pdu(tags, p);
		plen = le32_to_cpu(((const struct nvme_tcp_hdr *)p)->plen);
		if (plen < sizeof(h))
			return 0;	/* not a PDU we know: stop parsing */
		pos += plen;
	}
	return 0;
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
	const void *sq, *ctrl;
	u8 op = cmd->common.opcode;
	u64 lba = le64_to_cpu(cmd->rw.slba);
	u16 qid, cntlid;

	if (!sampled && ((op != nvme_cmd_read && op != nvme_cmd_write) || !nvmetrace_sampled(lba)))
		return;
	sq = FIELD_AT(const void *, req, cfg.layout.req_sq);
	qid = FIELD_AT(u16, sq, cfg.layout.sq_qid);
	if (!qid)
		return;
	ctrl = FIELD_AT(const void *, sq, cfg.layout.sq_ctrl);
	cntlid = ctrl ? FIELD_AT(u16, ctrl, cfg.layout.ctrl_cntlid) : 0;
	/* nvmet's namespace block size is private: len counts blocks */
	emit(event, lba, 0, le16_to_cpu(cmd->rw.length) + 1, qid,
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
		     FIELD_AT(const struct nvme_command *, req, cfg.layout.req_cmd), 0);
}

static void probe_nvmet_init(void *data, void *req, struct nvme_command *cmd)
{
	target_event(NVMETRACE_EV_NVMET_INIT, req, cmd,
		     le32_to_cpu(cmd->common.nsid));
}

static void probe_nvmet_complete(void *data, void *req)
{
	const struct nvme_command *cmd =
		FIELD_AT(const struct nvme_command *, req, cfg.layout.req_cmd);
	const struct nvme_completion *cqe =
		FIELD_AT(const struct nvme_completion *, req, cfg.layout.req_cqe);

	target_event(NVMETRACE_EV_NVMET_COMPLETE, req, cmd,
		     le16_to_cpu(cqe->status) >> 1);
}

/* the probe_test_symbol kprobe: records nothing */
static int kp_test_noop(struct kprobe *kp, struct pt_regs *regs)
{
	return 0;
}

/* at nvmet_bdev_execute_rw(struct nvmet_req *req) */
static int kp_nvmet_exec(struct kprobe *kp, struct pt_regs *regs)
{
	req_event(NVMETRACE_EV_NVMET_EXEC, (const void *)regs_get_kernel_argument(regs, 0));
	return 0;
}

/* kprobe at nvmet_bio_done(struct bio *bio): bi_private is the nvmet_req */
static int kp_nvmet_bio_done(struct kprobe *kp, struct pt_regs *regs)
{
	const struct bio *bio = (const struct bio *)regs_get_kernel_argument(regs, 0);
	const void *req = bio->bi_private;

	target_event(NVMETRACE_EV_NVMET_BIO_DONE, req,
		     FIELD_AT(const struct nvme_command *, req, cfg.layout.req_cmd),
		     (__force u64)bio->bi_status);
	return 0;
}

/* nvme-rdma host and nvmet-rdma target hooks */
#include "hooks_rdma.c"
/* -------------------------------------------------- nvmet-tcp target */

/*
 * nvmet-tcp's per-PDU functions are static, and most of them are inlined in
 * one kernel or both (nvmet_tcp_done_recv_pdu, nvmet_tcp_handle_h2c_data_pdu,
 * nvmet_setup_c2h_data_pdu and nvmet_setup_r2t_pdu in both; nvmet_try_send_r2t,
 * nvmet_try_send_data_pdu and nvmet_try_send_response in 6.1: nm of both
 * nvmet-tcp.ko).  The hooks sit on functions that exist in both:
 *
 *  - nvmet_tcp_data_ready(sk), the socket's sk_data_ready callback (softirq,
 *    or the socket owner in release_sock()): notes when data last arrived on
 *    the queue's socket, in tcpt_arrivals[].  It cannot sample (nothing is
 *    parsed yet), so it only stores a timestamp.
 *  - nvmet_tcp_map_data(cmd), called right after nvmet_req_init() for every
 *    command that carries data: TCPT_CMD_RECV, aux = that arrival time.
 *  - nvmet_tcp_queue_response(req) (nvmet_tcp_ops.queue_response): for a
 *    write that still waits for its data, the R2T is queued: TCPT_R2T_SEND.
 *  - nvmet_tcp_build_pdu_iovec(cmd): the receive of data is set up, for an
 *    H2C data PDU whose header is in queue->pdu (TCPT_H2C_RECV, once per
 *    PDU) or for in-capsule data (TCPT_DATA_RECV).
 *
 * Each samples on the command's LBA before it reads anything else.  The
 * private fields come from BTF (struct nvmetrace_tcpt_layout); these hooks
 * are refused without them.  Commands are preallocated with their queue, and
 * every hook runs while its command is in flight.
 */
#define TCPT_OFF(name) NVMETRACE_TCPT_OFF(&cfg.layout, name)

/*
 * The last data arrival per queue socket.  A queue hashes to one entry;
 * two queues on one entry overwrite each other, and a reader that finds
 * another queue there records no arrival.  The writer clears the owner
 * around the timestamp, so a reader that sees the same owner before and
 * after reading it has a timestamp of that queue.  O(1), no lock.
 */
#define NVMETRACE_TCPT_ARRIVAL_BITS	6
struct nvmetrace_tcpt_arrival {
	const void *queue;
	u64 ts;
};
static struct nvmetrace_tcpt_arrival tcpt_arrivals[1 << NVMETRACE_TCPT_ARRIVAL_BITS];

static __always_inline struct nvmetrace_tcpt_arrival *tcpt_arrival(const void *queue)
{
	return &tcpt_arrivals[hash_ptr((void *)queue, NVMETRACE_TCPT_ARRIVAL_BITS)];
}

/* kprobe at nvmet_tcp_data_ready(struct sock *sk); sk_user_data is the queue */
static int kp_tcpt_data_ready(struct kprobe *kp, struct pt_regs *regs)
{
	const struct sock *sk = (const struct sock *)regs_get_kernel_argument(regs, 0);
	const void *queue = READ_ONCE(sk->sk_user_data);
	struct nvmetrace_tcpt_arrival *a;

	if (!queue)
		return 0;
	a = tcpt_arrival(queue);
	WRITE_ONCE(a->queue, NULL);
	smp_wmb();
	WRITE_ONCE(a->ts, ktime_get_ns());
	smp_wmb();
	WRITE_ONCE(a->queue, queue);
	return 0;
}

/* When data last arrived on queue's socket, 0: not known. */
static __always_inline u64 tcpt_arrived(const void *queue)
{
	const struct nvmetrace_tcpt_arrival *a = tcpt_arrival(queue);
	u64 ts;

	if (READ_ONCE(a->queue) != queue)
		return 0;
	smp_rmb();
	ts = READ_ONCE(a->ts);
	smp_rmb();
	return READ_ONCE(a->queue) == queue ? ts : 0;
}

/* req's NVMe command if it is a sampled read or write, else NULL: first test */
static __always_inline const struct nvme_command *tcpt_sampled(const void *req)
{
	const struct nvme_command *c =
		FIELD_AT(const struct nvme_command *, req, cfg.layout.req_cmd);
	u8 op = c->common.opcode;

	if (op != nvme_cmd_read && op != nvme_cmd_write)
		return NULL;
	return nvmetrace_sampled(le64_to_cpu(c->rw.slba)) ? c : NULL;
}

/* kprobe at nvmet_tcp_map_data(struct nvmet_tcp_cmd *cmd) */
static int kp_tcpt_map_data(struct kprobe *kp, struct pt_regs *regs)
{
	const char *cmd = (const char *)regs_get_kernel_argument(regs, 0);
	const void *req = cmd + TCPT_OFF(CMD_REQ);
	const struct nvme_command *c = tcpt_sampled(req);
	u64 arrived;

	if (!c)
		return 0;
	arrived = tcpt_arrived(FIELD_AT(const void *, cmd, TCPT_OFF(CMD_QUEUE)));
	if (arrived)
		req_cmd_event(NVMETRACE_EV_TCPT_CMD_RECV, req, c, arrived, true);
	return 0;
}

/* kprobe at nvmet_tcp_queue_response(struct nvmet_req *req) */
static int kp_tcpt_queue_response(struct kprobe *kp, struct pt_regs *regs)
{
	const char *req = (const char *)regs_get_kernel_argument(regs, 0);
	const struct nvme_command *c = tcpt_sampled(req);
	const struct nvme_completion *cqe;
	u32 done;

	if (!c || c->common.opcode != nvme_cmd_write)
		return 0;
	/* nvmet_tcp_need_data_in(): a write short of its data, no error */
	cqe = FIELD_AT(const struct nvme_completion *, req, cfg.layout.req_cqe);
	done = FIELD_AT(u32, req - TCPT_OFF(CMD_REQ), TCPT_OFF(CMD_RBYTES_DONE));
	if (cqe->status || done >= FIELD_AT(size_t, req, TCPT_OFF(REQ_TRANSFER_LEN)))
		return 0;	/* its response, not an R2T */
	req_cmd_event(NVMETRACE_EV_TCPT_R2T_SEND, req, c, done, true);
	return 0;
}

/* kprobe at nvmet_tcp_build_pdu_iovec(struct nvmet_tcp_cmd *cmd) */
static int kp_tcpt_build_pdu_iovec(struct kprobe *kp, struct pt_regs *regs)
{
	const char *cmd = (const char *)regs_get_kernel_argument(regs, 0);
	const void *req = cmd + TCPT_OFF(CMD_REQ);
	const struct nvme_command *c = tcpt_sampled(req);
	const struct nvme_tcp_hdr *hdr;
	u32 len;

	if (!c)
		return 0;
	hdr = (const void *)(FIELD_AT(const char *, cmd, TCPT_OFF(CMD_QUEUE)) +
			     TCPT_OFF(QUEUE_PDU));
	len = FIELD_AT(u32, cmd, TCPT_OFF(CMD_PDU_LEN));
	if (READ_ONCE(hdr->type) == nvme_tcp_h2c_data)
		req_cmd_event(NVMETRACE_EV_TCPT_H2C_RECV, req, c,
			      FIELD_AT(u32, cmd, TCPT_OFF(CMD_RBYTES_DONE)) |
			      (u64)len << NVMETRACE_H2C_AUX_LEN_SHIFT, true);
	else
		req_cmd_event(NVMETRACE_EV_TCPT_DATA_RECV, req, c, len, true);
	return 0;
}

/* ------------------------------------------------------------ the table */

/* struct nvmetrace_hook.needs */
#define NEEDS_TCP_HOST		(1u << 0)	/* cfg.layout.tcp */
#define NEEDS_RDMA_HOST		(1u << 2)	/* cfg.layout.rdma */
#define NEEDS_RDMA_TARGET	(1u << 3)	/* cfg.layout.rdmat */
#define NEEDS_TCP_TARGET	(1u << 1)	/* cfg.layout.tcpt (and nvmet's) */

struct nvmetrace_hook {
	const char *name;	/* tracepoint or function */
	const char *module;	/* NULL: built in */
	u32 kind;		/* NVMETRACE_HOOK_*: the mechanism asked for */
	u32 role;		/* NVMETRACE_ROLE_* it serves */
	void *probe;		/* tracepoint probe */
	kprobe_pre_handler_t pre;	/* kprobe handler */
	bool alternative;	/* absent on some kernels by design */
	u32 needs;		/* NEEDS_*: layout groups it reads */
	/* a kretprobe (reported as a kprobe): handlers at entry and return */
	kretprobe_handler_t ret_entry, ret;
	size_t ret_data;	/* per-instance data of the kretprobe */

	/* state, under hooks_lock */
	struct tracepoint *tp;
	struct kprobe kp;
	struct kretprobe krp;
	struct nvmetrace_fhook fh;
	u32 used;		/* the mechanism attached: NVMETRACE_HOOK_FTRACE or _KPROBE */
	u32 state;		/* NVMETRACE_HOOK_* state */
	int err;
};

static struct nvmetrace_hook hooks[] = {
	{ "block_bio_queue", NULL, NVMETRACE_HOOK_TRACEPOINT, NVMETRACE_ROLE_HOST,
	  probe_bio_queue },
	{ "block_rq_insert", NULL, NVMETRACE_HOOK_TRACEPOINT, NVMETRACE_ROLE_HOST,
	  probe_rq_insert },
	{ "block_rq_issue", NULL, NVMETRACE_HOOK_TRACEPOINT, NVMETRACE_ROLE_HOST,
	  probe_rq_issue },
	{ "nvme_setup_cmd", "nvme_core", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_HOST, probe_nvme_setup },
	{ "nvme_complete_rq", "nvme_core", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_HOST, probe_nvme_complete },
	{ "block_rq_complete", NULL, NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_HOST, probe_rq_complete },
	{ "nvmet_req_init", "nvmet", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_TARGET, probe_nvmet_init },
	{ "nvmet_bdev_execute_rw", "nvmet", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_nvmet_exec },
	{ "nvmet_bio_done", "nvmet", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_nvmet_bio_done },
	{ "nvmet_req_complete", "nvmet", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_TARGET, probe_nvmet_complete },
	/* above the block layer: syscalls, files, aio */
	{ "__x64_sys_io_submit", NULL, NVMETRACE_HOOK_FTRACE, NVMETRACE_ROLE_HOST,
	  NULL, kp_submit },
	{ "blkdev_read_iter", NULL, NVMETRACE_HOOK_FTRACE, NVMETRACE_ROLE_HOST,
	  NULL, kp_file_read },
	{ "blkdev_write_iter", NULL, NVMETRACE_HOOK_FTRACE, NVMETRACE_ROLE_HOST,
	  NULL, kp_file_write },
	{ "aio_complete_rw", NULL, NVMETRACE_HOOK_FTRACE, NVMETRACE_ROLE_HOST,
	  NULL, kp_aio_complete },
	{ "do_io_getevents", NULL, NVMETRACE_HOOK_KPROBE, NVMETRACE_ROLE_HOST,
	  .ret_entry = krp_reap_entry, .ret = krp_reap_return,
	  .ret_data = sizeof(unsigned long) },
	{ "nvme_tcp_try_send", "nvme_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_tcp_try_send, .needs = NEEDS_TCP_HOST },
	{ "nvme_tcp_recv_skb", "nvme_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_tcp_recv_skb, .needs = NEEDS_TCP_HOST },
	/* nvme-rdma host */
	{ "nvme_rdma_post_send", "nvme_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_rdma_post_send, .needs = NEEDS_RDMA_HOST },
	{ "nvme_rdma_send_done", "nvme_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_rdma_send_done, .needs = NEEDS_RDMA_HOST },
	{ "nvme_rdma_recv_done", "nvme_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_rdma_recv_done, .needs = NEEDS_RDMA_HOST },
	{ "nvme_rdma_complete_rq", "nvme_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_rdma_complete_rq },
	/* nvmet-rdma target */
	{ "nvmet_rdma_recv_done", "nvmet_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_rdmat_recv_done, .needs = NEEDS_RDMA_TARGET },
	{ "nvmet_rdma_read_data_done", "nvmet_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_rdmat_read_done, .needs = NEEDS_RDMA_TARGET },
	{ "nvmet_rdma_queue_response", "nvmet_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_rdmat_queue_response },
	{ "nvmet_rdma_send_done", "nvmet_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_rdmat_send_done, .needs = NEEDS_RDMA_TARGET },
	/* nvmet-tcp target */
	{ "nvmet_tcp_data_ready", "nvmet_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_tcpt_data_ready, .needs = NEEDS_TCP_TARGET },
	{ "nvmet_tcp_map_data", "nvmet_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_tcpt_map_data, .needs = NEEDS_TCP_TARGET },
	{ "nvmet_tcp_queue_response", "nvmet_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_tcpt_queue_response, .needs = NEEDS_TCP_TARGET },
	{ "nvmet_tcp_build_pdu_iovec", "nvmet_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_tcpt_build_pdu_iovec, .needs = NEEDS_TCP_TARGET },
	/* probe_test_symbol: named at load, or unused (name NULL) */
	{ NULL, NULL, NVMETRACE_HOOK_KPROBE,
	  NVMETRACE_ROLE_HOST | NVMETRACE_ROLE_TARGET, NULL, kp_test_noop },
};

/*
 * An extra kprobe on any kernel function, for testing how `nvmetrace probe`
 * reports a hook that cannot attach (name a function that does not exist).
 * It records nothing.
 */
static char *probe_test_symbol;
module_param(probe_test_symbol, charp, 0444);
MODULE_PARM_DESC(probe_test_symbol,
		 "extra kprobe that records nothing, to test attach reporting");

/*
 * Every function-entry hook as a kprobe of its own, the path a function
 * that ftrace cannot attach to takes: for testing that path on a kernel
 * where ftrace attaches to them all (tests/guest/scenarios/17-kprobe-fallback.sh).
 */
static bool hook_kprobes;
module_param(hook_kprobes, bool, 0444);
MODULE_PARM_DESC(hook_kprobes,
		 "attach every function-entry hook as a kprobe, not through ftrace (testing)");

/* The layout groups START carried (NEEDS_* bits). */
static u32 layout_have(void)
{
	return (cfg.layout.tcp.valid ? NEEDS_TCP_HOST : 0) |
	       (cfg.layout.rdma.valid ? NEEDS_RDMA_HOST : 0) |
	       (cfg.layout.tcpt.valid && cfg.layout.valid ? NEEDS_TCP_TARGET : 0) |
	       (cfg.layout.rdma.valid ? NEEDS_RDMA_HOST : 0) |
	       (cfg.layout.rdmat.valid ? NEEDS_RDMA_TARGET : 0);
}

static bool hook_wanted(const struct nvmetrace_hook *h)
{
	return recording && h->name && (h->role & cfg.role) &&
	       (h->needs & layout_have()) == h->needs;
}

/* hooks_lock held */
static void tp_attach(struct nvmetrace_hook *h, struct tracepoint *tp)
{
	int ret;

	if (h->state == NVMETRACE_HOOK_ATTACHED)
		return;
	ret = tracepoint_probe_register(tp, h->probe, NULL);
	if (ret) {
		h->state = NVMETRACE_HOOK_FAILED;
		h->err = ret;
		return;
	}
	h->tp = tp;
	h->state = NVMETRACE_HOOK_ATTACHED;
	h->err = 0;
}

/* hooks_lock held */
static void tp_detach(struct nvmetrace_hook *h)
{
	if (h->state == NVMETRACE_HOOK_ATTACHED)
		tracepoint_probe_unregister(h->tp, h->probe, NULL);
	h->tp = NULL;
}

static void match_builtin_tp(struct tracepoint *tp, void *priv)
{
	struct nvmetrace_hook *h = priv;

	if (!strcmp(tp->name, h->name))
		tp_attach(h, tp);
}

/* hooks_lock held: the kprobe (or kretprobe) of h could not be registered */
static void kp_failed(struct nvmetrace_hook *h, int ret)
{
	/*
	 * -ENOENT: no such function: in a module, the module is not loaded (it
	 * is retried when it is) or the function was inlined; built in, this
	 * kernel does not have it.
	 */
	if (ret == -ENOENT)
		h->state = h->module ? NVMETRACE_HOOK_WAITING : NVMETRACE_HOOK_ABSENT;
	else
		h->state = NVMETRACE_HOOK_FAILED;
	h->err = ret;
}

static void kp_attached(struct nvmetrace_hook *h, u32 used)
{
	h->used = used;
	h->state = NVMETRACE_HOOK_ATTACHED;
	h->err = 0;
}

/* hooks_lock held: h through a kprobe (a kretprobe) of its own */
static void kp_register(struct nvmetrace_hook *h)
{
	int ret;

	if (h->ret) {
		memset(&h->krp, 0, sizeof(h->krp));
		h->krp.kp.symbol_name = h->name;
		h->krp.entry_handler = h->ret_entry;
		h->krp.handler = h->ret;
		h->krp.data_size = h->ret_data;
		ret = register_kretprobe(&h->krp);
	} else {
		memset(&h->kp, 0, sizeof(h->kp));
		h->kp.symbol_name = h->name;
		h->kp.pre_handler = h->pre;
		ret = register_kprobe(&h->kp);
	}
	if (ret)
		kp_failed(h, ret);
	else
		kp_attached(h, NVMETRACE_HOOK_KPROBE);
}

/* hooks_lock held: h's kprobe, registered disabled, becomes its hook */
static void kp_enable(struct nvmetrace_hook *h)
{
	int ret = enable_kprobe(&h->kp);

	if (ret) {
		unregister_kprobe(&h->kp);
		kp_failed(h, ret);
		return;
	}
	kp_attached(h, NVMETRACE_HOOK_KPROBE);
}

/* scratch of kp_attach_set()/kp_detach_set(), under hooks_lock */
static struct nvmetrace_hook *set_hooks[ARRAY_SIZE(hooks)];
static struct nvmetrace_fhook *set_fhooks[ARRAY_SIZE(hooks)];
static struct kprobe *set_kprobes[ARRAY_SIZE(hooks)];

/*
 * hooks_lock held: attach the function-entry hooks hs[0..n) (kinds FTRACE
 * and KPROBE) that are not attached.
 *
 * A hook of kind FTRACE first registers its kprobe disabled, which patches
 * nothing: the kprobe core finds the function by name (as it would for the
 * kprobe fallback) and, with KPROBE_FLAG_FTRACE, tells that its address is
 * the function's ftrace location.  Those hooks join the shared ftrace_ops
 * together (one filter update; the first also registers the ops), and their
 * kprobes are unregistered together (one RCU grace period).  A function
 * ftrace cannot attach to (or an ops ftrace refuses) keeps its kprobe,
 * enabled: the kprobe fallback.
 */
static void kp_attach_set(struct nvmetrace_hook **hs, unsigned int n)
{
	unsigned int i, nf = 0, nk = 0;
	struct nvmetrace_hook *h;
	int ret;

	BUILD_BUG_ON(ARRAY_SIZE(hooks) > NVMETRACE_FHOOKS_MAX);
	for (i = 0; i < n; i++) {
		h = hs[i];
		if (h->state == NVMETRACE_HOOK_ATTACHED)
			continue;
		if (h->kind != NVMETRACE_HOOK_FTRACE || h->ret) {
			kp_register(h);
			continue;
		}
		memset(&h->kp, 0, sizeof(h->kp));
		h->kp.symbol_name = h->name;
		h->kp.pre_handler = h->pre;
		h->kp.flags = KPROBE_FLAG_DISABLED;
		ret = register_kprobe(&h->kp);
		if (ret) {
			kp_failed(h, ret);
			continue;
		}
		if (!(h->kp.flags & KPROBE_FLAG_FTRACE) || hook_kprobes) {
			/* not ftrace-able here (or told so): the kprobe is tried instead */
			kp_enable(h);
			continue;
		}
		h->fh.ip = (unsigned long)h->kp.addr;
		h->fh.pre = h->pre;
		set_hooks[nf] = h;
		set_fhooks[nf++] = &h->fh;
	}
	if (!nf)
		return;
	ret = nvmetrace_fhooks_add(set_fhooks, nf);
	for (i = 0; i < nf; i++) {
		h = set_hooks[i];
		if (ret) {
			/* ftrace refused: the kprobe is tried instead */
			kp_enable(h);
			continue;
		}
		kp_attached(h, NVMETRACE_HOOK_FTRACE);
		set_kprobes[nk++] = &h->kp;
	}
	unregister_kprobes(set_kprobes, nk);
}

/*
 * hooks_lock held: ftrace could not update the shared ops' filter and
 * dropped every hook from it (nvmetrace_fhooks_remove()).
 */
static void fhooks_lost(int err)
{
	struct nvmetrace_hook *h;

	for (h = hooks; h < hooks + ARRAY_SIZE(hooks); h++) {
		if (h->state == NVMETRACE_HOOK_ATTACHED &&
		    h->used == NVMETRACE_HOOK_FTRACE && !nvmetrace_fhook_in_ops(&h->fh)) {
			h->state = NVMETRACE_HOOK_FAILED;
			h->err = err;
		}
	}
}

/*
 * hooks_lock held: detach the function-entry hooks hs[0..n) that are
 * attached (the ftrace ones in one update of the shared ops).  Their state
 * is the caller's to set.  No handler of theirs runs once this returns.
 */
static void kp_detach_set(struct nvmetrace_hook **hs, unsigned int n)
{
	unsigned int i, nf = 0;
	struct nvmetrace_hook *h;
	int ret;

	for (i = 0; i < n; i++) {
		h = hs[i];
		if (h->state != NVMETRACE_HOOK_ATTACHED)
			continue;
		if (h->used == NVMETRACE_HOOK_FTRACE)
			set_fhooks[nf++] = &h->fh;
		else if (h->ret)
			unregister_kretprobe(&h->krp);
		else
			unregister_kprobe(&h->kp);
	}
	ret = nvmetrace_fhooks_remove(set_fhooks, nf);
	if (ret)
		fhooks_lost(ret);
}

/*
 * A module with tracepoints comes or goes.  Called with the tracepoint
 * module list mutex held; replayed for loaded modules when the notifier is
 * registered.  A module's tracepoints must have no probes left when it goes
 * (the tracepoint core checks), so detach them here.
 */
static int tp_module_notify(struct notifier_block *nb, unsigned long val,
			    void *data)
{
	struct tp_module *tp_mod = data;
	struct module *mod = tp_mod->mod;
	struct nvmetrace_hook *h;
	unsigned int i;

	mutex_lock(&hooks_lock);
	for (h = hooks; h < hooks + ARRAY_SIZE(hooks); h++) {
		if (h->kind != NVMETRACE_HOOK_TRACEPOINT || !h->module ||
		    strcmp(h->module, mod->name))
			continue;
		if (val == MODULE_STATE_COMING && hook_wanted(h)) {
			for (i = 0; i < mod->num_tracepoints; i++) {
				struct tracepoint *tp =
					tracepoint_ptr_deref(&mod->tracepoints_ptrs[i]);

				if (!strcmp(tp->name, h->name))
					tp_attach(h, tp);
			}
		} else if (val == MODULE_STATE_GOING) {
			tp_detach(h);
			h->state = hook_wanted(h) ? NVMETRACE_HOOK_WAITING :
						    NVMETRACE_HOOK_DETACHED;
		}
	}
	mutex_unlock(&hooks_lock);
	return NOTIFY_OK;
}

static struct notifier_block tp_module_nb = {
	.notifier_call = tp_module_notify,
};

/* callers' lists for kp_attach_set()/kp_detach_set(), under hooks_lock */
static struct nvmetrace_hook *fn_hooks[ARRAY_SIZE(hooks)];

/*
 * Function-entry hooks in a module: attach them once the module is live,
 * detach them when it goes, before its text is freed (the kprobe core marks
 * its kprobes gone; unregistering releases our side; the shared ftrace_ops'
 * filter lets go of the module's addresses).  Registered before START
 * attaches anything and unregistered after STOP has detached everything, so
 * no module goes away unseen while a hook of it is attached.
 */
static int module_notify(struct notifier_block *nb, unsigned long val, void *data)
{
	struct module *mod = data;
	struct nvmetrace_hook *h;
	unsigned int i, n = 0;

	if (val != MODULE_STATE_LIVE && val != MODULE_STATE_GOING)
		return NOTIFY_DONE;
	mutex_lock(&hooks_lock);
	for (h = hooks; h < hooks + ARRAY_SIZE(hooks); h++) {
		if (h->kind == NVMETRACE_HOOK_TRACEPOINT || !h->module ||
		    strcmp(h->module, mod->name) || !hook_wanted(h))
			continue;
		fn_hooks[n++] = h;
	}
	if (val == MODULE_STATE_LIVE) {
		kp_attach_set(fn_hooks, n);
	} else {
		kp_detach_set(fn_hooks, n);
		for (i = 0; i < n; i++)
			fn_hooks[i]->state = NVMETRACE_HOOK_WAITING;
	}
	mutex_unlock(&hooks_lock);
	return NOTIFY_OK;
}

static struct notifier_block module_nb = {
	.notifier_call = module_notify,
};

/* ------------------------------------------------------------ start/stop */

static int check_layout(const struct nvmetrace_layout *l)
{
	/* Offsets come from BTF in user space; reject anything implausible. */
	const u32 max = 4096;

	if (!l->valid)
		return -ENOENT;
	if (l->req_cmd >= max || l->req_cqe >= max || l->req_sq >= max ||
	    l->sq_qid >= max || l->sq_ctrl >= max || l->ctrl_cntlid >= max ||
	    l->req_cmd % 8 || l->req_cqe % 8 || l->req_sq % 8 ||
	    l->sq_ctrl % 8 || l->sq_qid % 2 || l->ctrl_cntlid % 2)
		return -EINVAL;
	return 0;
}

/* The nvme-tcp group: aligned for its type, queue fields inside the queue. */
static int check_tcp_layout(const struct nvmetrace_layout *l)
{
	static const u8 align[] = {	/* NVMETRACE_L_TCP_* order */
		8, 8, 8, 8, 4, 4, 8, 8, 1, 8, 8, 8, 8, 8, 8, 4, 8,
	};
	const u32 qsize = NVMETRACE_TCP_OFF(l, QUEUE_SIZE);
	int i;

	BUILD_BUG_ON(ARRAY_SIZE(align) != ARRAY_SIZE(l->tcp.off));
	if (!l->tcp.valid)
		return 0;
	if (!qsize || qsize >= 4096)
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(align); i++) {
		if (l->tcp.off[i] % align[i])
			return -EINVAL;
		if (i + NVMETRACE_L_TCP_QUEUE_REQUEST <= NVMETRACE_L_TCP_QUEUE_CTRL &&
		    l->tcp.off[i] >= qsize)
			return -EINVAL;
	}
	return 0;
}

/*
 * The RDMA groups: pointers 8-aligned, ib_wc.status 4-aligned; a queue's
 * size, so the queue id can be computed.
 */
static int check_rdma_layout(const struct nvmetrace_layout *l)
{
	int i;

	if (l->rdma.valid) {
		if (NVMETRACE_RDMA_OFF(l, QUEUE_SIZE) < 8 ||
		    NVMETRACE_RDMA_OFF(l, QUEUE_CTRL) >= NVMETRACE_RDMA_OFF(l, QUEUE_SIZE))
			return -EINVAL;
		for (i = 0; i < ARRAY_SIZE(l->rdma.off); i++)
			if (l->rdma.off[i] %
			    (i == NVMETRACE_L_RDMA_WC_STATUS - NVMETRACE_L_RDMA_WC_WR_CQE ? 4 : 8))
				return -EINVAL;
	}
	if (l->rdmat.valid) {
		if (!l->valid)
			return -EINVAL;	/* the target hooks read nvmet's fields too */
		for (i = 0; i < ARRAY_SIZE(l->rdmat.off); i++)
			if (l->rdmat.off[i] %
			    (i == NVMETRACE_L_RDMAT_WC_STATUS - NVMETRACE_L_RDMAT_WC_WR_CQE ? 4 : 8))
				return -EINVAL;
	}
	return 0;
}

/* The nvmet-tcp group: aligned for its type, members inside their struct. */
static int check_tcpt_layout(const struct nvmetrace_layout *l)
{
	const u32 cmd_size = NVMETRACE_TCPT_OFF(l, CMD_SIZE);
	const u32 queue_size = NVMETRACE_TCPT_OFF(l, QUEUE_SIZE);

	if (!l->tcpt.valid)
		return 0;
	if (!cmd_size || !queue_size ||
	    NVMETRACE_TCPT_OFF(l, CMD_QUEUE) % 8 ||
	    NVMETRACE_TCPT_OFF(l, CMD_QUEUE) + 8 > cmd_size ||
	    NVMETRACE_TCPT_OFF(l, CMD_REQ) % 8 ||
	    NVMETRACE_TCPT_OFF(l, CMD_REQ) >= cmd_size ||
	    NVMETRACE_TCPT_OFF(l, CMD_RBYTES_DONE) % 4 ||
	    NVMETRACE_TCPT_OFF(l, CMD_RBYTES_DONE) + 4 > cmd_size ||
	    NVMETRACE_TCPT_OFF(l, CMD_PDU_LEN) % 4 ||
	    NVMETRACE_TCPT_OFF(l, CMD_PDU_LEN) + 4 > cmd_size ||
	    NVMETRACE_TCPT_OFF(l, QUEUE_PDU) + sizeof(struct nvme_tcp_hdr) > queue_size ||
	    NVMETRACE_TCPT_OFF(l, REQ_TRANSFER_LEN) % 8)
		return -EINVAL;
	return 0;
}

/* ctl_lock held, nothing recording (see nvmetrace.h) */
int nvmetrace_hooks_start(const struct nvmetrace_config *c,
			  struct netlink_ext_ack *extack)
{
	struct nvmetrace_hook *h;
	unsigned int n = 0;
	bool busy;
	int ret;

	if (c->role & NVMETRACE_ROLE_TARGET) {
		ret = check_layout(&c->layout);
		if (ret) {
			NL_SET_ERR_MSG(extack,
				       "target role needs nvmet's struct layout (NVMETRACE_A_LAYOUT, from BTF)");
			return ret;
		}
	}

	if (check_tcp_layout(&c->layout)) {
		NL_SET_ERR_MSG(extack, "implausible nvme-tcp layout (NVMETRACE_L_TCP_*)");
		return -EINVAL;
	}
	if (check_rdma_layout(&c->layout)) {
		NL_SET_ERR_MSG(extack,
			       "implausible nvme-rdma or nvmet-rdma layout (NVMETRACE_L_RDMA*_*), or nvmet-rdma's without nvmet's");
		return -EINVAL;
	}
	if (check_tcpt_layout(&c->layout)) {
		NL_SET_ERR_MSG(extack, "implausible nvmet-tcp layout (NVMETRACE_L_NVMET_TCP_*)");
		return -EINVAL;
	}

	mutex_lock(&hooks_lock);
	busy = recording;
	mutex_unlock(&hooks_lock);
	if (busy) {
		NL_SET_ERR_MSG(extack, "already recording");
		return -EBUSY;
	}
	/* before anything attaches (see module_notify()) */
	ret = register_module_notifier(&module_nb);
	if (ret) {
		NL_SET_ERR_MSG(extack, "cannot register module notifiers");
		return ret;
	}

	mutex_lock(&hooks_lock);
	/* no hook runs: the last recording's arrivals are not this one's */
	memset(tcpt_arrivals, 0, sizeof(tcpt_arrivals));
	cfg = *c;
	memset(uiocbs, 0, sizeof(uiocbs));
	atomic_set(&uiocbs_live, 0);
	memset(pt_cmds, 0, sizeof(pt_cmds));
	sample_threshold = div64_u64(U64_MAX, cfg.sample);
	if (cfg.sample == 1)
		sample_threshold = U64_MAX;
	recording = true;

	for (h = hooks; h < hooks + ARRAY_SIZE(hooks); h++) {
		h->state = NVMETRACE_HOOK_DETACHED;
		h->err = 0;
		if ((h->role & cfg.role) && (h->needs & layout_have()) != h->needs) {
			/* its private layout is unknown: refused, never guessed */
			h->state = NVMETRACE_HOOK_FAILED;
			h->err = -ENODATA;
			continue;
		}
		if (!hook_wanted(h))
			continue;
		if (h->kind != NVMETRACE_HOOK_TRACEPOINT) {
			fn_hooks[n++] = h;
		} else if (!h->module) {
			for_each_kernel_tracepoint(match_builtin_tp, h);
			if (h->state == NVMETRACE_HOOK_DETACHED)
				h->state = NVMETRACE_HOOK_ABSENT;
		} else {
			h->state = NVMETRACE_HOOK_WAITING;
		}
	}
	/* the ftrace ones through one registration of the shared ops */
	kp_attach_set(fn_hooks, n);
	mutex_unlock(&hooks_lock);

	/* replays COMING for loaded modules: attaches nvme_core/nvmet hooks */
	ret = register_tracepoint_module_notifier(&tp_module_nb);
	if (ret) {
		NL_SET_ERR_MSG(extack, "cannot register module notifiers");
		nvmetrace_hooks_stop();
		return ret;
	}
	WRITE_ONCE(emitting, true);
	return 0;
}

void nvmetrace_hooks_stop(void)
{
	struct nvmetrace_hook *h;
	unsigned int n = 0;
	bool was;

	WRITE_ONCE(emitting, false);
	/* replays GOING for loaded modules: detaches nvme_core/nvmet hooks */
	unregister_tracepoint_module_notifier(&tp_module_nb);

	mutex_lock(&hooks_lock);
	was = recording;
	if (recording) {
		/* every ftrace hook at once: one unregistration */
		nvmetrace_fhooks_clear();
		for (h = hooks; h < hooks + ARRAY_SIZE(hooks); h++) {
			if (h->kind == NVMETRACE_HOOK_TRACEPOINT)
				tp_detach(h);
			else if (h->state == NVMETRACE_HOOK_ATTACHED &&
				 h->used != NVMETRACE_HOOK_FTRACE)
				fn_hooks[n++] = h;	/* kprobes */
		}
		kp_detach_set(fn_hooks, n);
		for (h = hooks; h < hooks + ARRAY_SIZE(hooks); h++)
			h->state = NVMETRACE_HOOK_DETACHED;
		recording = false;
	}
	mutex_unlock(&hooks_lock);
	/* only now: a module going meanwhile had its hooks detached first */
	unregister_module_notifier(&module_nb);
	if (!was)
		return;
	/* no probe runs on any CPU after this returns */
	tracepoint_synchronize_unregister();
}

int nvmetrace_hooks_init(void)
{
	if (probe_test_symbol && *probe_test_symbol)
		hooks[ARRAY_SIZE(hooks) - 1].name = probe_test_symbol;
	return 0;
}

/* Unload: netlink has stopped any recording before this runs. */
void nvmetrace_hooks_exit(void)
{
	WARN_ON_ONCE(READ_ONCE(recording));
}

/*
 * GET_HOOKS dump: one NVMETRACE_A_HOOK nest per hook; cb->args[0] is the
 * next hook to send.  Takes hooks_lock, so a dump sees each hook's state
 * consistently.
 */
int nvmetrace_hooks_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	unsigned long i;
	int ret = 0;

	mutex_lock(&hooks_lock);
	for (i = cb->args[0]; i < ARRAY_SIZE(hooks); i++) {
		const struct nvmetrace_hook *h = &hooks[i];
		struct nlattr *nest;
		void *hdr;

		if (!h->name)
			continue;

		hdr = genlmsg_put(skb, NETLINK_CB(cb->skb).portid,
				  cb->nlh->nlmsg_seq, nvmetrace_genl_family_ptr(),
				  NLM_F_MULTI, NVMETRACE_CMD_GET_HOOKS);
		if (!hdr)
			break;
		nest = nla_nest_start(skb, NVMETRACE_A_HOOK);
		if (!nest ||
		    nla_put_string(skb, NVMETRACE_A_HOOK_NAME, h->name) ||
		    nla_put_u32(skb, NVMETRACE_A_HOOK_KIND,
				h->state == NVMETRACE_HOOK_ATTACHED ? h->used : h->kind) ||
		    nla_put_u32(skb, NVMETRACE_A_HOOK_STATE, h->state) ||
		    nla_put_s32(skb, NVMETRACE_A_HOOK_ERROR, h->err) ||
		    nla_put_u32(skb, NVMETRACE_A_ROLE, h->role)) {
			genlmsg_cancel(skb, hdr);
			break;
		}
		nla_nest_end(skb, nest);
		genlmsg_end(skb, hdr);
	}
	mutex_unlock(&hooks_lock);
	if (i == cb->args[0] && i < ARRAY_SIZE(hooks))
		ret = -EMSGSIZE;
	cb->args[0] = i;
	return ret ? ret : skb->len;
}
