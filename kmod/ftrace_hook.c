// SPDX-License-Identifier: GPL-2.0
/*
 * ftrace_hook.c — a function-entry hook through an ftrace_ops of its own.
 *
 * A kprobe at the entry of an ftrace-able function already goes through
 * ftrace, but through the kprobe core's shared ops: every register saved
 * (FTRACE_OPS_FL_SAVE_REGS), a lookup of the kprobe by address, the
 * current_kprobe bookkeeping.  An ftrace_ops filtered on that one function
 * gets a trampoline of its own that saves only the argument registers (x86
 * has DYNAMIC_FTRACE_WITH_ARGS on both 6.1 and 6.12) and calls the adapter
 * below directly, which calls the same handler the kprobe would have, with
 * the saved registers as its struct pt_regs: handlers read only their
 * arguments (regs_get_kernel_argument()), which are filled.
 *
 * The ops leaves out FTRACE_OPS_FL_RECURSION (since 5.11 that flag asks
 * ftrace to guard the callback, through ftrace_ops_assist_func()), so ftrace
 * calls the adapter with no helper in between; the adapter guards against
 * recursion itself with ftrace_test_recursion_trylock(), which also disables
 * preemption until the unlock (on 6.1 and 6.12 alike), as the ring writer
 * expects.  Not FTRACE_OPS_FL_RCU either: the hooked functions run where RCU
 * is watching.
 *
 * The filter is the function's name, as ftrace's own set_ftrace_filter
 * takes it.  unregister_ftrace_function() returns once no CPU can be in the
 * adapter any more.  The filter holds the function's address: it is freed
 * at detach, so an ops of a module that goes away never points at the
 * module's old text (hooks.c detaches from the module notifier's GOING).
 */
#include <linux/ftrace.h>
#include <linux/kallsyms.h>
#include <linux/kprobes.h>
#include <linux/string.h>

#include "nvmetrace.h"

#ifdef arch_ftrace_regs
/* 6.12 (and the stable kernels with the abstract struct ftrace_regs) */
#define fhook_pt_regs(fregs) (&arch_ftrace_regs(fregs)->regs)
#else
#define fhook_pt_regs(fregs) (&(fregs)->regs)
#endif

static void notrace fhook_entry(unsigned long ip, unsigned long parent_ip,
				struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	struct nvmetrace_fhook *fh = container_of(op, struct nvmetrace_fhook, ops);
	int bit;

	bit = ftrace_test_recursion_trylock(ip, parent_ip);
	if (bit < 0)
		return;
	fh->pre(NULL, fhook_pt_regs(fregs));
	ftrace_test_recursion_unlock(bit);
}

static void fhook_reset(struct nvmetrace_fhook *fh)
{
	ftrace_free_filter(&fh->ops);
	memset(&fh->ops, 0, sizeof(fh->ops));
}

/*
 * Attach pre at the entry of function name.  0, or -ENOENT: no ftrace-able
 * function of that name (absent, inlined, its module not loaded, or not
 * traceable), or another error of ftrace.
 */
int nvmetrace_fhook_attach(struct nvmetrace_fhook *fh, const char *name,
			   kprobe_pre_handler_t pre)
{
	char buf[KSYM_NAME_LEN];
	int len, ret;

	len = strscpy(buf, name, sizeof(buf));
	if (len < 0)
		return -ENAMETOOLONG;
	memset(&fh->ops, 0, sizeof(fh->ops));
	fh->pre = pre;
	fh->ops.func = fhook_entry;
	fh->ops.flags = 0;	/* the adapter guards recursion (see above) */
	/* -EINVAL: the name matched no ftrace-able function */
	ret = ftrace_set_filter(&fh->ops, buf, len, 1);
	if (ret) {
		fhook_reset(fh);
		return ret == -EINVAL ? -ENOENT : ret;
	}
	ret = register_ftrace_function(&fh->ops);
	if (ret) {
		fhook_reset(fh);
		return ret;
	}
	fh->attached = true;
	return 0;
}

/* No CPU runs the handler once this returns. */
void nvmetrace_fhook_detach(struct nvmetrace_fhook *fh)
{
	if (!fh->attached)
		return;
	unregister_ftrace_function(&fh->ops);
	fhook_reset(fh);
	fh->attached = false;
}
