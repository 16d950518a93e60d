// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite nvmetrace_uring_wq: the table of io_uring requests handed to
 * io-wq (uring_wq_core.h).  Every case works on one set, as requests whose
 * addresses hash alike would: the set must keep as many of them as it has
 * ways, let a request's new punt take its own entry, and make room by
 * dropping an issued request before a queued one, and the oldest queued
 * one before a newer.
 */
#include <kunit/test.h>
#include <linux/string.h>

#include "uring_wq_core.h"

#define WAYS NVMETRACE_URING_WQ_WAYS

/* request "addresses": never dereferenced */
static const void *req_at(unsigned long i)
{
	return (const void *)(0x1000UL + 0x100UL * i);
}

static bool punt(struct nvmetrace_uring_wq *set, const void *req, u64 start, u64 queued)
{
	struct nvmetrace_uring_wq *w = nvmetrace_uring_wq_claim(set, req);

	if (!w)
		return false;
	nvmetrace_uring_wq_publish(w, req, start, queued);
	return true;
}

static int entries_of(const struct nvmetrace_uring_wq *set, const void *req)
{
	int i, n = 0;

	for (i = 0; i < WAYS; i++)
		n += set[i].req == req;
	return n;
}

/* requests that meet in one set each keep their own times */
static void nvmetrace_uring_wq_set_holds_its_ways(struct kunit *test)
{
	struct nvmetrace_uring_wq set[WAYS];
	u64 start, queued;
	int round, i;

	memset(set, 0, sizeof(set));
	/* punted again and again, as a ring recycles them: none ever lost */
	for (round = 0; round < 3; round++) {
		for (i = 0; i < WAYS; i++)
			KUNIT_ASSERT_TRUE(test, punt(set, req_at(i), 100 * round + i,
						     100 * round + i + 50));
		for (i = 0; i < WAYS; i++) {
			KUNIT_ASSERT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(i),
									&start, &queued));
			KUNIT_EXPECT_EQ(test, start, (u64)(100 * round + i));
			KUNIT_EXPECT_EQ(test, queued, (u64)(100 * round + i + 50));
			KUNIT_EXPECT_EQ(test, entries_of(set, req_at(i)), 1);
		}
	}
}

/* a request punted again takes its own entry, found or not */
static void nvmetrace_uring_wq_punt_again_takes_its_own(struct kunit *test)
{
	struct nvmetrace_uring_wq set[WAYS];
	u64 start, queued;

	memset(set, 0, sizeof(set));
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(1), 10, 11));
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(2), 20, 21));
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(1), 30, 31));
	KUNIT_EXPECT_EQ(test, entries_of(set, req_at(1)), 1);
	KUNIT_EXPECT_EQ(test, entries_of(set, NULL), WAYS - 2);
	KUNIT_ASSERT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(1), &start, &queued));
	KUNIT_EXPECT_EQ(test, start, 30ULL);
	KUNIT_EXPECT_EQ(test, queued, 31ULL);
	/* found (issued), then punted again: still its own entry */
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(1), 40, 41));
	KUNIT_EXPECT_EQ(test, entries_of(set, req_at(1)), 1);
	KUNIT_ASSERT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(2), &start, &queued));
	KUNIT_EXPECT_EQ(test, start, 20ULL);
}

/* a worker may try twice (nonblocking, then blocking): both tries find it */
static void nvmetrace_uring_wq_found_twice(struct kunit *test)
{
	struct nvmetrace_uring_wq set[WAYS];
	u64 start, queued;

	memset(set, 0, sizeof(set));
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(7), 70, 71));
	KUNIT_EXPECT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(7), &start, &queued));
	KUNIT_EXPECT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(7), &start, &queued));
	KUNIT_EXPECT_EQ(test, start, 70ULL);
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_wq_find(set, req_at(8), &start, &queued));
}

/* a full set makes room with an issued request first, whatever its age */
static void nvmetrace_uring_wq_full_drops_issued_first(struct kunit *test)
{
	struct nvmetrace_uring_wq set[WAYS];
	u64 start, queued;
	int i;

	memset(set, 0, sizeof(set));
	for (i = 0; i < WAYS; i++)
		KUNIT_ASSERT_TRUE(test, punt(set, req_at(i), i, i));
	/* the newest is issued; the oldest still waits in io-wq */
	KUNIT_ASSERT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(WAYS - 1), &start, &queued));
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(WAYS), 100, 100));
	KUNIT_EXPECT_EQ(test, entries_of(set, req_at(WAYS - 1)), 0);
	for (i = 0; i <= WAYS; i++) {
		if (i == WAYS - 1)
			continue;
		KUNIT_EXPECT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(i), &start, &queued));
	}
}

/* a full set of queued requests drops the one queued longest ago */
static void nvmetrace_uring_wq_full_drops_oldest(struct kunit *test)
{
	struct nvmetrace_uring_wq set[WAYS];
	u64 start, queued;
	int i;

	memset(set, 0, sizeof(set));
	/* queued in the order 2, 0, 3, 1 (times 10, 20, 30, 40) */
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(0), 20, 20));
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(1), 40, 40));
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(2), 10, 10));
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(3), 30, 30));
	KUNIT_ASSERT_TRUE(test, punt(set, req_at(9), 50, 50));
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_wq_find(set, req_at(2), &start, &queued));
	for (i = 0; i < WAYS; i++)
		if (i != 2)
			KUNIT_EXPECT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(i),
									&start, &queued));
	KUNIT_EXPECT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(9), &start, &queued));
	KUNIT_EXPECT_EQ(test, queued, 50ULL);
}

/* an entry another punt has claimed is neither taken nor found */
static void nvmetrace_uring_wq_claimed_entry_skipped(struct kunit *test)
{
	struct nvmetrace_uring_wq set[WAYS];
	struct nvmetrace_uring_wq *w;
	u64 start, queued;
	int i;

	memset(set, 0, sizeof(set));
	for (i = 0; i < WAYS; i++)
		set[i].req = NVMETRACE_URING_WQ_BUSY;
	KUNIT_EXPECT_NULL(test, nvmetrace_uring_wq_claim(set, req_at(1)));
	set[2].req = NULL;
	w = nvmetrace_uring_wq_claim(set, req_at(1));
	KUNIT_EXPECT_PTR_EQ(test, w, &set[2]);
	KUNIT_EXPECT_PTR_EQ(test, set[2].req, NVMETRACE_URING_WQ_BUSY);
	/* claimed, not yet published: a worker does not find it */
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_wq_find(set, req_at(1), &start, &queued));
	nvmetrace_uring_wq_publish(w, req_at(1), 5, 6);
	KUNIT_EXPECT_TRUE(test, nvmetrace_uring_wq_find(set, req_at(1), &start, &queued));
}

/* req_at(i) claimed in an empty set and published with the times and word */
static struct nvmetrace_uring_wq *published(struct kunit *test, struct nvmetrace_uring_wq *set,
					    unsigned long i, u64 start, u64 queued, u64 word)
{
	struct nvmetrace_uring_wq *w;

	memset(set, 0, WAYS * sizeof(*set));
	w = nvmetrace_uring_wq_claim(set, req_at(i));
	KUNIT_ASSERT_NOT_NULL(test, w);
	nvmetrace_uring_wq_publish_word(w, req_at(i), start, queued, word);
	return w;
}

/* the caller's word travels with the times; a republish replaces both */
static void nvmetrace_uring_wq_word_published_with_times(struct kunit *test)
{
	struct nvmetrace_uring_wq set[WAYS], *w;
	u64 start, queued, word;

	published(test, set, 3, 10, 11, 4242);
	KUNIT_ASSERT_TRUE(test, nvmetrace_uring_wq_find_word(set, req_at(3), &start, &queued,
							     &word));
	KUNIT_EXPECT_EQ(test, word, 4242ULL);
	KUNIT_EXPECT_EQ(test, start, 10ULL);
	w = nvmetrace_uring_wq_claim(set, req_at(3));
	KUNIT_EXPECT_PTR_EQ(test, w, &set[0]);
	nvmetrace_uring_wq_publish(w, req_at(3), 20, 21);
	KUNIT_ASSERT_TRUE(test, nvmetrace_uring_wq_find_word(set, req_at(3), &start, &queued,
							     &word));
	KUNIT_EXPECT_EQ(test, word, 0ULL);
	KUNIT_EXPECT_EQ(test, queued, 21ULL);
}

/* taken once: the second take, and a find, see nothing; the way is free again */
static void nvmetrace_uring_wq_taken_once(struct kunit *test)
{
	struct nvmetrace_uring_wq set[WAYS], *w;
	u64 start, queued, word;

	w = published(test, set, 5, 1, 2, 3);
	KUNIT_EXPECT_TRUE(test, nvmetrace_uring_wq_take_word(set, req_at(5), &start, &queued,
							     &word));
	KUNIT_EXPECT_EQ(test, word, 3ULL);
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_wq_take_word(set, req_at(5), &start, &queued,
							      &word));
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_wq_find(set, req_at(5), &start, &queued));
	KUNIT_EXPECT_NULL(test, w->req);
}

/* a waiting call hands over the oldest min_complete CQEs from the head, across the wrap */
static void nvmetrace_uring_cqe_waited_oldest(struct kunit *test)
{
	KUNIT_EXPECT_TRUE(test, nvmetrace_uring_cqe_waited(10, 10, 1));
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_cqe_waited(11, 10, 1));
	KUNIT_EXPECT_TRUE(test, nvmetrace_uring_cqe_waited(13, 10, 4));
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_cqe_waited(14, 10, 4));
	/* taken already (behind the head), or a call that waits for none */
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_cqe_waited(9, 10, 4));
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_cqe_waited(10, 10, 0));
	/* the free-running index wrapped past the head */
	KUNIT_EXPECT_TRUE(test, nvmetrace_uring_cqe_waited(1, U32_MAX - 1, 4));
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_cqe_waited(2, U32_MAX - 1, 4));
	KUNIT_EXPECT_FALSE(test, nvmetrace_uring_cqe_waited(U32_MAX - 2, U32_MAX - 1, 4));
}

static struct kunit_case nvmetrace_uring_wq_cases[] = {
	KUNIT_CASE(nvmetrace_uring_cqe_waited_oldest),
	KUNIT_CASE(nvmetrace_uring_wq_set_holds_its_ways),
	KUNIT_CASE(nvmetrace_uring_wq_punt_again_takes_its_own),
	KUNIT_CASE(nvmetrace_uring_wq_found_twice),
	KUNIT_CASE(nvmetrace_uring_wq_full_drops_issued_first),
	KUNIT_CASE(nvmetrace_uring_wq_full_drops_oldest),
	KUNIT_CASE(nvmetrace_uring_wq_claimed_entry_skipped),
	KUNIT_CASE(nvmetrace_uring_wq_word_published_with_times),
	KUNIT_CASE(nvmetrace_uring_wq_taken_once),
	{}
};

static struct kunit_suite nvmetrace_uring_wq_suite = {
	.name = "nvmetrace_uring_wq",
	.test_cases = nvmetrace_uring_wq_cases,
};

kunit_test_suite(nvmetrace_uring_wq_suite);

MODULE_DESCRIPTION("KUnit tests for nvmetrace's io-wq request table");
MODULE_LICENSE("GPL");
