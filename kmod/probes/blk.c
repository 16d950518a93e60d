// SPDX-License-Identifier: GPL-2.0
/*
 * probes/blk.c — the block layer's tracepoints (host role): a bio queued,
 * and a request inserted, issued and completed.
 *
 * Built-in tracepoints, attached by name through for_each_kernel_tracepoint()
 * (hooks.c).  A request's op and LBA come from the block layer, or for a
 * sampled passthrough request from its NVMe command (pt_find(), noted by
 * probes/nvme.c).  A bio's record names the thread that queued it, and
 * whether that is a kernel thread (write-back): the analysis says where a
 * command without a system call came from.  A task's bio may be a file's
 * direct I/O (nvmetrace_fs_bio(), probes/aio.c), whose file submission is
 * recorded first.
 */
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/sched.h>
#include <trace/events/block.h>

#include "probe.h"

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
	if (!(current->flags & PF_KTHREAD))
		nvmetrace_fs_bio(bio, lba, dev, op);
	nvmetrace_emit(NVMETRACE_EV_BIO_QUEUE, lba, dev, bio->bi_iter.bi_size, 0, 0, 0,
		       0, op, op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0,
		       (u64)(u32)current->pid |
		       ((current->flags & PF_KTHREAD) ? NVMETRACE_BIO_KTHREAD : 0));
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

/*
 * The probes' prototypes against the tracepoints' own: these helpers come
 * with <trace/events/block.h>, and a probe whose arguments no longer match
 * (-Werror=incompatible-pointer-types) fails the build rather than reading
 * the wrong arguments at run time.  Never called.
 */
static void __maybe_unused blk_check_prototypes(void)
{
	check_trace_callback_type_block_bio_queue(probe_bio_queue);
	check_trace_callback_type_block_rq_insert(probe_rq_insert);
	check_trace_callback_type_block_rq_issue(probe_rq_issue);
	check_trace_callback_type_block_rq_complete(probe_rq_complete);
}

static struct nvmetrace_hook blk_hooks[] = {
	{ "block_bio_queue", NULL, NVMETRACE_HOOK_TRACEPOINT, NVMETRACE_ROLE_HOST,
	  probe_bio_queue },
	{ "block_rq_insert", NULL, NVMETRACE_HOOK_TRACEPOINT, NVMETRACE_ROLE_HOST,
	  probe_rq_insert },
	{ "block_rq_issue", NULL, NVMETRACE_HOOK_TRACEPOINT, NVMETRACE_ROLE_HOST,
	  probe_rq_issue },
	{ "block_rq_complete", NULL, NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_HOST, probe_rq_complete },
};

struct nvmetrace_hook_group nvmetrace_blk_hooks = {
	.rows = blk_hooks,
	.nr = ARRAY_SIZE(blk_hooks),
};
