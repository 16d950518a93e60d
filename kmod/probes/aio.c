// SPDX-License-Identifier: GPL-2.0
/*
 * probes/aio.c — the host above the block layer: io_submit(), the block
 * device file's read/write submission, the aio completion and
 * io_getevents()' reap.
 */
#include <linux/aio_abi.h>
#include <linux/atomic.h>
#include <linux/blkdev.h>
#include <linux/compat.h>
#include <linux/fdtable.h>
#include <linux/fs.h>
#include <linux/hash.h>
#include <linux/kallsyms.h>
#include <linux/kprobes.h>
#include <linux/pagemap.h>
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
 *  - kprobe on io_submit(): its entry time is kept for the task (no record).
 *  - kprobes on blkdev_read_iter/blkdev_write_iter (the file-level submission,
 *    before any bio): FILE_SUBMIT, with the io_submit() entry in its aux.
 *    During io_submit() the kiocb they get is the rw member of fs/aio.c's
 *    private struct aio_kiocb, whose ki_res (a struct io_event) already
 *    holds the user's iocb address in obj: __io_submit_one() fills ki_res
 *    before aio_read()/aio_write() call the file (6.1 to 7.x alike).  For a
 *    sampled command that address is read (without faulting, at the offsets
 *    START carried from the kernel's BTF) and kept in a small table with the
 *    command's dev and LBA.  Without those offsets FILE_SUBMIT is recorded
 *    all the same, without the iocb: no AIO_REAP follows it.
 *  - kprobe on aio_complete_rw: AIO_COMPLETE, the completion posted to the
 *    aio context (right after block_rq_complete, in the same context).
 *  - kretprobes on the positioned synchronous reads and writes
 *    (__x64_sys_pread64, pwrite64, preadv, pwritev, preadv2, pwritev2): at
 *    the entry, the file is looked up by its descriptor (under RCU, no
 *    reference taken) and the command's LBA from the call's position; for a
 *    sampled command on an O_DIRECT block device the entry time goes to the
 *    task's stash (FILE_SUBMIT's aux, as io_submit()'s) and the return is
 *    probed: SYNC_RETURN.  Any other call is not probed at its return.
 *  - kretprobe on do_io_getevents: AIO_REAP when it returns: each event it
 *    copied to user space names its iocb (io_event.obj); one whose iocb is in
 *    the table gives a record with that command's dev and LBA.  The aio ring
 *    is handed over oldest first, possibly over several calls, so only the
 *    iocb says which reap took which command.  While no sampled command is
 *    in the table the return is not probed at all.
 *
 * A file on a file system (ext4, XFS: their own read_iter/write_iter, which
 * map the file through iomap) has its disk LBA only at its bio:
 *
 *  - ftrace hooks at __iomap_dio_rw and __iomap_dio_read_simple (the
 *    direct I/O of every iomap file system, and its fast path for a small
 *    read, 7.3 on; in the task that submits it: the system call, or an io-wq
 *    worker): for a regular file on a traced disk, its kiocb and when the
 *    file system handed it over are kept for the task (fs_task).
 *  - block_bio_queue of a sampled bio (probes/blk.c, nvmetrace_fs_bio()):
 *    the bio's bi_private is the struct iomap_dio, whose first member is
 *    its kiocb (6.1 to 7.3), or the bio is a member of a struct
 *    iomap_dio_simple beside its kiocb (the fast path, at the offsets START
 *    carried from the kernel's BTF); one of the task's kept kiocb is the first
 *    sampled bio of that direct I/O: FILE_SUBMIT, flagged NVMETRACE_REC_FS,
 *    stamped here with len the time since the file system took it, its aux
 *    as above.  An aio kiocb's iocb joins the table; an io_uring request is
 *    kept for its CQE (nvmetrace_uring_fs_keep()); a synchronous call's
 *    command is kept for its return.  Only the first sampled bio: the next
 *    ones of a large I/O are commands from their bio on.
 *  - the synchronous calls' entry probes the return of an O_DIRECT call on
 *    a regular file of a traced disk, sampled or not (the LBA is not known
 *    yet); the return records SYNC_RETURN only if a bio of that call was
 *    tied to it.
 *  - aio_complete_rw of a file: its command is the table's entry of its
 *    user iocb (the position says nothing of the disk).
 *  - a buffered read call (pread64, preadv, preadv2) on such a file whose
 *    first or last page the page cache does not hold (a lockless look-up at
 *    its entry): the mapping and the pages are kept for the task, the
 *    return probed, and filemap_read()'s ftrace hook notes when the page
 *    cache took it.  The first sampled read bio the task queues in that
 *    call whose first folio is one of those pages is the miss the call waits
 *    for: FILE_SUBMIT, flagged NVMETRACE_REC_FS | NVMETRACE_REC_PAGECACHE,
 *    len the time since filemap_read(); SYNC_RETURN at the return.  Bios of
 *    other pages (read-ahead) are not the call's.
 *  - an aio or io_uring buffered read of such a file: filemap_read()'s hook
 *    itself looks its first and last page up, and keeps its kiocb; the bio
 *    that fills one of them, queued while that request is the task's
 *    (io_submit() reads inline; io_uring's task or io-wq worker), is tied as
 *    a direct I/O's is, and ends at aio_complete_rw or the CQE.
 *
 * The LBA of FILE_SUBMIT and AIO_COMPLETE is the file position in the whole
 * disk's logical blocks, the number block_bio_queue samples by, so they pick
 * the same commands.  aio_complete_rw runs after the block device advanced
 * ki_pos by the result (blkdev_bio_end_io_async), so it steps back by it.
 *
 * State, all O(1) and racy only in ways that lose a record: the io_submit()
 * stash (by a hash of the task) and the iocb table (a collision drops the
 * older entry).  What the hooks write, each entry on a cache line of its own
 * so that tasks and commands on other CPUs share none:
 *
 *  - every io_submit() entry: the task's stash entry;
 *  - an unsampled command: nothing;
 *  - a sampled aio command: its iocb table entry and uiocbs_live, once at
 *    FILE_SUBMIT and once at its reap.
 */

/*
 * The io_submit() entry of a task, an owned timestamp (probe.h).  By task,
 * not by CPU: the task may migrate between io_submit()'s entry and its file
 * submissions.  Two tasks whose slots collide overwrite each other; each
 * reads its own entry time or none, never another task's.
 */
#define NVMETRACE_SUBMIT_BITS	6
static struct nvmetrace_owned_ts submit_stash[1 << NVMETRACE_SUBMIT_BITS];

static __always_inline struct nvmetrace_owned_ts *task_stash(void)
{
	return &submit_stash[hash_ptr(current, NVMETRACE_SUBMIT_BITS)];
}

struct nvmetrace_uiocb {
	u64 uptr;	/* user address of the iocb, 0: free; written last */
	u64 lba;
	u32 dev;
	u8 op;
} ____cacheline_aligned_in_smp;

#define NVMETRACE_UIOCB_BITS	8
static struct nvmetrace_uiocb uiocbs[1 << NVMETRACE_UIOCB_BITS];	/* 16 KiB */

/* entries of uiocbs[] in use, about; alone on its line, read by every reap */
static struct nvmetrace_uiocbs_live {
	atomic_t n;
} ____cacheline_aligned_in_smp uiocbs_live;	/* the type aligned: the whole line */

/*
 * The address of aio_complete_rw (static in fs/aio.c), the ki_complete of
 * every aio read and write, found at START from its hook's address
 * (aio_hooks_attached()); 0: not known in this recording (its hook did not
 * attach), and no aio kiocb is read.
 */
static unsigned long aio_complete_fn __read_mostly;

/* events per io_getevents() return looked at, at most */
#define NVMETRACE_REAP_EVENTS_MAX	64

static __always_inline u64 uaux(u32 pid, u64 hi)
{
	return (u64)pid | (u64)min_t(u64, hi, U32_MAX) << 32;
}

/*
 * Instances of each synchronous call's kretprobe: one is taken at every
 * entry and held, while the I/O runs, by each sampled command; with none
 * left an entry is not probed at all (the kretprobe's nmissed), and its
 * command is recorded from its file submission on.
 */
#define NVMETRACE_SYNC_MAXACTIVE	1024

/* kprobe at __x64_sys_io_submit(const struct pt_regs *regs) */
static int kp_submit(struct kprobe *kp, struct pt_regs *regs)
{
	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return 0;
	nvmetrace_owned_ts_set(task_stash(), current, ktime_get_ns());
	return 0;
}

/*
 * Nanoseconds since this task's io_submit() entry, for a file submission
 * inside that call; 0: not known (the stash entry is another task's, or
 * changing).
 */
static __always_inline u64 submit_since(void)
{
	u64 entry = nvmetrace_owned_ts_get(task_stash(), current);

	return entry ? ktime_get_ns() - entry : 0;
}

/*
 * Whether iocb is the kiocb of an aio read or write (the rw member of a
 * struct aio_kiocb): fs/aio.c sets ki_complete to aio_complete_rw for those
 * (aio_prep_rw()) and for nothing else, and it is the very completion
 * AIO_COMPLETE hooks.  That, not the system call alone, makes the read of
 * the aio_kiocb around it sound: a synchronous read has no ki_complete, and
 * io_uring and the loop driver set their own.  A compare: the address was
 * found at START.
 */
static __always_inline bool is_aio_kiocb(const struct kiocb *iocb)
{
	unsigned long known = READ_ONCE(aio_complete_fn);

	return known && (unsigned long)READ_ONCE(iocb->ki_complete) == known;
}

/*
 * The user's iocb of an aio kiocb: io_event.obj of its aio_kiocb's ki_res,
 * at the offsets START carried (NVMETRACE_L_AIO_KIOCB_*); 0 without them.
 */
static __always_inline u64 aio_user_iocb(const struct kiocb *iocb)
{
	const struct nvmetrace_layout *l = &nvmetrace_cfg.layout;
	const char *req;
	u64 obj;

	if (!l->vmlinux.valid)
		return 0;
	req = (const char *)iocb - NVMETRACE_VMLINUX_OFF(l, AIO_KIOCB_RW);
	if (copy_from_kernel_nofault(&obj, req + NVMETRACE_VMLINUX_OFF(l, AIO_KIOCB_RES) +
				     offsetof(struct io_event, obj), sizeof(obj)))
		return 0;
	if (!obj || !access_ok((const void __user *)(unsigned long)obj, sizeof(struct iocb)))
		return 0;
	return obj;
}

/* A sampled aio command: its iocb joins the table, for its reap. */
static __always_inline void uiocb_put(u64 uptr, u64 lba, u32 dev, u8 op)
{
	struct nvmetrace_uiocb *u = &uiocbs[hash_64(uptr, NVMETRACE_UIOCB_BITS)];

	if (!READ_ONCE(u->uptr))
		atomic_inc(&uiocbs_live.n);
	WRITE_ONCE(u->uptr, 0);
	smp_wmb();	/* uptr cleared before the fields change (uiocb_peek()) */
	u->lba = lba;
	u->dev = dev;
	u->op = op;
	smp_store_release(&u->uptr, uptr);	/* the fields, then uptr */
}

/* the command of a sampled aio iocb in the table, left there for its reap */
static __always_inline bool uiocb_peek(u64 uptr, u64 *lba, u32 *dev, u8 *op)
{
	const struct nvmetrace_uiocb *u = &uiocbs[hash_64(uptr, NVMETRACE_UIOCB_BITS)];

	/* uptr, then the fields its writer published with it (uiocb_put()) */
	if (smp_load_acquire(&u->uptr) != uptr)
		return false;
	*lba = READ_ONCE(u->lba);
	*dev = READ_ONCE(u->dev);
	*op = READ_ONCE(u->op);
	smp_rmb();	/* the fields, then uptr again */
	return READ_ONCE(u->uptr) == uptr;
}

/*
 * A positioned synchronous read or write of a 64-bit task: the system calls
 * whose entry the sync kretprobes keep and whose file read or write returns
 * only when the I/O is done.
 */
static __always_inline bool sync_syscall(void)
{
	if (in_compat_syscall())
		return false;
	switch (syscall_get_nr(current, task_pt_regs(current))) {
	case __NR_pread64:
	case __NR_pwrite64:
	case __NR_preadv:
	case __NR_pwritev:
	case __NR_preadv2:
	case __NR_pwritev2:
		return true;
	}
	return false;
}

/*
 * Where a sampled command's file submission came from, and what its
 * interface keeps for its end: an io_submit() call (the user's iocb joins
 * the table), an io_uring request (a file's is kept by its address for its
 * CQE; a block device's CQE finds its command by its position), or a
 * synchronous call (its entry; a file's command is kept for the return by
 * the caller).  Anything else: no interface, no aux.
 */
struct submit_origin {
	u64 since;	/* ns since the kernel took it: FILE_SUBMIT's aux */
	u64 call;	/* a synchronous call's entry; 0: not one, or not known */
	u64 wq_queued;	/* io_uring's io-wq: when the request was queued there */
	u16 iface;	/* NVMETRACE_IFACE_* */
	u16 path;	/* io_uring's path flags */
};

/* now: the time of the submission if already read; 0: read it if needed */
static __always_inline void submit_origin(const struct kiocb *iocb, u64 lba, u32 dev, u8 op,
					  bool fs, u64 now, struct submit_origin *o)
{
	*o = (struct submit_origin){};
	if (syscall_get_nr(current, task_pt_regs(current)) == __NR_io_submit) {
		/* aio submits reads and writes only from io_submit() */
		u64 uptr = is_aio_kiocb(iocb) ? aio_user_iocb(iocb) : 0;

		o->iface = NVMETRACE_IFACE_AIO;
		o->since = submit_since();
		if (uptr)
			uiocb_put(uptr, lba, dev, op);
	} else if (nvmetrace_uring_origin(iocb, &o->since, &o->path, &o->wq_queued)) {
		o->iface = NVMETRACE_IFACE_URING;
		if (fs)
			nvmetrace_uring_fs_keep(iocb, lba, dev, op);
	} else if (!READ_ONCE(iocb->ki_complete) && sync_syscall()) {
		/* a synchronous kiocb: the call returns when the I/O is done */
		o->iface = NVMETRACE_IFACE_SYNC;
		o->call = nvmetrace_owned_ts_get(task_stash(), current);
		if (o->call && !now)
			now = ktime_get_ns();
		o->since = o->call && now > o->call ? now - o->call : 0;
	}
}

/* FILE_SUBMIT of a sampled command from o, and where io-wq had it, URING_WQ */
static __always_inline void emit_file_submit(u64 lba, u32 dev, u32 len, u8 op, u8 flags,
					     const struct submit_origin *o)
{
	u8 wflag = op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0;

	nvmetrace_emit(NVMETRACE_EV_FILE_SUBMIT, lba, dev, len, 0, o->iface, o->path, 0, op,
		       wflag | flags, uaux(current->pid, o->since));
	if (o->wq_queued)
		nvmetrace_emit(NVMETRACE_EV_URING_WQ, lba, dev, 0, 0, 0, 0, 0, op, wflag,
			       o->wq_queued);
}

static __always_inline void file_submit(struct pt_regs *regs, u8 op)
{
	const struct kiocb *iocb = (const struct kiocb *)regs_get_kernel_argument(regs, 0);
	const struct iov_iter *iter = (const struct iov_iter *)regs_get_kernel_argument(regs, 1);
	struct submit_origin o;
	u64 lba;
	u32 dev;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return;
	if (!(iocb->ki_flags & IOCB_DIRECT) ||
	    !nvmetrace_file_lba(iocb->ki_filp, iocb->ki_pos, &dev, &lba) ||
	    !nvmetrace_sampled(lba))
		return;
	submit_origin(iocb, lba, dev, op, false, 0, &o);
	emit_file_submit(lba, dev, iov_iter_count(iter), op, 0, &o);
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

/* ------------------------------------------------ files on a file system */

/*
 * A task's direct I/O of a file as the file system took it, and the sampled
 * command of its synchronous call, by a hash of the task.  Only the task
 * writes its entry's fields, but another task whose hash collides takes the
 * entry over: a writer clears the owner, writes, and sets itself as the
 * owner; a reader takes the fields only if it sees itself as the owner
 * before and after (probe.h's owned timestamps, over several fields).
 */
struct fs_task {
	const struct task_struct *task;	/* owner; NULL while the fields change */
	const struct kiocb *iocb;	/* the direct I/O the file system took last; NULL: tied */
	const struct file *file;	/* its file */
	u64 ts;				/* when (a buffered read: its filemap_read(); 0: not yet) */
	/* a buffered read call that may miss the page cache; NULL: none, or tied */
	const struct address_space *mapping;
	pgoff_t first, last;		/* the pages it asked for */
	u64 bcall;			/* a synchronous call's entry */
	const struct kiocb *biocb;	/* or an aio or io_uring read's kiocb */
	u64 call;			/* the synchronous call's entry (its sync_cmd's) */
	u64 lba;			/* the call's sampled command */
	u32 dev;
	u8 op;
} ____cacheline_aligned_in_smp;	/* written per direct I/O: a line per task */

#define NVMETRACE_FS_BITS	6
static struct fs_task fs_tasks[1 << NVMETRACE_FS_BITS];

static __always_inline struct fs_task *fs_task(void)
{
	return &fs_tasks[hash_ptr(current, NVMETRACE_FS_BITS)];
}

/* current's entry, for a change of its fields; false: another task's, cleared */
static __always_inline bool fs_task_claim(struct fs_task *t)
{
	bool own = READ_ONCE(t->task) == current;

	WRITE_ONCE(t->task, NULL);
	smp_wmb();	/* the owner cleared before the fields change */
	if (!own) {
		t->iocb = NULL;
		t->mapping = NULL;
		t->biocb = NULL;
		t->call = 0;
	}
	return own;
}

static __always_inline void fs_task_publish(struct fs_task *t)
{
	smp_wmb();	/* the fields, then the owner */
	WRITE_ONCE(t->task, current);
}

static __always_inline bool fs_task_mine(const struct fs_task *t)
{
	return READ_ONCE(t->task) == current;
}

/*
 * The disk (whole, dev_t) of a regular file's file system, if it is traced:
 * where its direct I/O goes (the data device; not an XFS realtime device).
 */
static __always_inline bool fs_file_dev(const struct file *file, u32 *dev)
{
	const struct inode *inode = file_inode(file);
	const struct block_device *bdev = inode->i_sb->s_bdev;

	if (!S_ISREG(inode->i_mode) || !bdev || !bdev->bd_disk)
		return false;
	*dev = disk_dev(bdev->bd_disk);
	return host_dev_wanted(*dev);
}

/*
 * Whether a page of mapping is in the page cache, read (up to date).  A
 * lockless look-up (xa_load() under RCU), no reference taken: a folio
 * freed meanwhile at worst gives the wrong answer, which loses a tie or
 * probes one return for nothing.
 */
static __always_inline bool fs_page_cached(struct address_space *mapping, pgoff_t index)
{
	void *entry = xa_load(&mapping->i_pages, index);

	return entry && !xa_is_value(entry) && folio_test_uptodate((struct folio *)entry);
}

/*
 * Whether the page cache misses the first or the last page of count bytes
 * at pos: those pages, in *first and *last.
 */
static __always_inline bool fs_misses(struct address_space *mapping, loff_t pos, size_t count,
				      pgoff_t *first, pgoff_t *last)
{
	if (!count || pos < 0)
		return false;
	*first = pos >> PAGE_SHIFT;
	*last = (pos + count - 1) >> PAGE_SHIFT;
	return !fs_page_cached(mapping, *first) || !fs_page_cached(mapping, *last);
}

/*
 * ftrace hooks at __iomap_dio_rw(struct kiocb *iocb, struct iov_iter *iter,
 * ...) and __iomap_dio_read_simple(struct kiocb *iocb, ...): a file's direct
 * I/O as its file system hands it to iomap (the second, 7.3 on, after the
 * file system mapped the range).
 */
static int kp_fs_dio(struct kprobe *kp, struct pt_regs *regs)
{
	const struct kiocb *iocb = (const struct kiocb *)regs_get_kernel_argument(regs, 0);
	struct fs_task *t;
	u32 dev;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)) || !fs_file_dev(iocb->ki_filp, &dev))
		return 0;
	t = fs_task();
	fs_task_claim(t);
	t->iocb = iocb;
	t->file = iocb->ki_filp;
	t->ts = ktime_get_ns();
	fs_task_publish(t);
	return 0;
}

/*
 * ftrace hook at filemap_read(struct kiocb *iocb, struct iov_iter *iter,
 * ...): the page cache takes a buffered read.  For the synchronous call whose
 * entry found the page cache missing its pages (sync_entry()): when.  For an
 * aio or io_uring read of a regular file on a traced disk (its kiocb has a
 * completion; io_submit() reads inline, io_uring from the submitting task or
 * an io-wq worker): if the page cache misses its first or last page, the
 * read's kiocb, pages and time are kept for its bio.
 */
static int kp_fs_read(struct kprobe *kp, struct pt_regs *regs)
{
	const struct kiocb *iocb = (const struct kiocb *)regs_get_kernel_argument(regs, 0);
	const struct iov_iter *iter = (const struct iov_iter *)regs_get_kernel_argument(regs, 1);
	struct file *file = iocb->ki_filp;
	struct fs_task *t = fs_task();
	pgoff_t first, last;
	u32 dev;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return 0;
	if (!READ_ONCE(iocb->ki_complete)) {
		/* a synchronous read: set up at its call's entry, if at all */
		if (!fs_task_mine(t) || READ_ONCE(t->ts) || READ_ONCE(t->biocb) ||
		    READ_ONCE(t->mapping) != file->f_mapping)
			return 0;
		if (fs_task_claim(t))
			t->ts = ktime_get_ns();
		fs_task_publish(t);
		return 0;
	}
	if (!fs_file_dev(file, &dev))
		return 0;
	if (!fs_misses(file->f_mapping, iocb->ki_pos, iov_iter_count(iter), &first, &last)) {
		/* a hit: a read of the task's kept earlier that was never tied is over */
		if (fs_task_mine(t) && READ_ONCE(t->biocb)) {
			if (fs_task_claim(t))
				t->mapping = NULL;
			t->biocb = NULL;
			fs_task_publish(t);
		}
		return 0;
	}
	nvmetrace_uring_file_miss(iocb);
	fs_task_claim(t);
	t->iocb = NULL;
	t->mapping = file->f_mapping;
	t->first = first;
	t->last = last;
	t->bcall = 0;
	t->biocb = iocb;
	t->ts = ktime_get_ns();
	fs_task_publish(t);
	return 0;
}

/*
 * Whether a read bio fills the page cache of mapping at one of the pages
 * first..last: its first folio's, locked by the read-ahead that queues it
 * (a page-cache folio's mapping and index do not change while it is locked).
 */
static __always_inline bool fs_bio_fills(const struct bio *bio, const struct address_space *mapping,
					 pgoff_t first, pgoff_t last)
{
	struct folio *folio;
	pgoff_t index;

	if (!bio->bi_vcnt)
		return false;
	folio = page_folio(bio->bi_io_vec[0].bv_page);
	if (READ_ONCE(folio->mapping) != mapping)
		return false;
	index = READ_ONCE(folio->index);
	return index <= last && index + folio_nr_pages(folio) > first;
}

/*
 * Whether bio is one of iocb's direct I/O: iomap's general path queues bios
 * whose bi_private is its struct iomap_dio, the kiocb its first member (6.1
 * to 7.3); the fast path of a small read (7.3 on) one bio that is a member
 * of a struct iomap_dio_simple beside the kiocb (at the offsets START
 * carried).  Read without faulting: a bio of any other kind names no kiocb,
 * or not this one.
 */
static __always_inline bool fs_bio_of(const struct bio *bio, const struct kiocb *iocb)
{
	const struct nvmetrace_layout *l = &nvmetrace_cfg.layout;
	const struct kiocb *named;

	if (!copy_from_kernel_nofault(&named, bio->bi_private, sizeof(named)) && named == iocb)
		return true;
	if (!l->dio_simple.valid)
		return false;
	return !copy_from_kernel_nofault(&named, (const char *)bio -
					 NVMETRACE_DIO_SIMPLE_OFF(l, BIO) +
					 NVMETRACE_DIO_SIMPLE_OFF(l, IOCB), sizeof(named)) &&
	       named == iocb;
}

/*
 * A buffered read's bio (the task's read call found its pages missing from
 * the page cache at its entry): the first sampled one that fills one of the
 * pages the call asked for is the miss the call waits for, FILE_SUBMIT with
 * NVMETRACE_REC_FS | NVMETRACE_REC_PAGECACHE, len the nanoseconds since
 * filemap_read() took the read (0: not seen), aux the call's entry; the
 * command is kept for the call's return.  A bio of pages beyond them is
 * read-ahead the call does not wait for: not tied.
 */
static __always_inline void fs_buffered_bio(struct fs_task *t, const struct bio *bio,
					    const struct address_space *mapping, pgoff_t first,
					    pgoff_t last, u64 bcall, const struct kiocb *biocb,
					    u64 fs_ts, u64 lba, u32 dev)
{
	struct submit_origin o = { .iface = NVMETRACE_IFACE_SYNC };
	u64 now;

	if (!fs_bio_fills(bio, mapping, first, last))
		return;
	if (biocb) {
		/*
		 * an aio or io_uring read, queued by its own filemap_read():
		 * io_submit() reads inline, io_uring from the task that took the
		 * request or the io-wq worker that has it
		 */
		now = ktime_get_ns();
		submit_origin(biocb, lba, dev, nvme_cmd_read, true, now, &o);
		if (o.iface != NVMETRACE_IFACE_AIO && o.iface != NVMETRACE_IFACE_URING)
			return;
	} else {
		if (!sync_syscall())
			return;
		o.call = nvmetrace_owned_ts_get(task_stash(), current);
		if (!o.call || o.call != bcall)
			return;
		now = ktime_get_ns();
		o.since = now > o.call ? now - o.call : 0;
	}
	if (fs_task_claim(t)) {
		t->mapping = NULL;
		t->biocb = NULL;
		if (!biocb) {
			t->call = o.call;
			t->lba = lba;
			t->dev = dev;
			t->op = nvme_cmd_read;
		}
	}
	fs_task_publish(t);
	emit_file_submit(lba, dev, fs_ts && now > fs_ts ? (u32)min_t(u64, now - fs_ts, U32_MAX) : 0,
			 nvme_cmd_read, NVMETRACE_REC_FS | NVMETRACE_REC_PAGECACHE, &o);
}

/*
 * block_bio_queue of a sampled bio (probes/blk.c), before its BIO_QUEUE: if
 * it is the first sampled bio of the direct I/O the file system took last in
 * this task (its bi_private is that I/O's struct iomap_dio, whose first
 * member is the kiocb), FILE_SUBMIT with NVMETRACE_REC_FS: its aux as for a
 * block device file, len the nanoseconds since the file system took it;
 * and the command is kept for its completion and reap.  Or the page-cache
 * miss of the task's buffered read call (fs_buffered_bio()).
 */
void nvmetrace_fs_bio(const struct bio *bio, u64 lba, u32 dev, u8 op)
{
	struct fs_task *t = fs_task();
	const struct address_space *mapping;
	const struct kiocb *iocb, *biocb;
	const struct file *file, *now_file;
	struct submit_origin o;
	u64 fs_ts, now, bcall;
	pgoff_t first, last;

	if (!in_task() || !fs_task_mine(t))
		return;
	smp_rmb();	/* the owner, then the fields */
	iocb = READ_ONCE(t->iocb);
	file = READ_ONCE(t->file);
	fs_ts = READ_ONCE(t->ts);
	mapping = READ_ONCE(t->mapping);
	first = READ_ONCE(t->first);
	last = READ_ONCE(t->last);
	bcall = READ_ONCE(t->bcall);
	biocb = READ_ONCE(t->biocb);
	smp_rmb();	/* the fields, then the owner again */
	if (!fs_task_mine(t))
		return;
	if (!iocb) {
		if (mapping && op == nvme_cmd_read)
			fs_buffered_bio(t, bio, mapping, first, last, bcall, biocb, fs_ts,
					lba, dev);
		return;
	}
	/*
	 * The bio names the kiocb, and that kiocb is still the file's: a kiocb
	 * of an I/O the file system took without a sampled bio may be used
	 * again for a block device's (whose struct blkdev_dio also starts with
	 * it), which no hook here saw begin.
	 */
	if (!fs_bio_of(bio, iocb) ||
	    copy_from_kernel_nofault(&now_file, &iocb->ki_filp, sizeof(now_file)) ||
	    now_file != file)
		return;
	now = ktime_get_ns();
	submit_origin(iocb, lba, dev, op, true, now, &o);
	/* tied: the next bios of this I/O are not its first */
	if (fs_task_claim(t)) {
		t->iocb = NULL;
		if (o.call) {
			t->call = o.call;
			t->lba = lba;
			t->dev = dev;
			t->op = op;
		}
	}
	fs_task_publish(t);
	emit_file_submit(lba, dev, (u32)min_t(u64, now > fs_ts ? now - fs_ts : 0, U32_MAX), op,
			 NVMETRACE_REC_FS, &o);
}

/*
 * The command a bio of the synchronous call that began at call tied to it
 * (nvmetrace_fs_bio()), taken; false: none.
 */
static __always_inline bool fs_sync_cmd(u64 call, u64 *lba, u32 *dev, u8 *op)
{
	struct fs_task *t = fs_task();
	bool mine;

	if (!fs_task_mine(t))
		return false;
	smp_rmb();	/* the owner, then the fields */
	mine = READ_ONCE(t->call) == call;
	*lba = READ_ONCE(t->lba);
	*dev = READ_ONCE(t->dev);
	*op = READ_ONCE(t->op);
	smp_rmb();	/* the fields, then the owner again */
	if (!mine || !fs_task_mine(t))
		return false;
	fs_task_claim(t);
	t->call = 0;
	fs_task_publish(t);
	return true;
}

/*
 * A buffered read call's entry on a regular file of a traced disk: whether
 * the page cache misses the first or the last page it asks for (count bytes
 * at pos; for preadv/preadv2 the first iovec's).  If so the task's fs_task
 * waits for the call's miss (fs_buffered_bio()), the call's return is probed.
 */
static __always_inline bool fs_read_misses(const struct pt_regs *uregs, struct file *file,
					   loff_t pos, u64 *call)
{
	struct address_space *mapping = file->f_mapping;
	size_t count = (size_t)uregs->dx;
	pgoff_t first, last;
	struct fs_task *t;

	if (syscall_get_nr(current, task_pt_regs(current)) != __NR_pread64) {
		struct iovec iov;

		if (!uregs->dx ||
		    copy_from_user_nofault(&iov, (const void __user *)uregs->si, sizeof(iov)))
			return false;
		count = iov.iov_len;
	}
	if (!fs_misses(mapping, pos, count, &first, &last))
		return false;
	*call = ktime_get_ns();
	t = fs_task();
	fs_task_claim(t);
	t->iocb = NULL;
	t->mapping = mapping;
	t->first = first;
	t->last = last;
	t->bcall = *call;
	t->biocb = NULL;
	t->ts = 0;
	fs_task_publish(t);
	return true;
}

/*
 * A buffered read call returned without a tied bio (its pages came in
 * meanwhile, or its bio was not sampled): no later bio of the task is its.
 */
static __always_inline void fs_read_done(u64 call)
{
	struct fs_task *t = fs_task();

	if (!fs_task_mine(t) || !READ_ONCE(t->mapping) || READ_ONCE(t->bcall) != call)
		return;
	if (fs_task_claim(t))
		t->mapping = NULL;
	fs_task_publish(t);
}

/* a sampled synchronous command, kept by its call's kretprobe for the return */
struct sync_cmd {
	u64 lba;
	u64 call;	/* the entry's time */
	u32 dev;
	u8 op;
	bool fs;	/* a file on a file system: its command, if any, is tied at its bio */
};

/*
 * The entry of __x64_sys_pread64 ... pwritev2(const struct pt_regs *regs):
 * the descriptor in di, the position in r10 (pos_l of preadv/preadv2, the
 * whole position on 64 bits; -1 for preadv2/pwritev2: the file's own
 * position, not probed).  Probe the return (0) only for a sampled command
 * of an O_DIRECT block device, or for any O_DIRECT call on a regular file
 * whose file system is on a traced disk (its LBA is known only at its bio),
 * or for a buffered read of such a file that misses the page cache.
 * The file is read under RCU without a reference: a descriptor closed
 * meanwhile at worst names another command, whose return then matches none.
 */
static __always_inline int sync_entry(struct kretprobe_instance *ri, struct pt_regs *regs, u8 op)
{
	const struct pt_regs *uregs = (const struct pt_regs *)regs_get_kernel_argument(regs, 0);
	struct sync_cmd *sync = (struct sync_cmd *)ri->data;
	struct files_struct *files = current->files;
	unsigned int fd = (unsigned int)uregs->di;
	loff_t pos = (loff_t)uregs->r10;
	struct file *file;
	bool ok = false;
	u64 call = 0;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)) || !files || pos < 0)
		return 1;
	sync->fs = false;
	rcu_read_lock();
	file = files_lookup_fd_raw(files, fd);
	if (file && (READ_ONCE(file->f_flags) & O_DIRECT)) {
		if (S_ISBLK(file_inode(file)->i_mode))
			ok = nvmetrace_file_lba(file, pos, &sync->dev, &sync->lba) &&
			     nvmetrace_sampled(sync->lba);
		else
			ok = fs_file_dev(file, &sync->dev);
		sync->fs = ok && !S_ISBLK(file_inode(file)->i_mode);
	} else if (file && op == nvme_cmd_read && fs_file_dev(file, &sync->dev)) {
		ok = fs_read_misses(uregs, file, pos, &call);
		sync->fs = ok;
	}
	rcu_read_unlock();
	if (!ok)
		return 1;
	sync->op = op;
	sync->call = call ? call : ktime_get_ns();
	nvmetrace_owned_ts_set(task_stash(), current, sync->call);
	return 0;
}

static int krp_sync_read(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return sync_entry(ri, regs, nvme_cmd_read);
}

static int krp_sync_write(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return sync_entry(ri, regs, nvme_cmd_write);
}

/* the synchronous call returned: SYNC_RETURN, len its result */
static int krp_sync_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	const struct sync_cmd *sync = (const struct sync_cmd *)ri->data;
	long ret = (long)regs_return_value(regs);
	u64 lba = sync->lba;
	u32 dev = sync->dev;
	u8 op = sync->op;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return 0;
	if (sync->fs && !fs_sync_cmd(sync->call, &lba, &dev, &op)) {
		fs_read_done(sync->call);
		return 0;	/* no sampled bio of the file's I/O */
	}
	nvmetrace_emit(NVMETRACE_EV_SYNC_RETURN, lba, dev,
		       ret > 0 ? (u32)min_t(long, ret, U32_MAX) : 0, 0, 0, 0, 0, op,
		       op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0, uaux(current->pid, 0));
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
	op = (iocb->ki_flags & IOCB_WRITE) ? nvme_cmd_write : nvme_cmd_read;
	if (!S_ISBLK(file_inode(file)->i_mode)) {
		u64 uptr;

		/*
		 * a file's (direct I/O, or a buffered read that missed): the
		 * command its first sampled bio tied to its iocb
		 */
		if (atomic_read(&uiocbs_live.n) <= 0 || !is_aio_kiocb(iocb))
			return 0;
		uptr = aio_user_iocb(iocb);
		if (!uptr || !uiocb_peek(uptr, &lba, &dev, &op))
			return 0;
		goto posted;
	}
	if (!(iocb->ki_flags & IOCB_DIRECT))
		return 0;
	if (res > 0)
		pos -= res;	/* the block device advanced ki_pos by the result */
	if (!nvmetrace_file_lba(file, pos, &dev, &lba) || !nvmetrace_sampled(lba))
		return 0;
posted:
	nvmetrace_emit(NVMETRACE_EV_AIO_COMPLETE, lba, dev, res > 0 ? res : 0, 0, 0, 0, 0,
		       op, op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0, (u64)res);
	return 0;
}

/* do_io_getevents(ctx_id, min_nr, nr, struct io_event __user *events, ts) */
static int krp_reap_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	if (!READ_ONCE(nvmetrace_emitting) || atomic_read(&uiocbs_live.n) <= 0)
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
		atomic_dec(&uiocbs_live.n);
		nvmetrace_emit(NVMETRACE_EV_AIO_REAP, lba, dev, 0, 0, 0, 0, 0, op,
			       op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0,
			       uaux(current->pid, ret));
	}
	return 0;
}

/* START: no hook runs; the last recording's iocbs are not this one's */
static void aio_hooks_reset(void)
{
	memset(submit_stash, 0, sizeof(submit_stash));
	memset(fs_tasks, 0, sizeof(fs_tasks));
	memset(uiocbs, 0, sizeof(uiocbs));
	atomic_set(&uiocbs_live.n, 0);
	aio_complete_fn = 0;
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
	{ "__iomap_dio_rw", NULL, NVMETRACE_HOOK_FTRACE, NVMETRACE_ROLE_HOST,
	  NULL, kp_fs_dio },
	{ "filemap_read", NULL, NVMETRACE_HOOK_FTRACE, NVMETRACE_ROLE_HOST,
	  NULL, kp_fs_read },
#ifdef NVMETRACE_HAVE_IOMAP_DIO_READ_SIMPLE
	/* the fast path of a small O_DIRECT read (compat.h) */
	{ "__iomap_dio_read_simple", NULL, NVMETRACE_HOOK_FTRACE, NVMETRACE_ROLE_HOST,
	  NULL, kp_fs_dio },
#endif
	{ "do_io_getevents", NULL, NVMETRACE_HOOK_KPROBE, NVMETRACE_ROLE_HOST,
	  .ret_entry = krp_reap_entry, .ret = krp_reap_return,
	  .ret_data = sizeof(unsigned long) },
#define SYNC_HOOK(fn, entry)							\
	{ fn, NULL, NVMETRACE_HOOK_KPROBE, NVMETRACE_ROLE_HOST,			\
	  .ret_entry = entry, .ret = krp_sync_return,				\
	  .ret_data = sizeof(struct sync_cmd), .ret_maxactive = NVMETRACE_SYNC_MAXACTIVE }
	SYNC_HOOK("__x64_sys_pread64", krp_sync_read),
	SYNC_HOOK("__x64_sys_pwrite64", krp_sync_write),
	SYNC_HOOK("__x64_sys_preadv", krp_sync_read),
	SYNC_HOOK("__x64_sys_pwritev", krp_sync_write),
	SYNC_HOOK("__x64_sys_preadv2", krp_sync_read),
	SYNC_HOOK("__x64_sys_pwritev2", krp_sync_write),
#undef SYNC_HOOK
};

/*
 * START, hooks attached (process context): aio_complete_rw's address from
 * its hook's, which is inside it (its ftrace location, after an endbr64
 * where the kernel has IBT, or its kprobe's).  The symbol that address
 * falls in, and the offset into it, give the function's start: what
 * fs/aio.c stores in ki_complete.  Without the hook, or with any doubt
 * (not that symbol, no kallsyms), 0: no aio kiocb is read.
 */
static void aio_hooks_attached(void)
{
	char sym[KSYM_SYMBOL_LEN], *plus;
	unsigned long ip = 0, off, size;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(aio_hooks); i++)
		if (aio_hooks[i].pre == kp_aio_complete)
			ip = nvmetrace_hook_addr(&aio_hooks[i]);
	if (!ip)
		return;
	sprint_symbol(sym, ip);		/* "aio_complete_rw+0x4/0x90" */
	plus = strchr(sym, '+');
	if (!plus)
		return;
	*plus++ = '\0';
	if (strcmp(sym, "aio_complete_rw") ||
	    sscanf(plus, "0x%lx/0x%lx", &off, &size) != 2 || off >= size)
		return;
	WRITE_ONCE(aio_complete_fn, ip - off);
}

struct nvmetrace_hook_group nvmetrace_aio_hooks = {
	.rows = aio_hooks,
	.nr = ARRAY_SIZE(aio_hooks),
	.reset = aio_hooks_reset,
	.attached = aio_hooks_attached,
};
