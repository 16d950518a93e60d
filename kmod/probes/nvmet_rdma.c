// SPDX-License-Identifier: GPL-2.0
/*
 * probes/nvmet_rdma.c — the nvmet-rdma target's hooks: a command capsule
 * received, a write's data read, the response posted and sent.
 *
 * The transports' functions are static; the hooks are kprobes on those whose
 * address is taken (CQE done callbacks, the blk-mq and nvmet fabrics ops), so
 * they are not inlined on either Debian kernel (checked with nm on 6.1 and
 * 6.12): nvme_rdma_post_send, nvme_rdma_send_done, nvme_rdma_recv_done,
 * nvme_rdma_complete_rq; nvmet_rdma_recv_done, nvmet_rdma_read_data_done,
 * nvmet_rdma_queue_response, nvmet_rdma_send_done.
 *
 * The RDMA core's headers are not in the kernel headers package, and the
 * transports' structs are private, so every field read here (struct ib_wc,
 * struct ib_qp, and the transports' own) has its offset from BTF
 * (NVMETRACE_L_RDMA_* and NVMETRACE_L_RDMAT_*); without its group a hook is
 * refused (-ENODATA) and the others run.
 *
 * All buffers these hooks follow (requests, queue entries, response
 * contexts, receive buffers) are allocated with the queue and live as long
 * as it does; a completion callback runs before its buffer can be reposted.
 * The sampling predicate is evaluated on the command's starting LBA before
 * anything else is read.
 */
#include <linux/kprobes.h>
#include <linux/nvme.h>

#include "probe.h"

#define RDMAT_OFF(name) NVMETRACE_RDMAT_OFF(&nvmetrace_cfg.layout, name)

/*
 * One target record from an NVMe command and its nvmet_sq (where
 * target_event() takes the sq from an initialized nvmet_req).
 */
static __always_inline void rdmat_event(u16 event, const void *sq,
					const struct nvme_command *cmd)
{
	const void *ctrl;
	u8 op = READ_ONCE(cmd->common.opcode);
	u64 lba;
	u16 qid, cntlid;

	if (op != nvme_cmd_read && op != nvme_cmd_write)
		return;
	lba = le64_to_cpu(cmd->rw.slba);
	if (!nvmetrace_sampled(lba))
		return;
	qid = FIELD_AT(u16, sq, nvmetrace_cfg.layout.sq_qid);
	if (!qid)
		return;
	ctrl = FIELD_AT(const void *, sq, nvmetrace_cfg.layout.sq_ctrl);
	cntlid = ctrl ? FIELD_AT(u16, ctrl, nvmetrace_cfg.layout.ctrl_cntlid) : 0;
	nvmetrace_emit(event, lba, 0, le16_to_cpu(cmd->rw.length) + 1, qid,
		       cmd->common.command_id, 0, cntlid, op,
		       NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID |
		       NVMETRACE_REC_LEN_BLOCKS |
		       (op == nvme_cmd_write ? NVMETRACE_REC_WRITE : 0),
		       le32_to_cpu(cmd->common.nsid));
}

/* The nvmet_req inside the response context whose ib_cqe at cqe_off is cqe. */
static __always_inline const void *rdmat_rsp_req(const char *cqe, u32 cqe_off)
{
	return cqe - cqe_off + RDMAT_OFF(RSP_REQ);
}

/*
 * kprobe at nvmet_rdma_recv_done(cq, wc): a command capsule arrived, before
 * nvmet_req_init().  The queue's nvmet_sq knows qid and controller.
 */
static int kp_rdmat_recv_done(struct kprobe *kp, struct pt_regs *regs)
{
	const void *wc = (const void *)regs_get_kernel_argument(regs, 1);
	const char *cqe = rdma_wc_cqe(wc, RDMAT_OFF(WC_STATUS), RDMAT_OFF(WC_WR_CQE));
	const struct nvme_command *cmd;
	const void *qp, *queue;

	if (!cqe)
		return 0;
	qp = FIELD_AT(const void *, wc, RDMAT_OFF(WC_QP));
	queue = qp ? FIELD_AT(const void *, qp, RDMAT_OFF(QP_CONTEXT)) : NULL;
	cmd = FIELD_AT(const struct nvme_command *, cqe - RDMAT_OFF(CMD_CQE),
		       RDMAT_OFF(CMD_NVME_CMD));
	if (queue && cmd)
		rdmat_event(NVMETRACE_EV_RDMAT_RECV,
			    (const char *)queue + RDMAT_OFF(QUEUE_NVME_SQ), cmd);
	return 0;
}

/*
 * kprobe at nvmet_rdma_read_data_done(cq, wc): a write's data has arrived,
 * between its nvmet_req_init and its execution: the target gate (probe.h)
 * comes first.
 */
static int kp_rdmat_read_done(struct kprobe *kp, struct pt_regs *regs)
{
	const void *wc;
	const char *cqe;
	const void *req;

	if (!nvmetrace_target_gate_open())
		return 0;
	wc = (const void *)regs_get_kernel_argument(regs, 1);
	cqe = rdma_wc_cqe(wc, RDMAT_OFF(WC_STATUS), RDMAT_OFF(WC_WR_CQE));
	if (!cqe)
		return 0;
	req = rdmat_rsp_req(cqe, RDMAT_OFF(RSP_READ_CQE));
	req_event(NVMETRACE_EV_RDMAT_READ_DONE, req);
	return 0;
}

/*
 * kprobe at nvmet_rdma_queue_response(req), nvmet's queue_response op: the
 * response (after the RDMA WRITE of a read's data) is about to be posted.
 */
static int kp_rdmat_queue_response(struct kprobe *kp, struct pt_regs *regs)
{
	req_event(NVMETRACE_EV_RDMAT_RSP_POST, (const void *)regs_get_kernel_argument(regs, 0));
	return 0;
}

/*
 * kprobe at nvmet_rdma_send_done(cq, wc): the response was sent.  The
 * command's receive buffer was reposted before the response was sent, so a
 * new capsule may have landed in it: the command counts only if it still
 * carries the response's command id, read before and after the fields used.
 */
static int kp_rdmat_send_done(struct kprobe *kp, struct pt_regs *regs)
{
	const void *wc = (const void *)regs_get_kernel_argument(regs, 1);
	const char *cqe = rdma_wc_cqe(wc, RDMAT_OFF(WC_STATUS), RDMAT_OFF(WC_WR_CQE));
	const struct nvme_completion *rsp;
	const struct nvme_command *cmd;
	struct nvme_command copy;
	const void *req, *sq;
	u16 cid;

	if (!cqe)
		return 0;
	req = rdmat_rsp_req(cqe, RDMAT_OFF(RSP_SEND_CQE));
	cmd = FIELD_AT(const struct nvme_command *, req, nvmetrace_cfg.layout.req_cmd);
	rsp = FIELD_AT(const struct nvme_completion *, req, nvmetrace_cfg.layout.req_cqe);
	sq = FIELD_AT(const void *, req, nvmetrace_cfg.layout.req_sq);
	if (!cmd || !rsp || !sq)
		return 0;
	cid = READ_ONCE(rsp->command_id);
	if (READ_ONCE(cmd->common.command_id) != cid)
		return 0;
	copy.rw.opcode = READ_ONCE(cmd->rw.opcode);
	copy.rw.command_id = cid;
	copy.rw.nsid = READ_ONCE(cmd->rw.nsid);
	copy.rw.slba = READ_ONCE(cmd->rw.slba);
	copy.rw.length = READ_ONCE(cmd->rw.length);
	smp_rmb();	/* the fields above, then the command id again */
	if (READ_ONCE(cmd->common.command_id) != cid)
		return 0;
	rdmat_event(NVMETRACE_EV_RDMAT_SEND_DONE, sq, &copy);
	return 0;
}

static struct nvmetrace_hook nvmet_rdma_hooks[] = {
	{ "nvmet_rdma_recv_done", "nvmet_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_rdmat_recv_done, .needs = NEEDS_RDMA_TARGET },
	{ "nvmet_rdma_read_data_done", "nvmet_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_rdmat_read_done, .needs = NEEDS_RDMA_TARGET },
	{ "nvmet_rdma_queue_response", "nvmet_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_rdmat_queue_response },
	{ "nvmet_rdma_send_done", "nvmet_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_rdmat_send_done, .needs = NEEDS_RDMA_TARGET },
};

struct nvmetrace_hook_group nvmetrace_nvmet_rdma_hooks = {
	.rows = nvmet_rdma_hooks,
	.nr = ARRAY_SIZE(nvmet_rdma_hooks),
};
