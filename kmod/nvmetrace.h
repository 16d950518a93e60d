/* SPDX-License-Identifier: GPL-2.0 */
/*
 * State and interfaces shared by the module's files.
 *
 * Components (one file each):
 *   main.c      load/unload, module parameters, the order things come up in
 *   ring.c      per-CPU rings: allocation, counters (producer: inline below)
 *   chardev.c   /dev/nvmetrace: mmap of one ring per possible CPU
 *   netlink.c   generic netlink family: version, status, start/stop, hooks
 *   hooks.c     the attach core: the hook table, attaching to tracepoints,
 *               ftrace and kprobes, start/stop, the hook dump
 *   probes/     one file per probed subsystem (the only part that knows
 *               about NVMe), sharing probes/probe.h; calls the producer
 *               below from its probes
 *   layout.c    plausibility checks of the private layouts START carries
 *   pool.c      the premapped-buffer test pool (large folios, mmap)
 *   dmacost.c   DMA map/unmap cost of a block device's DMA device
 *   compat.h    every kernel-version difference
 */
#ifndef NVMETRACE_H
#define NVMETRACE_H

#include <linux/ftrace.h>
#include <linux/kprobes.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/irqflags.h>
#include <linux/preempt.h>
#include <linux/timekeeping.h>
#include <linux/types.h>
#include <asm/barrier.h>

#include <linux/nvmetrace.h>

/*
 * The ordering primitives ring_core.h is written against: acquire/release
 * pair the producer's head with the consumer's tail (Documentation/ring.md).
 */
#define NVMETRACE_LOAD_ACQUIRE(p)	smp_load_acquire(p)	/* of the other side's index */
#define NVMETRACE_STORE_RELEASE(p, v)	smp_store_release(p, v)	/* of our own index */
#define NVMETRACE_READ_ONCE(x)		READ_ONCE(x)
#define NVMETRACE_WRITE_ONCE(x, v)	WRITE_ONCE(x, v)
/* the time of a dropped record, for its run's GAP marker */
#define NVMETRACE_RING_NOW()		ktime_get_ns()
#include "ring_core.h"
#include "layout_id.h"

#ifndef NVMETRACE_VERSION
#error "NVMETRACE_VERSION unset: no VERSION file in kmod/ or above it (see Kbuild)"
#endif

/* NVMETRACE_A_FLAGS bits this module understands. */
#define NVMETRACE_FLAGS_KNOWN		NVMETRACE_START_DEV_FILTER
#define NVMETRACE_ROLE_ALL		(NVMETRACE_ROLE_HOST | NVMETRACE_ROLE_TARGET)

/*
 * Byte offsets of the private nvme-tcp host fields its hooks read, in
 * NVMETRACE_L_TCP_* order (off[NVMETRACE_L_TCP_X - NVMETRACE_L_TCP_QUEUE_REQUEST]);
 * valid only when START carried the whole group.
 */
#define NVMETRACE_TCP_OFF(l, name) \
	((l)->tcp.off[NVMETRACE_L_TCP_##name - NVMETRACE_L_TCP_QUEUE_REQUEST])

struct nvmetrace_tcp_layout {
	bool valid;
	u32 off[NVMETRACE_L_TCP_LAST - NVMETRACE_L_TCP_QUEUE_REQUEST + 1];
};

/*
 * The nvme-rdma host and nvmet-rdma target groups, likewise
 * (off[NVMETRACE_L_RDMA_X - NVMETRACE_L_RDMA_WC_WR_CQE], ...).
 */
#define NVMETRACE_RDMA_OFF(l, name) \
	((l)->rdma.off[NVMETRACE_L_RDMA_##name - NVMETRACE_L_RDMA_WC_WR_CQE])
#define NVMETRACE_RDMAT_OFF(l, name) \
	((l)->rdmat.off[NVMETRACE_L_RDMAT_##name - NVMETRACE_L_RDMAT_WC_WR_CQE])

struct nvmetrace_rdma_layout {
	bool valid;
	u32 off[NVMETRACE_L_RDMA_LAST - NVMETRACE_L_RDMA_WC_WR_CQE + 1];
};

struct nvmetrace_rdmat_layout {
	bool valid;
	u32 off[NVMETRACE_L_RDMAT_RSP_REQ - NVMETRACE_L_RDMAT_WC_WR_CQE + 1];
};

/*
 * Byte offsets of the private nvmet-tcp target fields its hooks read, in
 * NVMETRACE_L_NVMET_TCP_* order; valid only when START carried the whole group.
 */
#define NVMETRACE_TCPT_OFF(l, name) \
	((l)->tcpt.off[NVMETRACE_L_NVMET_TCP_##name - NVMETRACE_L_NVMET_TCP_BASE])

struct nvmetrace_tcpt_layout {
	bool valid;
	u32 off[NVMETRACE_L_NVMET_TCP_LAST - NVMETRACE_L_NVMET_TCP_BASE + 1];
};

/*
 * The kernel's own private fields (NVMETRACE_L_VMLINUX_* order): the aio
 * iocb identity (probes/aio.c); valid only when START carried the group.
 */
#define NVMETRACE_VMLINUX_OFF(l, name) \
	((l)->vmlinux.off[NVMETRACE_L_##name - NVMETRACE_L_VMLINUX_BASE])

struct nvmetrace_vmlinux_layout {
	bool valid;
	u32 off[NVMETRACE_L_VMLINUX_LAST - NVMETRACE_L_VMLINUX_BASE + 1];
};

/*
 * iomap's struct iomap_dio_simple (NVMETRACE_L_DIO_SIMPLE_* order): the
 * kiocb of a small O_DIRECT read's bio (probes/aio.c); valid only when START
 * carried the group (kernels that have the struct).
 */
#define NVMETRACE_DIO_SIMPLE_OFF(l, name) \
	((l)->dio_simple.off[NVMETRACE_L_DIO_SIMPLE_##name - NVMETRACE_L_DIO_SIMPLE_BASE])

struct nvmetrace_dio_simple_layout {
	bool valid;
	u32 off[NVMETRACE_L_DIO_SIMPLE_LAST - NVMETRACE_L_DIO_SIMPLE_BASE + 1];
};

/*
 * The modules a layout group comes from, in NVMETRACE_L_BTF_* order: id[]
 * of struct nvmetrace_layout is indexed by these.
 */
enum nvmetrace_lmod {
	NVMETRACE_LMOD_NVMET,		/* valid: nvmet's group */
	NVMETRACE_LMOD_NVME_TCP,	/* tcp */
	NVMETRACE_LMOD_NVMET_TCP,	/* tcpt */
	NVMETRACE_LMOD_NVME_RDMA,	/* rdma */
	NVMETRACE_LMOD_NVMET_RDMA,	/* rdmat */
	NVMETRACE_LMOD_NR,
};

/*
 * Byte offsets of the private fields the hooks read, from the running
 * kernel's BTF via user space (NVMETRACE_A_LAYOUT).  valid (nvmet's group)
 * is set only when START carried every one of them; tcp likewise.  id[] is
 * the identity of each group's module (NVMETRACE_L_BTF_*), known only when
 * START carried it with the group.
 */
struct nvmetrace_layout {
	bool valid;
	u32 req_cmd, req_cqe, req_sq;	/* struct nvmet_req */
	u32 sq_ctrl, sq_qid;		/* struct nvmet_sq */
	u32 ctrl_cntlid;		/* struct nvmet_ctrl */
	struct nvmetrace_tcp_layout tcp;	/* nvme-tcp host */
	struct nvmetrace_rdma_layout rdma;	/* nvme-rdma host */
	struct nvmetrace_rdmat_layout rdmat;	/* nvmet-rdma target */
	struct nvmetrace_tcpt_layout tcpt;	/* nvmet-tcp target */
	struct nvmetrace_vmlinux_layout vmlinux;	/* the kernel's (no identity) */
	struct nvmetrace_dio_simple_layout dio_simple;	/* the kernel's (no identity) */
	struct nvmetrace_layout_id id[NVMETRACE_LMOD_NR];
};

/* What START asked for; parsed and range-checked by netlink.c. */
struct nvmetrace_config {
	u32 role;			/* NVMETRACE_ROLE_* mask, never 0 */
	u32 sample;			/* record 1 of every N commands, N >= 1 */
	u64 seed;			/* sampling hash seed */
	/*
	 * dev_filter false: every device (and in nvmetrace_cfg, the hooks'
	 * copy, nr_devs is NVMETRACE_DEVS_ANY).  Else devs[0, nr_devs):
	 * filled by START, then appended to by ADMIT while the hooks run (the
	 * entry written before nr_devs grows, nr_devs stored with release), so
	 * a hook sees each entry whole or not yet.
	 */
	bool dev_filter;
	u32 nr_devs;
	u32 devs[NVMETRACE_MAX_DEVS];	/* dev_t, kernel encoding */
	struct nvmetrace_layout layout;	/* for the target role */
};

/* nvmetrace_cfg.nr_devs of a recording without a device filter */
#define NVMETRACE_DEVS_ANY		U32_MAX

/* The configuration GET_STATUS reports while nothing is recording. */
#define NVMETRACE_CONFIG_IDLE		((struct nvmetrace_config){ .sample = 1 })

/*
 * One ring, per possible CPU.  prod is the producer's private state (see
 * ring_core.h): user space never sees it.  base is the vmap()ed mapping
 * (control page + records) that chardev.c hands to user space; pages backs
 * it, allocated on the CPU's node.
 */
struct nvmetrace_ring {
	struct nvmetrace_ring_prod prod;
	void *base;
	struct page **pages;
	unsigned int nr_pages;
};

DECLARE_PER_CPU(struct nvmetrace_ring, nvmetrace_rings);

/*
 * The device: set up once at load, torn down at unload.  nr_recs and
 * map_size never change in between.  state and cfg change only under
 * ctl_lock (START/STOP); readers that do not hold it use READ_ONCE(state).
 */
struct nvmetrace_dev {
	u32 nr_recs;			/* records per ring, a power of two */
	unsigned long map_size;		/* bytes per ring mapping, page-aligned */
	struct mutex ctl_lock;		/* serializes START/STOP, protects below */
	u32 state;			/* enum nvmetrace_state */
	struct nvmetrace_config cfg;	/* recording's, or NVMETRACE_CONFIG_IDLE */
	u32 owner_portid;		/* netlink port that STARTed; 0 when idle */
};

extern struct nvmetrace_dev nvmetrace_dev;

/* ring.c — process context, at load/unload only */
int nvmetrace_rings_alloc(u32 nr_recs);
void nvmetrace_rings_free(void);
void *nvmetrace_ring_base(unsigned int cpu);
void nvmetrace_ring_counts(unsigned int cpu, u64 *records, u64 *lost);
void nvmetrace_rings_totals(u64 *records, u64 *lost);
void nvmetrace_rings_forget_gaps(void);

/* pool.c — init/exit at load/unload; mmap from chardev.c's ->mmap */
struct file;
struct vm_area_struct;
struct nvmetrace_pool_stats {
	u64 buf_size;			/* 0: no pool */
	u32 nr_asked;			/* pool_nr */
	u32 nr_bufs;			/* allocated */
	u32 fallbacks;
	u64 bytes;
	u32 order, min_order, nr_folios;
	s32 nid;
	u32 mappings;
};

int nvmetrace_pool_init(void);
void nvmetrace_pool_exit(void);
int nvmetrace_pool_mmap(struct file *file, struct vm_area_struct *vma);
void nvmetrace_pool_stats(struct nvmetrace_pool_stats *s);

/*
 * The device work of POOL_GET (the kernel's blk_iobuf pool, pool.c) and
 * DMA_COST (dmacost.c): put their attributes into msg.  Process context,
 * may sleep.
 */
struct genl_info;
struct sk_buff;
int nvmetrace_kpool_put(struct genl_info *info, struct sk_buff *msg, u32 dev,
			bool have_dev);
int nvmetrace_dma_cost(struct genl_info *info, u32 dev, u32 iters,
		       struct sk_buff *msg);
size_t nvmetrace_dma_reply_size(u32 iters);

/* chardev.c */
int nvmetrace_chardev_init(void);
void nvmetrace_chardev_exit(void);

/* netlink.c */
struct genl_family;
int nvmetrace_genl_init(void);
const struct genl_family *nvmetrace_genl_family_ptr(void);
void nvmetrace_genl_exit(void);

/*
 * hooks.c — the extension point for the probes.
 *
 * nvmetrace_hooks_init/exit: at load/unload, process context, may sleep.
 * nvmetrace_hooks_start: called with nvmetrace_dev.ctl_lock held and state
 *   IDLE; attach the probes for cfg (the pointer is only valid during the
 *   call: copy what the probes need).  Returns 0 when recording; on error,
 *   nothing stays attached.
 * nvmetrace_hooks_stop: called with ctl_lock held and state RECORDING; must
 *   return only once no probe can still be running (e.g. after
 *   tracepoint_synchronize_unregister()), because unload frees the rings
 *   right after it.
 * nvmetrace_hooks_dump: the GET_HOOKS dumpit (one NVMETRACE_A_HOOK nest per
 *   hook); called without ctl_lock.
 */
struct sk_buff;
struct netlink_callback;
struct netlink_ext_ack;
int nvmetrace_hooks_init(void);
void nvmetrace_hooks_exit(void);
int nvmetrace_hooks_start(const struct nvmetrace_config *cfg,
			  struct netlink_ext_ack *extack);
void nvmetrace_hooks_stop(void);
/*
 * nvmetrace_hooks_admit: called with ctl_lock held and state RECORDING; adds
 * dev to the recording's devices (nothing if it is one already).  0, or
 * -ENOSPC when the table is full.
 */
int nvmetrace_hooks_admit(u32 dev);
/*
 * nvmetrace_hooks_layout: called with ctl_lock held and state RECORDING;
 * LAYOUT's groups (netlink.c parsed them into l) for transport modules
 * loaded since START: checked against the loaded modules, taken, and their
 * hooks attached.  0, or an error with its reason in extack.
 */
int nvmetrace_hooks_layout(const struct nvmetrace_layout *l,
			   struct netlink_ext_ack *extack);
/* The recording's devices, under ctl_lock: how many, and the i-th. */
u32 nvmetrace_hooks_nr_devs(void);
u32 nvmetrace_hooks_dev(u32 i);
int nvmetrace_hooks_dump(struct sk_buff *skb, struct netlink_callback *cb);

/*
 * layout.c — START's layouts (netlink.c parsed them): 0 when every group it
 * carries is plausible and the target role has nvmet's; else an error, its
 * reason in extack.  Process context.
 */
int nvmetrace_layout_check(const struct nvmetrace_config *cfg,
			   struct netlink_ext_ack *extack);
/* Only the plausibility of each group l carries (START's, or LAYOUT's). */
int nvmetrace_layout_check_groups(const struct nvmetrace_layout *l,
				  struct netlink_ext_ack *extack);
/* Whether l carries module i's group (enum nvmetrace_lmod). */
bool nvmetrace_layout_has(const struct nvmetrace_layout *l, int i);

/*
 * ftrace_hook.c: function-entry hooks through one shared ftrace_ops, whose
 * callback finds a hook by the traced function's address and calls its
 * kprobe pre-handler (with NULL for its kprobe) on the argument registers.
 * ip is the function's ftrace location (where ftrace calls out; a kprobe
 * with KPROBE_FLAG_FTRACE sits there).  add/remove/clear: process context,
 * may sleep, serialized by the caller; add is all or none; after remove or
 * clear no CPU runs the handlers taken out.  remove fails only if ftrace
 * cannot update the filter, and then clears every hook.
 */
#define NVMETRACE_FHOOKS_MAX	64

struct nvmetrace_fhook {
	unsigned long ip;
	kprobe_pre_handler_t pre;
};

int nvmetrace_fhooks_add(struct nvmetrace_fhook *const *fh, unsigned int n);
int nvmetrace_fhooks_remove(struct nvmetrace_fhook *const *fh, unsigned int n);
void nvmetrace_fhooks_clear(void);
bool nvmetrace_fhook_in_ops(const struct nvmetrace_fhook *fh);

/*
 * The producer, for the probes: any context but NMI, never sleeps, allocates,
 * locks or prints.
 *
 *	unsigned long flags;
 *	struct nvmetrace_rec *rec = nvmetrace_ring_local_reserve(&flags);
 *
 *	if (!rec)
 *		return;			// ring full: counted in lost
 *	rec->ts = ktime_get_ns();	// fill every field but seq
 *	...
 *	nvmetrace_ring_local_commit(rec, flags);
 *
 * Local interrupts stay disabled from a successful reserve to the commit, so
 * every probe on this CPU (process, softirq or hardirq) is serialized on this
 * CPU's ring, and the task cannot migrate: the commit goes to the ring the
 * reserve came from.  Keep the code in between short.  On NULL, interrupts
 * are already restored.
 */
static __always_inline struct nvmetrace_rec *
nvmetrace_ring_local_reserve(unsigned long *flags)
{
	struct nvmetrace_rec *rec;

	/* No hook runs in NMI; one that did could interrupt a reserve..commit. */
	if (unlikely(in_nmi()))
		return NULL;
	local_irq_save(*flags);
	rec = nvmetrace_ring_reserve(&this_cpu_ptr(&nvmetrace_rings)->prod);
	if (unlikely(!rec))
		local_irq_restore(*flags);
	return rec;
}

static __always_inline void
nvmetrace_ring_local_commit(struct nvmetrace_rec *rec, unsigned long flags)
{
	nvmetrace_ring_commit(&this_cpu_ptr(&nvmetrace_rings)->prod, rec);
	local_irq_restore(flags);
}

/* Copy a filled-in record (seq is set here) into this CPU's ring. */
static __always_inline void
nvmetrace_ring_write(const struct nvmetrace_rec *tmpl)
{
	unsigned long flags;
	struct nvmetrace_rec *rec = nvmetrace_ring_local_reserve(&flags);

	if (!rec)
		return;
	*rec = *tmpl;
	nvmetrace_ring_local_commit(rec, flags);
}

#endif /* NVMETRACE_H */
