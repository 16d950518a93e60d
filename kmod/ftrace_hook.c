// SPDX-License-Identifier: GPL-2.0
/*
 * ftrace_hook.c — function-entry hooks through one shared ftrace_ops.
 *
 * A kprobe at the entry of an ftrace-able function already goes through
 * ftrace, but through the kprobe core's shared ops: every register saved
 * (FTRACE_OPS_FL_SAVE_REGS), a lookup of the kprobe by address, the
 * current_kprobe bookkeeping.  An ftrace_ops of our own gets a trampoline
 * that saves only the argument registers (x86 has DYNAMIC_FTRACE_WITH_ARGS
 * on both 6.1 and 6.12) and calls the adapter below directly, which calls the
 * handler the kprobe would have, with the saved registers as its struct
 * pt_regs: handlers read only their arguments (regs_get_kernel_argument()),
 * which are filled.
 *
 * Every hook of a recording is in the one ops: its filter holds each hooked
 * function's ftrace location (its address), and the adapter finds the
 * handler by the traced function's address (ip) in a small hash table (no
 * lock, no allocation).  So START registers one
 * ops (one code update, one trampoline) and STOP unregisters it (one wait),
 * where an ops per hook cost one of each per hook.
 *
 * The ops leaves out FTRACE_OPS_FL_RECURSION (since 5.11 that flag asks
 * ftrace to guard the callback, through ftrace_ops_assist_func()), so ftrace
 * calls the adapter with no helper in between.  Nor does the adapter take
 * ftrace's recursion lock (ftrace_test_recursion_trylock(), ~20 instructions
 * a hit, a quarter of the adapter): the adapter cannot recurse in one context,
 * because no handler calls a hooked function (the filter holds only the
 * probed subsystems' functions: nvme-tcp's, nvmet's, aio's, io_uring's, ...;
 * the handlers call the ring writer, the clock and skb_copy_bits()), and a
 * hooked function that an interrupt runs in the middle of a handler nests
 * as an interrupt does into any hook, which the handlers allow (the ring
 * write disables interrupts; everything else they touch is per call or
 * written racily on purpose).  The adapter disables preemption (notrace),
 * as the ring writer expects, which makes the table lookup an RCU-sched
 * reader.  Not FTRACE_OPS_FL_RCU either: the hooked functions run where RCU
 * is watching.
 *
 * Changing the set (a module's hooks come and go with it):
 *  - the table is double-buffered: the spare copy is rewritten, published
 *    with rcu_assign_pointer(), and synchronize_rcu() waits for the adapters
 *    that may still read the old one.  After that no CPU runs a handler the
 *    new table does not have, and the old copy is free to be rewritten.
 *  - an address joins the table before the filter, and leaves the table
 *    (and the wait above ends) before it leaves the filter, so a call through
 *    the ops always finds its handler or, while a hook is leaving, nothing.
 *  - the filter is never empty while the ops is registered: an empty filter
 *    means every function.  The ops is registered when its first hook joins
 *    and unregistered before its last leaves.
 *  - hooks.c removes a module's addresses from its GOING notifier, before
 *    the module's text (and ftrace's records of it) are freed, so the filter
 *    never holds an address of freed text.
 * unregister_ftrace_function() returns once no CPU can be in the adapter
 * (or the ops' trampoline) any more.
 *
 * Callers serialize every call (hooks.c's hooks_lock); all may sleep.
 */
#include <linux/ftrace.h>
#include <linux/hash.h>
#include <linux/kprobes.h>
#include <linux/rcupdate.h>
#include <linux/log2.h>
#include <linux/string.h>

#include "nvmetrace.h"

#ifdef arch_ftrace_regs
/* 6.12 (and the stable kernels with the abstract struct ftrace_regs) */
#define fhook_pt_regs(fregs) (&arch_ftrace_regs(fregs)->regs)
#else
#define fhook_pt_regs(fregs) (&(fregs)->regs)
#endif

/*
 * The adapters' view: hooks in the ops by address, open addressing with
 * linear probing in twice as many slots as hooks can be (so a probe always
 * ends at an empty slot, ip 0, after one or two steps on average).  Built
 * whole and never changed while published.
 */
#define FHOOK_SLOT_BITS		(ilog2(NVMETRACE_FHOOKS_MAX) + 1)
#define FHOOK_SLOTS		(1u << FHOOK_SLOT_BITS)

struct fhook_table {
	struct {
		unsigned long ip;
		kprobe_pre_handler_t pre;
	} slot[FHOOK_SLOTS];
};

static struct fhook_table fhook_tables[2];
static struct fhook_table __rcu *fhook_live;	/* NULL: no hook */

/* The writers' view: hooks in the ops, in no order. */
static struct nvmetrace_fhook *fhook_set[NVMETRACE_FHOOKS_MAX];
static unsigned int fhook_nr;

static struct ftrace_ops fhook_ops;
static bool fhook_registered;	/* registered iff fhook_nr > 0 */

static void notrace fhook_entry(unsigned long ip, unsigned long parent_ip,
				struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	const struct fhook_table *t;
	unsigned int i;

	preempt_disable_notrace();
	t = rcu_dereference_sched(fhook_live);
	if (t) {
		for (i = hash_long(ip, FHOOK_SLOT_BITS); t->slot[i].ip;
		     i = (i + 1) & (FHOOK_SLOTS - 1)) {
			if (t->slot[i].ip == ip) {
				t->slot[i].pre(NULL, fhook_pt_regs(fregs));
				break;
			}
		}
	}
	preempt_enable_notrace();
}

/*
 * Publish the table of fhook_set (a hook's ip is never 0); once this
 * returns no adapter runs a handler of a hook that is not in the set.
 */
static void fhook_publish(void)
{
	struct fhook_table *t = rcu_access_pointer(fhook_live) == &fhook_tables[0] ?
				&fhook_tables[1] : &fhook_tables[0];
	unsigned int i, j;

	BUILD_BUG_ON(FHOOK_SLOTS < 2 * NVMETRACE_FHOOKS_MAX);
	memset(t, 0, sizeof(*t));
	for (i = 0; i < fhook_nr; i++) {
		const struct nvmetrace_fhook *fh = fhook_set[i];

		for (j = hash_long(fh->ip, FHOOK_SLOT_BITS); t->slot[j].ip;
		     j = (j + 1) & (FHOOK_SLOTS - 1))
			;
		t->slot[j].ip = fh->ip;
		t->slot[j].pre = fh->pre;
	}
	rcu_assign_pointer(fhook_live, fhook_nr ? t : NULL);
	/* unregistered: no adapter runs (unregister_ftrace_function() waited) */
	if (fhook_registered)
		synchronize_rcu();
}

static void fhook_ops_reset(void)
{
	ftrace_free_filter(&fhook_ops);
	memset(&fhook_ops, 0, sizeof(fhook_ops));
	fhook_ops.func = fhook_entry;
	fhook_ops.flags = 0;	/* no recursion guard: none is needed (see above) */
}

/*
 * Put fh[0..n) into the ops: each ->ip must be the function's ftrace
 * location, ->pre its handler.  All or none: 0, or an error of ftrace (none
 * was added).  Handlers may run from the moment this returns (and a little
 * before).
 */
int nvmetrace_fhooks_add(struct nvmetrace_fhook *const *fh, unsigned int n)
{
	unsigned long ips[NVMETRACE_FHOOKS_MAX];
	unsigned int i;
	int ret;

	if (!n)
		return 0;
	if (n > NVMETRACE_FHOOKS_MAX - fhook_nr)
		return -ENOSPC;
	if (!fhook_nr)
		fhook_ops_reset();	/* unregistered, empty filter */
	for (i = 0; i < n; i++) {
		ips[i] = fh[i]->ip;
		fhook_set[fhook_nr + i] = fh[i];
	}
	fhook_nr += n;
	fhook_publish();

	ret = ftrace_set_filter_ips(&fhook_ops, ips, n, 0, 0);
	if (ret)
		goto undo;	/* the filter is as it was */
	if (!fhook_registered) {
		/* the filter holds fh's addresses only: one code update */
		ret = register_ftrace_function(&fhook_ops);
		if (ret) {
			fhook_ops_reset();
			goto undo;
		}
		fhook_registered = true;
	}
	return 0;
undo:
	fhook_nr -= n;
	fhook_publish();
	return ret;
}

/*
 * Take fh[0..n) out of the ops.  Once this returns no CPU runs their
 * handlers and the filter holds none of their addresses.  0, or an error
 * of ftrace updating the filter: then every hook was dropped from the ops
 * (it is unregistered and its filter freed, so it cannot keep an address of
 * text about to be freed), and the caller must treat all as detached.
 */
int nvmetrace_fhooks_remove(struct nvmetrace_fhook *const *fh, unsigned int n)
{
	unsigned long ips[NVMETRACE_FHOOKS_MAX];
	unsigned int i, j, k = 0;
	int ret;

	for (i = 0; i < n; i++) {
		for (j = 0; j < fhook_nr && fhook_set[j] != fh[i]; j++)
			;
		if (j == fhook_nr)
			continue;	/* not in the ops */
		fhook_set[j] = fhook_set[--fhook_nr];
		ips[k++] = fh[i]->ip;
	}
	if (!k)
		return 0;
	if (!fhook_nr) {
		/* unregistered before the filter empties (it would trace everything) */
		nvmetrace_fhooks_clear();
		return 0;
	}
	fhook_publish();
	ret = ftrace_set_filter_ips(&fhook_ops, ips, k, 1, 0);
	if (ret)
		nvmetrace_fhooks_clear();
	return ret;
}

/* Unregister the ops and forget every hook in it (STOP). */
void nvmetrace_fhooks_clear(void)
{
	if (fhook_registered)
		unregister_ftrace_function(&fhook_ops);
	fhook_registered = false;
	fhook_nr = 0;
	RCU_INIT_POINTER(fhook_live, NULL);
	fhook_ops_reset();
}

/* Is fh in the ops? */
bool nvmetrace_fhook_in_ops(const struct nvmetrace_fhook *fh)
{
	unsigned int i;

	for (i = 0; i < fhook_nr; i++)
		if (fhook_set[i] == fh)
			return true;
	return false;
}
