/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ring_core.h — the per-CPU record ring, producer and consumer halves.
 *
 * This file is compiled three ways: into the module (kmod/ring.c), into the
 * KUnit suite nvmetrace_ring (kmod/ring_test.c), and into user space (the
 * tool's reader and its GoogleTest, user/src/kernel/ring_reader.cc), so it
 * uses only the UAPI types, four ordering primitives and a clock that the
 * includer defines:
 *
 *   NVMETRACE_LOAD_ACQUIRE(p)      kernel: smp_load_acquire(p)
 *   NVMETRACE_STORE_RELEASE(p, v)  kernel: smp_store_release(p, v)
 *   NVMETRACE_READ_ONCE(x)         kernel: READ_ONCE(x)
 *   NVMETRACE_WRITE_ONCE(x, v)     kernel: WRITE_ONCE(x, v)
 *   NVMETRACE_RING_NOW()           kernel: ktime_get_ns(); read only when a
 *                                  record is dropped
 *
 * Protocol (see Documentation/ring.md for the whole story):
 *
 *   One producer and one consumer per ring.  The producer is the hook code on
 *   the ring's own CPU; it runs with local interrupts disabled around
 *   reserve..commit, so process, softirq and hardirq hooks on one CPU never
 *   interleave inside a record.  The consumer is one user-space thread.
 *
 *   head and tail count records ever written/consumed (u64, never wrap in
 *   practice); the slot of record n is n & mask.
 *
 *   Producer:  tail = load_acquire(ctrl->tail)
 *              need = 2 after a drop run (marker + record), else 1
 *              if (tail > head || free slots < need)
 *                                       -> full: lost++, note the run's
 *                                          count and first/last time, drop
 *                                          (no slot touched)
 *              if a run is noted: write its GAP marker at data[head & mask],
 *                                 head++; store_release(ctrl->head, head)
 *              fill data[head & mask]
 *              head++; store_release(ctrl->head, head)
 *
 *   Consumer:  head = load_acquire(ctrl->head)
 *              copy data[tail & mask] for tail < head
 *              store_release(ctrl->tail, tail)
 *
 *   The acquire on tail in the producer pairs with the consumer's release: the
 *   consumer has finished copying a slot before the producer may overwrite it.
 *   The acquire on head in the consumer pairs with the producer's release: a
 *   record is complete before the consumer can see it.  So a record is never
 *   torn while the ring has room, and a full ring drops and counts instead of
 *   overwriting.
 *
 *   The producer never reads what user space may write: its head, mask, data
 *   pointer and lost count live in struct nvmetrace_ring_prod (kernel memory);
 *   the control page only receives copies.  A tail that user space corrupts
 *   can only make the ring look full, never make the producer write outside
 *   the data area.  "Full" must include tail > head: a consumer never
 *   publishes a tail past a head it has seen, and without that test a tail
 *   just below 2^64 (e.g. ~0) would pass head - tail <= mask by wrapping.
 */
#ifndef NVMETRACE_RING_CORE_H
#define NVMETRACE_RING_CORE_H

#include <linux/nvmetrace.h>

#if !defined(NVMETRACE_LOAD_ACQUIRE) || !defined(NVMETRACE_STORE_RELEASE) || \
	!defined(NVMETRACE_READ_ONCE) || !defined(NVMETRACE_WRITE_ONCE) || \
	!defined(NVMETRACE_RING_NOW)
#error "define the NVMETRACE_* ordering primitives and clock before including ring_core.h"
#endif

/* Producer state: private to the writer, never mapped to user space. */
struct nvmetrace_ring_prod {
	struct nvmetrace_ring_ctrl *ctrl;	/* shared control page */
	struct nvmetrace_rec *data;		/* shared records */
	__u64 head;				/* records committed */
	__u64 lost;				/* records dropped */
	__u32 mask;				/* nr_recs - 1 */
	__u32 seq;				/* next record's seq */
	__u32 cpu;				/* the ring's CPU, for markers */
	__u32 __pad;
	__u64 gap_recs;				/* dropped since the last marker */
	__u64 gap_first;			/* their first drop's time */
	__u64 gap_last;				/* their last drop's time */
};

/*
 * Lay out a ring: ctrl points at a zeroed control page, data at nr_recs
 * records right behind it in the same mapping.  nr_recs must be a power of
 * two.  Called before the ring is visible to anyone.
 */
static inline void nvmetrace_ring_init(struct nvmetrace_ring_prod *p,
				       struct nvmetrace_ring_ctrl *ctrl,
				       struct nvmetrace_rec *data,
				       __u32 nr_recs, __u32 cpu, __u64 map_size)
{
	p->ctrl = ctrl;
	p->data = data;
	p->head = 0;
	p->lost = 0;
	p->mask = nr_recs - 1;
	p->seq = 0;
	p->cpu = cpu;
	p->__pad = 0;
	p->gap_recs = 0;
	p->gap_first = 0;
	p->gap_last = 0;

	ctrl->magic = NVMETRACE_RING_MAGIC;
	ctrl->version = NVMETRACE_RING_VERSION;
	ctrl->compat_version = NVMETRACE_RING_COMPAT_VERSION;
	ctrl->size = sizeof(*ctrl);
	ctrl->rec_size = sizeof(*data);
	ctrl->nr_recs = nr_recs;
	ctrl->cpu = cpu;
	ctrl->data_offset = (__u64)((const char *)data - (const char *)ctrl);
	ctrl->map_size = map_size;
	ctrl->head = 0;
	ctrl->lost = 0;
	ctrl->gap_recs = 0;
	ctrl->gap_first = 0;
	ctrl->gap_last = 0;
	ctrl->tail = 0;
}

/*
 * Forget a drop run that no marker covers (its records stay counted in
 * lost).  Only while no producer can run: before a recording starts.
 */
static inline void nvmetrace_ring_forget_gap(struct nvmetrace_ring_prod *p)
{
	p->gap_recs = 0;
	NVMETRACE_WRITE_ONCE(p->ctrl->gap_recs, 0);
}

/* A record is dropped: count it, and note it in the current drop run. */
static inline void nvmetrace_ring_drop(struct nvmetrace_ring_prod *p)
{
	__u64 now = NVMETRACE_RING_NOW();

	if (!p->gap_recs) {
		p->gap_first = now;
		NVMETRACE_WRITE_ONCE(p->ctrl->gap_first, now);
	}
	p->gap_last = now;
	p->gap_recs++;
	p->lost++;
	NVMETRACE_WRITE_ONCE(p->ctrl->gap_last, now);
	NVMETRACE_WRITE_ONCE(p->ctrl->gap_recs, p->gap_recs);
	NVMETRACE_WRITE_ONCE(p->ctrl->lost, p->lost);
}

/*
 * Commit the GAP marker of the noted drop run into the free slot at head
 * (the caller has checked there is one more behind it) and end the run.
 */
static inline void nvmetrace_ring_put_gap(struct nvmetrace_ring_prod *p)
{
	struct nvmetrace_rec *m = &p->data[p->head & p->mask];

	m->ts = p->gap_last;
	m->lba = p->gap_first;
	m->aux = p->gap_recs;
	m->dev = p->cpu;
	m->len = 0;
	m->event = NVMETRACE_EV_GAP;
	m->qid = 0;
	m->cid = 0;
	m->tag = 0;
	m->cntlid = 0;
	m->opcode = 0;
	m->flags = 0;
	m->seq = p->seq++;
	p->head++;
	NVMETRACE_STORE_RELEASE(&p->ctrl->head, p->head);
	p->gap_recs = 0;
	NVMETRACE_WRITE_ONCE(p->ctrl->gap_recs, 0);
}

/*
 * Start a record.  Returns the slot to fill, or NULL (and counts the loss)
 * when the ring is full.  After a drop run the first record needs two free
 * slots: the run's GAP marker is committed first, so a marker is never
 * dropped and every dropped record is covered by exactly one marker.  The
 * caller must not be preempted or interrupted by another producer of this
 * ring until nvmetrace_ring_commit().  nr_recs must be 2 or more.
 */
static inline struct nvmetrace_rec *
nvmetrace_ring_reserve(struct nvmetrace_ring_prod *p)
{
	__u64 tail = NVMETRACE_LOAD_ACQUIRE(&p->ctrl->tail);
	__u64 room = (__u64)p->mask + 1 - (p->gap_recs ? 2 : 1);

	if (tail > p->head || p->head - tail > room) {
		nvmetrace_ring_drop(p);
		return (struct nvmetrace_rec *)0;
	}
	if (p->gap_recs)
		nvmetrace_ring_put_gap(p);
	return &p->data[p->head & p->mask];
}

/* Publish the record returned by the last nvmetrace_ring_reserve(). */
static inline void nvmetrace_ring_commit(struct nvmetrace_ring_prod *p,
					 struct nvmetrace_rec *rec)
{
	rec->seq = p->seq++;
	p->head++;
	NVMETRACE_STORE_RELEASE(&p->ctrl->head, p->head);
}

/*
 * Consumer: copy out up to max records into out[]; returns how many.  The
 * consumer's tail lives in the control page (it is the only writer).  A head
 * that is behind tail or more than a ring ahead of it means the control page
 * is not a ring this reader understands; return -1 and touch nothing.
 */
static inline long nvmetrace_ring_consume(struct nvmetrace_ring_ctrl *ctrl,
					  const struct nvmetrace_rec *data,
					  __u32 nr_recs,
					  struct nvmetrace_rec *out, __u32 max)
{
	__u64 head = NVMETRACE_LOAD_ACQUIRE(&ctrl->head);
	__u64 tail = NVMETRACE_READ_ONCE(ctrl->tail);
	__u64 avail = head - tail;
	__u32 mask = nr_recs - 1;
	__u32 n, i;

	if (head < tail || avail > (__u64)nr_recs)
		return -1;
	n = avail < (__u64)max ? (__u32)avail : max;
	for (i = 0; i < n; i++)
		out[i] = data[(tail + i) & mask];
	NVMETRACE_STORE_RELEASE(&ctrl->tail, tail + n);
	return (long)n;
}

#endif /* NVMETRACE_RING_CORE_H */
