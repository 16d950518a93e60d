// SPDX-License-Identifier: GPL-2.0
/*
 * hooks.c — the attach core: where nvmetrace attaches to the kernel.
 *
 * Hooks are tracepoints found by name (built-in ones with
 * for_each_kernel_tracepoint(), ones in nvme-core and nvmet through the
 * tracepoint module notifier, which also replays modules already loaded) and
 * function-entry hooks (all in one shared ftrace_ops, ftrace_hook.c, else a
 * kprobe each; re-armed by a module notifier when their module comes back).
 * Nothing needs to be exported by the kernel and the load order
 * of nvme-core, nvmet and nvmetrace does not matter.
 *
 * What each hook records is in the probe files, one per probed subsystem
 * (probes/, sharing probes/probe.h); each brings its rows of the hook
 * table as a struct nvmetrace_hook_group.  At load this file gathers every
 * group's rows, in the order of hook_groups[] below, into hooks[], which
 * START, STOP, the notifiers and the hook dump walk; the hot path never does
 * (a tracepoint or kprobe calls its handler directly, the shared ftrace_ops
 * finds its handler by address in ftrace_hook.c's hash).
 *
 * Hooks are registered at START and removed at STOP, so an idle nvmetrace
 * costs nothing on the I/O path.  The configuration (struct
 * nvmetrace_config) is written only while no hook is registered and read
 * without locks by the hooks.
 *
 * Every hook decides on its own whether its command is sampled: the predicate
 * is a hash of the command's starting LBA (in namespace blocks), which host
 * and target both know, so both sides sample the same commands with no
 * per-command state in the kernel.  A sampled hook writes one record into its
 * CPU's ring; user space joins records into commands.
 */
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
#include <net/genetlink.h>

#include "nvmetrace.h"
#include "probes/probe.h"

/* ------------------------------------------------------- configuration */

struct nvmetrace_config nvmetrace_cfg;
u64 nvmetrace_sample_threshold;
bool nvmetrace_emitting;

/*
 * The probes' one way into the ring (probes/probe.h).  notrace: it runs
 * inside hooks, where the function tracer would only add to their cost.
 */
notrace noinline u64 nvmetrace_emit(u16 event, u64 lba, u32 dev, u32 len,
				    u16 qid, u16 cid, u16 tag, u16 cntlid,
				    u8 opcode, u8 flags, u64 aux)
{
	unsigned long irqflags;
	struct nvmetrace_rec *r;
	u64 ts;

	if (unlikely(!READ_ONCE(nvmetrace_emitting)))
		return 0;
	r = nvmetrace_ring_local_reserve(&irqflags);
	if (!r)
		return 0;	/* ring full: counted in its lost counter */
	/* taken inside the reserve, so a ring's records are in time order */
	ts = ktime_get_ns();
	r->ts = ts;
	r->lba = lba;
	r->aux = aux;
	r->dev = dev;
	r->len = len;
	r->event = event;
	r->qid = qid;
	r->cid = cid;
	r->tag = tag;
	r->cntlid = cntlid;
	r->opcode = opcode;
	r->flags = flags;
	nvmetrace_ring_local_commit(r, irqflags);
	return ts;
}

/* Serializes START/STOP against each other and against module notifiers. */
static DEFINE_MUTEX(hooks_lock);
static bool recording;

/* ------------------------------------------------------------ the table */

/* the probe_test_symbol kprobe: records nothing */
static int kp_test_noop(struct kprobe *kp, struct pt_regs *regs)
{
	return 0;
}

static struct nvmetrace_hook test_hooks[] = {
	/* probe_test_symbol: named at load, or unused (name NULL) */
	{ NULL, NULL, NVMETRACE_HOOK_KPROBE,
	  NVMETRACE_ROLE_HOST | NVMETRACE_ROLE_TARGET, NULL, kp_test_noop },
};

static struct nvmetrace_hook_group test_group = {
	.rows = test_hooks,
	.nr = ARRAY_SIZE(test_hooks),
};

/* Every group, in the order of the hook dump (`nvmetrace probe` lists it). */
static struct nvmetrace_hook_group *const hook_groups[] = {
	&nvmetrace_blk_hooks,
	&nvmetrace_nvme_hooks,
	&nvmetrace_nvmet_hooks,
	&nvmetrace_aio_hooks,
	&nvmetrace_uring_hooks,
	&nvmetrace_nvme_tcp_hooks,
	&nvmetrace_nvme_rdma_hooks,
	&nvmetrace_nvmet_rdma_hooks,
	&nvmetrace_nvmet_tcp_hooks,
	&test_group,			/* last */
};

/*
 * Every row of every group, gathered at load (nvmetrace_hooks_init()) and
 * ended by a NULL; at most one shared ftrace_ops' worth, so a set of
 * function-entry hooks always fits in it.
 */
#define NVMETRACE_HOOKS_MAX	NVMETRACE_FHOOKS_MAX
static struct nvmetrace_hook *hooks[NVMETRACE_HOOKS_MAX + 1];
static unsigned int nr_hooks;

/*
 * An extra kprobe on any kernel function, for testing how `nvmetrace probe`
 * reports a hook that cannot attach (name a function that does not exist).
 * It records nothing.
 */
static char *probe_test_symbol;
module_param(probe_test_symbol, charp, 0444);
MODULE_PARM_DESC(probe_test_symbol,
		 "extra kprobe that records nothing, to test attach reporting");

/*
 * Every function-entry hook as a kprobe of its own, the path a function
 * that ftrace cannot attach to takes: for testing that path on a kernel
 * where ftrace attaches to them all (tests/guest/scenarios/17-kprobe-fallback.sh).
 */
static bool hook_kprobes;
module_param(hook_kprobes, bool, 0444);
MODULE_PARM_DESC(hook_kprobes,
		 "attach every function-entry hook as a kprobe, not through ftrace (testing)");

/*
 * Only the hooks named here (comma-separated) attach, for measuring what
 * one hook site costs (tools/bench's rec...@HOOK cases): unset, every hook a
 * recording's roles and layouts call for attaches.  Read at START, under
 * hooks_lock; 0444, so it cannot change while a recording reads it.
 */
static char *bench_hooks;
module_param(bench_hooks, charp, 0444);
MODULE_PARM_DESC(bench_hooks,
		 "attach only these hooks (comma-separated names), to measure one hook's cost (benchmarks)");

/*
 * Attached hooks run handlers that do nothing (and a kretprobe's entry asks
 * for no return probe, as it does while nothing sampled is in flight), so a
 * benchmark reads what the attach mechanism alone costs beside the full
 * handlers (tools/bench's rec...-nop cases).  Not for recording: nothing is
 * emitted.  A tracepoint's no-op takes only the probe's data argument, as
 * every x86-64 caller passes it first; a kernel with kCFI would refuse the
 * call, and Debian's are built without it.
 */
static bool bench_nop;
module_param(bench_nop, bool, 0444);
MODULE_PARM_DESC(bench_nop,
		 "hooks attach with handlers that do nothing, to measure the attach mechanism (benchmarks)");

static void nop_tp_probe(void *data)
{
}

static int nop_pre(struct kprobe *kp, struct pt_regs *regs)
{
	return 0;
}

static int nop_ret_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return 1;	/* no return probe */
}

static int nop_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return 0;
}

/* h's handlers as attached: its own, or bench_nop's (constant while loaded) */
static void *hook_tp_probe(const struct nvmetrace_hook *h)
{
	return bench_nop ? (void *)nop_tp_probe : h->probe;
}

static kprobe_pre_handler_t hook_pre(const struct nvmetrace_hook *h)
{
	return bench_nop ? nop_pre : h->pre;
}

/* whether bench_hooks lets the hook named name attach */
static bool bench_hook_allowed(const char *name)
{
	const char *p = bench_hooks;
	size_t len = strlen(name);

	if (!p || !*p)
		return true;
	while (*p) {
		const char *end = strchrnul(p, ',');

		if ((size_t)(end - p) == len && !strncmp(p, name, len))
			return true;
		p = *end ? end + 1 : end;
	}
	return false;
}

/* The layout groups START carried (NEEDS_* bits). */
static u32 layout_have(void)
{
	const struct nvmetrace_layout *l = &nvmetrace_cfg.layout;

	return (l->valid ? NEEDS_NVMET : 0) |
	       (l->tcp.valid ? NEEDS_TCP_HOST : 0) |
	       (l->rdma.valid ? NEEDS_RDMA_HOST : 0) |
	       (l->tcpt.valid && l->valid ? NEEDS_TCP_TARGET : 0) |
	       (l->rdmat.valid ? NEEDS_RDMA_TARGET : 0);
}

/*
 * The modules whose private layout START (or LAYOUT) carries, in enum
 * nvmetrace_lmod order: own is the NEEDS_* bit of the module's group, needs
 * the hooks that read it (the target transports read nvmet's fields as
 * well), role the role whose hooks are in it.
 */
static const struct {
	const char *name;
	u32 own, needs, role;
} lmods[NVMETRACE_LMOD_NR] = {
	[NVMETRACE_LMOD_NVMET]		= { "nvmet", NEEDS_NVMET,
					    NEEDS_NVMET | NEEDS_TCP_TARGET | NEEDS_RDMA_TARGET,
					    NVMETRACE_ROLE_TARGET },
	[NVMETRACE_LMOD_NVME_TCP]	= { "nvme_tcp", NEEDS_TCP_HOST, NEEDS_TCP_HOST,
					    NVMETRACE_ROLE_HOST },
	[NVMETRACE_LMOD_NVMET_TCP]	= { "nvmet_tcp", NEEDS_TCP_TARGET, NEEDS_TCP_TARGET,
					    NVMETRACE_ROLE_TARGET },
	[NVMETRACE_LMOD_NVME_RDMA]	= { "nvme_rdma", NEEDS_RDMA_HOST, NEEDS_RDMA_HOST,
					    NVMETRACE_ROLE_HOST },
	[NVMETRACE_LMOD_NVMET_RDMA]	= { "nvmet_rdma", NEEDS_RDMA_TARGET, NEEDS_RDMA_TARGET,
					    NVMETRACE_ROLE_TARGET },
};

/*
 * The modules of lmods[] whose layout no longer holds: loaded again during
 * the recording with BTF other than START's (or no identity to tell).
 * Under hooks_lock; cleared by START, set again at each load, cleared by a
 * LAYOUT that gives the new module's.
 */
static bool lmod_stale[NVMETRACE_LMOD_NR];

/*
 * The identity of each module of lmods[] loaded since START, taken while it
 * was COMING and forgotten when it goes: what LAYOUT's groups are checked
 * against.  Unknown for a module loaded before START.  Under hooks_lock.
 */
static struct nvmetrace_layout_id lmod_loaded[NVMETRACE_LMOD_NR];

/* The identity of a module being loaded (MODULE_STATE_COMING only). */
static struct nvmetrace_layout_id coming_layout_id(const struct module *mod)
{
	struct nvmetrace_layout_id id = { .known = false };

#ifdef CONFIG_DEBUG_INFO_BTF_MODULES
	/*
	 * .BTF is not kept after the module's init: the loader clears
	 * btf_data once the module is live, and the memory goes before.
	 */
	if (mod->btf_data && mod->btf_data_size) {
		id.crc = nvmetrace_crc32c(mod->btf_data, mod->btf_data_size);
		id.known = true;
	}
#endif
	return id;
}

/*
 * hooks_lock held, process context: a module is being loaded while
 * recording.  If START carried its layout, the hooks that read it keep
 * working only if it is the same module (the same BTF) as START's.
 */
static void layout_module_coming(const struct module *mod)
{
	int i;

	for (i = 0; i < NVMETRACE_LMOD_NR; i++) {
		if (strcmp(lmods[i].name, mod->name))
			continue;
		lmod_loaded[i] = coming_layout_id(mod);
		if (layout_have() & lmods[i].own)
			lmod_stale[i] = !nvmetrace_layout_id_match(&nvmetrace_cfg.layout.id[i],
								   &lmod_loaded[i]);
	}
}

/* hooks_lock held: a module of lmods[] goes; LAYOUT no longer takes its layout */
static void layout_module_going(const struct module *mod)
{
	int i;

	for (i = 0; i < NVMETRACE_LMOD_NR; i++)
		if (!strcmp(lmods[i].name, mod->name))
			lmod_loaded[i].known = false;
}

/* hooks_lock held: whether h reads a layout that no longer holds */
static bool hook_stale(struct nvmetrace_hook *h)
{
	u32 stale = 0;
	int i;

	for (i = 0; i < NVMETRACE_LMOD_NR; i++)
		if (lmod_stale[i])
			stale |= lmods[i].needs;
	if (!(h->needs & stale))
		return false;
	h->state = NVMETRACE_HOOK_STALE;
	h->err = -ESTALE;
	return true;
}

static bool hook_wanted(const struct nvmetrace_hook *h)
{
	return recording && h->name && (h->role & nvmetrace_cfg.role) &&
	       (h->needs & layout_have()) == h->needs && bench_hook_allowed(h->name);
}

/* hooks_lock held */
static void tp_attach(struct nvmetrace_hook *h, struct tracepoint *tp)
{
	int ret;

	if (h->state == NVMETRACE_HOOK_ATTACHED)
		return;
	ret = tracepoint_probe_register(tp, hook_tp_probe(h), NULL);
	if (ret) {
		h->state = NVMETRACE_HOOK_FAILED;
		h->err = ret;
		return;
	}
	h->tp = tp;
	h->state = NVMETRACE_HOOK_ATTACHED;
	h->err = 0;
}

/* hooks_lock held */
static void tp_detach(struct nvmetrace_hook *h)
{
	if (h->state == NVMETRACE_HOOK_ATTACHED)
		tracepoint_probe_unregister(h->tp, hook_tp_probe(h), NULL);
	h->tp = NULL;
}

static void match_builtin_tp(struct tracepoint *tp, void *priv)
{
	struct nvmetrace_hook *h = priv;

	if (!strcmp(tp->name, h->name))
		tp_attach(h, tp);
}

/* hooks_lock held: the kprobe (or kretprobe) of h could not be registered */
static void kp_failed(struct nvmetrace_hook *h, int ret)
{
	/*
	 * -ENOENT: no such function: in a module, the module is not loaded (it
	 * is retried when it is) or the function was inlined; built in, this
	 * kernel does not have it.
	 */
	if (ret == -ENOENT)
		h->state = h->module ? NVMETRACE_HOOK_WAITING : NVMETRACE_HOOK_ABSENT;
	else
		h->state = NVMETRACE_HOOK_FAILED;
	h->err = ret;
}

static void kp_attached(struct nvmetrace_hook *h, u32 used)
{
	h->used = used;
	h->state = NVMETRACE_HOOK_ATTACHED;
	h->err = 0;
}

/* hooks_lock held: h through a kprobe (a kretprobe) of its own */
static void kp_register(struct nvmetrace_hook *h)
{
	int ret;

	if (h->ret) {
		memset(&h->krp, 0, sizeof(h->krp));
		h->krp.kp.symbol_name = h->name;
		h->krp.entry_handler = bench_nop ? nop_ret_entry : h->ret_entry;
		h->krp.handler = bench_nop ? nop_ret : h->ret;
		h->krp.data_size = h->ret_data;
		h->krp.maxactive = h->ret_maxactive;
		ret = register_kretprobe(&h->krp);
	} else {
		memset(&h->kp, 0, sizeof(h->kp));
		h->kp.symbol_name = h->name;
		h->kp.pre_handler = hook_pre(h);
		ret = register_kprobe(&h->kp);
	}
	if (ret)
		kp_failed(h, ret);
	else
		kp_attached(h, NVMETRACE_HOOK_KPROBE);
}

/* hooks_lock held: h's kprobe, registered disabled, becomes its hook */
static void kp_enable(struct nvmetrace_hook *h)
{
	int ret = enable_kprobe(&h->kp);

	if (ret) {
		unregister_kprobe(&h->kp);
		kp_failed(h, ret);
		return;
	}
	kp_attached(h, NVMETRACE_HOOK_KPROBE);
}

/* scratch of kp_attach_set()/kp_detach_set(), under hooks_lock */
static struct nvmetrace_hook *set_hooks[NVMETRACE_HOOKS_MAX];
static struct nvmetrace_fhook *set_fhooks[NVMETRACE_HOOKS_MAX];
static struct kprobe *set_kprobes[NVMETRACE_HOOKS_MAX];

/*
 * hooks_lock held: attach the function-entry hooks hs[0..n) (kinds FTRACE
 * and KPROBE) that are not attached.
 *
 * A hook of kind FTRACE first registers its kprobe disabled, which patches
 * nothing: the kprobe core finds the function by name (as it would for the
 * kprobe fallback) and, with KPROBE_FLAG_FTRACE, tells that its address is
 * the function's ftrace location.  Those hooks join the shared ftrace_ops
 * together (one filter update; the first also registers the ops), and their
 * kprobes are unregistered together (one RCU grace period).  A function
 * ftrace cannot attach to (or an ops ftrace refuses) keeps its kprobe,
 * enabled: the kprobe fallback.
 */
static void kp_attach_set(struct nvmetrace_hook **hs, unsigned int n)
{
	unsigned int i, nf = 0, nk = 0;
	struct nvmetrace_hook *h;
	int ret;

	for (i = 0; i < n; i++) {
		h = hs[i];
		if (h->state == NVMETRACE_HOOK_ATTACHED)
			continue;
		if (h->kind != NVMETRACE_HOOK_FTRACE || h->ret) {
			kp_register(h);
			continue;
		}
		memset(&h->kp, 0, sizeof(h->kp));
		h->kp.symbol_name = h->name;
		h->kp.pre_handler = hook_pre(h);
		h->kp.flags = KPROBE_FLAG_DISABLED;
		ret = register_kprobe(&h->kp);
		if (ret) {
			kp_failed(h, ret);
			continue;
		}
		if (!(h->kp.flags & KPROBE_FLAG_FTRACE) || hook_kprobes) {
			/* not ftrace-able here (or told so): the kprobe is tried instead */
			kp_enable(h);
			continue;
		}
		h->fh.ip = (unsigned long)h->kp.addr;
		h->fh.pre = hook_pre(h);
		set_hooks[nf] = h;
		set_fhooks[nf++] = &h->fh;
	}
	if (!nf)
		return;
	ret = nvmetrace_fhooks_add(set_fhooks, nf);
	for (i = 0; i < nf; i++) {
		h = set_hooks[i];
		if (ret) {
			/* ftrace refused: the kprobe is tried instead */
			kp_enable(h);
			continue;
		}
		kp_attached(h, NVMETRACE_HOOK_FTRACE);
		set_kprobes[nk++] = &h->kp;
	}
	unregister_kprobes(set_kprobes, nk);
}

/* scratch of fn_attach(), under hooks_lock */
static struct nvmetrace_hook *alt_hooks[NVMETRACE_HOOKS_MAX];

/* hooks_lock held: whether every row h stands in for is attached */
static bool standin_spare(const struct nvmetrace_hook *h)
{
	const struct nvmetrace_hook *o, **op;

	for (op = (const struct nvmetrace_hook **)hooks; (o = *op); op++)
		if (o != h && o->alt == h->alt && !o->standin &&
		    o->state != NVMETRACE_HOOK_ATTACHED)
			return false;
	return true;
}

/*
 * hooks_lock held: attach the function-entry hooks hs[0..n) as
 * kp_attach_set() does, stand-ins last: a stand-in attaches only if a row it
 * stands in for did not (else it is SPARE, and costs nothing), and once it
 * has, the rows whose function was not found (while the stand-in's, in the
 * same module, was) are INLINED in this kernel rather than WAITING for it.
 */
static void fn_attach(struct nvmetrace_hook **hs, unsigned int n)
{
	unsigned int i, j, na = 0, nw = 0;
	struct nvmetrace_hook *h, *o, **op;

	for (i = 0; i < n; i++) {
		if (hs[i]->standin)
			alt_hooks[na++] = hs[i];
		else
			hs[nw++] = hs[i];
	}
	kp_attach_set(hs, nw);
	for (i = 0, j = 0; i < na; i++) {
		h = alt_hooks[i];
		if (standin_spare(h))
			h->state = NVMETRACE_HOOK_SPARE;
		else
			alt_hooks[j++] = h;
	}
	kp_attach_set(alt_hooks, j);
	for (i = 0; i < j; i++) {
		h = alt_hooks[i];
		if (h->state != NVMETRACE_HOOK_ATTACHED)
			continue;
		for (op = hooks; (o = *op); op++)
			if (o->alt == h->alt && !o->standin && o->err == -ENOENT &&
			    o->state == NVMETRACE_HOOK_WAITING)
				o->state = NVMETRACE_HOOK_INLINED;
	}
}

/*
 * hooks_lock held: ftrace could not update the shared ops' filter and
 * dropped every hook from it (nvmetrace_fhooks_remove()).
 */
static void fhooks_lost(int err)
{
	struct nvmetrace_hook *h, **hp;

	for (hp = hooks; (h = *hp); hp++) {
		if (h->state == NVMETRACE_HOOK_ATTACHED &&
		    h->used == NVMETRACE_HOOK_FTRACE && !nvmetrace_fhook_in_ops(&h->fh)) {
			h->state = NVMETRACE_HOOK_FAILED;
			h->err = err;
		}
	}
}

/*
 * hooks_lock held: detach the function-entry hooks hs[0..n) that are
 * attached (the ftrace ones in one update of the shared ops).  Their state
 * is the caller's to set.  No handler of theirs runs once this returns.
 */
static void kp_detach_set(struct nvmetrace_hook **hs, unsigned int n)
{
	unsigned int i, nf = 0;
	struct nvmetrace_hook *h;
	int ret;

	for (i = 0; i < n; i++) {
		h = hs[i];
		if (h->state != NVMETRACE_HOOK_ATTACHED)
			continue;
		if (h->used == NVMETRACE_HOOK_FTRACE)
			set_fhooks[nf++] = &h->fh;
		else if (h->ret)
			unregister_kretprobe(&h->krp);
		else
			unregister_kprobe(&h->kp);
	}
	ret = nvmetrace_fhooks_remove(set_fhooks, nf);
	if (ret)
		fhooks_lost(ret);
}

/*
 * A module with tracepoints comes or goes.  Called with the tracepoint
 * module list mutex held; replayed for loaded modules when the notifier is
 * registered.  A module's tracepoints must have no probes left when it goes
 * (the tracepoint core checks), so detach them here.
 */
static int tp_module_notify(struct notifier_block *nb, unsigned long val,
			    void *data)
{
	struct tp_module *tp_mod = data;
	struct module *mod = tp_mod->mod;
	struct nvmetrace_hook *h, **hp;
	unsigned int i;

	mutex_lock(&hooks_lock);
	for (hp = hooks; (h = *hp); hp++) {
		if (h->kind != NVMETRACE_HOOK_TRACEPOINT || !h->module ||
		    strcmp(h->module, mod->name))
			continue;
		if (val == MODULE_STATE_COMING && hook_wanted(h)) {
			if (hook_stale(h))
				continue;
			for (i = 0; i < mod->num_tracepoints; i++) {
				struct tracepoint *tp =
					tracepoint_ptr_deref(&mod->tracepoints_ptrs[i]);

				if (!strcmp(tp->name, h->name))
					tp_attach(h, tp);
			}
		} else if (val == MODULE_STATE_GOING) {
			tp_detach(h);
			h->state = hook_wanted(h) ? NVMETRACE_HOOK_WAITING :
						    NVMETRACE_HOOK_DETACHED;
		}
	}
	mutex_unlock(&hooks_lock);
	return NOTIFY_OK;
}

static struct notifier_block tp_module_nb = {
	.notifier_call = tp_module_notify,
};

/* callers' lists for kp_attach_set()/kp_detach_set(), under hooks_lock */
static struct nvmetrace_hook *fn_hooks[NVMETRACE_HOOKS_MAX];

/*
 * Function-entry hooks in a module: attach them once the module is live,
 * detach them when it goes, before its text is freed (the kprobe core marks
 * its kprobes gone; unregistering releases our side; the shared ftrace_ops'
 * filter lets go of the module's addresses).  Registered before START
 * attaches anything and unregistered after STOP has detached everything, so
 * no module goes away unseen while a hook of it is attached.
 *
 * While the module is COMING its BTF is still there: a module whose layout
 * START carried is compared with START's identity of it, and the hooks that
 * read a layout that no longer holds stay off (NVMETRACE_HOOK_STALE) when
 * their module goes live, or their tracepoints' module comes.  This notifier
 * runs before the tracepoint core's (module_nb's priority), so that holds
 * for nvmet's tracepoints too.
 */
static int module_notify(struct notifier_block *nb, unsigned long val, void *data)
{
	struct module *mod = data;
	struct nvmetrace_hook *h, **hp;
	unsigned int i, n = 0;

	if (val == MODULE_STATE_COMING) {
		mutex_lock(&hooks_lock);
		if (recording)
			layout_module_coming(mod);
		mutex_unlock(&hooks_lock);
		return NOTIFY_OK;
	}
	if (val != MODULE_STATE_LIVE && val != MODULE_STATE_GOING)
		return NOTIFY_DONE;
	mutex_lock(&hooks_lock);
	if (val == MODULE_STATE_GOING && recording)
		layout_module_going(mod);
	for (hp = hooks; (h = *hp); hp++) {
		if (h->kind == NVMETRACE_HOOK_TRACEPOINT || !h->module ||
		    strcmp(h->module, mod->name) || !hook_wanted(h))
			continue;
		if (val == MODULE_STATE_LIVE && hook_stale(h))
			continue;
		fn_hooks[n++] = h;
	}
	if (val == MODULE_STATE_LIVE) {
		fn_attach(fn_hooks, n);
	} else {
		kp_detach_set(fn_hooks, n);
		for (i = 0; i < n; i++)
			fn_hooks[i]->state = NVMETRACE_HOOK_WAITING;
	}
	mutex_unlock(&hooks_lock);
	return NOTIFY_OK;
}

static struct notifier_block module_nb = {
	.notifier_call = module_notify,
	/* before the tracepoint core's module notifier (priority 0) */
	.priority = 1,
};

/* ------------------------------------------------------------ start/stop */

/* ctl_lock held, nothing recording (see nvmetrace.h) */
int nvmetrace_hooks_start(const struct nvmetrace_config *c,
			  struct netlink_ext_ack *extack)
{
	struct nvmetrace_hook *h, **hp;
	unsigned int i, n = 0;
	bool busy;
	int ret;

	ret = nvmetrace_layout_check(c, extack);
	if (ret)
		return ret;

	mutex_lock(&hooks_lock);
	busy = recording;
	mutex_unlock(&hooks_lock);
	if (busy) {
		NL_SET_ERR_MSG(extack, "already recording");
		return -EBUSY;
	}
	/* before anything attaches (see module_notify()) */
	ret = register_module_notifier(&module_nb);
	if (ret) {
		NL_SET_ERR_MSG(extack, "cannot register module notifiers");
		return ret;
	}

	mutex_lock(&hooks_lock);
	/*
	 * no hook runs: the rings forget the last recording's open drop runs
	 * (its recorder took them from the control pages), and each probe
	 * file forgets the last recording's state
	 */
	nvmetrace_rings_forget_gaps();
	for (i = 0; i < ARRAY_SIZE(hook_groups); i++)
		if (hook_groups[i]->reset)
			hook_groups[i]->reset();
	nvmetrace_cfg = *c;
	if (!nvmetrace_cfg.dev_filter)
		nvmetrace_cfg.nr_devs = NVMETRACE_DEVS_ANY;
	memset(lmod_stale, 0, sizeof(lmod_stale));
	memset(lmod_loaded, 0, sizeof(lmod_loaded));
	nvmetrace_sample_threshold = div64_u64(U64_MAX, nvmetrace_cfg.sample);
	if (nvmetrace_cfg.sample == 1)
		nvmetrace_sample_threshold = U64_MAX;
	recording = true;

	for (hp = hooks; (h = *hp); hp++) {
		h->state = NVMETRACE_HOOK_DETACHED;
		h->err = 0;
		if ((h->role & nvmetrace_cfg.role) && (h->needs & layout_have()) != h->needs) {
			/* its private layout is unknown: refused, never guessed */
			h->state = NVMETRACE_HOOK_FAILED;
			h->err = -ENODATA;
			continue;
		}
		if (!hook_wanted(h))
			continue;
		if (h->kind != NVMETRACE_HOOK_TRACEPOINT) {
			fn_hooks[n++] = h;
		} else if (!h->module) {
			for_each_kernel_tracepoint(match_builtin_tp, h);
			if (h->state == NVMETRACE_HOOK_DETACHED)
				h->state = NVMETRACE_HOOK_ABSENT;
		} else {
			h->state = NVMETRACE_HOOK_WAITING;
		}
	}
	/* the ftrace ones through one registration of the shared ops */
	fn_attach(fn_hooks, n);
	for (i = 0; i < ARRAY_SIZE(hook_groups); i++)
		if (hook_groups[i]->attached)
			hook_groups[i]->attached();
	mutex_unlock(&hooks_lock);

	/* replays COMING for loaded modules: attaches nvme_core/nvmet hooks */
	ret = register_tracepoint_module_notifier(&tp_module_nb);
	if (ret) {
		NL_SET_ERR_MSG(extack, "cannot register module notifiers");
		nvmetrace_hooks_stop();
		return ret;
	}
	WRITE_ONCE(nvmetrace_emitting, true);
	return 0;
}

/*
 * ADMIT: the hooks read devs[] without a lock (host_dev_wanted()), so the
 * entry is written first and nr_devs grows after it, with release.  Entries
 * are never changed or removed while the recording lasts.
 */
int nvmetrace_hooks_admit(u32 dev)
{
	u32 i, n = nvmetrace_cfg.nr_devs;

	lockdep_assert_held(&nvmetrace_dev.ctl_lock);
	for (i = 0; i < n; i++)
		if (nvmetrace_cfg.devs[i] == dev)
			return 0;
	if (n == NVMETRACE_MAX_DEVS)
		return -ENOSPC;
	WRITE_ONCE(nvmetrace_cfg.devs[n], dev);
	/* pairs with host_dev_wanted()'s acquire: the entry before the count */
	smp_store_release(&nvmetrace_cfg.nr_devs, n + 1);
	return 0;
}

/* a transport module i's group (and identity) of src into l */
static void layout_group_copy(struct nvmetrace_layout *l,
			      const struct nvmetrace_layout *src, int i)
{
	switch (i) {
	case NVMETRACE_LMOD_NVME_TCP:
		l->tcp = src->tcp;
		break;
	case NVMETRACE_LMOD_NVMET_TCP:
		l->tcpt = src->tcpt;
		break;
	case NVMETRACE_LMOD_NVME_RDMA:
		l->rdma = src->rdma;
		break;
	case NVMETRACE_LMOD_NVMET_RDMA:
		l->rdmat = src->rdmat;
		break;
	}
	l->id[i] = src->id[i];
}

/* scratch of nvmetrace_hooks_layout(), under hooks_lock */
static struct nvmetrace_layout layout_next;

/*
 * LAYOUT.  A group is taken only while no hook reads it: START did not carry
 * it, or its module was loaded again with other BTF (stale), so its hooks are
 * off; they attach once it is in place, as a load would attach them.  The
 * hooks of the other groups keep running and never read these fields.
 */
int nvmetrace_hooks_layout(const struct nvmetrace_layout *given,
			   struct netlink_ext_ack *extack)
{
	struct nvmetrace_hook *h, **hp;
	unsigned int n = 0;
	u32 take = 0;
	int i, ret = 0;

	lockdep_assert_held(&nvmetrace_dev.ctl_lock);
	if (given->valid || given->vmlinux.valid) {
		NL_SET_ERR_MSG(extack, "nvmet's and the kernel's layouts are START's only");
		return -EINVAL;
	}
	mutex_lock(&hooks_lock);
	layout_next = nvmetrace_cfg.layout;
	for (i = 0; i < NVMETRACE_LMOD_NR; i++) {
		if (!nvmetrace_layout_has(given, i))
			continue;
		if (!given->id[i].known) {
			NL_SET_ERR_MSG(extack,
				       "a layout given while recording needs its module's BTF identity (NVMETRACE_L_BTF_*)");
			ret = -EINVAL;
			goto out;
		}
		if (!(lmods[i].role & nvmetrace_cfg.role)) {
			NL_SET_ERR_MSG(extack, "a layout of a role this recording does not have");
			ret = -EINVAL;
			goto out;
		}
		if ((layout_have() & lmods[i].own) && !lmod_stale[i]) {
			if (nvmetrace_layout_id_match(&nvmetrace_cfg.layout.id[i], &given->id[i]))
				continue;	/* the one the hooks read */
			NL_SET_ERR_MSG(extack, "the module's hooks run with another layout");
			ret = -EBUSY;
			goto out;
		}
		if (!nvmetrace_layout_id_match(&lmod_loaded[i], &given->id[i])) {
			NL_SET_ERR_MSG(extack,
				       "not the BTF of the module loaded since the recording started");
			ret = -ESTALE;
			goto out;
		}
		layout_group_copy(&layout_next, given, i);
		take |= BIT(i);
	}
	ret = nvmetrace_layout_check_groups(&layout_next, extack);
	if (ret || !take)
		goto out;
	for (i = 0; i < NVMETRACE_LMOD_NR; i++) {
		if (!(take & BIT(i)))
			continue;
		/* no hook reads the group: the copy races with nothing */
		layout_group_copy(&nvmetrace_cfg.layout, given, i);
		lmod_stale[i] = false;
	}
	for (hp = hooks; (h = *hp); hp++) {
		if (h->kind == NVMETRACE_HOOK_TRACEPOINT || !h->module || !hook_wanted(h))
			continue;
		for (i = 0; i < NVMETRACE_LMOD_NR; i++)
			if ((take & BIT(i)) && !strcmp(h->module, lmods[i].name))
				break;
		if (i == NVMETRACE_LMOD_NR)
			continue;
		h->state = NVMETRACE_HOOK_WAITING;
		h->err = 0;
		fn_hooks[n++] = h;
	}
	/* the module is loaded (COMING or LIVE): as module_notify() attaches */
	fn_attach(fn_hooks, n);
out:
	mutex_unlock(&hooks_lock);
	return ret;
}

u32 nvmetrace_hooks_nr_devs(void)
{
	return nvmetrace_cfg.nr_devs;
}

u32 nvmetrace_hooks_dev(u32 i)
{
	return nvmetrace_cfg.devs[i];
}

void nvmetrace_hooks_stop(void)
{
	struct nvmetrace_hook *h, **hp;
	unsigned int n = 0;
	bool was;

	WRITE_ONCE(nvmetrace_emitting, false);
	/* replays GOING for loaded modules: detaches nvme_core/nvmet hooks */
	unregister_tracepoint_module_notifier(&tp_module_nb);

	mutex_lock(&hooks_lock);
	was = recording;
	if (recording) {
		/* every ftrace hook at once: one unregistration */
		nvmetrace_fhooks_clear();
		for (hp = hooks; (h = *hp); hp++) {
			if (h->kind == NVMETRACE_HOOK_TRACEPOINT)
				tp_detach(h);
			else if (h->state == NVMETRACE_HOOK_ATTACHED &&
				 h->used != NVMETRACE_HOOK_FTRACE)
				fn_hooks[n++] = h;	/* kprobes */
		}
		kp_detach_set(fn_hooks, n);
		for (hp = hooks; (h = *hp); hp++)
			h->state = NVMETRACE_HOOK_DETACHED;
		recording = false;
	}
	mutex_unlock(&hooks_lock);
	/* only now: a module going meanwhile had its hooks detached first */
	unregister_module_notifier(&module_nb);
	if (!was)
		return;
	/* no probe runs on any CPU after this returns */
	tracepoint_synchronize_unregister();
}

/* Load: gather every group's rows into hooks[], in hook_groups[] order. */
int nvmetrace_hooks_init(void)
{
	const struct nvmetrace_hook_group *g;
	unsigned int i, j;

	nr_hooks = 0;
	for (i = 0; i < ARRAY_SIZE(hook_groups); i++) {
		g = hook_groups[i];
		if (WARN_ON(nr_hooks + g->nr > NVMETRACE_HOOKS_MAX))
			return -E2BIG;	/* raise NVMETRACE_FHOOKS_MAX */
		for (j = 0; j < g->nr; j++)
			hooks[nr_hooks++] = &g->rows[j];
	}
	if (probe_test_symbol && *probe_test_symbol)
		test_hooks[0].name = probe_test_symbol;
	return 0;
}

/* Unload: netlink has stopped any recording before this runs. */
void nvmetrace_hooks_exit(void)
{
	WARN_ON_ONCE(READ_ONCE(recording));
}

/*
 * GET_HOOKS dump: one NVMETRACE_A_HOOK nest per hook; cb->args[0] is the
 * next hook to send.  Takes hooks_lock, so a dump sees each hook's state
 * consistently.
 */
int nvmetrace_hooks_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	unsigned long i;
	int ret = 0;

	mutex_lock(&hooks_lock);
	for (i = cb->args[0]; i < nr_hooks; i++) {
		const struct nvmetrace_hook *h = hooks[i];
		struct nlattr *nest;
		void *hdr;

		if (!h->name)
			continue;

		hdr = genlmsg_put(skb, NETLINK_CB(cb->skb).portid,
				  cb->nlh->nlmsg_seq, nvmetrace_genl_family_ptr(),
				  NLM_F_MULTI, NVMETRACE_CMD_GET_HOOKS);
		if (!hdr)
			break;
		nest = nla_nest_start(skb, NVMETRACE_A_HOOK);
		if (!nest ||
		    nla_put_string(skb, NVMETRACE_A_HOOK_NAME, h->name) ||
		    nla_put_u32(skb, NVMETRACE_A_HOOK_KIND,
				h->state == NVMETRACE_HOOK_ATTACHED ? h->used : h->kind) ||
		    nla_put_u32(skb, NVMETRACE_A_HOOK_STATE, h->state) ||
		    nla_put_s32(skb, NVMETRACE_A_HOOK_ERROR, h->err) ||
		    nla_put_u32(skb, NVMETRACE_A_ROLE, h->role)) {
			genlmsg_cancel(skb, hdr);
			break;
		}
		nla_nest_end(skb, nest);
		genlmsg_end(skb, hdr);
	}
	mutex_unlock(&hooks_lock);
	if (i == cb->args[0] && i < nr_hooks)
		ret = -EMSGSIZE;
	cb->args[0] = i;
	return ret ? ret : skb->len;
}
