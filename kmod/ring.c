// SPDX-License-Identifier: GPL-2.0
/*
 * One record ring per possible CPU (protocol: Documentation/ring.md,
 * logic: ring_core.h, producer: nvmetrace.h).
 *
 * Memory.  Each ring is one virtually contiguous area, control page first,
 * that chardev.c maps into user space with remap_vmalloc_range().  That needs
 * a VM_USERMAP area.  vmalloc_user() gives one but allocates on whatever node
 * the loading task runs on, and no node-aware variant is exported by both
 * 6.1 and 6.12 (vmalloc_user_node() does not exist, __vmalloc_node_range()
 * is not exported).  So the pages are allocated one by one, zeroed, on the
 * ring's CPU's node, and vmap()ed with VM_USERMAP: the producer writes local
 * memory, and the area is what remap_vmalloc_range() expects.
 *
 * Lifetime.  Rings are allocated at load and freed at unload, and nothing
 * else ever frees them.  A mapping holds a reference on the file
 * (vma->vm_file), the open file holds a reference on this module (misc
 * device fops .owner), so unload cannot start while any mapping exists, even
 * after the descriptor is closed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/topology.h>
#include <linux/vmalloc.h>

#include "nvmetrace.h"

DEFINE_PER_CPU(struct nvmetrace_ring, nvmetrace_rings);

static void nvmetrace_ring_free_one(struct nvmetrace_ring *r)
{
	unsigned int i;

	if (r->base)
		vunmap(r->base);
	if (r->pages) {
		for (i = 0; i < r->nr_pages && r->pages[i]; i++)
			__free_page(r->pages[i]);
		kvfree(r->pages);
	}
	memset(r, 0, sizeof(*r));
}

/* Process context, may sleep; the ring is not visible to anyone yet. */
static int nvmetrace_ring_alloc_one(struct nvmetrace_ring *r, unsigned int cpu,
				    u32 nr_recs, unsigned long map_size)
{
	int nid = cpu_to_node(cpu);
	unsigned int i;

	/* a possible CPU may sit on a node that is not online (yet) */
	if (nid != NUMA_NO_NODE && !node_online(nid))
		nid = NUMA_NO_NODE;

	r->nr_pages = map_size >> PAGE_SHIFT;
	r->pages = kvcalloc(r->nr_pages, sizeof(*r->pages), GFP_KERNEL);
	if (!r->pages)
		return -ENOMEM;
	for (i = 0; i < r->nr_pages; i++) {
		r->pages[i] = alloc_pages_node(nid, GFP_KERNEL | __GFP_ZERO, 0);
		if (!r->pages[i])
			return -ENOMEM;
	}
	/* VM_USERMAP: remap_vmalloc_range() refuses areas without it */
	r->base = vmap(r->pages, r->nr_pages, VM_MAP | VM_USERMAP, PAGE_KERNEL);
	if (!r->base)
		return -ENOMEM;

	nvmetrace_ring_init(&r->prod, r->base,
			    r->base + sizeof(struct nvmetrace_ring_ctrl),
			    nr_recs, cpu, map_size);
	return 0;
}

/*
 * Allocate and lay out every possible CPU's ring; nr_recs is a power of two.
 * At load, before the device and the netlink family exist.
 */
int nvmetrace_rings_alloc(u32 nr_recs)
{
	unsigned long map_size;
	unsigned int cpu;
	int err;

	map_size = PAGE_ALIGN(sizeof(struct nvmetrace_ring_ctrl) +
			      (unsigned long)nr_recs * sizeof(struct nvmetrace_rec));
	nvmetrace_dev.nr_recs = nr_recs;
	nvmetrace_dev.map_size = map_size;

	for_each_possible_cpu(cpu) {
		err = nvmetrace_ring_alloc_one(per_cpu_ptr(&nvmetrace_rings, cpu),
					       cpu, nr_recs, map_size);
		if (err) {
			pr_err("cannot allocate the %lu-byte ring of CPU %u\n",
			       map_size, cpu);
			nvmetrace_rings_free();
			return err;
		}
	}
	return 0;
}

/* At unload (or a failed load), once no probe runs and nothing is mapped. */
void nvmetrace_rings_free(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		nvmetrace_ring_free_one(per_cpu_ptr(&nvmetrace_rings, cpu));
}

/* The vmap()ed area of a possible CPU's ring, for mmap. */
void *nvmetrace_ring_base(unsigned int cpu)
{
	return per_cpu_ptr(&nvmetrace_rings, cpu)->base;
}

/*
 * Records committed and dropped by one ring so far.  Read from another CPU
 * while the producer runs: each value is a single aligned u64 the producer
 * stores, so it is never torn on 64-bit, only possibly one record stale.
 * Taken from the producer's private copy, not from the control page, which
 * user space can write.
 */
void nvmetrace_ring_counts(unsigned int cpu, u64 *records, u64 *lost)
{
	const struct nvmetrace_ring_prod *p =
		&per_cpu_ptr(&nvmetrace_rings, cpu)->prod;

	*records = READ_ONCE(p->head);
	*lost = READ_ONCE(p->lost);
}

void nvmetrace_rings_totals(u64 *records, u64 *lost)
{
	u64 r, l, sum_r = 0, sum_l = 0;
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		nvmetrace_ring_counts(cpu, &r, &l);
		sum_r += r;
		sum_l += l;
	}
	*records = sum_r;
	*lost = sum_l;
}

/*
 * Before a recording starts, while no probe runs on any CPU: a drop run that
 * ended the last recording has no marker, and must not get one in the next
 * (its records are counted in lost, and the control page showed it).
 */
void nvmetrace_rings_forget_gaps(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		nvmetrace_ring_forget_gap(&per_cpu_ptr(&nvmetrace_rings, cpu)->prod);
}
