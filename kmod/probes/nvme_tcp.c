// SPDX-License-Identifier: GPL-2.0
/*
 * probes/nvme_tcp.c — the nvme-tcp host's hooks: command and H2C data PDUs
 * sent, R2T, C2H data and response PDUs received.
 */
#include <linux/blk-mq.h>
#include <linux/fs.h>
#include <linux/kprobes.h>
#include <linux/llist.h>
#include <linux/net.h>
#include <linux/nvme-tcp.h>
#include <linux/skbuff.h>
#include <linux/string.h>

#include "probe.h"

/*
 * nvme-tcp's functions are static and many of the per-PDU ones are inlined
 * (nvme_tcp_recv_pdu, nvme_tcp_handle_r2t, nvme_tcp_process_nvme_cqe), so the
 * hooks sit on functions whose address is taken or that stay functions:
 *
 *  - nvme_tcp_try_send_cmd_pdu(req) and nvme_tcp_try_send_data_pdu(req):
 *    the command PDU (and any in-capsule data) and an H2C data PDU of req
 *    handed to the socket; offset 0 is the first try, anything else the
 *    rest of a partial send.  Functions on 6.12 and later, inlined into
 *    nvme_tcp_try_send on 6.1.
 *  - nvme_tcp_try_send(queue), their stand-in where they are inlined: the
 *    send state machine, called with the queue's send_mutex held.  At its
 *    entry the request it is about to send is queue->request, or the one
 *    nvme_tcp_fetch_request() will take, which is a guess: a request queued
 *    between the entry and the fetch is sent unseen (seen on 7.3, where a
 *    test run now and then had one command without its H2C data PDU), so
 *    it is used only where the exact hooks cannot attach.
 *  - nvme_tcp_recv_skb(desc, skb, offset, len), the socket's read_sock
 *    actor: the PDU headers that start in this skb are parsed from the
 *    queue's receive state and the skb (skb_copy_bits(), no allocation),
 *    and each R2T, C2H data and response PDU recorded for its request.
 *
 * The private fields come from BTF (struct nvmetrace_tcp_layout); these
 * hooks are refused without them.  Requests are preallocated and live as
 * long as the queue, so reading them is safe; only commands in flight are
 * recorded.
 */
#define TCP_OFF(name) NVMETRACE_TCP_OFF(&nvmetrace_cfg.layout, name)

/* nvme-tcp's enum nvme_tcp_send_state, the same in 6.1 and 6.12 */
#define NVMETRACE_TCP_SEND_CMD_PDU	0
#define NVMETRACE_TCP_SEND_H2C_PDU	1
/* requests nvmetrace follows down nvme_tcp_queue.req_list, at most */
#define NVMETRACE_TCP_REQ_LIST_MAX	64
/* PDU headers nvmetrace parses in one skb, at most */
#define NVMETRACE_TCP_SKB_PDUS_MAX	64

/* The I/O queue id of an nvme_tcp_queue (its index in ctrl->queues), 0: admin. */
static __always_inline u16 tcp_queue_qid(const void *queue, const void **ctrl)
{
	const char *queues;

	*ctrl = FIELD_AT(const void *, queue, TCP_OFF(QUEUE_CTRL));
	if (!*ctrl)
		return 0;
	queues = FIELD_AT(const char *, *ctrl, TCP_OFF(CTRL_QUEUES));
	if (!queues || (const char *)queue < queues)
		return 0;
	return ((const char *)queue - queues) / TCP_OFF(QUEUE_SIZE);
}

/* Whether queue is the admin queue (ctrl->queues[0]); no division. */
static __always_inline bool tcp_queue_is_admin(const void *queue)
{
	const void *ctrl = FIELD_AT(const void *, queue, TCP_OFF(QUEUE_CTRL));

	return !ctrl || FIELD_AT(const void *, ctrl, TCP_OFF(CTRL_QUEUES)) == queue;
}

/*
 * The sampling predicate on a request's LBA: the first thing the nvme-tcp
 * hooks test once they hold a request, so that a command that is not sampled
 * costs a few loads and one hash.
 */
static __always_inline bool tcp_rq_sampled(struct request *rq)
{
	u64 lba;
	u8 op;

	return rq_op_lba(rq, &op, &lba) && nvmetrace_sampled(lba);
}

/*
 * The request nvme_tcp_try_send() will work on: the current one, else the
 * head of send_list, else the oldest on req_list (the llist is newest
 * first).  send_mutex is held, so nobody else takes requests off the lists;
 * llist_add() only changes the head.
 */
static __always_inline const void *tcp_next_send(const void *queue)
{
	const struct list_head *sl;
	const struct llist_node *n;
	const void *req;
	int i;

	req = FIELD_AT(const void *, queue, TCP_OFF(QUEUE_REQUEST));
	if (req)
		return req;
	sl = (const struct list_head *)((const char *)queue + TCP_OFF(QUEUE_SEND_LIST));
	if (!list_empty(sl))
		return (const char *)READ_ONCE(sl->next) - TCP_OFF(REQ_ENTRY);
	n = READ_ONCE(((const struct llist_head *)((const char *)queue +
						   TCP_OFF(QUEUE_REQ_LIST)))->first);
	for (i = 0; n && i < NVMETRACE_TCP_REQ_LIST_MAX; i++) {
		const struct llist_node *next = READ_ONCE(n->next);

		if (!next)
			return (const char *)n - TCP_OFF(REQ_LENTRY);
		n = next;
	}
	return NULL;	/* empty, or too long to follow here */
}

/* nvme_tcp_hooks[] rows the stand-in and the receive gate ask about */
enum { TCP_ROW_CMD_PDU, TCP_ROW_DATA_PDU, TCP_ROW_TRY_SEND, TCP_ROW_RECV_SKB, TCP_ROWS };

static struct nvmetrace_hook nvme_tcp_hooks[TCP_ROWS];

/*
 * The receive gate: nvme_tcp_recv_skb runs for every skb (two an I/O at
 * least), and parsing its PDU headers and finding each one's request is
 * most of what a recording of 1 command in N costs there; a queue with no
 * sampled command in flight has nothing to record, so its skbs are not
 * parsed.  gate_core.h's tags of queues: a sampled command's tag is set
 * when its command PDU is sent (nvme_tcp_try_send_cmd_pdu's entry: before
 * it reaches the socket, so before any reply can come; where that hook
 * cannot attach, 6.1, the gate stays open), and cleared by the PDU that
 * ends it (the response, or C2H data with the SUCCESS flag), seen in a
 * parse that the tag itself keeps open.  A tag whose end never comes (the
 * queue torn down) keeps the gate open until the tag's next command ends:
 * a cost, never a loss.  Sampling every command needs no gate.
 */
static struct nvmetrace_tag_gate tcp_gates[1 << NVMETRACE_TAG_GATE_BITS];

/* whether queue's skbs may hold a PDU of a sampled command */
static __always_inline bool tcp_gate_open(const void *queue)
{
	if (nvmetrace_sample_threshold == U64_MAX)
		return true;
	/*
	 * The command PDU's own hook sets the tags.  Without it the gate stays
	 * open: the stand-in (6.1) may miss a command's send, and its replies
	 * would then go unrecorded.
	 */
	if (!nvmetrace_hook_runs(&nvme_tcp_hooks[TCP_ROW_CMD_PDU]))
		return true;
	return nvmetrace_tag_gate_open(tcp_gates, queue);
}

/* START: no hook runs; the last recording's commands are not this one's */
static void nvme_tcp_hooks_reset(void)
{
	memset(tcp_gates, 0, sizeof(tcp_gates));
}

/* req's PDU in state (SEND_CMD_PDU or SEND_H2C_PDU) goes to the socket */
static __always_inline void tcp_req_send(const void *queue, const void *req, u32 state)
{
	struct request *rq;

	if (FIELD_AT(size_t, req, TCP_OFF(REQ_OFFSET)))
		return;		/* the rest of a partial send */
	if (!queue || tcp_queue_is_admin(queue))
		return;		/* its async event request has no struct request */
	rq = blk_mq_rq_from_pdu((void *)req);
	if (!tcp_rq_sampled(rq))
		return;
	if (state == NVMETRACE_TCP_SEND_CMD_PDU && nvmetrace_sample_threshold != U64_MAX)
		nvmetrace_tag_gate_set(tcp_gates, queue, rq->tag);
	tcp_rq_event(state == NVMETRACE_TCP_SEND_CMD_PDU ? NVMETRACE_EV_TCP_CMD_SEND :
		     NVMETRACE_EV_TCP_H2C_SEND, rq, 0, true);
}

/* kprobe at nvme_tcp_try_send_cmd_pdu(struct nvme_tcp_request *req) */
static int kp_tcp_send_cmd_pdu(struct kprobe *kp, struct pt_regs *regs)
{
	const void *req = (const void *)regs_get_kernel_argument(regs, 0);

	tcp_req_send(FIELD_AT(const void *, req, TCP_OFF(REQ_QUEUE)), req,
		     NVMETRACE_TCP_SEND_CMD_PDU);
	return 0;
}

/* kprobe at nvme_tcp_try_send_data_pdu(struct nvme_tcp_request *req) */
static int kp_tcp_send_data_pdu(struct kprobe *kp, struct pt_regs *regs)
{
	const void *req = (const void *)regs_get_kernel_argument(regs, 0);

	tcp_req_send(FIELD_AT(const void *, req, TCP_OFF(REQ_QUEUE)), req,
		     NVMETRACE_TCP_SEND_H2C_PDU);
	return 0;
}

/*
 * kprobe at nvme_tcp_try_send(struct nvme_tcp_queue *queue), the stand-in.
 * It runs several times per command (from queue_rq and from every io_work
 * round), so the common cases leave early: nothing to send, a state without
 * a PDU to note or whose exact hook is attached, then the sampling
 * predicate.
 */
static int kp_tcp_try_send(struct kprobe *kp, struct pt_regs *regs)
{
	const void *queue = (const void *)regs_get_kernel_argument(regs, 0);
	const void *req;
	u32 state;

	req = tcp_next_send(queue);
	if (!req)
		return 0;
	state = FIELD_AT(u32, req, TCP_OFF(REQ_STATE));
	if (state == NVMETRACE_TCP_SEND_CMD_PDU) {
		if (nvmetrace_hook_runs(&nvme_tcp_hooks[TCP_ROW_CMD_PDU]))
			return 0;
	} else if (state == NVMETRACE_TCP_SEND_H2C_PDU) {
		if (nvmetrace_hook_runs(&nvme_tcp_hooks[TCP_ROW_DATA_PDU]))
			return 0;
	} else {
		return 0;
	}
	tcp_req_send(queue, req, state);
	return 0;
}

/*
 * len bytes of skb at pos: in place when they lie in the linear part or in
 * one page fragment (the common case, no copy), else copied into buf by
 * skb_copy_bits().  NULL when the skb is shorter.
 */
static __always_inline const u8 *tcp_skb_peek(const struct sk_buff *skb, size_t pos,
					      u8 *buf, size_t len)
{
	const struct skb_shared_info *sh = skb_shinfo(skb);
	size_t head = skb_headlen(skb);
	int i;

	if (pos + len <= head)
		return skb->data + pos;
	if (pos >= head) {
		size_t off = pos - head;

		for (i = 0; i < sh->nr_frags; i++) {
			const skb_frag_t *f = &sh->frags[i];
			size_t fl = skb_frag_size(f);

			if (off < fl) {
				const u8 *p = off + len <= fl ? skb_frag_address_safe(f) : NULL;

				if (p)
					return p + off;
				break;
			}
			off -= fl;
		}
	}
	return skb_copy_bits(skb, pos, buf, len) ? NULL : buf;
}

/* One received PDU header of queue (the first 24 bytes, enough for each type). */
static __always_inline void tcp_recv_pdu(const void *queue, struct blk_mq_tags *tags,
					 const u8 *h)
{
	const struct nvme_tcp_hdr *hdr = (const void *)h;
	struct request *rq;
	u16 event, cid;
	u64 aux = 0;
	bool last = false;

	switch (hdr->type) {
	case nvme_tcp_c2h_data: {
		const struct nvme_tcp_data_pdu *p = (const void *)h;

		event = NVMETRACE_EV_TCP_C2H_RECV;
		cid = p->command_id;
		aux = le32_to_cpu(p->data_offset) |
		      (u64)hdr->flags << NVMETRACE_C2H_AUX_FLAGS_SHIFT;
		last = hdr->flags & NVME_TCP_F_DATA_SUCCESS;
		break;
	}
	case nvme_tcp_r2t: {
		const struct nvme_tcp_r2t_pdu *p = (const void *)h;

		event = NVMETRACE_EV_TCP_R2T_RECV;
		cid = p->command_id;
		aux = le32_to_cpu(p->r2t_offset);
		break;
	}
	case nvme_tcp_rsp:
		event = NVMETRACE_EV_TCP_RSP_RECV;
		cid = ((const struct nvme_tcp_rsp_pdu *)h)->cqe.command_id;
		last = true;
		break;
	default:
		return;
	}
	rq = host_rq_by_cid(tags, cid, TCP_OFF(NVME_REQ_GENCTR));
	if (!rq)
		return;
	if (tcp_rq_sampled(rq))
		rq_event(event, rq, aux, true);
	if (last && nvmetrace_sample_threshold != U64_MAX)
		nvmetrace_tag_gate_clear(tcp_gates, queue, rq->tag);
}

/* kprobe at nvme_tcp_recv_skb(desc, skb, offset, len) */
static int kp_tcp_recv_skb(struct kprobe *kp, struct pt_regs *regs)
{
	const read_descriptor_t *desc =
		(const read_descriptor_t *)regs_get_kernel_argument(regs, 0);
	const struct sk_buff *skb =
		(const struct sk_buff *)regs_get_kernel_argument(regs, 1);
	size_t pos = regs_get_kernel_argument(regs, 2);
	size_t end = pos + regs_get_kernel_argument(regs, 3);
	const void *queue = desc->arg.data;
	const struct blk_mq_tag_set *set;
	struct blk_mq_tags *tags;
	const void *ctrl;
	u8 h[sizeof(struct nvme_tcp_rsp_pdu)];
	int pdu_offset, i;
	u16 qid;

	BUILD_BUG_ON(sizeof(struct nvme_tcp_data_pdu) != sizeof(h) ||
		     sizeof(struct nvme_tcp_r2t_pdu) != sizeof(h));
	if (!tcp_gate_open(queue))
		return 0;
	qid = tcp_queue_qid(queue, &ctrl);
	if (!qid)
		return 0;
	set = (const struct blk_mq_tag_set *)((const char *)ctrl + TCP_OFF(CTRL_TAG_SET));
	if (qid > set->nr_hw_queues || !set->tags)
		return 0;
	tags = READ_ONCE(set->tags[qid - 1]);
	if (!tags)
		return 0;

	/*
	 * Where the first PDU header that starts in this skb is (see
	 * nvme_tcp_recv_state(): pdu, else digest, else data).
	 */
	if (FIELD_AT(int, queue, TCP_OFF(QUEUE_PDU_REMAINING))) {
		pdu_offset = FIELD_AT(int, queue, TCP_OFF(QUEUE_PDU_OFFSET));
		if (pdu_offset > 0) {
			/* a header split across skbs: its start is in queue->pdu */
			const u8 *pdu = FIELD_AT(const u8 *, queue, TCP_OFF(QUEUE_PDU));
			int have = min_t(int, pdu_offset, sizeof(h));

			memcpy(h, pdu, have);
			if (have < sizeof(h) &&
			    (pos + sizeof(h) - have > end ||
			     skb_copy_bits(skb, pos, h + have, sizeof(h) - have)))
				return 0;
			tcp_recv_pdu(queue, tags, h);
			pos += le32_to_cpu(((struct nvme_tcp_hdr *)h)->plen) - pdu_offset;
		}
	} else if (FIELD_AT(size_t, queue, TCP_OFF(QUEUE_DDGST_REMAINING))) {
		pos += FIELD_AT(size_t, queue, TCP_OFF(QUEUE_DDGST_REMAINING));
	} else {
		pos += FIELD_AT(size_t, queue, TCP_OFF(QUEUE_DATA_REMAINING));
		if (FIELD_AT(bool, queue, TCP_OFF(QUEUE_DATA_DIGEST)))
			pos += NVME_TCP_DIGEST_LENGTH;
	}
	for (i = 0; i < NVMETRACE_TCP_SKB_PDUS_MAX && pos + sizeof(h) <= end; i++) {
		const u8 *p = tcp_skb_peek(skb, pos, h, sizeof(h));
		u32 plen;

		if (!p)
			return 0;
		tcp_recv_pdu(queue, tags, p);
		plen = le32_to_cpu(((const struct nvme_tcp_hdr *)p)->plen);
		if (plen < sizeof(h))
			return 0;	/* not a PDU we know: stop parsing */
		pos += plen;
	}
	return 0;
}

/* alt: the stand-in set of the send hooks */
#define TCP_ALT_SEND	1

static struct nvmetrace_hook nvme_tcp_hooks[TCP_ROWS] = {
	[TCP_ROW_CMD_PDU] = { "nvme_tcp_try_send_cmd_pdu", "nvme_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_tcp_send_cmd_pdu, .alt = TCP_ALT_SEND,
	  .needs = NEEDS_TCP_HOST },
	[TCP_ROW_DATA_PDU] = { "nvme_tcp_try_send_data_pdu", "nvme_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_tcp_send_data_pdu, .alt = TCP_ALT_SEND,
	  .needs = NEEDS_TCP_HOST },
	[TCP_ROW_TRY_SEND] = { "nvme_tcp_try_send", "nvme_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_tcp_try_send, .alt = TCP_ALT_SEND, .standin = true,
	  .needs = NEEDS_TCP_HOST },
	[TCP_ROW_RECV_SKB] = { "nvme_tcp_recv_skb", "nvme_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_HOST, NULL, kp_tcp_recv_skb, .needs = NEEDS_TCP_HOST },
};

struct nvmetrace_hook_group nvmetrace_nvme_tcp_hooks = {
	.rows = nvme_tcp_hooks,
	.nr = ARRAY_SIZE(nvme_tcp_hooks),
	.reset = nvme_tcp_hooks_reset,
};
