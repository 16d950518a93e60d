// SPDX-License-Identifier: GPL-2.0
/*
 * layout.c — the private struct layouts START carries (NVMETRACE_A_LAYOUT,
 * parsed by netlink.c), checked before any hook that reads them attaches.
 *
 * The offsets come from the running kernel's BTF through user space; they
 * are checked for plausibility only (in range, aligned for their type,
 * members inside their struct), never guessed.  Process context.
 */
#include <linux/aio_abi.h>
#include <linux/blk_types.h>
#include <linux/errno.h>
#include <linux/fs.h>
#include <linux/nvme-tcp.h>
#include <net/netlink.h>

#include "nvmetrace.h"

static int check_layout(const struct nvmetrace_layout *l)
{
	/* Offsets come from BTF in user space; reject anything implausible. */
	const u32 max = 4096;

	if (!l->valid)
		return -ENOENT;
	if (l->req_cmd >= max || l->req_cqe >= max || l->req_sq >= max ||
	    l->sq_qid >= max || l->sq_ctrl >= max || l->ctrl_cntlid >= max ||
	    l->req_cmd % 8 || l->req_cqe % 8 || l->req_sq % 8 ||
	    l->sq_ctrl % 8 || l->sq_qid % 2 || l->ctrl_cntlid % 2)
		return -EINVAL;
	return 0;
}

/* The nvme-tcp group: aligned for its type, queue fields inside the queue. */
static int check_tcp_layout(const struct nvmetrace_layout *l)
{
	static const u8 align[] = {	/* NVMETRACE_L_TCP_* order */
		8, 8, 8, 8, 4, 4, 8, 8, 1, 8, 8, 8, 8, 8, 8, 4, 8, 8, 1,
	};
	const u32 qsize = NVMETRACE_TCP_OFF(l, QUEUE_SIZE);
	int i;

	BUILD_BUG_ON(ARRAY_SIZE(align) != ARRAY_SIZE(l->tcp.off));
	if (!l->tcp.valid)
		return 0;
	if (!qsize || qsize >= 4096)
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(align); i++) {
		if (l->tcp.off[i] % align[i])
			return -EINVAL;
		if (i + NVMETRACE_L_TCP_QUEUE_REQUEST <= NVMETRACE_L_TCP_QUEUE_CTRL &&
		    l->tcp.off[i] >= qsize)
			return -EINVAL;
	}
	return 0;
}

/*
 * The RDMA groups: pointers 8-aligned, ib_wc.status 4-aligned, genctr a
 * byte; a queue's size, so the queue id can be computed.
 */
static int check_rdma_layout(const struct nvmetrace_layout *l)
{
	static const u8 rdma_align[] = {	/* NVMETRACE_L_RDMA_* order */
		8, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 1,
	};
	int i;

	BUILD_BUG_ON(ARRAY_SIZE(rdma_align) != ARRAY_SIZE(l->rdma.off));

	if (l->rdma.valid) {
		if (NVMETRACE_RDMA_OFF(l, QUEUE_SIZE) < 8 ||
		    NVMETRACE_RDMA_OFF(l, QUEUE_CTRL) >= NVMETRACE_RDMA_OFF(l, QUEUE_SIZE))
			return -EINVAL;
		for (i = 0; i < ARRAY_SIZE(l->rdma.off); i++)
			if (l->rdma.off[i] % rdma_align[i])
				return -EINVAL;
	}
	if (l->rdmat.valid) {
		if (!l->valid)
			return -EINVAL;	/* the target hooks read nvmet's fields too */
		for (i = 0; i < ARRAY_SIZE(l->rdmat.off); i++)
			if (l->rdmat.off[i] %
			    (i == NVMETRACE_L_RDMAT_WC_STATUS -
				  NVMETRACE_L_RDMAT_WC_WR_CQE ? 4 : 8))
				return -EINVAL;
	}
	return 0;
}

/* The nvmet-tcp group: aligned for its type, members inside their struct. */
static int check_tcpt_layout(const struct nvmetrace_layout *l)
{
	const u32 cmd_size = NVMETRACE_TCPT_OFF(l, CMD_SIZE);
	const u32 queue_size = NVMETRACE_TCPT_OFF(l, QUEUE_SIZE);

	if (!l->tcpt.valid)
		return 0;
	if (!cmd_size || !queue_size ||
	    NVMETRACE_TCPT_OFF(l, CMD_QUEUE) % 8 ||
	    NVMETRACE_TCPT_OFF(l, CMD_QUEUE) + 8 > cmd_size ||
	    NVMETRACE_TCPT_OFF(l, CMD_REQ) % 8 ||
	    NVMETRACE_TCPT_OFF(l, CMD_REQ) >= cmd_size ||
	    NVMETRACE_TCPT_OFF(l, CMD_RBYTES_DONE) % 4 ||
	    NVMETRACE_TCPT_OFF(l, CMD_RBYTES_DONE) + 4 > cmd_size ||
	    NVMETRACE_TCPT_OFF(l, CMD_PDU_LEN) % 4 ||
	    NVMETRACE_TCPT_OFF(l, CMD_PDU_LEN) + 4 > cmd_size ||
	    NVMETRACE_TCPT_OFF(l, QUEUE_PDU) + sizeof(struct nvme_tcp_hdr) > queue_size ||
	    NVMETRACE_TCPT_OFF(l, REQ_TRANSFER_LEN) % 8)
		return -EINVAL;
	return 0;
}

/*
 * The vmlinux group: struct aio_kiocb's kiocb and io_event, 8-aligned,
 * apart from each other (struct kiocb is public: its size is this build's).
 */
static int check_vmlinux_layout(const struct nvmetrace_layout *l)
{
	const u32 rw = NVMETRACE_VMLINUX_OFF(l, AIO_KIOCB_RW);
	const u32 res = NVMETRACE_VMLINUX_OFF(l, AIO_KIOCB_RES);

	if (!l->vmlinux.valid)
		return 0;
	if (rw % 8 || res % 8 ||
	    (res < rw + sizeof(struct kiocb) && rw < res + sizeof(struct io_event)))
		return -EINVAL;
	return 0;
}

/*
 * The iomap_dio_simple group: the kiocb pointer and the bio (whose size is
 * this build's), 8-aligned, apart from each other.
 */
static int check_dio_simple_layout(const struct nvmetrace_layout *l)
{
	const u32 iocb = NVMETRACE_DIO_SIMPLE_OFF(l, IOCB);
	const u32 bio = NVMETRACE_DIO_SIMPLE_OFF(l, BIO);

	if (!l->dio_simple.valid)
		return 0;
	if (iocb % 8 || bio % 8 ||
	    (iocb < bio + sizeof(struct bio) && bio < iocb + sizeof(void *)))
		return -EINVAL;
	return 0;
}

/* Every group l carries: 0 if each is plausible, else an error (extack). */
int nvmetrace_layout_check_groups(const struct nvmetrace_layout *l,
				  struct netlink_ext_ack *extack)
{
	if (check_tcp_layout(l)) {
		NL_SET_ERR_MSG(extack, "implausible nvme-tcp layout (NVMETRACE_L_TCP_*)");
		return -EINVAL;
	}
	if (check_rdma_layout(l)) {
		NL_SET_ERR_MSG(extack,
			       "implausible nvme-rdma or nvmet-rdma layout (NVMETRACE_L_RDMA*_*), or nvmet-rdma's without nvmet's");
		return -EINVAL;
	}
	if (check_tcpt_layout(l)) {
		NL_SET_ERR_MSG(extack, "implausible nvmet-tcp layout (NVMETRACE_L_NVMET_TCP_*)");
		return -EINVAL;
	}
	if (check_vmlinux_layout(l)) {
		NL_SET_ERR_MSG(extack, "implausible aio layout (NVMETRACE_L_AIO_*)");
		return -EINVAL;
	}
	if (check_dio_simple_layout(l)) {
		NL_SET_ERR_MSG(extack, "implausible iomap layout (NVMETRACE_L_DIO_SIMPLE_*)");
		return -EINVAL;
	}
	return 0;
}

/* START's layouts: 0, or an error with its reason in extack */
int nvmetrace_layout_check(const struct nvmetrace_config *c,
			   struct netlink_ext_ack *extack)
{
	int ret;

	if (c->role & NVMETRACE_ROLE_TARGET) {
		ret = check_layout(&c->layout);
		if (ret) {
			NL_SET_ERR_MSG(extack,
				       "target role needs nvmet's struct layout (NVMETRACE_A_LAYOUT, from BTF)");
			return ret;
		}
	}
	return nvmetrace_layout_check_groups(&c->layout, extack);
}

/* Whether l carries the group of offsets of module i (enum nvmetrace_lmod). */
bool nvmetrace_layout_has(const struct nvmetrace_layout *l, int i)
{
	switch (i) {
	case NVMETRACE_LMOD_NVMET:
		return l->valid;
	case NVMETRACE_LMOD_NVME_TCP:
		return l->tcp.valid;
	case NVMETRACE_LMOD_NVMET_TCP:
		return l->tcpt.valid;
	case NVMETRACE_LMOD_NVME_RDMA:
		return l->rdma.valid;
	case NVMETRACE_LMOD_NVMET_RDMA:
		return l->rdmat.valid;
	}
	return false;
}
