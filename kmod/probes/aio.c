// SPDX-License-Identifier: GPL-2.0
/*
 * probes/aio.c — the host above the block layer: io_submit(), the block
 * device file's read/write submission, the aio completion and
 * io_getevents()' reap.
 */
#include <linux/aio_abi.h>
#include <linux/atomic.h>
#include <linux/blkdev.h>
#include <linux/fs.h>
#include <linux/hash.h>
#include <linux/kprobes.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/uio.h>
#include <asm/syscall.h>

#include "probe.h"
#include "uring.h"

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

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return 0;
	st->task = current;
	st->entry_ts = ktime_get_ns();
	st->iocbpp = regs_get_kernel_argument(uregs, 2);	/* io_submit(ctx, nr, iocbpp) */
	st->nsub = 0;
	return 0;
}

static __always_inline void file_submit(struct pt_regs *regs, u8 op)
{
	const struct kiocb *iocb = (const struct kiocb *)regs_get_kernel_argument(regs, 0);
	const struct iov_iter *iter = (const struct iov_iter *)regs_get_kernel_argument(regs, 1);
	struct nvmetrace_submit *st = task_stash();
	u64 lba, since = 0, uptr = 0, wq_queued = 0;
	u16 iface = 0, path = 0;
	/* the stash is this call's: same task, still inside io_submit() */
	bool in_submit = st->task == current &&
			 syscall_get_nr(current, task_pt_regs(current)) == __NR_io_submit;
	u32 dev, idx = 0;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return;
	if (in_submit)
		idx = st->nsub++;
	if (!(iocb->ki_flags & IOCB_DIRECT) ||
	    !nvmetrace_file_lba(iocb->ki_filp, iocb->ki_pos, &dev, &lba) ||
	    !nvmetrace_sampled(lba))
		return;
	if (in_submit) {
		iface = NVMETRACE_IFACE_AIO;
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
			smp_store_release(&u->uptr, uptr);	/* the fields, then uptr */
		}
	} else if (nvmetrace_uring_origin(iocb, &since, &path, &wq_queued)) {
		iface = NVMETRACE_IFACE_URING;
	}
	emit(NVMETRACE_EV_FILE_SUBMIT, lba, dev, iov_iter_count(iter), 0, iface,
	     path, 0, op, op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0,
	     uaux(current->pid, since));
	if (wq_queued)
		emit(NVMETRACE_EV_URING_WQ, lba, dev, 0, 0, 0, 0, 0, op,
		     op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0, wq_queued);
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

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return 0;
	if (!(iocb->ki_flags & IOCB_DIRECT) || !S_ISBLK(file_inode(file)->i_mode))
		return 0;
	if (res > 0)
		pos -= res;	/* the block device advanced ki_pos by the result */
	if (!nvmetrace_file_lba(file, pos, &dev, &lba) || !nvmetrace_sampled(lba))
		return 0;
	op = (iocb->ki_flags & IOCB_WRITE) ? nvme_cmd_write : nvme_cmd_read;
	emit(NVMETRACE_EV_AIO_COMPLETE, lba, dev, res > 0 ? res : 0, 0, 0, 0, 0,
	     op, op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0, (u64)res);
	return 0;
}

/* do_io_getevents(ctx_id, min_nr, nr, struct io_event __user *events, ts) */
static int krp_reap_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	if (!READ_ONCE(nvmetrace_emitting) || atomic_read(&uiocbs_live) <= 0)
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
		/* uptr, then the fields its writer published with it */
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

/* START: no hook runs; the last recording's iocbs are not this one's */
static void aio_hooks_reset(void)
{
	memset(uiocbs, 0, sizeof(uiocbs));
	atomic_set(&uiocbs_live, 0);
}

static struct nvmetrace_hook aio_hooks[] = {
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
};

struct nvmetrace_hook_group nvmetrace_aio_hooks = {
	.rows = aio_hooks,
	.nr = ARRAY_SIZE(aio_hooks),
	.reset = aio_hooks_reset,
};
