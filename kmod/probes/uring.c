// SPDX-License-Identifier: GPL-2.0
/*
 * probes/uring.c — io_uring on a block device opened with O_DIRECT, as far
 * as the kernel sees it: the SQE taken, the wait in io-wq, the CQE posted
 * and the io_uring_enter() return that hands it to user space.
 *
 * The request is named by its struct io_kiocb.  For a read or write its
 * struct kiocb is the first member of the request (every member of the
 * io_kiocb's first union starts with the file pointer, and io_rw starts with
 * its kiocb), so the block device file's submission (probes/aio.c) knows an
 * io_uring request by its kiocb's address alone:
 *
 *  - kretprobe on io_uring_enter(): its entry time is kept for the task;
 *    its entry looks at the CQ head of the rings the task's pending CQEs
 *    were posted to (below); the return of a call that waited for
 *    min_complete completions gives URING_REAP for the task's sampled CQEs
 *    among the oldest min_complete of the ring (below).
 *  - io_uring_submit_req (io_uring_submit_sqe before 5.19, Debian's 6.1):
 *    the request the task takes now, and when: the io_uring_enter() entry
 *    if the task is in that call, else now (the SQPOLL thread).  No record.
 *  - io_uring_queue_async_work: the request is punted to io-wq (the inline
 *    issue would block, or IOSQE_ASYNC): its submission time and the time
 *    it was queued are kept in a small table by the request's address
 *    (uring_wq_core.h: a set of ways per hash, since a ring recycles the
 *    same few requests and two that hash alike must not evict each other).
 *  - the file submission (probes/aio.c) asks uring_origin() whether its
 *    kiocb is an io_uring request's: the task's current one (inline issue,
 *    or the SQPOLL thread's), or one an io-wq worker finds in the table,
 *    which also gives URING_WQ (recorded after the file submission, so
 *    that the submission's time is taken right after its "since"; the
 *    time it was queued in aux); each try of the worker finds it (the
 *    analysis keeps the last).
 *  - io_uring_complete: URING_CQE, the CQE posted, for a read or write of a
 *    traced block device.  The LBA is the kiocb's position less the result
 *    (the block device advanced it), as for aio.  Posted in the task that
 *    owns the ring (task work, or its own io_uring_enter() for IOPOLL), the
 *    command waits in a per-task table for that task's next io_uring_enter()
 *    with GETEVENTS.  One posted by an io thread (io-wq, SQPOLL) has no task
 *    to wait for: its reap is not recorded.
 *
 * A read or write of a file on a file system (O_DIRECT, iomap) has no LBA at
 * its file position: its first sampled bio ties it (probes/aio.c,
 * nvmetrace_fs_bio()), which keeps the command by the request's address in
 * uring_ptc (nvmetrace_uring_fs_keep()), where its io_uring_complete takes
 * it, as a passthrough command's below.
 *
 * NVMe passthrough (IORING_OP_URING_CMD on /dev/ngXnY) has no kiocb and
 * no file position: nvme-core turns the command into a block request whose
 * end_io_data is the io_uring_cmd, which is the first member of the
 * io_kiocb (6.1 to 7.x), so the request names its io_uring request.  The
 * request may be run from kblockd (nvme-tcp's queues may block), not the
 * submitting task, so the tie is by address, in two tables of sets of ways
 * (uring_wq_core.h):
 *
 *  - io_uring_submit_req of a URING_CMD: when it was taken and by which
 *    thread (uring_pt).  Written for every URING_CMD SQE: the LBA is not
 *    known before the driver reads the command.
 *  - nvme_setup_cmd of a sampled passthrough read or write (probes/nvme.c)
 *    takes that entry out: FILE_SUBMIT, interface io_uring, path
 *    NVMETRACE_URING_CMD, stamped at the setup, the SQE's time in its aux as
 *    for a read or write; the command's LBA, dev and op go to uring_ptc.
 *  - io_uring_complete of a URING_CMD takes them out of uring_ptc:
 *    URING_CQE, and its reap as for a read or write.
 *
 * A reap from the mapped CQ ring needs no system call: user space reads the
 * CQE and moves the ring's head past it (fio at QD > 1 commits each SQE with
 * a call that waits for nothing, and takes the CQEs from the ring when it
 * next looks).  Only the head shows it.  Each pending CQE keeps its ring and
 * its index (the ring's tail when it was posted), and every io_uring_enter()
 * entry of the task reads the head of that ring: once the head has passed
 * the index, user space took the CQE between the task's last
 * io_uring_enter() return (or the posting, if later: the task was in the
 * kernel until then, and a CQE cannot be taken before it is posted) and this
 * entry.  URING_REAP then carries NVMETRACE_URING_REAP_RING, its time is the
 * entry and its len the width of that window.  The return of a call that
 * waits for no CQE is probed only while a sampled CQE is pending (not per
 * command at QD 1, where fio's submissions are such calls), so a CQE that
 * such a call posts has its window from its posting, a little wider.  The
 * return of a call that waits without submitting is probed only while a
 * sampled command may be in flight (uring_inflight) or its CQE is pending.
 * Another thread of the process
 * could take the CQE from the ring while the task is in the kernel; that
 * window would then start too late (the threads share the ring's memory, not
 * our view of it).
 *
 * The return of a call that waited for min_complete completions hands over
 * the oldest min_complete CQEs of the ring from its head (a CQE of the task
 * pending in another ring is further from that ring's head or not): those
 * posted while it waited are its reap; one posted before the call began
 * carries LATE (the entry found it still in the ring, but it may belong to
 * another ring than the one the call waited on).  The CQEs behind them are
 * there for user space to take too, but a caller may take them one at a time
 * between its next calls (fio, reaping one CQE per call at its default
 * batch, and submitting in between): they stay pending and are seen taken by
 * the head at a later entry, their window starting at this return.
 *
 * All state is O(1) tables written without locks; a collision or a race
 * loses a time or a record, never more.
 */
#include <linux/atomic.h>
#include <linux/blkdev.h>
#include <linux/fs.h>
#include <linux/hash.h>
#include <linux/io_uring.h>
#include <linux/io_uring_types.h>
#include <linux/kprobes.h>
#include <linux/sched.h>
#include <asm/syscall.h>
#include <uapi/linux/io_uring.h>

#include "probe.h"
#include "uring.h"
#include "../uring_wq_core.h"

/* every member of the request's first union starts with the file pointer */
static_assert(offsetof(struct io_kiocb, file) == 0);
static_assert(offsetof(struct kiocb, ki_filp) == 0);

/* ------------------------------------------------------- submission */

/*
 * A task's io_uring_enter() entry and the request it took last, by a hash of
 * the task.  Two tasks whose entries collide overwrite each other: a writer
 * clears the owner, writes the fields, then sets itself as the owner
 * (uring_task_own()); the task itself reads them only when it sees itself as
 * the owner before and after (uring_task_req(), uring_task_enter()), so it
 * gets its own fields or none, never a mix with another task's: the protocol
 * of probe.h's owned timestamps, over four fields.
 */
struct uring_task {
	const struct task_struct *task;	/* owner; NULL while the fields change */
	u64 enter_ts;		/* io_uring_enter() entry */
	const void *req;	/* the request taken last */
	u64 start;		/* when the kernel took it */
	bool sqpoll;		/* taken by an io thread (SQPOLL) */
} ____cacheline_aligned_in_smp;	/* written per SQE: a line per task */

#define URING_TASK_BITS	6
static struct uring_task uring_tasks[1 << URING_TASK_BITS];

static __always_inline struct uring_task *uring_task(void)
{
	return &uring_tasks[hash_ptr(current, URING_TASK_BITS)];
}

/* t's fields become current's */
static __always_inline void uring_task_own(struct uring_task *t, u64 enter_ts,
					   const void *req, u64 start, bool sqpoll)
{
	WRITE_ONCE(t->task, NULL);
	smp_wmb();	/* the owner cleared before the fields change */
	WRITE_ONCE(t->enter_ts, enter_ts);
	WRITE_ONCE(t->req, req);
	WRITE_ONCE(t->start, start);
	WRITE_ONCE(t->sqpoll, sqpoll);
	smp_wmb();	/* the fields written before the owner is back */
	WRITE_ONCE(t->task, current);
}

/*
 * *ts if *owner is current before and after it is read, else 0: the reader's
 * side of a field an owner pointer guards (the writer clears the owner, writes,
 * and sets it again, with a write barrier at each step)
 */
static __always_inline u64 uring_owned(const struct task_struct *const *owner,
				       const u64 *ts)
{
	u64 v;

	if (READ_ONCE(*owner) != current)
		return 0;
	smp_rmb();	/* the owner, then the field */
	v = READ_ONCE(*ts);
	smp_rmb();	/* the field, then the owner again */
	return READ_ONCE(*owner) == current ? v : 0;
}

/* the entry time current's entry holds, 0: none (another task's, or changing) */
static __always_inline u64 uring_task_enter(const struct uring_task *t)
{
	return uring_owned(&t->task, &t->enter_ts);
}

/* whether current's entry holds req as its last request, with its start and path */
static __always_inline bool uring_task_req(const struct uring_task *t, const void *req,
					   u64 *start, bool *sqpoll)
{
	if (READ_ONCE(t->task) != current || READ_ONCE(t->req) != req)
		return false;
	smp_rmb();	/* the owner, then the fields */
	*start = READ_ONCE(t->start);
	*sqpoll = READ_ONCE(t->sqpoll);
	smp_rmb();	/* the fields, then the owner again */
	return READ_ONCE(t->task) == current;
}

/*
 * The io_uring requests that may carry a sampled command and have not
 * posted their CQE yet: a sampled read or write of a block device or file
 * from its file submission (nvmetrace_uring_origin()), and, their command
 * not known yet, every request punted to io-wq and every passthrough
 * command from when the task hands them over.  Each leaves at its CQE
 * (probe_complete()).  While it is empty (and no sampled CQE is pending), a
 * call that waits for CQEs without submitting any cannot be handed a
 * sampled one: its return is not probed.  Kept only while every hook that
 * fills it or empties it runs (uring_gate; at 1 of 1 every command is
 * sampled and the return is always probed).
 */
static struct nvmetrace_ptrset uring_inflight;
static bool uring_gate __read_mostly;

/* requests handed to io-wq, by sets of ways (uring_wq_core.h) */
#define URING_WQ_SET_BITS	6
static struct nvmetrace_uring_wq uring_wq[1 << URING_WQ_SET_BITS][NVMETRACE_URING_WQ_WAYS];

static __always_inline struct nvmetrace_uring_wq *uring_wq_set(const void *req)
{
	return uring_wq[hash_ptr(req, URING_WQ_SET_BITS)];
}

/*
 * Passthrough commands (IORING_OP_URING_CMD): from the SQE taken to the
 * driver's setup (word: the submitter's thread id, bit 32 SQPOLL), and from
 * the setup to the CQE (start: the LBA; word: dev, op in bits 32-39).
 */
static struct nvmetrace_uring_wq uring_pt[1 << URING_WQ_SET_BITS][NVMETRACE_URING_WQ_WAYS];
static struct nvmetrace_uring_wq uring_ptc[1 << URING_WQ_SET_BITS][NVMETRACE_URING_WQ_WAYS];

#define URING_PT_SQPOLL		BIT_ULL(32)

static __always_inline struct nvmetrace_uring_wq *uring_pt_set(const void *req)
{
	return uring_pt[hash_ptr(req, URING_WQ_SET_BITS)];
}

static __always_inline struct nvmetrace_uring_wq *uring_ptc_set(const void *req)
{
	return uring_ptc[hash_ptr(req, URING_WQ_SET_BITS)];
}

/* a URING_CMD's SQE taken at start: kept for the driver's setup */
static __always_inline void uring_pt_taken(const void *req, u64 start, bool sqpoll)
{
	struct nvmetrace_uring_wq *w = nvmetrace_uring_wq_claim(uring_pt_set(req), req);

	if (w)
		nvmetrace_uring_wq_publish_word(w, req, start, start,
						(u64)current->pid | (sqpoll ? URING_PT_SQPOLL : 0));
}

bool nvmetrace_uring_pt_setup(const void *ioucmd, u64 lba, u32 dev, u32 len, u8 op)
{
	struct nvmetrace_uring_wq *w;
	u64 start, queued, word, now;
	u8 wflag = op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0;

	if (!ioucmd || !nvmetrace_uring_wq_take_word(uring_pt_set(ioucmd), ioucmd, &start,
						     &queued, &word))
		return false;
	now = ktime_get_ns();
	nvmetrace_emit(NVMETRACE_EV_FILE_SUBMIT, lba, dev, len, 0, NVMETRACE_IFACE_URING,
		       NVMETRACE_URING_CMD |
		       ((word & URING_PT_SQPOLL) ? NVMETRACE_URING_SQPOLL : 0), 0, op,
		       wflag | NVMETRACE_REC_PASSTHRU,
		       (u64)(u32)word |
		       (u64)min_t(u64, now > start ? now - start : 0, U32_MAX) << 32);
	w = nvmetrace_uring_wq_claim(uring_ptc_set(ioucmd), ioucmd);
	if (w)
		nvmetrace_uring_wq_publish_word(w, ioucmd, lba, now, (u64)dev | (u64)op << 32);
	return true;
}

/*
 * A read of a file, async, that missed the page cache: its bios may be
 * submitted later, from task work retrying it while its task waits, so an
 * io_uring request joins uring_inflight now, its command not known yet
 */
void nvmetrace_uring_file_miss(const void *req)
{
	u64 start;
	bool sqpoll;

	if (uring_gate && uring_task_req(uring_task(), req, &start, &sqpoll))
		nvmetrace_ptrset_add(&uring_inflight, req);
}

void nvmetrace_uring_fs_keep(const void *req, u64 lba, u32 dev, u8 op)
{
	struct nvmetrace_uring_wq *w = nvmetrace_uring_wq_claim(uring_ptc_set(req), req);

	if (w)
		nvmetrace_uring_wq_publish_word(w, req, lba, ktime_get_ns(),
						(u64)dev | (u64)op << 32);
}

/*
 * The sampled passthrough command whose CQE req posts, or the sampled
 * command of a file's read or write (nvmetrace_uring_fs_keep()): its LBA,
 * dev and op
 */
static __always_inline bool uring_pt_done(const void *req, u64 *lba, u32 *dev, u8 *op)
{
	u64 set_up, word;

	if (!nvmetrace_uring_wq_take_word(uring_ptc_set(req), req, lba, &set_up, &word))
		return false;
	*dev = (u32)word;
	*op = (u8)(word >> 32);
	return true;
}

static __always_inline bool in_uring_enter(void)
{
	return syscall_get_nr(current, task_pt_regs(current)) == __NR_io_uring_enter;
}

/* io_uring_submit_req(struct io_kiocb *req); io_uring_submit_sqe adds an argument after it */
static void probe_submit_req(void *data, struct io_kiocb *req)
{
	struct uring_task *t = uring_task();
	bool sqpoll = current->flags & PF_IO_WORKER;
	u64 enter = 0, start;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return;
	if (!sqpoll && in_uring_enter())
		enter = uring_task_enter(t);
	/* every SQE of one io_uring_enter() call shares its entry time: no clock read */
	start = enter ?: ktime_get_ns();
	uring_task_own(t, enter, req, start, sqpoll);
	if (unlikely(READ_ONCE(req->opcode) == IORING_OP_URING_CMD)) {
		uring_pt_taken(req, start, sqpoll);
		/* its command is read by the driver, maybe after the wait began */
		if (uring_gate)
			nvmetrace_ptrset_add(&uring_inflight, req);
	}
}

static void probe_queue_async(void *data, struct io_kiocb *req, int rw)
{
	struct uring_task *t = uring_task();
	struct nvmetrace_uring_wq *w;
	u64 now, start;
	bool sqpoll;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return;
	/* io-wq submits it later, maybe while its task waits */
	if (uring_gate)
		nvmetrace_ptrset_add(&uring_inflight, req);
	now = ktime_get_ns();
	if (!uring_task_req(t, req, &start, &sqpoll))
		start = now;
	w = nvmetrace_uring_wq_claim(uring_wq_set(req), req);
	if (w)
		nvmetrace_uring_wq_publish(w, req, start, now);
}

bool nvmetrace_uring_origin(const struct kiocb *iocb, u64 *since, u16 *path,
			    u64 *wq_queued)
{
	const void *req = iocb;	/* the kiocb is the request's first member */
	struct uring_task *t = uring_task();
	u64 now, start, queued;
	bool sqpoll;

	*wq_queued = 0;
	if (uring_task_req(t, req, &start, &sqpoll)) {
		*since = ktime_get_ns() - start;
		*path = sqpoll ? NVMETRACE_URING_SQPOLL : 0;
		if (uring_gate)
			nvmetrace_ptrset_add(&uring_inflight, req);
		return true;
	}
	if (!(current->flags & PF_IO_WORKER))
		return false;
	if (!nvmetrace_uring_wq_find(uring_wq_set(req), req, &start, &queued))
		return false;
	/* in the set since io_uring_queue_async_work */
	now = ktime_get_ns();
	*since = now - start;
	*path = NVMETRACE_URING_IOWQ;
	*wq_queued = queued;
	return true;
}

/* ------------------------------------------------------- completion */

struct uring_pending {
	const struct task_struct *task;	/* NULL: free; written last */
	const struct io_ring_ctx *ctx;	/* the ring it was posted to */
	u64 posted;
	u64 lba;
	u32 dev;
	u32 index;	/* its place in the CQ ring: the head passes it when taken */
	u8 op;
};

/*
 * CQEs of a task not yet handed over: a bucket by task, oldest overwritten
 * (a ring at QD 32 holds up to 32 CQEs user space has not taken yet).  The
 * bucket also keeps when its task last returned from io_uring_enter(): the
 * start of the window in which it can take a CQE from the ring.
 */
#define URING_PEND_BITS		6
#define URING_PEND_SLOTS	32
struct uring_bucket {
	struct uring_pending slot[URING_PEND_SLOTS];
	unsigned int next;
	const struct task_struct *ret_task;	/* whose ret_ts; NULL while it changes */
	u64 ret_ts;
} ____cacheline_aligned_in_smp;	/* a task's own lines */

static struct uring_bucket uring_pend[1 << URING_PEND_BITS];
/* entries in use, about; alone on its line, read by every GETEVENTS return */
static struct uring_pend_live_line {
	atomic_t n;
} ____cacheline_aligned_in_smp uring_pend_live;	/* the type aligned: the whole line */

static __always_inline struct uring_bucket *task_bucket(void)
{
	return &uring_pend[hash_ptr(current, URING_PEND_BITS)];
}

static __always_inline bool uring_is_rw(u8 opcode)
{
	switch (opcode) {
	case IORING_OP_READV:
	case IORING_OP_WRITEV:
	case IORING_OP_READ_FIXED:
	case IORING_OP_WRITE_FIXED:
	case IORING_OP_READ:
	case IORING_OP_WRITE:
		return true;
	default:
		return false;
	}
}

/* the CQE req posts to ctx: URING_CQE of a sampled command, which then waits for its reap */
static __always_inline void uring_posted(const struct io_ring_ctx *ctx, const void *reqp)
{
	const struct io_kiocb *req = reqp;
	const struct kiocb *iocb = reqp;
	const struct file *file;
	struct uring_bucket *b;
	struct uring_pending *p;
	s32 res;
	loff_t pos;
	u64 lba, now;
	bool io_thread;
	u32 dev;
	u8 op, opcode;

	opcode = READ_ONCE(req->opcode);
	res = req->cqe.res;
	if (unlikely(opcode == IORING_OP_URING_CMD)) {
		/* a passthrough command's result is its status: no length */
		if (!uring_pt_done(req, &lba, &dev, &op))
			return;
		res = 0;
		goto posted;
	}
	if (!uring_is_rw(opcode))
		return;
	file = iocb->ki_filp;
	if (!file)
		return;
	if (!S_ISBLK(file_inode(file)->i_mode)) {
		/*
		 * a file's (direct I/O, or a buffered read that missed): the
		 * command its first sampled bio kept by the request
		 */
		if (!S_ISREG(file_inode(file)->i_mode) || !uring_pt_done(req, &lba, &dev, &op))
			return;
		goto posted;
	}
	if (!(iocb->ki_flags & IOCB_DIRECT))
		return;
	pos = iocb->ki_pos;
	if (res > 0)
		pos -= res;	/* the block device advanced ki_pos by the result */
	if (!nvmetrace_file_lba(file, pos, &dev, &lba) || !nvmetrace_sampled(lba))
		return;
	op = (iocb->ki_flags & IOCB_WRITE) ? nvme_cmd_write : nvme_cmd_read;
posted:
	io_thread = current->flags & PF_IO_WORKER;	/* no task of the ring's to wait for */
	now = nvmetrace_emit(NVMETRACE_EV_URING_CQE, lba, dev, res > 0 ? res : 0, 0, 0,
			     io_thread ? NVMETRACE_URING_CQE_NO_REAP : 0, 0, op,
			     op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0, (u64)(s64)res);
	if (io_thread)
		return;
	if (!now)
		now = ktime_get_ns();	/* the CQE's record dropped: its reap still counts */
	b = task_bucket();
	p = &b->slot[b->next++ % URING_PEND_SLOTS];
	if (!READ_ONCE(p->task))
		atomic_inc(&uring_pend_live.n);
	WRITE_ONCE(p->task, NULL);
	p->ctx = ctx;
	p->posted = now;
	p->lba = lba;
	p->dev = dev;
	/*
	 * The tracepoint follows io_get_cqe(), which took the slot and moved
	 * the cached tail past it (every kernel line since 6.1): its index is
	 * one before.  Posted under the ring's completion lock or by its only
	 * submitter, so the plain read sees this CQE's own increment.
	 */
	p->index = READ_ONCE(ctx->cached_cq_tail) - 1;
	p->op = op;
	smp_store_release(&p->task, current);	/* the fields, then task */
}

/*
 * io_uring_complete(ctx, req, ...): the arguments after the request changed
 * (upstream 6.10 passes the CQE instead of its fields), so only the first
 * two are taken; the result is read from the request.
 */
static void probe_complete(void *data, void *ctxp, void *reqp)
{
	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return;
	/* a CQE of the ring's own (io_fill_cqe_aux(): poll, multishot) has no request */
	if (!reqp)
		return;
	uring_posted(ctxp, reqp);
	/*
	 * After its pending entry (uring_posted()): a sampled command is in
	 * flight or pending at every instant (krp_enter_entry() reads them in
	 * the other order)
	 */
	if (nvmetrace_ptrset_any(&uring_inflight))
		nvmetrace_ptrset_del(&uring_inflight, reqp);
}

/* the CQ head of ring ctx, read without faulting; false: unreadable */
static __always_inline bool uring_cq_head(const struct io_ring_ctx *ctx, u32 *head)
{
	struct io_rings *rings;

	/* a ring closed since it posted the CQE: its memory may be gone */
	if (get_kernel_nofault(rings, &ctx->rings) || !rings)
		return false;
	return !get_kernel_nofault(*head, &rings->cq.head);
}

/*
 * The CQ head of the ring of the pending CQEs a scan looks at, read once a
 * ring and scan: the task's CQEs are nearly always of one ring, and at QD 32
 * a scan met up to 32 of them, each paying two faultless reads for the
 * same head.  The head read first stands for the
 * whole scan (microseconds; the task's own user space does not move it
 * while the task is in io_uring_enter(), where every scan runs): a CQE
 * another thread takes meanwhile is seen at the next entry.
 */
struct uring_head {
	const struct io_ring_ctx *ctx;	/* NULL: none read yet */
	u32 head;
	bool ok;
};

static __always_inline bool uring_head_of(struct uring_head *h, const struct io_ring_ctx *ctx)
{
	if (h->ctx != ctx) {
		h->ctx = ctx;
		h->ok = uring_cq_head(ctx, &h->head);
	}
	return h->ok;
}

/* when current last returned from io_uring_enter(), 0: unknown */
static __always_inline u64 uring_last_return(const struct uring_bucket *b)
{
	return uring_owned(&b->ret_task, &b->ret_ts);
}

static __always_inline void uring_set_return(struct uring_bucket *b, u64 ts)
{
	WRITE_ONCE(b->ret_task, NULL);
	smp_wmb();	/* the owner cleared before the time changes */
	WRITE_ONCE(b->ret_ts, ts);
	smp_wmb();	/* the time written before the owner is back */
	WRITE_ONCE(b->ret_task, current);
}

/* take slot p of current's if it still holds its CQE: false if another took it */
static __always_inline bool uring_take(struct uring_pending *p)
{
	if (cmpxchg(&p->task, current, NULL) != current)
		return false;
	atomic_dec(&uring_pend_live.n);
	return true;
}

static __always_inline void uring_emit_reap(const struct uring_pending *p, u32 len, u64 flags)
{
	/*
	 * nvmetrace_emit() stamps the record: with NVMETRACE_URING_REAP_RING,
	 * len counts back from it
	 */
	nvmetrace_emit(NVMETRACE_EV_URING_REAP, p->lba, p->dev, len, 0, 0, 0, 0, p->op,
		       p->op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0,
		       (u64)current->pid | flags);
}

/*
 * At an io_uring_enter() entry: the task's pending CQEs whose ring's head
 * has passed them were taken from the ring since the task last left this
 * call (or since they were posted).
 */
static void uring_look(void)
{
	struct uring_bucket *b = task_bucket();
	u64 last_ret = uring_last_return(b);
	struct uring_head h = { };
	unsigned int i;

	for (i = 0; i < URING_PEND_SLOTS; i++) {
		struct uring_pending tmp, *p = &b->slot[i];
		u64 from, now;

		/* task, then the fields its writer published with it */
		if (smp_load_acquire(&p->task) != current)
			continue;
		tmp = *p;
		if (!uring_head_of(&h, tmp.ctx) || (s32)(h.head - tmp.index) <= 0)
			continue;	/* still in the ring, or no ring to look at */
		if (!uring_take(p))
			continue;
		from = max(tmp.posted, last_ret);
		now = ktime_get_ns();	/* a few instructions before nvmetrace_emit()'s stamp */
		uring_emit_reap(&tmp, (u32)min_t(u64, now > from ? now - from : 0, U32_MAX),
				NVMETRACE_URING_REAP_RING);
	}
}

/* kretprobe at __x64_sys_io_uring_enter(const struct pt_regs *regs) */
struct uring_enter {
	u64 ts;
	u32 min_complete;	/* with GETEVENTS: its return hands that many CQEs to a waiter */
};

static int krp_enter_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct pt_regs *uregs = (struct pt_regs *)regs_get_kernel_argument(regs, 0);
	struct uring_enter *e = (struct uring_enter *)ri->data;
	struct uring_task *t = uring_task();
	bool pending, inflight;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return 1;
	/* io_uring_enter(fd, to_submit, min_complete, flags, argp, argsz) */
	e->ts = ktime_get_ns();
	uring_task_own(t, e->ts, NULL, 0, false);
	/*
	 * The fourth system call argument is in r10 (rcx is the return
	 * address), the third is min_complete: a call for none only submits.
	 */
	e->min_complete = (uregs->r10 & IORING_ENTER_GETEVENTS) ? (u32)uregs->dx : 0;
	inflight = !uring_gate || nvmetrace_ptrset_any(&uring_inflight);
	smp_rmb();	/* in flight, then pending: probe_complete() writes them the other way */
	pending = atomic_read(&uring_pend_live.n) > 0;
	if (pending)
		uring_look();
	/*
	 * The return: a waiter's CQEs (min_complete > 0) are mostly posted
	 * while it waits, and their reap is this return; with CQEs pending, the
	 * task's return starts their window in the ring.  Not for a call that
	 * waits for none while no CQE is pending (fio's submission, with
	 * GETEVENTS and min_complete 0; one a command at QD 1): a sampled CQE
	 * its task work posts is taken from the ring, after this return, and
	 * its window starts when it was posted instead, a little wider; its
	 * reap, the task's next io_uring_enter() entry, is the same.  Nor for
	 * a waiter while no sampled command is in flight or pending (fio's wait
	 * at QD 1, at 1 of N): no sampled CQE can be posted before it returns,
	 * unless the call submits it itself (the second argument, to_submit).
	 */
	if (pending || (e->min_complete && (inflight || uregs->si)))
		return 0;
	return 1;
}

static int krp_enter_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	const struct uring_enter *e = (const struct uring_enter *)ri->data;
	struct uring_bucket *b = task_bucket();
	struct uring_head h = { };
	unsigned int i;

	if (atomic_read(&uring_pend_live.n) <= 0)
		return 0;	/* no sampled CQE waits for its reap */
	uring_set_return(b, ktime_get_ns());
	if (!e->min_complete)
		return 0;	/* user space takes them from the ring: uring_look() */
	for (i = 0; i < URING_PEND_SLOTS; i++) {
		struct uring_pending tmp, *p = &b->slot[i];

		/* task, then the fields its writer published with it */
		if (smp_load_acquire(&p->task) != current)
			continue;
		tmp = *p;
		/*
		 * The oldest min_complete CQEs of its ring are what the caller
		 * waited for; one behind them stays in the ring until the head
		 * passes it (uring_look(), its window from this return).
		 */
		if (!uring_head_of(&h, tmp.ctx) ||
		    !nvmetrace_uring_cqe_waited(tmp.index, h.head, e->min_complete))
			continue;
		if (!uring_take(p))
			continue;
		uring_emit_reap(&tmp, 0, tmp.posted < e->ts ? NVMETRACE_URING_REAP_LATE : 0);
	}
	return 0;
}

/* START: no hook runs; the last recording's requests are not this one's */
static void uring_hooks_reset(void)
{
	memset(uring_tasks, 0, sizeof(uring_tasks));
	memset(uring_wq, 0, sizeof(uring_wq));
	memset(uring_pt, 0, sizeof(uring_pt));
	memset(uring_ptc, 0, sizeof(uring_ptc));
	memset(uring_pend, 0, sizeof(uring_pend));
	atomic_set(&uring_pend_live.n, 0);
	nvmetrace_ptrset_clear(&uring_inflight);
	uring_gate = false;
}

#ifdef NVMETRACE_HAVE_URING_SUBMIT_REQ
#define URING_SUBMIT_TP	"io_uring_submit_req"
#else
#define URING_SUBMIT_TP	"io_uring_submit_sqe"	/* before upstream 5.19 */
#endif

static struct nvmetrace_hook uring_hooks[] = {
	{ "__x64_sys_io_uring_enter", NULL, NVMETRACE_HOOK_KPROBE,
	  NVMETRACE_ROLE_HOST, .ret_entry = krp_enter_entry,
	  .ret = krp_enter_return, .ret_data = sizeof(struct uring_enter) },
	{ URING_SUBMIT_TP, NULL, NVMETRACE_HOOK_TRACEPOINT, NVMETRACE_ROLE_HOST,
	  probe_submit_req },
	{ "io_uring_queue_async_work", NULL, NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_HOST, probe_queue_async },
	{ "io_uring_complete", NULL, NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_HOST, probe_complete },
};

/* whether hook name of group g runs */
static bool uring_hook_runs(const struct nvmetrace_hook_group *g, const char *name)
{
	unsigned int i;

	for (i = 0; i < g->nr; i++)
		if (g->rows[i].name && !strcmp(g->rows[i].name, name))
			return nvmetrace_hook_runs(&g->rows[i]);
	return false;
}

/*
 * START, hooks attached, nothing emitted yet: the in-flight gate holds only
 * while every hook that fills uring_inflight or empties it runs (all of
 * them built in: they stay so for the recording), and not at 1 of 1
 */
static void uring_hooks_attached(void)
{
	WRITE_ONCE(uring_gate,
		   nvmetrace_sample_threshold != U64_MAX &&
		   uring_hook_runs(&nvmetrace_uring_hooks, URING_SUBMIT_TP) &&
		   uring_hook_runs(&nvmetrace_uring_hooks, "io_uring_queue_async_work") &&
		   uring_hook_runs(&nvmetrace_uring_hooks, "io_uring_complete") &&
		   uring_hook_runs(&nvmetrace_aio_hooks, "blkdev_read_iter") &&
		   uring_hook_runs(&nvmetrace_aio_hooks, "blkdev_write_iter"));
}

struct nvmetrace_hook_group nvmetrace_uring_hooks = {
	.rows = uring_hooks,
	.nr = ARRAY_SIZE(uring_hooks),
	.reset = uring_hooks_reset,
	.attached = uring_hooks_attached,
};
