// SPDX-License-Identifier: GPL-2.0
/*
 * hooks.c — placeholder: no hooks yet.  The real file attaches the probes
 * (tracepoints by name, kprobes) and fills records with
 * nvmetrace_ring_local_reserve()/_commit(); its contract is in nvmetrace.h.
 * Until then START fails with -EOPNOTSUPP and GET_HOOKS lists nothing.
 */
#include <linux/errno.h>
#include <linux/netlink.h>

#include "nvmetrace.h"

int nvmetrace_hooks_init(void)
{
	return 0;
}

void nvmetrace_hooks_exit(void)
{
}

int nvmetrace_hooks_start(const struct nvmetrace_config *cfg)
{
	return -EOPNOTSUPP;
}

void nvmetrace_hooks_stop(void)
{
}

/* An empty dump: 0 ends it. */
int nvmetrace_hooks_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	return 0;
}
