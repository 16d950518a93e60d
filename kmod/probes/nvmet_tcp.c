// SPDX-License-Identifier: GPL-2.0
/*
 * probes/nvmet_tcp.c — the nvmet-tcp target's hooks: data arriving on a
 * queue's socket, a command received, an R2T queued, H2C or in-capsule
 * data received.
 */
#include <linux/hash.h>
#include <linux/kprobes.h>
#include <linux/nvme-tcp.h>
#include <linux/string.h>
#include <net/sock.h>

#include "probe.h"

/*
 * nvmet-tcp's per-PDU functions are static, and most of them are inlined in
 * one kernel or both (nvmet_tcp_done_recv_pdu, nvmet_tcp_handle_h2c_data_pdu,
 * nvmet_setup_c2h_data_pdu and nvmet_setup_r2t_pdu in both; nvmet_try_send_r2t,
 * nvmet_try_send_data_pdu and nvmet_try_send_response in 6.1: nm of both
 * nvmet-tcp.ko).  The hooks sit on functions that exist in both:
 *
 *  - nvmet_tcp_data_ready(sk), the socket's sk_data_ready callback (softirq,
 *    or the socket owner in release_sock()): notes when data last arrived on
 *    the queue's socket, in tcpt_arrivals[].  It cannot sample (nothing is
 *    parsed yet), so it only stores a timestamp.
 *  - nvmet_tcp_map_data(cmd), called right after nvmet_req_init() for every
 *    command that carries data: TCPT_CMD_RECV, aux = that arrival time.
 *  - nvmet_tcp_queue_response(req) (nvmet_tcp_ops.queue_response): for a
 *    write that still waits for its data, the R2T is queued: TCPT_R2T_SEND.
 *  - nvmet_tcp_build_pdu_iovec(cmd): the receive of data is set up, for an
 *    H2C data PDU whose header is in queue->pdu (TCPT_H2C_RECV, once per
 *    PDU) or for in-capsule data (TCPT_DATA_RECV).
 *
 * Each samples on the command's LBA before it reads anything else, after
 * the target gate (probe.h): all three record within the span between the
 * command's nvmet_req_init and nvmet_req_complete.  The
 * private fields come from BTF (struct nvmetrace_tcpt_layout); these hooks
 * are refused without them.  Commands are preallocated with their queue, and
 * every hook runs while its command is in flight.
 */
#define TCPT_OFF(name) NVMETRACE_TCPT_OFF(&nvmetrace_cfg.layout, name)

/*
 * The last data arrival per queue socket, an owned timestamp (probe.h).  A
 * queue hashes to one entry; two queues on one entry overwrite each other,
 * and a reader that finds another queue there records no arrival.  Written
 * at every data arrival, sampled or not: a cache line per entry (4 KiB in
 * all), so queues served on other CPUs write lines of their own; only queues
 * that collide share one.
 */
#define NVMETRACE_TCPT_ARRIVAL_BITS	6
static struct nvmetrace_owned_ts tcpt_arrivals[1 << NVMETRACE_TCPT_ARRIVAL_BITS];

static __always_inline struct nvmetrace_owned_ts *tcpt_arrival(const void *queue)
{
	return &tcpt_arrivals[hash_ptr((void *)queue, NVMETRACE_TCPT_ARRIVAL_BITS)];
}

/* kprobe at nvmet_tcp_data_ready(struct sock *sk); sk_user_data is the queue */
static int kp_tcpt_data_ready(struct kprobe *kp, struct pt_regs *regs)
{
	const struct sock *sk = (const struct sock *)regs_get_kernel_argument(regs, 0);
	const void *queue = READ_ONCE(sk->sk_user_data);

	if (queue)
		nvmetrace_owned_ts_set(tcpt_arrival(queue), queue, ktime_get_ns());
	return 0;
}

/* When data last arrived on queue's socket, 0: not known. */
static __always_inline u64 tcpt_arrived(const void *queue)
{
	return nvmetrace_owned_ts_get(tcpt_arrival(queue), queue);
}

/*
 * req's NVMe command if it is a sampled read or write, else NULL: first
 * test.  Every hook that asks records only between the command's
 * nvmet_req_init and nvmet_req_complete, so the target gate comes first.
 */
static __always_inline const struct nvme_command *tcpt_sampled(const void *req)
{
	const struct nvme_command *c;
	u8 op;

	if (!nvmetrace_target_gate_open())
		return NULL;
	c = FIELD_AT(const struct nvme_command *, req, nvmetrace_cfg.layout.req_cmd);
	op = c->common.opcode;

	if (op != nvme_cmd_read && op != nvme_cmd_write)
		return NULL;
	return nvmetrace_sampled(le64_to_cpu(c->rw.slba)) ? c : NULL;
}

/* kprobe at nvmet_tcp_map_data(struct nvmet_tcp_cmd *cmd) */
static int kp_tcpt_map_data(struct kprobe *kp, struct pt_regs *regs)
{
	const char *cmd = (const char *)regs_get_kernel_argument(regs, 0);
	const void *req = cmd + TCPT_OFF(CMD_REQ);
	const struct nvme_command *c = tcpt_sampled(req);
	u64 arrived;

	if (!c)
		return 0;
	arrived = tcpt_arrived(FIELD_AT(const void *, cmd, TCPT_OFF(CMD_QUEUE)));
	if (arrived)
		req_cmd_event(NVMETRACE_EV_TCPT_CMD_RECV, req, c, arrived, true);
	return 0;
}

/* kprobe at nvmet_tcp_queue_response(struct nvmet_req *req) */
static int kp_tcpt_queue_response(struct kprobe *kp, struct pt_regs *regs)
{
	const char *req = (const char *)regs_get_kernel_argument(regs, 0);
	const struct nvme_command *c = tcpt_sampled(req);
	const struct nvme_completion *cqe;
	u32 done;

	if (!c || c->common.opcode != nvme_cmd_write)
		return 0;
	/* nvmet_tcp_need_data_in(): a write short of its data, no error */
	cqe = FIELD_AT(const struct nvme_completion *, req, nvmetrace_cfg.layout.req_cqe);
	done = FIELD_AT(u32, req - TCPT_OFF(CMD_REQ), TCPT_OFF(CMD_RBYTES_DONE));
	if (cqe->status || done >= FIELD_AT(size_t, req, TCPT_OFF(REQ_TRANSFER_LEN)))
		return 0;	/* its response, not an R2T */
	req_cmd_event(NVMETRACE_EV_TCPT_R2T_SEND, req, c, done, true);
	return 0;
}

/* kprobe at nvmet_tcp_build_pdu_iovec(struct nvmet_tcp_cmd *cmd) */
static int kp_tcpt_build_pdu_iovec(struct kprobe *kp, struct pt_regs *regs)
{
	const char *cmd = (const char *)regs_get_kernel_argument(regs, 0);
	const void *req = cmd + TCPT_OFF(CMD_REQ);
	const struct nvme_command *c = tcpt_sampled(req);
	const struct nvme_tcp_hdr *hdr;
	u32 len;

	if (!c)
		return 0;
	hdr = (const void *)(FIELD_AT(const char *, cmd, TCPT_OFF(CMD_QUEUE)) +
			     TCPT_OFF(QUEUE_PDU));
	len = FIELD_AT(u32, cmd, TCPT_OFF(CMD_PDU_LEN));
	if (READ_ONCE(hdr->type) == nvme_tcp_h2c_data)
		req_cmd_event(NVMETRACE_EV_TCPT_H2C_RECV, req, c,
			      FIELD_AT(u32, cmd, TCPT_OFF(CMD_RBYTES_DONE)) |
			      (u64)len << NVMETRACE_H2C_AUX_LEN_SHIFT, true);
	else
		req_cmd_event(NVMETRACE_EV_TCPT_DATA_RECV, req, c, len, true);
	return 0;
}

/* START: no hook runs; the last recording's arrivals are not this one's */
static void nvmet_tcp_hooks_reset(void)
{
	memset(tcpt_arrivals, 0, sizeof(tcpt_arrivals));
}

static struct nvmetrace_hook nvmet_tcp_hooks[] = {
	{ "nvmet_tcp_data_ready", "nvmet_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_tcpt_data_ready, .needs = NEEDS_TCP_TARGET },
	{ "nvmet_tcp_map_data", "nvmet_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_tcpt_map_data, .needs = NEEDS_TCP_TARGET },
	{ "nvmet_tcp_queue_response", "nvmet_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_tcpt_queue_response, .needs = NEEDS_TCP_TARGET },
	{ "nvmet_tcp_build_pdu_iovec", "nvmet_tcp", NVMETRACE_HOOK_FTRACE,
	  NVMETRACE_ROLE_TARGET, NULL, kp_tcpt_build_pdu_iovec, .needs = NEEDS_TCP_TARGET },
};

struct nvmetrace_hook_group nvmetrace_nvmet_tcp_hooks = {
	.rows = nvmet_tcp_hooks,
	.nr = ARRAY_SIZE(nvmet_tcp_hooks),
	.reset = nvmet_tcp_hooks_reset,
};
