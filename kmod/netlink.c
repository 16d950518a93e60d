// SPDX-License-Identifier: GPL-2.0
/*
 * The control channel: generic netlink family
 * NVMETRACE_GENL_NAME (commands and attributes: <linux/nvmetrace.h>).
 *
 * Commands: GET_VERSION, GET_STATUS, START, STOP, ADMIT, LAYOUT, GET_HOOKS (dump),
 * POOL_GET (pool.c) and DMA_COST (dmacost.c).
 *
 * Every command needs CAP_NET_ADMIN (GENL_ADMIN_PERM); START, STOP, ADMIT,
 * LAYOUT and DMA_COST, which change what the kernel does, need CAP_SYS_ADMIN too, as
 * /dev/nvmetrace does (checked in their handlers, which say so in extack).  The family exists
 * only in the initial network namespace (.netnsok unset): the rings are
 * global.  POOL_GET and DMA_COST name a block device by a descriptor of the
 * sender's open on it (FD), never by its number alone.  Every request is
 * strictly validated against nvmetrace_genl_policy: unknown or reply-only
 * attributes, wrong lengths, unknown NVMETRACE_A_FLAGS bits and unknown roles
 * are refused with -EINVAL (SAMPLE 0: -ERANGE) and an extack message before
 * any handler runs.  Nested attributes need NLA_F_NESTED.
 *
 * Handlers run in process context and may sleep.  .parallel_ops is set, so
 * the genetlink core does not serialize them: START and STOP take
 * nvmetrace_dev.ctl_lock instead, which keeps slow hook (de)registration from
 * holding the global genl mutex.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/netlink.h>
#include <linux/workqueue.h>
#include <net/genetlink.h>
#include <net/netlink.h>

#include "nvmetrace.h"

static const struct nla_policy nvmetrace_genl_dev_policy[NVMETRACE_A_MAX + 1] = {
	[NVMETRACE_A_DEV]	= { .type = NLA_U32 },
};

static const struct nla_policy nvmetrace_genl_layout_policy[NVMETRACE_L_MAX + 1] = {
	[NVMETRACE_L_REQ_CMD]		= NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_REQ_CQE]		= NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_REQ_SQ]		= NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_SQ_CTRL]		= NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_SQ_QID]		= NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_CTRL_CNTLID]	= NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_TCP_QUEUE_REQUEST ... NVMETRACE_L_TCP_LAST] =
		NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_NVMET_TCP_BASE ... NVMETRACE_L_NVMET_TCP_LAST] =
		NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_RDMA_WC_WR_CQE ... NVMETRACE_L_RDMA_LAST] =
		NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_RDMAT_WC_WR_CQE ... NVMETRACE_L_RDMAT_RSP_REQ] =
		NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_BTF_BASE ... NVMETRACE_L_BTF_LAST] = { .type = NLA_U32 },
	[NVMETRACE_L_VMLINUX_BASE ... NVMETRACE_L_VMLINUX_LAST] =
		NLA_POLICY_MAX(NLA_U32, 4095),
	[NVMETRACE_L_DIO_SIMPLE_BASE ... NVMETRACE_L_DIO_SIMPLE_LAST] =
		NLA_POLICY_MAX(NLA_U32, 4095),
};

/* Request attributes; all others (reply-only ones included) are rejected. */
static const struct nla_policy nvmetrace_genl_policy[NVMETRACE_A_MAX + 1] = {
	[NVMETRACE_A_ROLE]	= NLA_POLICY_MASK(NLA_U32, NVMETRACE_ROLE_ALL),
	[NVMETRACE_A_SAMPLE]	= NLA_POLICY_MIN(NLA_U32, 1),
	[NVMETRACE_A_SEED]	= { .type = NLA_U64 },
	[NVMETRACE_A_DEVS]	= NLA_POLICY_NESTED(nvmetrace_genl_dev_policy),
	[NVMETRACE_A_LAYOUT]	= NLA_POLICY_NESTED(nvmetrace_genl_layout_policy),
	/* the "reserved bit set" check: unknown flags -> -EINVAL + extack */
	[NVMETRACE_A_FLAGS]	= NLA_POLICY_MASK(NLA_U32, NVMETRACE_FLAGS_KNOWN),
};

/*
 * POOL_GET and DMA_COST have policies of their own, so DEV is accepted at the
 * top level only there (START takes devices inside DEVS).
 */
static const struct nla_policy nvmetrace_genl_pool_policy[NVMETRACE_A_MAX + 1] = {
	[NVMETRACE_A_DEV]	= { .type = NLA_U32 },
	[NVMETRACE_A_FD]	= { .type = NLA_U32 },
};

static const struct nla_policy nvmetrace_genl_dma_req_policy[NVMETRACE_D_MAX + 1] = {
	[NVMETRACE_D_ITERS]	= NLA_POLICY_RANGE(NLA_U32, 1, NVMETRACE_DMA_ITERS_MAX),
};

static const struct nla_policy nvmetrace_genl_dma_policy[NVMETRACE_A_MAX + 1] = {
	[NVMETRACE_A_DEV]	= { .type = NLA_U32 },
	[NVMETRACE_A_FD]	= { .type = NLA_U32 },
	[NVMETRACE_A_DMA]	= NLA_POLICY_NESTED(nvmetrace_genl_dma_req_policy),
};

static struct genl_family nvmetrace_genl_family;

/* A reply to info's command; *hdr is where its attributes go. */
static struct sk_buff *nvmetrace_genl_reply_new(struct genl_info *info,
						void **hdr)
{
	struct sk_buff *msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);

	if (!msg)
		return NULL;
	*hdr = genlmsg_put_reply(msg, info, &nvmetrace_genl_family, 0,
				 info->genlhdr->cmd);
	if (!*hdr) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

static int nvmetrace_genl_reply_send(struct sk_buff *msg, void *hdr,
				     struct genl_info *info)
{
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

static int nvmetrace_genl_get_version(struct sk_buff *skb,
				      struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;

	msg = nvmetrace_genl_reply_new(info, &hdr);
	if (!msg)
		return -ENOMEM;
	if (nla_put_u32(msg, NVMETRACE_A_ABI_VERSION, NVMETRACE_ABI_VERSION) ||
	    nla_put_string(msg, NVMETRACE_A_MODULE_VERSION, NVMETRACE_VERSION) ||
	    nla_put_u32(msg, NVMETRACE_A_RING_VERSION, NVMETRACE_RING_VERSION)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	return nvmetrace_genl_reply_send(msg, hdr, info);
}

static int nvmetrace_genl_get_status(struct sk_buff *skb,
				     struct genl_info *info)
{
	const struct nvmetrace_dev *d = &nvmetrace_dev;
	u32 state, role, sample;
	u64 records, lost;
	struct sk_buff *msg;
	void *hdr;

	mutex_lock(&nvmetrace_dev.ctl_lock);
	state = d->state;
	role = d->cfg.role;
	sample = d->cfg.sample;
	mutex_unlock(&nvmetrace_dev.ctl_lock);
	nvmetrace_rings_totals(&records, &lost);

	msg = nvmetrace_genl_reply_new(info, &hdr);
	if (!msg)
		return -ENOMEM;
	if (nla_put_u32(msg, NVMETRACE_A_STATE, state) ||
	    nla_put_u32(msg, NVMETRACE_A_NR_RINGS, nr_cpu_ids) ||
	    nla_put_u32(msg, NVMETRACE_A_RING_RECS, d->nr_recs) ||
	    nla_put_u64_64bit(msg, NVMETRACE_A_RING_MAP_SIZE, d->map_size,
			      NVMETRACE_A_PAD) ||
	    nla_put_u32(msg, NVMETRACE_A_REC_SIZE, sizeof(struct nvmetrace_rec)) ||
	    nla_put_u64_64bit(msg, NVMETRACE_A_RECORDS, records,
			      NVMETRACE_A_PAD) ||
	    nla_put_u64_64bit(msg, NVMETRACE_A_LOST, lost, NVMETRACE_A_PAD) ||
	    nla_put_u32(msg, NVMETRACE_A_SAMPLE, sample) ||
	    nla_put_u32(msg, NVMETRACE_A_ROLE, role)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	return nvmetrace_genl_reply_send(msg, hdr, info);
}

/* Reply to START/STOP: the state they left behind. */
static int nvmetrace_genl_reply_state(struct genl_info *info, u32 state)
{
	struct sk_buff *msg;
	void *hdr;

	msg = nvmetrace_genl_reply_new(info, &hdr);
	if (!msg)
		return -ENOMEM;
	if (nla_put_u32(msg, NVMETRACE_A_STATE, state)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	return nvmetrace_genl_reply_send(msg, hdr, info);
}

/*
 * One group of NVMETRACE_L_* offsets [first, last] into out[]: all present
 * (returns 1), none (0), or some (-EINVAL).
 */
static int nvmetrace_genl_layout_group(struct genl_info *info,
				       const struct nlattr *nest,
				       struct nlattr **tb, int first, int last,
				       u32 *out)
{
	int i, n = 0;

	for (i = first; i <= last; i++)
		n += !!tb[i];
	if (!n)
		return 0;
	if (n != last - first + 1) {
		NL_SET_ERR_MSG_ATTR(info->extack, nest,
				    "layout: a group of NVMETRACE_L_* offsets is all or nothing");
		return -EINVAL;
	}
	for (i = first; i <= last; i++)
		out[i - first] = nla_get_u32(tb[i]);
	return 1;
}

/*
 * The NVMETRACE_L_BTF_* identities, each only with the group of offsets of
 * its module (already parsed into l).
 */
static int nvmetrace_genl_parse_layout_ids(struct genl_info *info,
					   struct nlattr **tb,
					   struct nvmetrace_layout *l)
{
	const bool have[NVMETRACE_LMOD_NR] = {
		[NVMETRACE_LMOD_NVMET]		= l->valid,
		[NVMETRACE_LMOD_NVME_TCP]	= l->tcp.valid,
		[NVMETRACE_LMOD_NVMET_TCP]	= l->tcpt.valid,
		[NVMETRACE_LMOD_NVME_RDMA]	= l->rdma.valid,
		[NVMETRACE_LMOD_NVMET_RDMA]	= l->rdmat.valid,
	};
	int i;

	BUILD_BUG_ON(NVMETRACE_L_BTF_LAST - NVMETRACE_L_BTF_BASE + 1 != NVMETRACE_LMOD_NR);
	for (i = 0; i < NVMETRACE_LMOD_NR; i++) {
		const struct nlattr *a = tb[NVMETRACE_L_BTF_BASE + i];

		if (!a)
			continue;
		if (!have[i]) {
			NL_SET_ERR_MSG_ATTR(info->extack, a,
					    "layout: a module's BTF identity (NVMETRACE_L_BTF_*) without that module's offsets");
			return -EINVAL;
		}
		l->id[i].crc = nla_get_u32(a);
		l->id[i].known = true;
	}
	return 0;
}

/* NVMETRACE_A_LAYOUT: each group of offsets whole, or not at all. */
static int nvmetrace_genl_parse_layout(struct genl_info *info,
				       const struct nlattr *nest,
				       struct nvmetrace_layout *l)
{
	struct nlattr *tb[NVMETRACE_L_MAX + 1];
	u32 nvmet[NVMETRACE_L_CTRL_CNTLID - NVMETRACE_L_REQ_CMD + 1];
	u32 tcp[NVMETRACE_L_TCP_LAST - NVMETRACE_L_TCP_QUEUE_REQUEST + 1];
	int err;

	err = nla_parse_nested(tb, NVMETRACE_L_MAX, nest,
			       nvmetrace_genl_layout_policy, info->extack);
	if (err)
		return err;
	err = nvmetrace_genl_layout_group(info, nest, tb, NVMETRACE_L_REQ_CMD,
					  NVMETRACE_L_CTRL_CNTLID, nvmet);
	if (err < 0)
		return err;
	if (err) {
		l->req_cmd = nvmet[0];
		l->req_cqe = nvmet[1];
		l->req_sq = nvmet[2];
		l->sq_ctrl = nvmet[3];
		l->sq_qid = nvmet[4];
		l->ctrl_cntlid = nvmet[5];
		l->valid = true;
	}
	err = nvmetrace_genl_layout_group(info, nest, tb,
					  NVMETRACE_L_TCP_QUEUE_REQUEST,
					  NVMETRACE_L_TCP_LAST, tcp);
	if (err < 0)
		return err;
	if (err) {
		BUILD_BUG_ON(sizeof(tcp) != sizeof(l->tcp.off));
		memcpy(l->tcp.off, tcp, sizeof(tcp));
		l->tcp.valid = true;
	}
	err = nvmetrace_genl_layout_group(info, nest, tb,
					  NVMETRACE_L_RDMA_WC_WR_CQE,
					  NVMETRACE_L_RDMA_LAST,
					  l->rdma.off);
	if (err < 0)
		return err;
	l->rdma.valid = err;
	err = nvmetrace_genl_layout_group(info, nest, tb,
					  NVMETRACE_L_RDMAT_WC_WR_CQE,
					  NVMETRACE_L_RDMAT_RSP_REQ,
					  l->rdmat.off);
	if (err < 0)
		return err;
	l->rdmat.valid = err;
	err = nvmetrace_genl_layout_group(info, nest, tb,
					  NVMETRACE_L_NVMET_TCP_BASE,
					  NVMETRACE_L_NVMET_TCP_LAST,
					  l->tcpt.off);
	if (err < 0)
		return err;
	l->tcpt.valid = err;
	err = nvmetrace_genl_layout_group(info, nest, tb,
					  NVMETRACE_L_VMLINUX_BASE,
					  NVMETRACE_L_VMLINUX_LAST,
					  l->vmlinux.off);
	if (err < 0)
		return err;
	l->vmlinux.valid = err;
	err = nvmetrace_genl_layout_group(info, nest, tb,
					  NVMETRACE_L_DIO_SIMPLE_BASE,
					  NVMETRACE_L_DIO_SIMPLE_LAST,
					  l->dio_simple.off);
	if (err < 0)
		return err;
	l->dio_simple.valid = err;
	return nvmetrace_genl_parse_layout_ids(info, tb, l);
}

/* START's attributes into cfg; the policy has already checked each one. */
static int nvmetrace_genl_parse_config(struct genl_info *info,
				       struct nvmetrace_config *cfg)
{
	struct nlattr **attrs = info->attrs;
	struct nlattr *nla;
	int rem;

	memset(cfg, 0, sizeof(*cfg));
	if (GENL_REQ_ATTR_CHECK(info, NVMETRACE_A_ROLE))
		return -EINVAL;
	cfg->role = nla_get_u32(attrs[NVMETRACE_A_ROLE]);
	if (!cfg->role) {
		NL_SET_ERR_MSG_ATTR(info->extack, attrs[NVMETRACE_A_ROLE],
				    "no role: set NVMETRACE_ROLE_HOST and/or _TARGET");
		return -EINVAL;
	}
	cfg->sample = 1;
	if (attrs[NVMETRACE_A_SAMPLE])
		cfg->sample = nla_get_u32(attrs[NVMETRACE_A_SAMPLE]);
	if (attrs[NVMETRACE_A_SEED])
		cfg->seed = nla_get_u64(attrs[NVMETRACE_A_SEED]);
	if (attrs[NVMETRACE_A_DEVS]) {
		nla_for_each_nested(nla, attrs[NVMETRACE_A_DEVS], rem) {
			if (cfg->nr_devs == NVMETRACE_MAX_DEVS) {
				NL_SET_ERR_MSG_ATTR(info->extack, nla,
						    "too many devices");
				return -EINVAL;
			}
			cfg->devs[cfg->nr_devs++] = nla_get_u32(nla);
		}
	}
	cfg->dev_filter = cfg->nr_devs > 0;
	if (attrs[NVMETRACE_A_FLAGS] &&
	    (nla_get_u32(attrs[NVMETRACE_A_FLAGS]) & NVMETRACE_START_DEV_FILTER))
		cfg->dev_filter = true;
	if (attrs[NVMETRACE_A_LAYOUT])
		return nvmetrace_genl_parse_layout(info, attrs[NVMETRACE_A_LAYOUT],
						   &cfg->layout);
	return 0;
}

/*
 * START, STOP and DMA_COST change what the kernel does (hooks, a recording
 * another user may own, a device opened for DMA) and what /dev/nvmetrace
 * serves: they need CAP_SYS_ADMIN as the device does, not only the
 * CAP_NET_ADMIN of GENL_ADMIN_PERM.
 */
static bool nvmetrace_genl_sys_admin(struct sk_buff *skb, struct genl_info *info)
{
	if (netlink_capable(skb, CAP_SYS_ADMIN))
		return true;
	NL_SET_ERR_MSG(info->extack, "needs CAP_SYS_ADMIN (as /dev/nvmetrace does)");
	return false;
}

static int nvmetrace_genl_start(struct sk_buff *skb, struct genl_info *info)
{
	struct nvmetrace_config cfg;
	u32 state;
	int err;

	if (!nvmetrace_genl_sys_admin(skb, info))
		return -EPERM;

	err = nvmetrace_genl_parse_config(info, &cfg);
	if (err)
		return err;

	mutex_lock(&nvmetrace_dev.ctl_lock);
	if (nvmetrace_dev.state != NVMETRACE_STATE_IDLE) {
		NL_SET_ERR_MSG(info->extack, "already recording");
		err = -EBUSY;
	} else {
		err = nvmetrace_hooks_start(&cfg, info->extack);
		if (err && !info->extack->_msg)
			NL_SET_ERR_MSG(info->extack, "cannot attach the hooks");
	}
	if (!err) {
		nvmetrace_dev.cfg = cfg;
		WRITE_ONCE(nvmetrace_dev.owner_portid, info->snd_portid);
		WRITE_ONCE(nvmetrace_dev.state, NVMETRACE_STATE_RECORDING);
	}
	state = nvmetrace_dev.state;
	mutex_unlock(&nvmetrace_dev.ctl_lock);
	if (err)
		return err;
	return nvmetrace_genl_reply_state(info, state);
}

/*
 * Stop recording if it is and, when @owner is not 0, if that netlink port
 * still owns it; from STOP (owner 0), the owner-gone work and unload.
 * Process context, takes ctl_lock.  Returns the new state.
 */
static u32 nvmetrace_genl_do_stop(u32 owner)
{
	mutex_lock(&nvmetrace_dev.ctl_lock);
	if (nvmetrace_dev.state == NVMETRACE_STATE_RECORDING &&
	    (!owner || nvmetrace_dev.owner_portid == owner)) {
		nvmetrace_hooks_stop();
		WRITE_ONCE(nvmetrace_dev.state, NVMETRACE_STATE_IDLE);
		nvmetrace_dev.cfg = NVMETRACE_CONFIG_IDLE;
		WRITE_ONCE(nvmetrace_dev.owner_portid, 0);
	}
	mutex_unlock(&nvmetrace_dev.ctl_lock);
	return NVMETRACE_STATE_IDLE;
}

/* STOP when idle is not an error: the caller wants IDLE and gets it. */
static int nvmetrace_genl_stop(struct sk_buff *skb, struct genl_info *info)
{
	if (!nvmetrace_genl_sys_admin(skb, info))
		return -EPERM;
	return nvmetrace_genl_reply_state(info, nvmetrace_genl_do_stop(0));
}

/* ctl_lock held: 0 if info's socket owns the running recording, else why not */
static int nvmetrace_genl_owner_check(struct genl_info *info)
{
	if (nvmetrace_dev.state != NVMETRACE_STATE_RECORDING) {
		NL_SET_ERR_MSG(info->extack, "nothing is recording");
		return -ENOENT;
	}
	if (nvmetrace_dev.owner_portid != info->snd_portid) {
		NL_SET_ERR_MSG(info->extack,
			       "the recording belongs to another socket");
		return -EBUSY;
	}
	return 0;
}

/*
 * ADMIT: devices that appeared after START join the recording.  Only the
 * socket that started it may add to it, and only to a filtered one (an
 * unfiltered recording has every device already).
 */
static int nvmetrace_genl_admit(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *nla, *nest;
	struct sk_buff *msg;
	void *hdr;
	int rem, err = 0;
	u32 i;

	if (!nvmetrace_genl_sys_admin(skb, info))
		return -EPERM;
	if (GENL_REQ_ATTR_CHECK(info, NVMETRACE_A_DEVS))
		return -EINVAL;
	msg = nvmetrace_genl_reply_new(info, &hdr);
	if (!msg)
		return -ENOMEM;

	mutex_lock(&nvmetrace_dev.ctl_lock);
	err = nvmetrace_genl_owner_check(info);
	if (!err && !nvmetrace_dev.cfg.dev_filter) {
		NL_SET_ERR_MSG(info->extack,
			       "the recording has every device: START had no device filter");
		err = -EINVAL;
	}
	if (!err) {
		nla_for_each_nested(nla, info->attrs[NVMETRACE_A_DEVS], rem) {
			err = nvmetrace_hooks_admit(nla_get_u32(nla));
			if (err) {
				NL_SET_ERR_MSG_ATTR(info->extack, nla,
						    "the recording has as many devices as it can hold");
				break;
			}
		}
	}
	/* the reply: every device the hooks now record */
	nest = err ? NULL : nla_nest_start(msg, NVMETRACE_A_DEVS);
	if (!err && !nest)
		err = -EMSGSIZE;
	for (i = 0; !err && i < nvmetrace_hooks_nr_devs(); i++)
		if (nla_put_u32(msg, NVMETRACE_A_DEV, nvmetrace_hooks_dev(i)))
			err = -EMSGSIZE;
	mutex_unlock(&nvmetrace_dev.ctl_lock);
	if (err) {
		nlmsg_free(msg);
		return err;
	}
	nla_nest_end(msg, nest);
	return nvmetrace_genl_reply_send(msg, hdr, info);
}

/* LAYOUT: a transport module's layout, for a module loaded since START. */
static int nvmetrace_genl_layout(struct sk_buff *skb, struct genl_info *info)
{
	struct nvmetrace_layout *l;
	int err;

	if (!nvmetrace_genl_sys_admin(skb, info))
		return -EPERM;
	if (GENL_REQ_ATTR_CHECK(info, NVMETRACE_A_LAYOUT))
		return -EINVAL;
	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return -ENOMEM;
	err = nvmetrace_genl_parse_layout(info, info->attrs[NVMETRACE_A_LAYOUT], l);
	if (!err) {
		mutex_lock(&nvmetrace_dev.ctl_lock);
		err = nvmetrace_genl_owner_check(info);
		if (!err)
			err = nvmetrace_hooks_layout(l, info->extack);
		mutex_unlock(&nvmetrace_dev.ctl_lock);
	}
	kfree(l);
	return err;
}

/*
 * The block device a request names, from FD: a file descriptor of the sender
 * open for reading on it.  A generic netlink request is handled in the
 * context of the task that sent it, so FD is looked up in the sender's own
 * table, and its open has passed the VFS permission check, the device cgroup
 * and any LSM: the module never looks at a device its caller could not have
 * read.  DEV, when given as well, must be the same device.  The file is
 * returned held, and the caller puts it when it is done with the device: the
 * open file keeps the disk, and so its number, from going to another device
 * while the module opens it by number and measures it.
 */
static struct file *nvmetrace_genl_dev_of_fd(struct genl_info *info, u32 *dev)
{
	struct nlattr *dev_attr = info->attrs[NVMETRACE_A_DEV];
	struct nlattr *fd_attr = info->attrs[NVMETRACE_A_FD];
	struct inode *inode;
	struct file *f;
	int err;

	if (!fd_attr) {
		NL_SET_ERR_MSG_ATTR(info->extack, dev_attr,
				    "FD is required: a descriptor of yours open for reading on the block device");
		return ERR_PTR(-EINVAL);
	}
	f = fget(nla_get_u32(fd_attr));
	if (!f) {
		NL_SET_ERR_MSG_ATTR(info->extack, fd_attr,
				    "FD is not an open file descriptor of the sender");
		return ERR_PTR(-EBADF);
	}
	inode = file_inode(f);
	if (!S_ISBLK(inode->i_mode)) {
		NL_SET_ERR_MSG_ATTR(info->extack, fd_attr, "FD is not a block device");
		err = -ENOTBLK;
	} else if (!(f->f_mode & FMODE_READ)) {
		NL_SET_ERR_MSG_ATTR(info->extack, fd_attr, "FD is not open for reading");
		err = -EBADF;
	} else if (dev_attr && nla_get_u32(dev_attr) != (u32)inode->i_rdev) {
		NL_SET_ERR_MSG_ATTR(info->extack, dev_attr,
				    "DEV is not the device FD is open on");
		err = -EINVAL;
	} else {
		*dev = inode->i_rdev;
		return f;
	}
	fput(f);
	return ERR_PTR(err);
}

/* POOL_GET's reply: the module's test pool, and dev's kernel pool if have_dev. */
static int nvmetrace_genl_pool_reply(struct genl_info *info, u32 dev,
				     bool have_dev)
{
	struct nvmetrace_pool_stats st;
	struct sk_buff *msg;
	struct nlattr *nest;
	void *hdr;
	int err;

	nvmetrace_pool_stats(&st);
	msg = nvmetrace_genl_reply_new(info, &hdr);
	if (!msg)
		return -ENOMEM;
	nest = nla_nest_start(msg, NVMETRACE_A_POOL);
	if (!nest ||
	    nla_put_u64_64bit(msg, NVMETRACE_P_BUF_SIZE, st.buf_size, NVMETRACE_P_PAD) ||
	    nla_put_u32(msg, NVMETRACE_P_NR_BUFS, st.nr_asked) ||
	    nla_put_u32(msg, NVMETRACE_P_ALLOCATED, st.nr_bufs) ||
	    nla_put_u32(msg, NVMETRACE_P_FALLBACKS, st.fallbacks) ||
	    nla_put_u64_64bit(msg, NVMETRACE_P_BYTES, st.bytes, NVMETRACE_P_PAD) ||
	    nla_put_u32(msg, NVMETRACE_P_ORDER, st.order) ||
	    nla_put_u32(msg, NVMETRACE_P_MIN_ORDER, st.min_order) ||
	    nla_put_u32(msg, NVMETRACE_P_FOLIOS, st.nr_folios) ||
	    nla_put_s32(msg, NVMETRACE_P_NODE, st.nid) ||
	    nla_put_u32(msg, NVMETRACE_P_MAPPINGS, st.mappings) ||
	    nla_put_u64_64bit(msg, NVMETRACE_P_MMAP_OFFSET,
			      NVMETRACE_POOL_MMAP_OFFSET, NVMETRACE_P_PAD)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	err = nvmetrace_kpool_put(info, msg, dev, have_dev);
	if (err) {
		nlmsg_free(msg);
		return err < 0 ? err : -EMSGSIZE;
	}
	nla_nest_end(msg, nest);
	if (have_dev && nla_put_u32(msg, NVMETRACE_A_DEV, dev)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	return nvmetrace_genl_reply_send(msg, hdr, info);
}

/*
 * POOL_GET: the module's test pool, and the kernel's blk_iobuf pool (of the
 * queue of FD's device, when FD is given).
 */
static int nvmetrace_genl_pool_get(struct sk_buff *skb, struct genl_info *info)
{
	bool have_dev = info->attrs[NVMETRACE_A_DEV] || info->attrs[NVMETRACE_A_FD];
	struct file *held = NULL;
	u32 dev = 0;
	int err;

	if (have_dev) {
		held = nvmetrace_genl_dev_of_fd(info, &dev);
		if (IS_ERR(held))
			return PTR_ERR(held);
	}
	err = nvmetrace_genl_pool_reply(info, dev, have_dev);
	if (held)
		fput(held);
	return err;
}

/* DMA_COST: FD (required), optionally DEV and DMA { ITERS }. */
static int nvmetrace_genl_dma_cost(struct sk_buff *skb, struct genl_info *info)
{
	u32 iters = NVMETRACE_DMA_ITERS_DEFAULT, dev;
	struct nlattr *tb[NVMETRACE_D_MAX + 1];
	struct sk_buff *msg = NULL;
	struct file *held;
	void *hdr;
	int err;

	if (!nvmetrace_genl_sys_admin(skb, info))
		return -EPERM;

	if (info->attrs[NVMETRACE_A_DMA]) {
		err = nla_parse_nested(tb, NVMETRACE_D_MAX, info->attrs[NVMETRACE_A_DMA],
				       nvmetrace_genl_dma_req_policy, info->extack);
		if (err)
			return err;
		if (tb[NVMETRACE_D_ITERS])
			iters = nla_get_u32(tb[NVMETRACE_D_ITERS]);
	}
	held = nvmetrace_genl_dev_of_fd(info, &dev);
	if (IS_ERR(held))
		return PTR_ERR(held);

	err = -ENOMEM;
	msg = genlmsg_new(nvmetrace_dma_reply_size(iters), GFP_KERNEL);
	if (!msg)
		goto out;
	err = -EMSGSIZE;
	hdr = genlmsg_put_reply(msg, info, &nvmetrace_genl_family, 0,
				info->genlhdr->cmd);
	if (!hdr || nla_put_u32(msg, NVMETRACE_A_DEV, dev))
		goto out;
	err = nvmetrace_dma_cost(info, dev, iters, msg);
	if (!err) {
		err = nvmetrace_genl_reply_send(msg, hdr, info);
		msg = NULL;	/* sent or freed by the send */
	}
out:
	nlmsg_free(msg);
	fput(held);
	return err;
}

static int nvmetrace_genl_get_hooks(struct sk_buff *skb,
				    struct netlink_callback *cb)
{
	return nvmetrace_hooks_dump(skb, cb);
}

static const struct genl_ops nvmetrace_genl_ops[] = {
	{
		.cmd	= NVMETRACE_CMD_GET_VERSION,
		.flags	= GENL_ADMIN_PERM,
		.doit	= nvmetrace_genl_get_version,
	},
	{
		.cmd	= NVMETRACE_CMD_GET_STATUS,
		.flags	= GENL_ADMIN_PERM,
		.doit	= nvmetrace_genl_get_status,
	},
	{
		.cmd	= NVMETRACE_CMD_START,
		.flags	= GENL_ADMIN_PERM,
		.doit	= nvmetrace_genl_start,
	},
	{
		.cmd	= NVMETRACE_CMD_STOP,
		.flags	= GENL_ADMIN_PERM,
		.doit	= nvmetrace_genl_stop,
	},
	{
		.cmd	= NVMETRACE_CMD_GET_HOOKS,
		.flags	= GENL_ADMIN_PERM,
		.dumpit	= nvmetrace_genl_get_hooks,
	},
	{
		.cmd	= NVMETRACE_CMD_POOL_GET,
		.flags	= GENL_ADMIN_PERM,
		.doit	= nvmetrace_genl_pool_get,
		.policy	= nvmetrace_genl_pool_policy,
		.maxattr = NVMETRACE_A_MAX,
	},
	{
		.cmd	= NVMETRACE_CMD_ADMIT,
		.flags	= GENL_ADMIN_PERM,
		.doit	= nvmetrace_genl_admit,
	},
	{
		.cmd	= NVMETRACE_CMD_LAYOUT,
		.flags	= GENL_ADMIN_PERM,
		.doit	= nvmetrace_genl_layout,
	},
	{
		.cmd	= NVMETRACE_CMD_DMA_COST,
		.flags	= GENL_ADMIN_PERM,
		.doit	= nvmetrace_genl_dma_cost,
		.policy	= nvmetrace_genl_dma_policy,
		.maxattr = NVMETRACE_A_MAX,
	},
};

/* .resv_start_op stays 0: every command is strictly validated (compat.h). */
static struct genl_family nvmetrace_genl_family __ro_after_init = {
	.name		= NVMETRACE_GENL_NAME,
	.version	= NVMETRACE_GENL_VERSION,
	.maxattr	= NVMETRACE_A_MAX,
	.policy		= nvmetrace_genl_policy,
	.parallel_ops	= true,
	.module		= THIS_MODULE,
	.ops		= nvmetrace_genl_ops,
	.n_ops		= ARRAY_SIZE(nvmetrace_genl_ops),
};

/* Last step of load: from here on user space can drive the module. */
/* For the GET_HOOKS dump built in hooks.c. */
const struct genl_family *nvmetrace_genl_family_ptr(void)
{
	return &nvmetrace_genl_family;
}

/*
 * A recording belongs to the netlink socket that started it: when that
 * socket goes away (the recorder exited or was killed), stop recording, so
 * a crashed recorder does not leave the hooks attached with nobody reading.
 * The netlink notifier chain is atomic: the stop itself runs in a work item.
 */
static u32 nvmetrace_gone_portid;	/* the owner whose socket went away */

/*
 * The recording may have changed hands between the notifier and this work
 * (STOP, then START from another socket): stop it only if the socket that
 * went away still owns it, checked under ctl_lock.
 */
static void nvmetrace_owner_gone(struct work_struct *work)
{
	nvmetrace_genl_do_stop(READ_ONCE(nvmetrace_gone_portid));
}

static DECLARE_WORK(nvmetrace_owner_gone_work, nvmetrace_owner_gone);

static int nvmetrace_netlink_notify(struct notifier_block *nb,
				    unsigned long event, void *ptr)
{
	struct netlink_notify *n = ptr;
	u32 owner = READ_ONCE(nvmetrace_dev.owner_portid);

	if (event == NETLINK_URELEASE && n->protocol == NETLINK_GENERIC &&
	    owner && n->portid == owner && net_eq(n->net, &init_net)) {
		WRITE_ONCE(nvmetrace_gone_portid, owner);
		schedule_work(&nvmetrace_owner_gone_work);
	}
	return NOTIFY_DONE;
}

static struct notifier_block nvmetrace_netlink_nb = {
	.notifier_call = nvmetrace_netlink_notify,
};

int nvmetrace_genl_init(void)
{
	int err = genl_register_family(&nvmetrace_genl_family);

	if (err) {
		pr_err("cannot register generic netlink family %s: %d\n",
		       NVMETRACE_GENL_NAME, err);
		return err;
	}
	err = netlink_register_notifier(&nvmetrace_netlink_nb);
	if (err) {
		pr_err("cannot register a netlink notifier: %d\n", err);
		genl_unregister_family(&nvmetrace_genl_family);
	}
	return err;
}

/*
 * First step of unload: once unregistered no handler runs or can start
 * (genl_unregister_family() waits for running ones); then stop recording.
 */
void nvmetrace_genl_exit(void)
{
	genl_unregister_family(&nvmetrace_genl_family);
	netlink_unregister_notifier(&nvmetrace_netlink_nb);
	cancel_work_sync(&nvmetrace_owner_gone_work);
	nvmetrace_genl_do_stop(0);
}
