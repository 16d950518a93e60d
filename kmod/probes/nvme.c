// SPDX-License-Identifier: GPL-2.0
/*
 * probes/nvme.c — nvme-core's tracepoints (host role): nvme_setup_cmd, where
 * the command id is known, and nvme_complete_rq.
 *
 * In the nvme_core module: attached through the tracepoint module notifier
 * (hooks.c), whenever nvme-core is loaded.  nvme_setup_cmd also notes sampled
 * passthrough requests in nvmetrace_pt_cmds (see probe.h), which the other
 * host hooks look up.
 */
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/nvme.h>
#include <linux/string.h>

#include "probe.h"
#include "uring.h"

/* the passthrough requests in flight (probe.h) */
struct nvmetrace_pt nvmetrace_pt_cmds[NVMETRACE_PT_SIZE];

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
	smp_wmb();	/* rq cleared before the fields change (pt_find()) */
	e->lba = lba;
	e->op = op;
	smp_store_release(&e->rq, rq);	/* the fields, then rq */
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
	if (unlikely(blk_rq_is_passthrough(rq))) {
		pt_note(rq, op, lba, true);
		/* io_uring's passthrough: the request's end_io_data is its io_uring_cmd */
		nvmetrace_uring_pt_setup(READ_ONCE(rq->end_io_data), lba, dev,
					 blk_rq_bytes(rq), op);
	}
	nvmetrace_emit(NVMETRACE_EV_NVME_SETUP, lba, dev, blk_rq_bytes(rq), rq_qid(rq),
		       cmd->common.command_id, (u16)rq->tag, 0, op,
		       NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID |
		       (blk_rq_is_passthrough(rq) ? NVMETRACE_REC_PASSTHRU : 0) |
		       (op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0),
		       le32_to_cpu(cmd->common.nsid));
}

/* START: no hook runs; the last recording's notes are not this one's */
static void nvme_hooks_reset(void)
{
	memset(nvmetrace_pt_cmds, 0, sizeof(nvmetrace_pt_cmds));
}

static struct nvmetrace_hook nvme_hooks[] = {
	{ "nvme_setup_cmd", "nvme_core", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_HOST, probe_nvme_setup },
	{ "nvme_complete_rq", "nvme_core", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_HOST, probe_nvme_complete },
};

struct nvmetrace_hook_group nvmetrace_nvme_hooks = {
	.rows = nvme_hooks,
	.nr = ARRAY_SIZE(nvme_hooks),
	.reset = nvme_hooks_reset,
};
