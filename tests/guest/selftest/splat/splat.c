// SPDX-License-Identifier: GPL-2.0
/*
 * splat.ko — lane self-test only: raises a real kernel WARNING when loaded, so the self-test
 * can check that tools/lane turns a scenario that exits 0 into a FAIL when the kernel log
 * shows a splat. Built by tools/lane against the guest kernel's headers.
 */
#include <linux/module.h>
#include <linux/bug.h>

static int __init splat_init(void)
{
	WARN_ON(1);
	return 0;
}

static void __exit splat_exit(void)
{
}

module_init(splat_init);
module_exit(splat_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("nvmetrace lane self-test: WARN_ON(1) on load");
