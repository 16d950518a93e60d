// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite nvmetrace_ring: the ring logic of ring_core.h on its own.
 *
 * Needs nothing but ring_core.h and the UAPI header (no hooks, no netlink,
 * no device), so it builds on UML.  Producer and consumer run on one thread:
 * these tests pin down the arithmetic; the concurrent protocol is exercised
 * by the user-space test with two threads.
 *
 * Every ring here has guard records on both sides of its data area, filled
 * with a pattern, so any out-of-range write shows up.
 */
#include <kunit/test.h>
#include <linux/compiler.h>
#include <linux/limits.h>
#include <linux/string.h>
#include <asm/barrier.h>

/* the module's primitives (nvmetrace.h): acquire/release pair head and tail */
#define NVMETRACE_LOAD_ACQUIRE(p)	smp_load_acquire(p)	/* of the other side's index */
#define NVMETRACE_STORE_RELEASE(p, v)	smp_store_release(p, v)	/* of our own index */
#define NVMETRACE_READ_ONCE(x)		READ_ONCE(x)
#define NVMETRACE_WRITE_ONCE(x, v)	WRITE_ONCE(x, v)
/* a clock the tests set: each drop reads the next tick */
static u64 test_clock;
#define NVMETRACE_RING_NOW()		(test_clock++)
#include "ring_core.h"

#define TEST_NR_RECS	8u
#define TEST_GUARD	2u		/* guard records before and after */
#define GUARD_BYTE	0xa5

struct test_ring {
	struct nvmetrace_ring_prod prod;
	struct nvmetrace_ring_ctrl *ctrl;
	struct nvmetrace_rec *buf;	/* guard, data, guard */
	struct nvmetrace_rec *data;
	struct nvmetrace_rec *out;	/* nr_recs records for the consumer */
	struct nvmetrace_rec *snap;	/* nr_recs records: a copy of data */
	u32 nr_recs;
};

static struct test_ring *test_ring_new(struct kunit *test, u32 nr_recs)
{
	struct test_ring *r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	size_t n = nr_recs + 2 * TEST_GUARD;

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, r);
	r->ctrl = kunit_kzalloc(test, sizeof(*r->ctrl), GFP_KERNEL);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, r->ctrl);
	r->buf = kunit_kcalloc(test, n, sizeof(*r->buf), GFP_KERNEL);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, r->buf);
	memset(r->buf, GUARD_BYTE, n * sizeof(*r->buf));
	r->data = r->buf + TEST_GUARD;
	memset(r->data, 0, nr_recs * sizeof(*r->data));
	r->out = kunit_kcalloc(test, nr_recs, sizeof(*r->out), GFP_KERNEL);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, r->out);
	r->snap = kunit_kcalloc(test, nr_recs, sizeof(*r->snap), GFP_KERNEL);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, r->snap);
	r->nr_recs = nr_recs;
	nvmetrace_ring_init(&r->prod, r->ctrl, r->data, nr_recs, 3, 4096);
	return r;
}

static void test_guards_intact(struct kunit *test, const struct test_ring *r)
{
	const u8 *lo = (const u8 *)r->buf;
	const u8 *hi = (const u8 *)(r->data + r->nr_recs);
	size_t i;

	for (i = 0; i < TEST_GUARD * sizeof(*r->buf); i++) {
		KUNIT_ASSERT_EQ_MSG(test, lo[i], GUARD_BYTE, "guard before data, byte %zu", i);
		KUNIT_ASSERT_EQ_MSG(test, hi[i], GUARD_BYTE, "guard after data, byte %zu", i);
	}
}

/* A record whose every field derives from n, so a round trip is checkable. */
static void test_rec_fill(struct nvmetrace_rec *rec, u64 n)
{
	rec->ts = 1000000000ull + n * 1000;
	rec->lba = n * 8;
	rec->aux = ~n;
	rec->dev = 0x10300000u | (u32)(n & 0xfffff);
	rec->len = 4096 * (u32)(n % 7 + 1);
	rec->event = (u16)(n % NVMETRACE_EV_MAX + 1);
	rec->qid = (u16)(n % 5);
	rec->cid = (u16)(n * 3);
	rec->tag = (u16)(n * 7);
	rec->cntlid = (u16)(n + 1);
	rec->opcode = (u8)(n & 1 ? 0x02 : 0x01);
	rec->flags = NVMETRACE_REC_HAS_CID | NVMETRACE_REC_HAS_QID;
	rec->seq = 0xdeadbeef;	/* commit must overwrite it */
}

/* Produce one record with payload n; false if the ring dropped it. */
static bool test_produce(struct test_ring *r, u64 n)
{
	struct nvmetrace_rec *rec = nvmetrace_ring_reserve(&r->prod);

	if (!rec)
		return false;
	test_rec_fill(rec, n);
	nvmetrace_ring_commit(&r->prod, rec);
	return true;
}

static long test_consume(struct test_ring *r, struct nvmetrace_rec *out, u32 max)
{
	return nvmetrace_ring_consume(r->ctrl, r->data, r->nr_recs, out, max);
}

static void nvmetrace_ring_test_init(struct kunit *test)
{
	struct test_ring *r = test_ring_new(test, TEST_NR_RECS);

	KUNIT_EXPECT_EQ(test, r->ctrl->magic, NVMETRACE_RING_MAGIC);
	KUNIT_EXPECT_EQ(test, r->ctrl->version, NVMETRACE_RING_VERSION);
	KUNIT_EXPECT_EQ(test, r->ctrl->compat_version, NVMETRACE_RING_COMPAT_VERSION);
	KUNIT_EXPECT_EQ(test, r->ctrl->size, (u32)NVMETRACE_RING_CTRL_SIZE);
	KUNIT_EXPECT_EQ(test, r->ctrl->rec_size, (u32)sizeof(struct nvmetrace_rec));
	KUNIT_EXPECT_EQ(test, r->ctrl->nr_recs, TEST_NR_RECS);
	KUNIT_EXPECT_EQ(test, r->ctrl->cpu, 3u);
	KUNIT_EXPECT_EQ(test, r->ctrl->map_size, 4096ull);
	KUNIT_EXPECT_EQ(test, r->ctrl->data_offset,
			(u64)((char *)r->data - (char *)r->ctrl));
	KUNIT_EXPECT_EQ(test, r->ctrl->head, 0ull);
	KUNIT_EXPECT_EQ(test, r->ctrl->tail, 0ull);
	KUNIT_EXPECT_EQ(test, r->ctrl->lost, 0ull);
	KUNIT_EXPECT_EQ(test, r->prod.mask, TEST_NR_RECS - 1);
}

/* nr_recs records fit; the next one is dropped and nothing is overwritten. */
static void nvmetrace_ring_test_fill_to_full(struct kunit *test)
{
	struct test_ring *r = test_ring_new(test, TEST_NR_RECS);
	u32 i;

	for (i = 0; i < TEST_NR_RECS; i++) {
		KUNIT_ASSERT_TRUE_MSG(test, test_produce(r, i), "record %u", i);
		KUNIT_EXPECT_EQ(test, r->ctrl->head, (u64)i + 1);
	}
	KUNIT_EXPECT_EQ(test, r->ctrl->lost, 0ull);
	memcpy(r->snap, r->data, TEST_NR_RECS * sizeof(*r->data));

	KUNIT_EXPECT_NULL(test, nvmetrace_ring_reserve(&r->prod));
	KUNIT_EXPECT_EQ(test, r->ctrl->head, (u64)TEST_NR_RECS);
	KUNIT_EXPECT_EQ(test, r->prod.head, (u64)TEST_NR_RECS);
	KUNIT_EXPECT_EQ(test, r->ctrl->lost, 1ull);
	KUNIT_EXPECT_EQ(test, memcmp(r->snap, r->data, TEST_NR_RECS * sizeof(*r->data)), 0);
	test_guards_intact(test, r);
}

/* Every drop is counted once, and room made by the consumer is used again. */
static void nvmetrace_ring_test_drop_counting(struct kunit *test)
{
	struct test_ring *r = test_ring_new(test, TEST_NR_RECS);
	struct nvmetrace_rec *out = r->out;
	u32 i, n = 0;

	for (i = 0; i < TEST_NR_RECS; i++)
		KUNIT_ASSERT_TRUE(test, test_produce(r, n++));
	for (i = 0; i < 100; i++)
		KUNIT_EXPECT_FALSE(test, test_produce(r, 1000 + i));
	KUNIT_EXPECT_EQ(test, r->ctrl->lost, 100ull);
	KUNIT_EXPECT_EQ(test, r->prod.lost, 100ull);

	/* three free slots: the run's marker and two records */
	KUNIT_ASSERT_EQ(test, test_consume(r, out, 3), 3L);
	for (i = 0; i < 2; i++)
		KUNIT_EXPECT_TRUE(test, test_produce(r, n++));
	KUNIT_EXPECT_FALSE(test, test_produce(r, 2000));
	KUNIT_EXPECT_EQ(test, r->ctrl->lost, 101ull);
	KUNIT_EXPECT_EQ(test, r->ctrl->head, (u64)TEST_NR_RECS + 3);

	/* left: records 3..7, the marker of the 100, records 8 and 9 */
	KUNIT_ASSERT_EQ(test, test_consume(r, out, TEST_NR_RECS), (long)TEST_NR_RECS);
	for (i = 0; i < 5; i++)
		KUNIT_EXPECT_EQ(test, out[i].lba, (u64)(3 + i) * 8);
	KUNIT_EXPECT_EQ(test, out[5].event, (u16)NVMETRACE_EV_GAP);
	KUNIT_EXPECT_EQ(test, out[5].aux, 100ull);
	KUNIT_EXPECT_EQ(test, out[6].lba, 8ull * 8);
	KUNIT_EXPECT_EQ(test, out[7].lba, 9ull * 8);
	KUNIT_EXPECT_EQ(test, test_consume(r, out, TEST_NR_RECS), 0L);
	/* the last drop opened a run that no marker covers yet */
	KUNIT_EXPECT_EQ(test, r->ctrl->gap_recs, 1ull);
	test_guards_intact(test, r);
}

/* Many laps in uneven batches: order, payload and seq stay continuous. */
static void nvmetrace_ring_test_wrap_seq(struct kunit *test)
{
	struct test_ring *r = test_ring_new(test, TEST_NR_RECS);
	struct nvmetrace_rec *out = r->out, want;
	u64 produced = 0, consumed = 0;
	u32 round, i;
	long got;

	for (round = 0; round < 200; round++) {
		u32 burst = round % (TEST_NR_RECS + 1);	/* 0..nr_recs */

		for (i = 0; i < burst; i++)
			KUNIT_ASSERT_TRUE(test, test_produce(r, produced++));
		got = test_consume(r, out, round % 5 + 1);
		KUNIT_ASSERT_GE(test, got, 0L);
		for (i = 0; i < got; i++, consumed++) {
			KUNIT_ASSERT_EQ(test, out[i].seq, (u32)consumed);
			KUNIT_ASSERT_EQ(test, out[i].lba, consumed * 8);
		}
		/* drain so the next burst always fits */
		while ((got = test_consume(r, out, TEST_NR_RECS)) > 0) {
			for (i = 0; i < got; i++, consumed++) {
				test_rec_fill(&want, consumed);
				want.seq = (u32)consumed;
				KUNIT_ASSERT_EQ(test, memcmp(&out[i], &want, sizeof(want)), 0);
			}
		}
		KUNIT_ASSERT_EQ(test, got, 0L);
	}
	KUNIT_EXPECT_EQ(test, consumed, produced);
	KUNIT_EXPECT_GT(test, produced, 10ull * TEST_NR_RECS);	/* really wrapped */
	KUNIT_EXPECT_EQ(test, r->ctrl->head, produced);
	KUNIT_EXPECT_EQ(test, r->ctrl->tail, consumed);
	KUNIT_EXPECT_EQ(test, r->ctrl->lost, 0ull);
	test_guards_intact(test, r);
}

/* The consumer refuses a head behind tail or more than a ring ahead. */
static void nvmetrace_ring_test_consumer_bounds(struct kunit *test)
{
	struct test_ring *r = test_ring_new(test, TEST_NR_RECS);
	struct nvmetrace_rec *out = r->out;

	r->ctrl->tail = 100;
	r->ctrl->head = 99;				/* head < tail */
	KUNIT_EXPECT_EQ(test, test_consume(r, out, TEST_NR_RECS), -1L);
	KUNIT_EXPECT_EQ(test, r->ctrl->tail, 100ull);

	r->ctrl->head = 100 + TEST_NR_RECS + 1;		/* head > tail + nr */
	KUNIT_EXPECT_EQ(test, test_consume(r, out, TEST_NR_RECS), -1L);
	KUNIT_EXPECT_EQ(test, r->ctrl->tail, 100ull);

	r->ctrl->head = U64_MAX;
	KUNIT_EXPECT_EQ(test, test_consume(r, out, TEST_NR_RECS), -1L);
	KUNIT_EXPECT_EQ(test, r->ctrl->tail, 100ull);

	r->ctrl->head = 100 + TEST_NR_RECS;		/* exactly full: valid */
	KUNIT_EXPECT_EQ(test, test_consume(r, out, TEST_NR_RECS), (long)TEST_NR_RECS);
	KUNIT_EXPECT_EQ(test, r->ctrl->tail, 100ull + TEST_NR_RECS);

	r->ctrl->head = r->ctrl->tail;			/* empty: valid */
	KUNIT_EXPECT_EQ(test, test_consume(r, out, TEST_NR_RECS), 0L);
}

/*
 * A tail written by a buggy or hostile consumer can only make the ring look
 * full: the producer drops and counts, and writes nothing anywhere.
 */
static void nvmetrace_ring_test_corrupt_tail(struct kunit *test)
{
	static const u64 bad_tails[] = {
		U64_MAX,		/* far ahead of head */
		5,			/* ahead of head by a little */
		1ull << 40,
	};
	struct test_ring *r = test_ring_new(test, TEST_NR_RECS);
	u64 lost = 0;
	u32 i, k;

	/* two records in, none consumed: head = 2 */
	KUNIT_ASSERT_TRUE(test, test_produce(r, 0));
	KUNIT_ASSERT_TRUE(test, test_produce(r, 1));
	memcpy(r->snap, r->data, TEST_NR_RECS * sizeof(*r->data));

	for (k = 0; k < ARRAY_SIZE(bad_tails); k++) {
		r->ctrl->tail = bad_tails[k];
		for (i = 0; i < 3 * TEST_NR_RECS; i++) {
			KUNIT_EXPECT_NULL(test, nvmetrace_ring_reserve(&r->prod));
			lost++;
		}
		KUNIT_EXPECT_EQ(test, r->prod.head, 2ull);
		KUNIT_EXPECT_EQ(test, r->ctrl->head, 2ull);
		KUNIT_EXPECT_EQ(test, r->ctrl->lost, lost);
		KUNIT_EXPECT_EQ(test, memcmp(r->snap, r->data, TEST_NR_RECS * sizeof(*r->data)), 0);
		test_guards_intact(test, r);
	}

	/* a tail far behind head (head - tail > mask): full as well */
	r->ctrl->tail = 0;
	for (i = 0; i < TEST_NR_RECS - 3; i++)	/* and the marker */
		KUNIT_ASSERT_TRUE(test, test_produce(r, 2 + i));
	r->prod.head += 1000;	/* as if many laps had been written */
	KUNIT_EXPECT_NULL(test, nvmetrace_ring_reserve(&r->prod));
	test_guards_intact(test, r);

	/* a sane tail again: the producer resumes */
	r->ctrl->tail = r->prod.head;
	KUNIT_EXPECT_TRUE(test, test_produce(r, 42));
	test_guards_intact(test, r);
}

/* Whatever the producer fills in comes out bit for bit, seq included. */
static void nvmetrace_ring_test_round_trip(struct kunit *test)
{
	struct test_ring *r = test_ring_new(test, TEST_NR_RECS);
	struct nvmetrace_rec *out = r->out, want;
	struct nvmetrace_rec *rec;
	u32 i;

	/* extreme values in every field */
	rec = nvmetrace_ring_reserve(&r->prod);
	KUNIT_ASSERT_NOT_NULL(test, rec);
	memset(rec, 0xff, sizeof(*rec));
	nvmetrace_ring_commit(&r->prod, rec);
	for (i = 1; i < TEST_NR_RECS; i++)
		KUNIT_ASSERT_TRUE(test, test_produce(r, i));

	KUNIT_ASSERT_EQ(test, test_consume(r, out, TEST_NR_RECS), (long)TEST_NR_RECS);
	memset(&want, 0xff, sizeof(want));
	want.seq = 0;
	KUNIT_EXPECT_EQ(test, memcmp(&out[0], &want, sizeof(want)), 0);
	for (i = 1; i < TEST_NR_RECS; i++) {
		test_rec_fill(&want, i);
		want.seq = i;
		KUNIT_EXPECT_EQ_MSG(test, memcmp(&out[i], &want, sizeof(want)), 0,
				    "record %u", i);
	}
	KUNIT_EXPECT_EQ(test, r->ctrl->tail, (u64)TEST_NR_RECS);
	test_guards_intact(test, r);
}

/*
 * A drop run is covered by one GAP marker, committed just before the first
 * record that finds two free slots: the ring's CPU, the first and last drop's
 * times, the exact count.  With one free slot the run goes on.
 */
static void nvmetrace_ring_test_gap_marker(struct kunit *test)
{
	struct test_ring *r = test_ring_new(test, TEST_NR_RECS);
	struct nvmetrace_rec *out = r->out;
	u32 i;

	for (i = 0; i < TEST_NR_RECS; i++)
		KUNIT_ASSERT_TRUE(test, test_produce(r, i));
	test_clock = 500;
	for (i = 0; i < 5; i++)
		KUNIT_EXPECT_FALSE(test, test_produce(r, 100 + i));
	KUNIT_EXPECT_EQ(test, r->ctrl->gap_recs, 5ull);
	KUNIT_EXPECT_EQ(test, r->ctrl->gap_first, 500ull);
	KUNIT_EXPECT_EQ(test, r->ctrl->gap_last, 504ull);

	/* one free slot: no room for marker and record, the run grows */
	KUNIT_ASSERT_EQ(test, test_consume(r, out, 1), 1L);
	KUNIT_EXPECT_FALSE(test, test_produce(r, 200));
	KUNIT_EXPECT_EQ(test, r->ctrl->head, (u64)TEST_NR_RECS);
	KUNIT_EXPECT_EQ(test, r->ctrl->lost, 6ull);

	/* two: the marker, then the record */
	KUNIT_ASSERT_EQ(test, test_consume(r, out, 1), 1L);
	KUNIT_EXPECT_TRUE(test, test_produce(r, 300));
	KUNIT_EXPECT_EQ(test, r->ctrl->head, (u64)TEST_NR_RECS + 2);
	KUNIT_EXPECT_EQ(test, r->ctrl->gap_recs, 0ull);
	KUNIT_ASSERT_EQ(test, test_consume(r, out, TEST_NR_RECS), (long)TEST_NR_RECS);
	KUNIT_EXPECT_EQ(test, out[5].lba, 7ull * 8);
	KUNIT_EXPECT_EQ(test, out[6].event, (u16)NVMETRACE_EV_GAP);
	KUNIT_EXPECT_EQ(test, out[6].dev, 3u);
	KUNIT_EXPECT_EQ(test, out[6].lba, 500ull);
	KUNIT_EXPECT_EQ(test, out[6].ts, 505ull);
	KUNIT_EXPECT_EQ(test, out[6].aux, 6ull);
	KUNIT_EXPECT_EQ(test, out[6].seq, TEST_NR_RECS);
	KUNIT_EXPECT_EQ(test, out[6].len, 0u);
	KUNIT_EXPECT_EQ(test, out[6].flags, 0);
	KUNIT_EXPECT_EQ(test, out[7].lba, 300ull * 8);
	KUNIT_EXPECT_EQ(test, out[7].seq, TEST_NR_RECS + 1);

	/* once written, a marker is not repeated */
	KUNIT_EXPECT_TRUE(test, test_produce(r, 301));
	KUNIT_ASSERT_EQ(test, test_consume(r, out, TEST_NR_RECS), 1L);
	KUNIT_EXPECT_EQ(test, out[0].lba, 301ull * 8);
	KUNIT_EXPECT_EQ(test, r->ctrl->lost, 6ull);
	test_guards_intact(test, r);
}

/* The smallest ring, two records, still recovers after a drop run. */
static void nvmetrace_ring_test_two_slots(struct kunit *test)
{
	struct test_ring *r = test_ring_new(test, 2);
	struct nvmetrace_rec *out = r->out;
	u32 i;

	KUNIT_ASSERT_TRUE(test, test_produce(r, 0));
	KUNIT_ASSERT_TRUE(test, test_produce(r, 1));
	for (i = 0; i < 10; i++) {
		/* full: a run of one, then room for its marker and a record */
		KUNIT_EXPECT_FALSE(test, test_produce(r, 100 + i));
		KUNIT_ASSERT_EQ(test, test_consume(r, out, 2), 2L);
		if (i) {
			KUNIT_EXPECT_EQ(test, out[0].event, (u16)NVMETRACE_EV_GAP);
			KUNIT_EXPECT_EQ(test, out[0].aux, 1ull);
			KUNIT_EXPECT_EQ(test, out[1].lba, (u64)(200 + i - 1) * 8);
		}
		KUNIT_EXPECT_TRUE(test, test_produce(r, 200 + i));
	}
	KUNIT_ASSERT_EQ(test, test_consume(r, out, 2), 2L);
	KUNIT_EXPECT_EQ(test, out[0].event, (u16)NVMETRACE_EV_GAP);
	KUNIT_EXPECT_EQ(test, out[1].lba, 209ull * 8);
	KUNIT_EXPECT_EQ(test, r->ctrl->lost, 10ull);
	test_guards_intact(test, r);
}

static struct kunit_case nvmetrace_ring_test_cases[] = {
	KUNIT_CASE(nvmetrace_ring_test_init),
	KUNIT_CASE(nvmetrace_ring_test_fill_to_full),
	KUNIT_CASE(nvmetrace_ring_test_drop_counting),
	KUNIT_CASE(nvmetrace_ring_test_wrap_seq),
	KUNIT_CASE(nvmetrace_ring_test_consumer_bounds),
	KUNIT_CASE(nvmetrace_ring_test_corrupt_tail),
	KUNIT_CASE(nvmetrace_ring_test_round_trip),
	KUNIT_CASE(nvmetrace_ring_test_gap_marker),
	KUNIT_CASE(nvmetrace_ring_test_two_slots),
	{}
};

static struct kunit_suite nvmetrace_ring_test_suite = {
	.name = "nvmetrace_ring",
	.test_cases = nvmetrace_ring_test_cases,
};

kunit_test_suite(nvmetrace_ring_test_suite);

MODULE_DESCRIPTION("KUnit tests for the nvmetrace record ring");
MODULE_LICENSE("GPL");
