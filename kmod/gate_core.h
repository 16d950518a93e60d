/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gate_core.h — what the hooks' gates remember of the sampled commands in
 * flight, so that a hook that runs for every command leaves at once while
 * none of them can be one it records (KUnit suite nvmetrace_gate,
 * gate_test.c).
 *
 * Two tables, each lock-free, each erring only toward "open" (a hook then
 * does the work it did before there was a gate), never toward "closed" while
 * a sampled command is in flight:
 *
 *  - struct nvmetrace_ptrset: a set of pointers (probes/nvmet.c: the nvmet
 *    requests of sampled commands between nvmet_req_init and
 *    nvmet_req_complete; probes/uring.c: the io_uring requests that may be
 *    sampled, until their CQE).  Buckets of a cache line by the pointer's hash; a
 *    pointer takes a free way with cmpxchg.  A pointer that finds its bucket
 *    full sets full, which keeps the set "not empty" until it is cleared.
 *  - struct nvmetrace_tag_gate: per queue, the tags that carry a sampled
 *    command (probes/nvme_tcp.c: from its command PDU's send to the PDU
 *    that ends it).  A slot of a table by the queue's hash belongs to the
 *    first queue that sets a tag in it; a second queue hashed to it, or a tag
 *    past NVMETRACE_TAG_GATE_TAGS, makes it shared: open to every queue
 *    hashed there until the table is cleared.
 *
 * The callers clear the tables at START, while no hook runs.
 */
#ifndef NVMETRACE_GATE_CORE_H
#define NVMETRACE_GATE_CORE_H

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/cache.h>
#include <linux/compiler.h>
#include <linux/hash.h>
#include <linux/string.h>
#include <linux/types.h>

/* ------------------------------------------------------- a set of pointers */

#define NVMETRACE_PTRSET_BITS	8
#define NVMETRACE_PTRSET_WAYS	(L1_CACHE_BYTES / sizeof(void *))

struct nvmetrace_ptrset_bucket {
	const void *p[NVMETRACE_PTRSET_WAYS];	/* NULL: free */
} ____cacheline_aligned_in_smp;

struct nvmetrace_ptrset {
	struct nvmetrace_ptrset_bucket b[1 << NVMETRACE_PTRSET_BITS];
	atomic_t n;	/* pointers in the buckets */
	bool full;	/* a pointer found no room */
};

static inline struct nvmetrace_ptrset_bucket *
nvmetrace_ptrset_bucket(struct nvmetrace_ptrset *s, const void *p)
{
	return &s->b[hash_ptr((void *)p, NVMETRACE_PTRSET_BITS)];
}

/* whether the set may hold a pointer: false only when it holds none */
static __always_inline bool nvmetrace_ptrset_any(const struct nvmetrace_ptrset *s)
{
	return atomic_read(&s->n) || READ_ONCE(s->full);
}

/* p joins s (once: a pointer already in it stays one entry) */
static inline void nvmetrace_ptrset_add(struct nvmetrace_ptrset *s, const void *p)
{
	struct nvmetrace_ptrset_bucket *b = nvmetrace_ptrset_bucket(s, p);
	unsigned int i;

	for (i = 0; i < NVMETRACE_PTRSET_WAYS; i++)
		if (READ_ONCE(b->p[i]) == p)
			return;
	for (i = 0; i < NVMETRACE_PTRSET_WAYS; i++)
		if (!READ_ONCE(b->p[i]) && !cmpxchg(&b->p[i], NULL, p)) {
			atomic_inc(&s->n);
			return;
		}
	WRITE_ONCE(s->full, true);
}

/* p leaves s (nothing when it is not in it) */
static inline void nvmetrace_ptrset_del(struct nvmetrace_ptrset *s, const void *p)
{
	struct nvmetrace_ptrset_bucket *b = nvmetrace_ptrset_bucket(s, p);
	unsigned int i;

	for (i = 0; i < NVMETRACE_PTRSET_WAYS; i++)
		if (READ_ONCE(b->p[i]) == p && cmpxchg(&b->p[i], p, NULL) == p)
			atomic_dec(&s->n);
}

/* empty, and no longer full: while nothing adds or deletes */
static inline void nvmetrace_ptrset_clear(struct nvmetrace_ptrset *s)
{
	memset(s->b, 0, sizeof(s->b));
	atomic_set(&s->n, 0);
	s->full = false;
}

/* ------------------------------------------------------ tags of queues */

#define NVMETRACE_TAG_GATE_BITS		8
#define NVMETRACE_TAG_GATE_TAGS		1024	/* NVMF_MAX_QUEUE_SIZE */
#define NVMETRACE_TAG_GATE_SHARED	((const void *)1)

struct nvmetrace_tag_gate {
	const void *queue;	/* owner; NULL: none yet; NVMETRACE_TAG_GATE_SHARED */
	atomic_t n;		/* tags set */
	unsigned long tags[BITS_TO_LONGS(NVMETRACE_TAG_GATE_TAGS)];
} ____cacheline_aligned_in_smp;

static __always_inline struct nvmetrace_tag_gate *
nvmetrace_tag_gate_of(struct nvmetrace_tag_gate *table, const void *queue)
{
	return &table[hash_ptr((void *)queue, NVMETRACE_TAG_GATE_BITS)];
}

/* whether queue may have a tag set: false only when it has none */
static __always_inline bool nvmetrace_tag_gate_open(struct nvmetrace_tag_gate *table,
						    const void *queue)
{
	const struct nvmetrace_tag_gate *g = nvmetrace_tag_gate_of(table, queue);
	const void *owner = READ_ONCE(g->queue);

	if (owner == NVMETRACE_TAG_GATE_SHARED)
		return true;
	return owner == queue && atomic_read(&g->n);
}

/* queue's tag carries a sampled command */
static inline void nvmetrace_tag_gate_set(struct nvmetrace_tag_gate *table,
					  const void *queue, u32 tag)
{
	struct nvmetrace_tag_gate *g = nvmetrace_tag_gate_of(table, queue);
	const void *owner = cmpxchg(&g->queue, NULL, queue);

	if ((owner && owner != queue) || tag >= NVMETRACE_TAG_GATE_TAGS) {
		WRITE_ONCE(g->queue, NVMETRACE_TAG_GATE_SHARED);
		return;
	}
	if (!test_and_set_bit(tag, g->tags))
		atomic_inc(&g->n);
}

/* queue's command on tag has ended (nothing when the tag is not set) */
static inline void nvmetrace_tag_gate_clear(struct nvmetrace_tag_gate *table,
					    const void *queue, u32 tag)
{
	struct nvmetrace_tag_gate *g = nvmetrace_tag_gate_of(table, queue);

	if (tag >= NVMETRACE_TAG_GATE_TAGS || READ_ONCE(g->queue) != queue ||
	    !test_bit(tag, g->tags))
		return;
	if (test_and_clear_bit(tag, g->tags))
		atomic_dec(&g->n);
}

#endif /* NVMETRACE_GATE_CORE_H */
