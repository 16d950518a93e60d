// SPDX-License-Identifier: GPL-2.0
/*
 * retprobe_cost.c — a measuring aid of tools/retprobe-cost, never loaded
 * beside nvmetrace: one return probe on one function, with handlers that do
 * nothing, through the mechanism the parameter names, so that a loop of
 * system calls in an icount guest reads one hit's cost in instructions.
 *
 *   mode 1  kretprobe, the entry asks for no return probe
 *   mode 2  kretprobe, the return probed
 *   mode 3  fprobe with an exit handler, the entry asks for no exit
 *   mode 4  fprobe with an exit handler, the exit run
 *   mode 5  fprobe without an exit handler (an entry hook alone)
 */
#include <linux/fprobe.h>
#include <linux/kprobes.h>
#include <linux/module.h>

static int mode = 1;
module_param(mode, int, 0444);
MODULE_PARM_DESC(mode, "1-2: kretprobe without/with return; 3-4: fprobe without/with exit; 5: fprobe, no exit handler");
static char *func = "do_io_getevents";
module_param(func, charp, 0444);
MODULE_PARM_DESC(func, "the function probed");

static int krp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return mode == 2 ? 0 : 1;
}

static int krp_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return 0;
}

static struct kretprobe krp = {
	.entry_handler = krp_entry,
	.handler = krp_return,
	.data_size = 16,
};

/* upstream 6.14 moved fprobe's handlers from pt_regs to ftrace_regs (Kbuild) */
#ifdef RPC_FTRACE_REGS
#define rpc_regs ftrace_regs
#else
#define rpc_regs pt_regs
#endif

static int fp_entry(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
		    struct rpc_regs *regs, void *data)
{
	return mode == 4 ? 0 : 1;
}

static void fp_exit(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
		    struct rpc_regs *regs, void *data)
{
}

static struct fprobe fp = {
	.entry_handler = fp_entry,
	.exit_handler = fp_exit,
	.entry_data_size = 16,
};

static int __init retprobe_cost_init(void)
{
	if (mode < 1 || mode > 5)
		return -EINVAL;
	if (mode <= 2) {
		krp.kp.symbol_name = func;
		return register_kretprobe(&krp);
	}
	if (mode == 5)
		fp.exit_handler = NULL;
	return register_fprobe(&fp, func, NULL);
}

static void __exit retprobe_cost_exit(void)
{
	if (mode <= 2)
		unregister_kretprobe(&krp);
	else
		unregister_fprobe(&fp);
}

module_init(retprobe_cost_init);
module_exit(retprobe_cost_exit);
MODULE_DESCRIPTION("one return probe with empty handlers, for tools/retprobe-cost");
MODULE_LICENSE("GPL");
