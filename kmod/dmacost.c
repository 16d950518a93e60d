// SPDX-License-Identifier: GPL-2.0
/*
 * DMA map cost of a block device's DMA device (NVMETRACE_CMD_DMA_COST).
 *
 * The DMA device is found by walking up from the disk's struct device to the
 * first ancestor that can do DMA (a non-zero dma_mask): for a PCI NVMe
 * namespace, nvme0n1 -> nvme0 (the controller's class device) -> the PCI
 * function.  A disk with no such ancestor (nvme-tcp, nvme-loop, null_blk, a
 * multipath head, whose parent is the subsystem) moves no data by DMA of its
 * own; the reply says so and which devices were walked.
 *
 * The measurement runs in the requester's process context, serialized by a
 * mutex, never on an I/O path: per I/O size (4 KiB .. 2 MiB), a scatterlist
 * with one entry per 4 KiB page (what a scattered user buffer gives) is
 * mapped with dma_map_sg() and unmapped, ITERS times, each timed with
 * ktime_get_ns(); then the same list is mapped once and each iteration only
 * syncs it for the device and back, which is what a retained (premapped)
 * mapping still costs per I/O.  Last, the size as one entry of a 2 MiB folio
 * (a pool buffer's I/O, whose pages the block layer merges into one
 * segment), mapped and unmapped ITERS times.  The raw times go to user space, which takes
 * the medians: the module does no statistics.  The addresses are never given
 * to the device.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blkdev.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/kdev_t.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <net/genetlink.h>
#include <net/netlink.h>

#include "compat.h"
#include "nvmetrace.h"

#define NVMETRACE_DMA_PAGES	(NVMETRACE_DMA_SIZE_MAX / PAGE_SIZE)
#define NVMETRACE_DMA_WALK_LEN	256

static DEFINE_MUTEX(nvmetrace_dma_lock);

/* The first ancestor of the disk that can do DMA; the walk as text in walk. */
static struct device *nvmetrace_dma_device(struct gendisk *disk, char *walk,
					   size_t len)
{
	struct device *d = disk_to_dev(disk);
	size_t n;

	n = scnprintf(walk, len, "%s", dev_name(d));
	for (d = d->parent; d; d = d->parent) {
		n += scnprintf(walk + n, len - n, " -> %s", dev_name(d));
		if (d->dma_mask && *d->dma_mask)
			return d;
	}
	return NULL;
}

static u32 nvmetrace_dma_iommu(struct device *dev, u32 *domain_type)
{
	struct iommu_domain *dom;

	*domain_type = 0;
	if (!device_iommu_mapped(dev))
		return NVMETRACE_DMA_IOMMU_NONE;
	dom = iommu_get_domain_for_dev(dev);
	if (!dom)
		return NVMETRACE_DMA_IOMMU_OTHER;
	*domain_type = dom->type;
	if (dom->type == IOMMU_DOMAIN_IDENTITY)
		return NVMETRACE_DMA_IOMMU_IDENTITY;
	if (dom->type & __IOMMU_DOMAIN_DMA_API)
		return NVMETRACE_DMA_IOMMU_TRANSLATING;
	return NVMETRACE_DMA_IOMMU_OTHER;
}

static u32 nvmetrace_ns_u32(u64 ns)
{
	return ns > U32_MAX ? U32_MAX : (u32)ns;
}

/* Map+unmap, then premapped sync, of sgt ITERS times; times into map[], pre[]. */
static int nvmetrace_dma_measure(struct device *dev, struct sg_table *sgt,
				 u32 iters, u32 *map, u32 *pre, u32 *mapped)
{
	int nents = sgt->orig_nents, n;
	u64 t0;
	u32 i;

	for (i = 0; i < iters; i++) {
		t0 = ktime_get_ns();
		n = dma_map_sg(dev, sgt->sgl, nents, DMA_FROM_DEVICE);
		if (!n)
			return -ENOMEM;
		dma_unmap_sg(dev, sgt->sgl, nents, DMA_FROM_DEVICE);
		map[i] = nvmetrace_ns_u32(ktime_get_ns() - t0);
		*mapped = n;
		cond_resched();
	}

	n = dma_map_sg(dev, sgt->sgl, nents, DMA_FROM_DEVICE);
	if (!n)
		return -ENOMEM;
	for (i = 0; i < iters; i++) {
		t0 = ktime_get_ns();
		dma_sync_sg_for_device(dev, sgt->sgl, nents, DMA_FROM_DEVICE);
		dma_sync_sg_for_cpu(dev, sgt->sgl, nents, DMA_FROM_DEVICE);
		pre[i] = nvmetrace_ns_u32(ktime_get_ns() - t0);
	}
	dma_unmap_sg(dev, sgt->sgl, nents, DMA_FROM_DEVICE);
	return 0;
}

struct nvmetrace_dma_limits {
	u64 opt, max;			/* dma_opt/max_mapping_size() */
	u32 queue_bytes, queue_segs;
};

/* Map+unmap of bytes of folio as one entry, ITERS times, into ns[]. */
static int nvmetrace_dma_measure_folio(struct device *dev, struct folio *folio,
				       u32 bytes, u32 iters, u32 *ns)
{
	struct scatterlist sg;
	u64 t0;
	u32 i;

	sg_init_table(&sg, 1);
	sg_set_page(&sg, folio_page(folio, 0), bytes, 0);
	for (i = 0; i < iters; i++) {
		t0 = ktime_get_ns();
		if (!dma_map_sg(dev, &sg, 1, DMA_FROM_DEVICE))
			return -ENOMEM;
		dma_unmap_sg(dev, &sg, 1, DMA_FROM_DEVICE);
		ns[i] = nvmetrace_ns_u32(ktime_get_ns() - t0);
		cond_resched();
	}
	return 0;
}

/*
 * One NVMETRACE_D_SIZE nest: measure bytes (one sg entry per page), and as
 * one entry of folio if there is one.
 */
static int nvmetrace_dma_one_size(struct sk_buff *msg, struct device *dev,
				  struct page **pages, struct folio *folio,
				  u32 bytes, u32 iters,
				  const struct nvmetrace_dma_limits *lim,
				  u32 *map, u32 *pre)
{
	u32 nents = bytes / PAGE_SIZE, limits = 0, mapped = 0, i;
	struct scatterlist *sg;
	struct sg_table sgt;
	struct nlattr *nest;
	int err = 0;

	if (bytes > lim->max)
		limits |= NVMETRACE_DMA_OVER_MAX_MAPPING;
	if (bytes > lim->opt)
		limits |= NVMETRACE_DMA_OVER_OPT;
	if (bytes > lim->queue_bytes)
		limits |= NVMETRACE_DMA_OVER_QUEUE_BYTES;
	if (nents > lim->queue_segs)
		limits |= NVMETRACE_DMA_OVER_QUEUE_SEGS;

	if (limits & NVMETRACE_DMA_OVER_MAX_MAPPING) {
		err = -E2BIG;	/* the mapping would fail: not measured */
	} else {
		err = sg_alloc_table(&sgt, nents, GFP_KERNEL);
		if (!err) {
			for_each_sg(sgt.sgl, sg, nents, i)
				sg_set_page(sg, pages[i], PAGE_SIZE, 0);
			err = nvmetrace_dma_measure(dev, &sgt, iters, map, pre,
						    &mapped);
			sg_free_table(&sgt);
		}
	}

	nest = nla_nest_start(msg, NVMETRACE_D_SIZE);
	if (!nest)
		return -EMSGSIZE;
	if (nla_put_u32(msg, NVMETRACE_D_BYTES, bytes) ||
	    nla_put_u32(msg, NVMETRACE_D_NENTS, nents) ||
	    nla_put_u32(msg, NVMETRACE_D_LIMITS, limits))
		return -EMSGSIZE;
	if (err) {
		if (nla_put_s32(msg, NVMETRACE_D_ERROR, err))
			return -EMSGSIZE;
	} else if (nla_put_u32(msg, NVMETRACE_D_MAPPED_NENTS, mapped) ||
		   nla_put(msg, NVMETRACE_D_MAP_NS, iters * sizeof(u32), map) ||
		   nla_put(msg, NVMETRACE_D_PREMAP_NS, iters * sizeof(u32), pre)) {
		return -EMSGSIZE;
	}
	/* map[] is free again: reuse it for the one-entry times */
	if (!err && folio &&
	    !nvmetrace_dma_measure_folio(dev, folio, bytes, iters, map) &&
	    nla_put(msg, NVMETRACE_D_FOLIO_NS, iters * sizeof(u32), map))
		return -EMSGSIZE;
	nla_nest_end(msg, nest);
	return 0;
}

static int nvmetrace_dma_sizes(struct sk_buff *msg, struct device *dev,
			       u32 iters, const struct nvmetrace_dma_limits *lim)
{
	int nid = dev_to_node(dev), err = 0;
	struct folio *folio = NULL;
	struct page **pages, *head;
	u32 *map, *pre;
	u32 bytes, i;

	pages = kcalloc(NVMETRACE_DMA_PAGES, sizeof(*pages), GFP_KERNEL);
	map = kcalloc(iters, sizeof(*map), GFP_KERNEL);
	pre = kcalloc(iters, sizeof(*pre), GFP_KERNEL);
	if (!pages || !map || !pre) {
		err = -ENOMEM;
		goto out;
	}
	/* single pages near the device, as a user buffer would be */
	for (i = 0; i < NVMETRACE_DMA_PAGES; i++) {
		pages[i] = alloc_pages_node(nid, GFP_KERNEL | __GFP_NOWARN, 0);
		if (!pages[i]) {
			err = -ENOMEM;
			goto out;
		}
	}
	/* a pool-like buffer; without one that column is left out */
	head = alloc_pages_node(nid, GFP_KERNEL | __GFP_COMP | __GFP_NOWARN |
				__GFP_RETRY_MAYFAIL,
				get_order(NVMETRACE_DMA_SIZE_MAX));
	if (head)
		folio = page_folio(head);
	for (bytes = NVMETRACE_DMA_SIZE_MIN; bytes <= NVMETRACE_DMA_SIZE_MAX;
	     bytes *= 2) {
		err = nvmetrace_dma_one_size(msg, dev, pages, folio, bytes, iters,
					     lim, map, pre);
		if (err)
			break;
	}
out:
	if (folio)
		folio_put(folio);
	if (pages)
		for (i = 0; i < NVMETRACE_DMA_PAGES && pages[i]; i++)
			__free_page(pages[i]);
	kfree(pages);
	kfree(map);
	kfree(pre);
	return err;
}

/*
 * The NVMETRACE_A_DMA nest for dev into msg.  Errors that concern the
 * request (no such device) come back negative with an extack message.
 */
int nvmetrace_dma_cost(struct genl_info *info, u32 dev, u32 iters,
		       struct sk_buff *msg)
{
	struct nvmetrace_dma_limits lim;
	struct nvmetrace_bdev b;
	struct request_queue *q;
	struct device *dma_dev;
	u32 iommu, dom_type;
	struct nlattr *nest;
	char *walk;
	int err;

	if (!MAJOR(dev)) {
		NL_SET_ERR_MSG(info->extack,
			       "DEV has major 0 (a hidden path disk?): give a block device's dev_t");
		return -EINVAL;
	}
	err = nvmetrace_bdev_open(dev, &b);
	if (err) {
		NL_SET_ERR_MSG(info->extack,
			       "cannot open the block device DEV names (is it there? see /sys/dev/block/MAJ:MIN)");
		return err;
	}
	walk = kzalloc(NVMETRACE_DMA_WALK_LEN, GFP_KERNEL);
	if (!walk) {
		err = -ENOMEM;
		goto out_close;
	}

	mutex_lock(&nvmetrace_dma_lock);
	dma_dev = nvmetrace_dma_device(b.bdev->bd_disk, walk,
				       NVMETRACE_DMA_WALK_LEN);
	nest = nla_nest_start(msg, NVMETRACE_A_DMA);
	err = -EMSGSIZE;
	if (!nest ||
	    nla_put_u32(msg, NVMETRACE_D_ITERS, iters) ||
	    nla_put_string(msg, NVMETRACE_D_WALK, walk) ||
	    nla_put_u8(msg, NVMETRACE_D_HAS_DMA, !!dma_dev))
		goto out_unlock;
	if (!dma_dev) {
		err = nla_put_string(msg, NVMETRACE_D_NO_DMA_REASON,
				     "no device above the disk does DMA: its transport moves the data itself (nvme-tcp, nvme-loop, null_blk) or it is a multipath head");
		if (err)
			goto out_unlock;
		nla_nest_end(msg, nest);
		err = 0;
		goto out_unlock;
	}

	q = bdev_get_queue(b.bdev);
	lim.opt = dma_opt_mapping_size(dma_dev);
	lim.max = dma_max_mapping_size(dma_dev);
	lim.queue_bytes = queue_max_hw_sectors(q) << SECTOR_SHIFT;
	lim.queue_segs = queue_max_segments(q);
	iommu = nvmetrace_dma_iommu(dma_dev, &dom_type);
	if (nla_put_string(msg, NVMETRACE_D_DEVICE, dev_name(dma_dev)) ||
	    (dma_dev->driver &&
	     nla_put_string(msg, NVMETRACE_D_DRIVER, dma_dev->driver->name)) ||
	    nla_put_s32(msg, NVMETRACE_D_NODE, dev_to_node(dma_dev)) ||
	    nla_put_u64_64bit(msg, NVMETRACE_D_OPT_SIZE, lim.opt, NVMETRACE_D_PAD) ||
	    nla_put_u64_64bit(msg, NVMETRACE_D_MAX_SIZE, lim.max, NVMETRACE_D_PAD) ||
	    nla_put_u32(msg, NVMETRACE_D_MAX_SEG_SIZE, dma_get_max_seg_size(dma_dev)) ||
	    nla_put_u32(msg, NVMETRACE_D_IOMMU, iommu) ||
	    nla_put_u32(msg, NVMETRACE_D_IOMMU_DOMAIN_TYPE, dom_type) ||
	    nla_put_u32(msg, NVMETRACE_D_QUEUE_MAX_BYTES, lim.queue_bytes) ||
	    nla_put_u32(msg, NVMETRACE_D_QUEUE_MAX_SEGMENTS, lim.queue_segs))
		goto out_unlock;
	err = nvmetrace_dma_sizes(msg, dma_dev, iters, &lim);
	if (err) {
		if (err == -EMSGSIZE)
			NL_SET_ERR_MSG(info->extack,
				       "reply too large: ask for fewer iterations");
		else
			NL_SET_ERR_MSG(info->extack,
				       "out of memory, or a mapping failed, while measuring");
		goto out_unlock;
	}
	nla_nest_end(msg, nest);
out_unlock:
	mutex_unlock(&nvmetrace_dma_lock);
	kfree(walk);
out_close:
	nvmetrace_bdev_close(&b);
	return err;
}

/* Reply size for iters iterations: ten sizes of three arrays, plus the rest. */
size_t nvmetrace_dma_reply_size(u32 iters)
{
	return 10 * (3 * nla_total_size(iters * sizeof(u32)) + 128) + 2048;
}
