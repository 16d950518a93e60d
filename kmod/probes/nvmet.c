// SPDX-License-Identifier: GPL-2.0
/*
 * probes/nvmet.c — the nvmet core's tracepoints and its bdev backend
 * (target role): a command initialized, its block I/O submitted and
 * completed, its response completed.
 *
 * nvmet_req_init and nvmet_req_complete are nvmet tracepoints (the
 * tracepoint module notifier attaches them); nvmet_bdev_execute_rw and
 * nvmet_bio_done are function-entry hooks.  nvmet's structs are private:
 * every field comes from its BTF layout (probe.h, req_cmd_event()).
 */
#include <linux/bio.h>
#include <linux/kprobes.h>
#include <linux/nvme.h>

#include "probe.h"

/*
 * The target gate (probe.h): nvmet_bdev_execute_rw and nvmet_bio_done run
 * for every command, between its nvmet_req_init and nvmet_req_complete
 * tracepoints, which decide and see every sampled command; so while no
 * sampled command is in flight the two function hooks (and nvmet-tcp's
 * that record within that span) leave at once, before reading the request.
 * The sampled requests in flight (gate_core.h's set of pointers) join at
 * nvmet_req_init and leave at nvmet_req_complete; a request that joined and
 * never completed (its queue torn down) leaves when it is initialized
 * again.  A full bucket opens the gate until the next START.  An open gate
 * costs what the hooks cost without one, never an event.  Sampling every
 * command, or without both tracepoints attached, there is no gate.
 */
struct nvmetrace_ptrset nvmetrace_target_sampled;

/* START: no hook runs; the last recording's requests are not this one's */
static void nvmet_hooks_reset(void)
{
	nvmetrace_ptrset_clear(&nvmetrace_target_sampled);
}

static void probe_nvmet_init(void *data, void *req, struct nvme_command *cmd)
{
	u8 op = cmd->common.opcode;

	if ((op == nvme_cmd_read || op == nvme_cmd_write) &&
	    nvmetrace_sampled(le64_to_cpu(cmd->rw.slba))) {
		if (nvmetrace_sample_threshold != U64_MAX)
			nvmetrace_ptrset_add(&nvmetrace_target_sampled, req);
		req_cmd_event(NVMETRACE_EV_NVMET_INIT, req, cmd, le32_to_cpu(cmd->common.nsid),
			      true);
	} else if (atomic_read(&nvmetrace_target_sampled.n)) {
		/* in the set: its last command never completed */
		nvmetrace_ptrset_del(&nvmetrace_target_sampled, req);
	}
}

static void probe_nvmet_complete(void *data, void *req)
{
	const struct nvme_command *cmd =
		FIELD_AT(const struct nvme_command *, req, nvmetrace_cfg.layout.req_cmd);
	const struct nvme_completion *cqe =
		FIELD_AT(const struct nvme_completion *, req, nvmetrace_cfg.layout.req_cqe);

	if (atomic_read(&nvmetrace_target_sampled.n))
		nvmetrace_ptrset_del(&nvmetrace_target_sampled, req);
	target_event(NVMETRACE_EV_NVMET_COMPLETE, req, cmd,
		     le16_to_cpu(cqe->status) >> 1);
}

/* at nvmet_bdev_execute_rw(struct nvmet_req *req) */
static int kp_nvmet_exec(struct kprobe *kp, struct pt_regs *regs)
{
	if (!nvmetrace_target_gate_open())
		return 0;
	req_event(NVMETRACE_EV_NVMET_EXEC, (const void *)regs_get_kernel_argument(regs, 0));
	return 0;
}

/* kprobe at nvmet_bio_done(struct bio *bio): bi_private is the nvmet_req */
static int kp_nvmet_bio_done(struct kprobe *kp, struct pt_regs *regs)
{
	const struct bio *bio;
	const void *req;

	if (!nvmetrace_target_gate_open())
		return 0;
	bio = (const struct bio *)regs_get_kernel_argument(regs, 0);
	req = bio->bi_private;

	target_event(NVMETRACE_EV_NVMET_BIO_DONE, req,
		     FIELD_AT(const struct nvme_command *, req, nvmetrace_cfg.layout.req_cmd),
		     (__force u64)bio->bi_status);
	return 0;
}

static struct nvmetrace_hook nvmet_hooks[NVMETRACE_NVMET_ROWS] = {
	[NVMETRACE_NVMET_ROW_INIT] = { "nvmet_req_init", "nvmet", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_TARGET, probe_nvmet_init, .needs = NEEDS_NVMET },
	[NVMETRACE_NVMET_ROW_EXEC] = { "nvmet_bdev_execute_rw", "nvmet", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_nvmet_exec, .needs = NEEDS_NVMET },
	[NVMETRACE_NVMET_ROW_BIO_DONE] = { "nvmet_bio_done", "nvmet", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_nvmet_bio_done, .needs = NEEDS_NVMET },
	[NVMETRACE_NVMET_ROW_COMPLETE] = { "nvmet_req_complete", "nvmet", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_TARGET, probe_nvmet_complete, .needs = NEEDS_NVMET },
};

struct nvmetrace_hook_group nvmetrace_nvmet_hooks = {
	.rows = nvmet_hooks,
	.nr = ARRAY_SIZE(nvmet_hooks),
	.reset = nvmet_hooks_reset,
};
