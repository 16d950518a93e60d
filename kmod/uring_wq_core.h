/* SPDX-License-Identifier: GPL-2.0 */
/*
 * uring_wq_core.h — io_uring requests handed to io-wq, until a worker
 * issues them (probes/uring.c; KUnit suite nvmetrace_uring_wq,
 * uring_wq_test.c).
 *
 * The punt (io_uring_queue_async_work) keeps the request's submission time
 * and the time it was queued; the io-wq worker's file submission finds them
 * by the request's address.  The table is a set of ways per hash of the
 * address: a ring recycles a handful of request structures for its whole
 * life, so two of them that hash alike meet at every punt and, in a table of
 * one way, would take each other's place every time.  A set holds both.
 *
 * A writer claims an entry with cmpxchg — the request's own from its last
 * punt, else a free one, else one a worker has issued, else the one queued
 * longest ago — writes the times and publishes the request last.  A reader
 * takes the times only if it sees its request before and after reading
 * them.  Two punts racing for the last entry of a set lose one time (the
 * command is then not known as io-wq's), never mix two requests' times.
 *
 * The same table keeps NVMe passthrough commands (IORING_OP_URING_CMD)
 * between the SQE taken and the driver's setup, and between the setup and
 * the CQE: there the caller's word, published with the times, carries the
 * submitter's thread id or the command's device and op.
 *
 * nvmetrace_uring_cqe_waited() is the rule by which a call that waited for
 * completions hands CQEs over at its return.
 */
#ifndef NVMETRACE_URING_WQ_CORE_H
#define NVMETRACE_URING_WQ_CORE_H

#include <linux/atomic.h>
#include <linux/cache.h>
#include <linux/compiler.h>
#include <linux/limits.h>
#include <linux/types.h>

struct nvmetrace_uring_wq {
	const void *req;	/* NULL: free; NVMETRACE_URING_WQ_BUSY: claimed; written last */
	u64 start;		/* the request's submission */
	u64 queued;		/* handed to io-wq */
	u64 word;		/* the caller's own, published with the times */
	bool issued;		/* a worker found it: the first to go */
} ____cacheline_aligned_in_smp;	/* written per punt: a line per request */

#define NVMETRACE_URING_WQ_BUSY	((const void *)1)
#define NVMETRACE_URING_WQ_WAYS	4

/* the entry of set that req's punt writes, claimed; NULL: two races lost */
static inline struct nvmetrace_uring_wq *
nvmetrace_uring_wq_claim(struct nvmetrace_uring_wq *set, const void *req)
{
	int try, i;

	for (try = 0; try < 2; try++) {
		struct nvmetrace_uring_wq *victim = NULL;
		const void *was = NULL;
		u64 oldest = U64_MAX;
		int rank = 4;	/* 0 its own, 1 free, 2 issued, 3 queued */

		for (i = 0; i < NVMETRACE_URING_WQ_WAYS && rank; i++) {
			struct nvmetrace_uring_wq *w = &set[i];
			const void *cur = READ_ONCE(w->req);
			u64 queued = 0;
			int r;

			if (cur == NVMETRACE_URING_WQ_BUSY)
				continue;
			if (cur == req)
				r = 0;
			else if (!cur)
				r = 1;
			else if (READ_ONCE(w->issued))
				r = 2;
			else
				r = 3;
			if (r == 3)
				queued = READ_ONCE(w->queued);
			/* the first of the best rank; of those queued, the oldest */
			if (r < rank || (r == 3 && rank == 3 && queued < oldest)) {
				victim = w;
				was = cur;
				rank = r;
				oldest = queued;
			}
		}
		/* a full barrier: the claim is seen before the times change */
		if (victim && cmpxchg(&victim->req, was, NVMETRACE_URING_WQ_BUSY) == was)
			return victim;
	}
	return NULL;
}

/* w, claimed, becomes req's: the times and word, then req */
static inline void nvmetrace_uring_wq_publish_word(struct nvmetrace_uring_wq *w,
						   const void *req, u64 start, u64 queued,
						   u64 word)
{
	WRITE_ONCE(w->start, start);
	WRITE_ONCE(w->queued, queued);
	WRITE_ONCE(w->word, word);
	WRITE_ONCE(w->issued, false);
	smp_store_release(&w->req, req);	/* the times, then req */
}

static inline void nvmetrace_uring_wq_publish(struct nvmetrace_uring_wq *w,
					      const void *req, u64 start, u64 queued)
{
	nvmetrace_uring_wq_publish_word(w, req, start, queued, 0);
}

/*
 * req's times, if a punt left them in set.  Left in place: the worker may try
 * again (a nonblocking try, then a blocking one), and each try is recorded;
 * marked issued, so that it is the first to make room.
 */
static inline bool nvmetrace_uring_wq_find_word(struct nvmetrace_uring_wq *set,
						const void *req, u64 *start, u64 *queued,
						u64 *word)
{
	struct nvmetrace_uring_wq *w;
	int i;

	for (i = 0; ; i++) {
		if (i == NVMETRACE_URING_WQ_WAYS)
			return false;
		w = &set[i];
		/* req, then the times its writer published with it */
		if (smp_load_acquire(&w->req) == req)
			break;
	}
	*start = READ_ONCE(w->start);
	*queued = READ_ONCE(w->queued);
	*word = READ_ONCE(w->word);
	smp_rmb();	/* the times, then req again */
	if (READ_ONCE(w->req) != req)
		return false;	/* taken over by another request meanwhile */
	if (!READ_ONCE(w->issued))
		WRITE_ONCE(w->issued, true);
	return true;
}

/*
 * req's times and word, taken out of set: found, then freed with a cmpxchg,
 * so that of two readers one has them, and a later request at the same
 * address never finds this one's.
 */
static inline bool nvmetrace_uring_wq_take_word(struct nvmetrace_uring_wq *set,
						const void *req, u64 *start, u64 *queued,
						u64 *word)
{
	int i;

	if (!nvmetrace_uring_wq_find_word(set, req, start, queued, word))
		return false;
	for (i = 0; i < NVMETRACE_URING_WQ_WAYS; i++)
		if (READ_ONCE(set[i].req) == req)
			return cmpxchg(&set[i].req, req, NULL) == req;
	return false;
}

static inline bool nvmetrace_uring_wq_find(struct nvmetrace_uring_wq *set,
					   const void *req, u64 *start, u64 *queued)
{
	u64 word;

	return nvmetrace_uring_wq_find_word(set, req, start, queued, &word);
}

/*
 * Whether the CQE at the ring position "index" is one a call that waited for
 * min_complete completions hands over at its return: the oldest
 * min_complete CQEs of the ring from its head (user space's, which does not
 * move while the task is in the call).  A caller may take more from the ring
 * afterwards, one by one between its next calls (fio reaps one at a time at
 * its default batch); those are seen by the head at a later entry.  Indices
 * are free-running u32s: the comparison holds across their wrap.
 */
static inline bool nvmetrace_uring_cqe_waited(u32 index, u32 head, u32 min_complete)
{
	return (s32)(index - head) >= 0 && index - head < min_complete;
}

#endif /* NVMETRACE_URING_WQ_CORE_H */
