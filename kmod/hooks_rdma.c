// SPDX-License-Identifier: GPL-2.0
/*
 * hooks_rdma.c — the nvme-rdma host and nvmet-rdma target hooks.
 *
 * Included by hooks.c (it uses hooks.c's emit(), sampling predicate and
 * configuration), so the RDMA hooks stay in one place of their own.
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

#define RDMA_OFF(name) NVMETRACE_RDMA_OFF(&cfg.layout, name)
#define RDMAT_OFF(name) NVMETRACE_RDMAT_OFF(&cfg.layout, name)

/* ------------------------------------------------------ nvme-rdma host */

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

/* A work completion's status (0: IB_WC_SUCCESS) and its wr_cqe. */
static __always_inline const void *rdma_wc_cqe(const void *wc, u32 status_off,
					       u32 cqe_off)
{
	if (FIELD_AT(u32, wc, status_off))
		return NULL;	/* flushed or failed: the queue is going down */
	return FIELD_AT(const void *, wc, cqe_off);
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
	u32 tag;
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
	tag = READ_ONCE(rsp->command_id) & 0xfff;	/* nvme_tag_from_cid() */
	if (tag >= tags->nr_tags)
		return 0;
	rq = READ_ONCE(tags->rqs[tag]);
	if (rq)
		tcp_rq_event(NVMETRACE_EV_RDMA_RECV_DONE, rq, 0, false);
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

/* --------------------------------------------------- nvmet-rdma target */

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
	qid = FIELD_AT(u16, sq, cfg.layout.sq_qid);
	if (!qid)
		return;
	ctrl = FIELD_AT(const void *, sq, cfg.layout.sq_ctrl);
	cntlid = ctrl ? FIELD_AT(u16, ctrl, cfg.layout.ctrl_cntlid) : 0;
	emit(event, lba, 0, le16_to_cpu(cmd->rw.length) + 1, qid,
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

/* kprobe at nvmet_rdma_read_data_done(cq, wc): a write's data has arrived. */
static int kp_rdmat_read_done(struct kprobe *kp, struct pt_regs *regs)
{
	const void *wc = (const void *)regs_get_kernel_argument(regs, 1);
	const char *cqe = rdma_wc_cqe(wc, RDMAT_OFF(WC_STATUS), RDMAT_OFF(WC_WR_CQE));
	const void *req;

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
	cmd = FIELD_AT(const struct nvme_command *, req, cfg.layout.req_cmd);
	rsp = FIELD_AT(const struct nvme_completion *, req, cfg.layout.req_cqe);
	sq = FIELD_AT(const void *, req, cfg.layout.req_sq);
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
