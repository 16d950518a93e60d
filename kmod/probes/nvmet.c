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

static void probe_nvmet_init(void *data, void *req, struct nvme_command *cmd)
{
	target_event(NVMETRACE_EV_NVMET_INIT, req, cmd,
		     le32_to_cpu(cmd->common.nsid));
}

static void probe_nvmet_complete(void *data, void *req)
{
	const struct nvme_command *cmd =
		FIELD_AT(const struct nvme_command *, req, nvmetrace_cfg.layout.req_cmd);
	const struct nvme_completion *cqe =
		FIELD_AT(const struct nvme_completion *, req, nvmetrace_cfg.layout.req_cqe);

	target_event(NVMETRACE_EV_NVMET_COMPLETE, req, cmd,
		     le16_to_cpu(cqe->status) >> 1);
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
		     FIELD_AT(const struct nvme_command *, req, nvmetrace_cfg.layout.req_cmd),
		     (__force u64)bio->bi_status);
	return 0;
}

static struct nvmetrace_hook nvmet_hooks[] = {
	{ "nvmet_req_init", "nvmet", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_TARGET, probe_nvmet_init, .needs = NEEDS_NVMET },
	{ "nvmet_bdev_execute_rw", "nvmet", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_nvmet_exec, .needs = NEEDS_NVMET },
	{ "nvmet_bio_done", "nvmet", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_nvmet_bio_done, .needs = NEEDS_NVMET },
	{ "nvmet_req_complete", "nvmet", NVMETRACE_HOOK_TRACEPOINT,
	  NVMETRACE_ROLE_TARGET, probe_nvmet_complete, .needs = NEEDS_NVMET },
};

struct nvmetrace_hook_group nvmetrace_nvmet_hooks = {
	.rows = nvmet_hooks,
	.nr = ARRAY_SIZE(nvmet_hooks),
};
