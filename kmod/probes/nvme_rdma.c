// SPDX-License-Identifier: GPL-2.0
/*
 * probes/nvme_rdma.c — the nvme-rdma host's hooks: the command capsule
 * posted and its send completed, the response capsule received, the request
 * completed.
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
#include <linux/blk-mq.h>
#include <linux/kprobes.h>
#include <linux/nvme.h>

#include "probe.h"

#define RDMA_OFF(name) NVMETRACE_RDMA_OFF(&nvmetrace_cfg.layout, name)

/* The I/O queue id of an nvme_rdma_queue (its index in ctrl->queues), 0: admin. */
static __always_inline u16 rdma_queue_qid(const void *queue, const void **ctrl)
{
	const char *queues;

	*ctrl = FIELD_AT(const void *, queue, RDMA_OFF(QUEUE_CTRL));
	if (!*ctrl)
		return 0;
	queues = FIELD_AT(const char *, *ctrl, RDMA_OFF(CTRL_QUEUES));
	if (!queues || (const char *)queue < queues)
		return 0;
	return ((const char *)queue - queues) / RDMA_OFF(QUEUE_SIZE);
}

/*
 * The request whose command queue entry (nvme_rdma_request.sqe) qe is.
 * tcp_rq_event() records a request only while it is in flight.
 */
static __always_inline struct request *rdma_sqe_rq(const void *qe)
{
	return blk_mq_rq_from_pdu((void *)((const char *)qe - RDMA_OFF(REQ_SQE)));
}

/*
 * kprobe at nvme_rdma_post_send(queue, qe, sge, num_sge, first): the command
 * capsule (and any MR registration chained before it) is posted.  On the
 * admin queue qe may be the async event entry, which has no request.
 */
static int kp_rdma_post_send(struct kprobe *kp, struct pt_regs *regs)
{
	const void *queue = (const void *)regs_get_kernel_argument(regs, 0);
	const void *qe = (const void *)regs_get_kernel_argument(regs, 1);
	const void *ctrl = FIELD_AT(const void *, queue, RDMA_OFF(QUEUE_CTRL));

	/* the admin queue is ctrl->queues[0] */
	if (!ctrl || queue == FIELD_AT(const void *, ctrl, RDMA_OFF(CTRL_QUEUES)))
		return 0;
	tcp_rq_event(NVMETRACE_EV_RDMA_POST_SEND, rdma_sqe_rq(qe), 0, false);
	return 0;
}

/*
 * kprobe at nvme_rdma_send_done(cq, wc): the capsule's send completed.
 * Only request entries have this callback (the async event's has its own).
 */
static int kp_rdma_send_done(struct kprobe *kp, struct pt_regs *regs)
{
	const void *wc = (const void *)regs_get_kernel_argument(regs, 1);
	const char *cqe = rdma_wc_cqe(wc, RDMA_OFF(WC_STATUS), RDMA_OFF(WC_WR_CQE));

	if (cqe)
		tcp_rq_event(NVMETRACE_EV_RDMA_SEND_DONE,
			     rdma_sqe_rq(cqe - RDMA_OFF(QE_CQE)), 0, false);
	return 0;
}

/*
 * kprobe at nvme_rdma_recv_done(cq, wc): a response capsule arrived; its
 * command id names the request, as in nvme_rdma_process_nvme_rsp().
 */
static int kp_rdma_recv_done(struct kprobe *kp, struct pt_regs *regs)
{
	const void *wc = (const void *)regs_get_kernel_argument(regs, 1);
	const char *cqe = rdma_wc_cqe(wc, RDMA_OFF(WC_STATUS), RDMA_OFF(WC_WR_CQE));
	const struct nvme_completion *rsp;
	const struct blk_mq_tag_set *set;
	const void *qp, *queue, *ctrl;
	struct blk_mq_tags *tags;
	struct request *rq;
	u16 qid;

	if (!cqe)
		return 0;
	qp = FIELD_AT(const void *, wc, RDMA_OFF(WC_QP));
	if (!qp)
		return 0;
	queue = FIELD_AT(const void *, qp, RDMA_OFF(QP_CONTEXT));
	if (!queue)
		return 0;
	qid = rdma_queue_qid(queue, &ctrl);
	if (!qid)
		return 0;	/* admin queue: async events have no request */
	set = (const struct blk_mq_tag_set *)((const char *)ctrl + RDMA_OFF(CTRL_TAG_SET));
	if (qid > set->nr_hw_queues || !set->tags)
		return 0;
	tags = READ_ONCE(set->tags[qid - 1]);
	rsp = FIELD_AT(const struct nvme_completion *, cqe - RDMA_OFF(QE_CQE),
		       RDMA_OFF(QE_DATA));
	if (!tags || !rsp)
		return 0;
	rq = host_rq_by_cid(tags, READ_ONCE(rsp->command_id), RDMA_OFF(NVME_REQ_GENCTR));
	if (rq)
		rq_event(NVMETRACE_EV_RDMA_RECV_DONE, rq, 0, false);
	return 0;
}

/*
 * kprobe at nvme_rdma_complete_rq(rq), blk-mq's complete op: data unmapped
 * here, then nvme_complete_rq().  The request is no longer in flight.
 */
static int kp_rdma_complete_rq(struct kprobe *kp, struct pt_regs *regs)
{
	host_rq_event(NVMETRACE_EV_RDMA_COMPLETE,
		      (struct request *)regs_get_kernel_argument(regs, 0), 0);
	return 0;
}

static struct nvmetrace_hook nvme_rdma_hooks[] = {
	{ "nvme_rdma_post_send", "nvme_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_rdma_post_send, .needs = NEEDS_RDMA_HOST },
	{ "nvme_rdma_send_done", "nvme_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_rdma_send_done, .needs = NEEDS_RDMA_HOST },
	{ "nvme_rdma_recv_done", "nvme_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_rdma_recv_done, .needs = NEEDS_RDMA_HOST },
	{ "nvme_rdma_complete_rq", "nvme_rdma", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_rdma_complete_rq },
};

struct nvmetrace_hook_group nvmetrace_nvme_rdma_hooks = {
	.rows = nvme_rdma_hooks,
	.nr = ARRAY_SIZE(nvme_rdma_hooks),
};
