// SPDX-License-Identifier: GPL-2.0
/*
 * Load and unload.
 *
 * Load brings the parts up from the inside out, so nothing is reachable
 * before what it uses exists: rings, the test pool, hooks (nothing attached yet), the
 * device, and last the netlink family, through which recording starts.
 * Unload goes the other way; it cannot begin while /dev/nvmetrace is open or
 * mapped (see chardev.c), so freeing the rings last is safe.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "nvmetrace.h"

#define NVMETRACE_RING_KB_MIN	4		/* 85 records -> 64 */
#define NVMETRACE_RING_KB_MAX	(1024 * 1024)	/* 1 GiB per CPU */

/*
 * The default ring: 4 MiB per CPU (65536 records, ~2.5k commands with every
 * hook at 1 of 1: a recorder kept off a busy CPU for a while loses less),
 * but at most 64 MiB for all possible CPUs together and at least 1 MiB each.
 * The rings are allocated at load, idle or not.
 */
#define NVMETRACE_RING_KB_DEFAULT_MAX	4096
#define NVMETRACE_RING_KB_DEFAULT_MIN	1024
#define NVMETRACE_RING_KB_DEFAULT_TOTAL	(64 * 1024)

static unsigned int ring_kb;
module_param(ring_kb, uint, 0444);
MODULE_PARM_DESC(ring_kb,
		 "record bytes per CPU ring, in KiB, rounded down to a power-of-two record count (default 0: 4096, less when 64 MiB does not cover every possible CPU, not under 1024)");

struct nvmetrace_dev nvmetrace_dev = {
	.ctl_lock	= __MUTEX_INITIALIZER(nvmetrace_dev.ctl_lock),
	.state		= NVMETRACE_STATE_IDLE,
	.cfg		= NVMETRACE_CONFIG_IDLE,
};

static int __init nvmetrace_init(void)
{
	u32 nr_recs;
	int err;

	if (!ring_kb)
		ring_kb = clamp_t(unsigned int,
				  NVMETRACE_RING_KB_DEFAULT_TOTAL / num_possible_cpus(),
				  NVMETRACE_RING_KB_DEFAULT_MIN,
				  NVMETRACE_RING_KB_DEFAULT_MAX);
	if (ring_kb < NVMETRACE_RING_KB_MIN || ring_kb > NVMETRACE_RING_KB_MAX) {
		pr_err("ring_kb=%u is outside [%u, %u]\n", ring_kb,
		       NVMETRACE_RING_KB_MIN, NVMETRACE_RING_KB_MAX);
		return -EINVAL;
	}
	/* round down: a ring never takes more than it was given */
	nr_recs = rounddown_pow_of_two((u64)ring_kb * 1024 /
				       sizeof(struct nvmetrace_rec));

	err = nvmetrace_rings_alloc(nr_recs);
	if (err)
		return err;
	err = nvmetrace_pool_init();
	if (err)
		goto out_rings;
	err = nvmetrace_hooks_init();
	if (err)
		goto out_pool;
	err = nvmetrace_chardev_init();
	if (err)
		goto out_hooks;
	err = nvmetrace_genl_init();
	if (err)
		goto out_chardev;

	pr_info("version %s, %u rings of %u records (%lu bytes each)\n",
		NVMETRACE_VERSION, nr_cpu_ids, nr_recs, nvmetrace_dev.map_size);
	return 0;

out_chardev:
	nvmetrace_chardev_exit();
out_hooks:
	nvmetrace_hooks_exit();
out_pool:
	nvmetrace_pool_exit();
out_rings:
	nvmetrace_rings_free();
	return err;
}

static void __exit nvmetrace_exit(void)
{
	nvmetrace_genl_exit();		/* no more commands; stops recording */
	nvmetrace_chardev_exit();
	nvmetrace_hooks_exit();
	nvmetrace_pool_exit();
	nvmetrace_rings_free();
}

module_init(nvmetrace_init);
module_exit(nvmetrace_exit);

MODULE_DESCRIPTION("nvmetrace: per-command NVMe timestamps into per-CPU mmap rings");
MODULE_LICENSE("GPL");
MODULE_VERSION(NVMETRACE_VERSION);
