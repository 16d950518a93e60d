// SPDX-License-Identifier: GPL-2.0
/*
 * The premapped-buffer test pool: pool_nr buffers of pool_buf_kb KiB,
 * allocated once at load as large folios and mmap()ed by user space through
 * /dev/nvmetrace at NVMETRACE_POOL_MMAP_OFFSET (chardev.c routes it here).
 * Benchmarks register the mapping as io_uring fixed buffers: the memory is
 * ordinary pages inserted with vm_insert_pages(), so pin_user_pages() and
 * O_DIRECT work on it (no VM_PFNMAP, no VM_IO).
 *
 * Allocation.  Each buffer is one folio of the buffer's order when the page
 * allocator has one (__GFP_RETRY_MAYFAIL: compaction and reclaim are tried,
 * the OOM killer is not).  When it has not, the rest of the buffer is made of
 * the largest smaller folios it can get, down to single pages, and the buffer
 * counts as a fallback (NVMETRACE_P_FALLBACKS; a benchmark that needs whole
 * folios checks it is 0).  If even single pages run out, the load fails with
 * a line in the kernel log saying how far it got: a pool is all there or not
 * at all.  Pages are zeroed (they reach user space) and asked for on
 * pool_node, by default the node of the CPU that loads the module.
 *
 * Lifetime.  The folios live from load to unload.  Every pool mapping holds
 * a reference on this module (taken in mmap and in vm_ops->open, dropped in
 * vm_ops->close), so unload waits for the last munmap() whether or not the
 * mapping still has its file (see nvmetrace_pool_drop_vm_file() in
 * compat.h); each mapped page also holds its own page reference, and pages
 * pinned by io_uring hold theirs, so nothing user space can reach is freed
 * under it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/blkdev.h>
#include <linux/gfp.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/nodemask.h>
#include <linux/slab.h>
#include <linux/topology.h>
#include <net/genetlink.h>
#include <net/netlink.h>

#include "compat.h"
#include "nvmetrace.h"

#define NVMETRACE_POOL_BUF_KB_MIN	(PAGE_SIZE / 1024)
/* order 10, a MAX_ORDER both kernels allow */
#define NVMETRACE_POOL_BUF_KB_MAX	4096
#define NVMETRACE_POOL_NR_MAX		65536

static unsigned int pool_buf_kb = 2048;
module_param(pool_buf_kb, uint, 0444);
MODULE_PARM_DESC(pool_buf_kb,
		 "test pool: KiB per buffer, a power of two from 4 to 4096 (default 2048)");

static unsigned int pool_nr;
module_param(pool_nr, uint, 0444);
MODULE_PARM_DESC(pool_nr, "test pool: number of buffers (default 0: no pool)");

static int pool_node = NUMA_NO_NODE;
module_param(pool_node, int, 0444);
MODULE_PARM_DESC(pool_node,
		 "test pool: NUMA node of the buffers (default -1: the node loading the module)");

/*
 * For tests of the fallback path only: never ask the page allocator for a
 * folio larger than this order, as if larger ones had run out.
 */
static int pool_test_max_order = -1;
module_param(pool_test_max_order, int, 0444);
MODULE_PARM_DESC(pool_test_max_order,
		 "test pool, for tests: largest folio order to ask for (default -1: the buffer's)");

/*
 * Set up at load, freed at unload; only mappings changes in between
 * (atomically).
 */
struct nvmetrace_pool {
	unsigned long buf_size;		/* bytes per buffer; 0: no pool */
	unsigned int nr_bufs;		/* buffers allocated */
	unsigned int order;		/* folio order asked for */
	unsigned int min_order;		/* smallest folio order obtained */
	unsigned int fallbacks;		/* buffers with smaller folios */
	int nid;			/* node asked on */
	unsigned long nr_pages;		/* pages[] and bytes >> PAGE_SHIFT */
	struct page **pages;		/* every page, in mapping order */
	unsigned int nr_folios;
	struct folio **folios;		/* to free */
	atomic_t mappings;		/* live pool VMAs */
};

static struct nvmetrace_pool nvmetrace_pool;

static void nvmetrace_pool_vm_open(struct vm_area_struct *vma)
{
	/* a split or mremap() copy of a mapping: the module is pinned already */
	__module_get(THIS_MODULE);
	atomic_inc(&nvmetrace_pool.mappings);
}

static void nvmetrace_pool_vm_close(struct vm_area_struct *vma)
{
	atomic_dec(&nvmetrace_pool.mappings);
	module_put(THIS_MODULE);
}

static const struct vm_operations_struct nvmetrace_pool_vm_ops = {
	.open	= nvmetrace_pool_vm_open,
	.close	= nvmetrace_pool_vm_close,
};

/*
 * The pool mapping: the whole pool at NVMETRACE_POOL_MMAP_OFFSET, shared,
 * never executable.  Called from ->mmap with the mmap lock held for writing;
 * may sleep.  Every refusal is -EINVAL, with the reason in the kernel log
 * (rate-limited: user space can call this in a loop).
 */
int nvmetrace_pool_mmap(struct file *file, struct vm_area_struct *vma)
{
	const struct nvmetrace_pool *p = &nvmetrace_pool;
	unsigned long len = vma->vm_end - vma->vm_start;
	unsigned long num = p->nr_pages;
	int err;

	if (!p->nr_pages) {
		pr_notice_ratelimited("pool mmap refused: no pool (load with pool_nr=N pool_buf_kb=KB)\n");
		return -EINVAL;
	}
	if (vma->vm_pgoff != NVMETRACE_POOL_MMAP_OFFSET >> PAGE_SHIFT) {
		pr_notice_ratelimited("pool mmap refused: offset must be NVMETRACE_POOL_MMAP_OFFSET (%#llx)\n",
				      NVMETRACE_POOL_MMAP_OFFSET);
		return -EINVAL;
	}
	if (len != p->nr_pages << PAGE_SHIFT) {
		pr_notice_ratelimited("pool mmap refused: length %lu, the pool is %lu bytes (%u x %lu)\n",
				      len, p->nr_pages << PAGE_SHIFT, p->nr_bufs,
				      p->buf_size);
		return -EINVAL;
	}
	if (!(vma->vm_flags & VM_SHARED) || (vma->vm_flags & VM_EXEC)) {
		pr_notice_ratelimited("pool mmap refused: needs MAP_SHARED and no PROT_EXEC\n");
		return -EINVAL;
	}

	nvmetrace_vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTCOPY | VM_DONTDUMP,
			       VM_MAYEXEC);
	/*
	 * All pages now, so nothing faults later.  On failure the core zaps
	 * what was inserted (unmap_region()), and no vm_ops is set yet, so
	 * close does not run for this VMA.
	 */
	err = vm_insert_pages(vma, vma->vm_start, p->pages, &num);
	if (err)
		return err;
	if (num) {
		pr_warn_ratelimited("pool mmap: %lu of %lu pages not inserted\n",
				    num, p->nr_pages);
		return -ENOMEM;
	}
	vma->vm_ops = &nvmetrace_pool_vm_ops;
	/* we are in our own fops: the module is live */
	__module_get(THIS_MODULE);
	atomic_inc(&nvmetrace_pool.mappings);
	nvmetrace_pool_drop_vm_file(vma);
	return 0;
}

static void nvmetrace_pool_release(struct nvmetrace_pool *p)
{
	unsigned int i;

	for (i = 0; i < p->nr_folios; i++)
		folio_put(p->folios[i]);
	kvfree(p->folios);
	kvfree(p->pages);
	memset(p, 0, sizeof(*p));
}

/*
 * One folio of the given order, zeroed, on nid; NULL if the allocator has
 * none.  GFP: no warning (a failure is expected and handled), no OOM killer.
 */
static struct folio *nvmetrace_pool_folio(int nid, unsigned int order)
{
	gfp_t gfp = GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN;
	struct page *page;

	if (order)
		gfp |= __GFP_COMP | __GFP_RETRY_MAYFAIL;
	page = alloc_pages_node(nid, gfp, order);
	return page ? page_folio(page) : NULL;
}

/*
 * Fill the buffer whose pages start at pages[first]; *fell_back: it needed
 * folios smaller than the buffer.
 */
static int nvmetrace_pool_fill_buf(struct nvmetrace_pool *p, unsigned long first,
				   bool *fell_back)
{
	unsigned long per_buf = p->buf_size >> PAGE_SHIFT, off = 0, i;
	unsigned int order = p->order;
	struct folio *folio;

	*fell_back = false;
	if (pool_test_max_order >= 0 && order > pool_test_max_order) {
		order = pool_test_max_order;
		*fell_back = true;
	}
	while (off < per_buf) {
		folio = nvmetrace_pool_folio(p->nid, order);
		if (!folio) {
			if (!order)
				return -ENOMEM;
			/* the smaller orders still tile the buffer exactly */
			order--;
			*fell_back = true;
			continue;
		}
		p->folios[p->nr_folios++] = folio;
		for (i = 0; i < (1UL << order); i++)
			p->pages[first + off + i] = folio_page(folio, i);
		off += 1UL << order;
		p->min_order = min(p->min_order, order);
	}
	return 0;
}

/* At load, before the device exists.  Process context, may sleep. */
int nvmetrace_pool_init(void)
{
	struct nvmetrace_pool *p = &nvmetrace_pool;
	unsigned long per_buf, ram_pages = totalram_pages();
	unsigned int b;
	bool fell_back;
	int nid, err;

	atomic_set(&p->mappings, 0);
	if (!pool_nr)
		return 0;
	if (pool_buf_kb < NVMETRACE_POOL_BUF_KB_MIN ||
	    pool_buf_kb > NVMETRACE_POOL_BUF_KB_MAX || !is_power_of_2(pool_buf_kb)) {
		pr_err("pool_buf_kb=%u: must be a power of two from %lu to %u\n",
		       pool_buf_kb, NVMETRACE_POOL_BUF_KB_MIN,
		       NVMETRACE_POOL_BUF_KB_MAX);
		return -EINVAL;
	}
	if (pool_nr > NVMETRACE_POOL_NR_MAX) {
		pr_err("pool_nr=%u: at most %u buffers\n", pool_nr,
		       NVMETRACE_POOL_NR_MAX);
		return -EINVAL;
	}
	per_buf = (unsigned long)pool_buf_kb * 1024 >> PAGE_SHIFT;
	/* a test pool never takes more than half of memory */
	if ((unsigned long)pool_nr * per_buf > ram_pages / 2) {
		pr_err("pool of %u x %u KiB (%lu MiB) is more than half of RAM (%lu MiB): lower pool_nr or pool_buf_kb\n",
		       pool_nr, pool_buf_kb,
		       ((unsigned long)pool_nr * per_buf) >> (20 - PAGE_SHIFT),
		       ram_pages >> (20 - PAGE_SHIFT));
		return -ENOMEM;
	}
	nid = pool_node;
	if (nid == NUMA_NO_NODE) {
		nid = numa_mem_id();
	} else if (nid < 0 || nid >= MAX_NUMNODES || !node_online(nid)) {
		pr_err("pool_node=%d is not an online NUMA node\n", pool_node);
		return -EINVAL;
	}

	p->buf_size = per_buf << PAGE_SHIFT;
	p->order = ilog2(per_buf);
	p->min_order = p->order;
	p->nid = nid;
	p->nr_pages = (unsigned long)pool_nr * per_buf;
	p->pages = kvcalloc(p->nr_pages, sizeof(*p->pages), GFP_KERNEL);
	/* at most one folio per page */
	p->folios = kvcalloc(p->nr_pages, sizeof(*p->folios), GFP_KERNEL);
	if (!p->pages || !p->folios) {
		nvmetrace_pool_release(p);
		return -ENOMEM;
	}
	for (b = 0; b < pool_nr; b++) {
		err = nvmetrace_pool_fill_buf(p, (unsigned long)b * per_buf,
					      &fell_back);
		if (err) {
			pr_err("pool: out of memory at buffer %u of %u (%u KiB each, node %d): lower pool_nr or pool_buf_kb\n",
			       b, pool_nr, pool_buf_kb, nid);
			nvmetrace_pool_release(p);
			return err;
		}
		p->fallbacks += fell_back;
		p->nr_bufs++;
		cond_resched();
	}
	pr_info("pool: %u x %u KiB on node %d, %u folios, %u buffers with folios smaller than order %u (smallest %u)\n",
		p->nr_bufs, pool_buf_kb, nid, p->nr_folios, p->fallbacks,
		p->order, p->min_order);
	return 0;
}

/* At unload: no mapping is left (each one pins the module). */
void nvmetrace_pool_exit(void)
{
	nvmetrace_pool_release(&nvmetrace_pool);
}

void nvmetrace_pool_stats(struct nvmetrace_pool_stats *s)
{
	const struct nvmetrace_pool *p = &nvmetrace_pool;

	s->buf_size = p->buf_size;
	s->nr_asked = pool_nr;
	s->nr_bufs = p->nr_bufs;
	s->fallbacks = p->fallbacks;
	s->bytes = (u64)p->nr_pages << PAGE_SHIFT;
	s->order = p->order;
	s->min_order = p->min_order;
	s->nr_folios = p->nr_folios;
	s->nid = p->nr_pages ? p->nid : pool_node;
	s->mappings = atomic_read(&p->mappings);
}

/*
 * The kernel's own blk_iobuf pool (CONFIG_BLK_IOBUF_POOL kernels) of the
 * device dev's queue, as NVMETRACE_P_KPOOL*, into msg.  Decided at build
 * time (Kbuild looks for <linux/blk-iobuf.h> and its accessors); on a stock
 * kernel this only says "absent".  Process context, may sleep.
 */
#if defined(CONFIG_BLK_IOBUF_POOL) && defined(NVMETRACE_HAVE_BLK_IOBUF_STATS)
#include <linux/blk-iobuf.h>

int nvmetrace_kpool_put(struct genl_info *info, struct sk_buff *msg, u32 dev,
			bool have_dev)
{
	struct blk_iobuf_pool *kp;
	struct nvmetrace_bdev b;
	int err;

	if (!have_dev)
		return nla_put_u32(msg, NVMETRACE_P_KPOOL, NVMETRACE_KPOOL_BUILT);
	err = nvmetrace_bdev_open(dev, &b);
	if (err) {
		NL_SET_ERR_MSG(info->extack,
			       "cannot open the block device DEV names (is it there? see /sys/dev/block/MAJ:MIN)");
		return err;
	}
	kp = blk_queue_get_iobuf_pool(bdev_get_queue(b.bdev));
	if (!kp) {
		err = nla_put_u32(msg, NVMETRACE_P_KPOOL, NVMETRACE_KPOOL_NONE);
	} else {
		err = nla_put_u32(msg, NVMETRACE_P_KPOOL, NVMETRACE_KPOOL_ACTIVE) ||
		      nla_put_u32(msg, NVMETRACE_P_KPOOL_ORDER, blk_iobuf_pool_order(kp)) ||
		      nla_put_u32(msg, NVMETRACE_P_KPOOL_FOLIO_SIZE,
				  blk_iobuf_pool_folio_size(kp)) ||
		      nla_put_u32(msg, NVMETRACE_P_KPOOL_CAPACITY,
				  blk_iobuf_pool_capacity(kp)) ||
		      nla_put_u32(msg, NVMETRACE_P_KPOOL_IN_USE,
				  blk_iobuf_pool_in_use(kp)) ||
		      nla_put_u32(msg, NVMETRACE_P_KPOOL_AVAILABLE,
				  blk_iobuf_pool_available(kp)) ||
		      nla_put_u32(msg, NVMETRACE_P_KPOOL_HIGH_WATER,
				  blk_iobuf_pool_high_water(kp)) ||
		      nla_put_u64_64bit(msg, NVMETRACE_P_KPOOL_ALLOC_FAILURES,
					blk_iobuf_pool_alloc_failures(kp),
					NVMETRACE_P_PAD) ? -EMSGSIZE : 0;
		blk_iobuf_pool_put(kp);
	}
	nvmetrace_bdev_close(&b);
	return err;
}
#else
int nvmetrace_kpool_put(struct genl_info *info, struct sk_buff *msg, u32 dev,
			bool have_dev)
{
#ifdef CONFIG_BLK_IOBUF_POOL
	/* the kernel has one, but not the accessors this module was written for */
	return nla_put_u32(msg, NVMETRACE_P_KPOOL, NVMETRACE_KPOOL_UNKNOWN_API);
#else
	return nla_put_u32(msg, NVMETRACE_P_KPOOL, NVMETRACE_KPOOL_ABSENT);
#endif
}
#endif
