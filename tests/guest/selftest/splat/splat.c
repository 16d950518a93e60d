// SPDX-License-Identifier: GPL-2.0
/*
 * splat.ko — lane self-test only: raises a real kernel WARNING when loaded, so the self-test
 * can check that tools/lane turns a scenario that exits 0 into a FAIL when the kernel log
 * shows a splat. With int3=1 it executes a breakpoint no one handles instead: the kernel
 * dies of "Oops: int3" with the 0xcc still in memory, which tools/lane must report as the
 * scenario's crash and never retry as an emulator fault. Built by tools/lane against the
 * guest kernel's headers.
 */
#include <linux/module.h>
#include <linux/bug.h>

static bool int3;
module_param(int3, bool, 0444);
MODULE_PARM_DESC(int3, "execute an unhandled int3 (the kernel dies) instead of WARN_ON(1)");

static volatile int splat_sink;

/*
 * Outside init text, and with code ahead of the int3, so that the oops can show the bytes
 * around it (its Code: line reads 43 bytes before the trapping address).
 */
static noinline void splat_trap(void)
{
	int i;

	for (i = 0; i < 16; i++)
		splat_sink += i;
	splat_sink = 0;
	splat_sink = 1;
	splat_sink = 2;
	splat_sink = 3;
	splat_sink = 4;
	splat_sink = 5;
	asm volatile("int3");
}

static int __init splat_init(void)
{
	if (int3)
		splat_trap();
	else
		WARN_ON(1);
	return 0;
}

static void __exit splat_exit(void)
{
}

module_init(splat_init);
module_exit(splat_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("nvmetrace lane self-test: WARN_ON(1) or an unhandled int3 on load");
