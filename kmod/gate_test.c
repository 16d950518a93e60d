// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite nvmetrace_gate: the tables behind the hooks' gates
 * (gate_core.h).  A gate may stay open when it need not, never close while
 * what it stands for is there: the set of pointers counts each pointer once,
 * keeps pointers that hash alike up to its ways and says "not empty" for
 * good once one finds no room; a queue's tags open its gate until each set
 * tag is cleared, by its own queue only, and a slot two queues meet in, or a
 * tag past the table, stays open.
 */
#include <kunit/test.h>
#include <linux/slab.h>

#include "gate_core.h"

/* pointers that are never dereferenced */
static const void *ptr_at(unsigned long i)
{
	return (const void *)(0x10000UL + 0x40UL * i);
}

/* the first n pointers (from ptr_at(from)) that land in p's bucket */
static void same_bucket(struct nvmetrace_ptrset *s, const void *p, const void **out,
			unsigned int n)
{
	struct nvmetrace_ptrset_bucket *b = nvmetrace_ptrset_bucket(s, p);
	unsigned long i;
	unsigned int k = 0;

	for (i = 1; k < n; i++)
		if (ptr_at(i) != p && nvmetrace_ptrset_bucket(s, ptr_at(i)) == b)
			out[k++] = ptr_at(i);
}

static void nvmetrace_ptrset_counts_each_once(struct kunit *test)
{
	struct nvmetrace_ptrset *s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, s);
	KUNIT_EXPECT_FALSE(test, nvmetrace_ptrset_any(s));
	nvmetrace_ptrset_add(s, ptr_at(0));
	nvmetrace_ptrset_add(s, ptr_at(0));	/* again: still one */
	nvmetrace_ptrset_add(s, ptr_at(1));
	KUNIT_EXPECT_EQ(test, atomic_read(&s->n), 2);
	nvmetrace_ptrset_del(s, ptr_at(2));	/* never added: nothing */
	KUNIT_EXPECT_EQ(test, atomic_read(&s->n), 2);
	nvmetrace_ptrset_del(s, ptr_at(0));
	KUNIT_EXPECT_TRUE(test, nvmetrace_ptrset_any(s));
	nvmetrace_ptrset_del(s, ptr_at(0));	/* twice: counted once */
	KUNIT_EXPECT_EQ(test, atomic_read(&s->n), 1);
	nvmetrace_ptrset_del(s, ptr_at(1));
	KUNIT_EXPECT_FALSE(test, nvmetrace_ptrset_any(s));
}

static void nvmetrace_ptrset_full_bucket_stays_open(struct kunit *test)
{
	struct nvmetrace_ptrset *s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	const void *p[NVMETRACE_PTRSET_WAYS + 1];
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, s);
	p[0] = ptr_at(0);
	same_bucket(s, p[0], p + 1, NVMETRACE_PTRSET_WAYS);
	/* as many as the bucket has ways: all kept */
	for (i = 0; i < NVMETRACE_PTRSET_WAYS; i++)
		nvmetrace_ptrset_add(s, p[i]);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->n), (int)NVMETRACE_PTRSET_WAYS);
	KUNIT_EXPECT_FALSE(test, s->full);
	/* one more: no room, so the set is "not empty" even once all have left */
	nvmetrace_ptrset_add(s, p[NVMETRACE_PTRSET_WAYS]);
	KUNIT_EXPECT_TRUE(test, s->full);
	for (i = 0; i <= NVMETRACE_PTRSET_WAYS; i++)
		nvmetrace_ptrset_del(s, p[i]);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->n), 0);
	KUNIT_EXPECT_TRUE(test, nvmetrace_ptrset_any(s));
	/* a freed way is taken again; clearing ends "full" */
	nvmetrace_ptrset_clear(s);
	KUNIT_EXPECT_FALSE(test, nvmetrace_ptrset_any(s));
	nvmetrace_ptrset_add(s, p[NVMETRACE_PTRSET_WAYS]);
	KUNIT_EXPECT_EQ(test, atomic_read(&s->n), 1);
	KUNIT_EXPECT_FALSE(test, s->full);
}

#define GATES (1 << NVMETRACE_TAG_GATE_BITS)

/* a queue other than q whose slot is q's */
static const void *queue_beside(struct nvmetrace_tag_gate *t, const void *q)
{
	unsigned long i;

	for (i = 1;; i++)
		if (ptr_at(i) != q && nvmetrace_tag_gate_of(t, ptr_at(i)) ==
				      nvmetrace_tag_gate_of(t, q))
			return ptr_at(i);
}

/* a queue whose slot is not q's */
static const void *queue_apart(struct nvmetrace_tag_gate *t, const void *q)
{
	unsigned long i;

	for (i = 1;; i++)
		if (nvmetrace_tag_gate_of(t, ptr_at(i)) != nvmetrace_tag_gate_of(t, q))
			return ptr_at(i);
}

static void nvmetrace_tag_gate_opens_per_queue(struct kunit *test)
{
	struct nvmetrace_tag_gate *t = kunit_kcalloc(test, GATES, sizeof(*t), GFP_KERNEL);
	const void *q = ptr_at(0), *o;

	KUNIT_ASSERT_NOT_NULL(test, t);
	o = queue_apart(t, q);
	KUNIT_EXPECT_FALSE(test, nvmetrace_tag_gate_open(t, q));
	nvmetrace_tag_gate_set(t, q, 5);
	nvmetrace_tag_gate_set(t, q, 5);	/* again: one tag */
	nvmetrace_tag_gate_set(t, q, NVMETRACE_TAG_GATE_TAGS - 1);
	KUNIT_EXPECT_TRUE(test, nvmetrace_tag_gate_open(t, q));
	KUNIT_EXPECT_FALSE(test, nvmetrace_tag_gate_open(t, o));	/* another queue's */
	nvmetrace_tag_gate_clear(t, o, 5);	/* not its tag: nothing */
	nvmetrace_tag_gate_clear(t, q, 6);	/* never set: nothing */
	nvmetrace_tag_gate_clear(t, q, 5);
	KUNIT_EXPECT_TRUE(test, nvmetrace_tag_gate_open(t, q));	/* one tag left */
	nvmetrace_tag_gate_clear(t, q, 5);	/* twice: counted once */
	nvmetrace_tag_gate_clear(t, q, NVMETRACE_TAG_GATE_TAGS - 1);
	KUNIT_EXPECT_FALSE(test, nvmetrace_tag_gate_open(t, q));
	KUNIT_EXPECT_EQ(test, atomic_read(&nvmetrace_tag_gate_of(t, q)->n), 0);
}

static void nvmetrace_tag_gate_shared_stays_open(struct kunit *test)
{
	struct nvmetrace_tag_gate *t = kunit_kcalloc(test, GATES, sizeof(*t), GFP_KERNEL);
	const void *q = ptr_at(0), *b, *o;

	KUNIT_ASSERT_NOT_NULL(test, t);
	b = queue_beside(t, q);
	o = queue_apart(t, q);
	/* q owns the slot; b, hashed to it, shares it: open to both for good */
	nvmetrace_tag_gate_set(t, q, 1);
	nvmetrace_tag_gate_set(t, b, 2);
	nvmetrace_tag_gate_clear(t, q, 1);
	nvmetrace_tag_gate_clear(t, b, 2);
	KUNIT_EXPECT_TRUE(test, nvmetrace_tag_gate_open(t, q));
	KUNIT_EXPECT_TRUE(test, nvmetrace_tag_gate_open(t, b));
	/* a tag past the table: that slot too */
	nvmetrace_tag_gate_set(t, o, NVMETRACE_TAG_GATE_TAGS);
	KUNIT_EXPECT_TRUE(test, nvmetrace_tag_gate_open(t, o));
	/* cleared (START): closed again */
	memset(t, 0, GATES * sizeof(*t));
	KUNIT_EXPECT_FALSE(test, nvmetrace_tag_gate_open(t, q));
	KUNIT_EXPECT_FALSE(test, nvmetrace_tag_gate_open(t, o));
}

static struct kunit_case nvmetrace_gate_cases[] = {
	KUNIT_CASE(nvmetrace_ptrset_counts_each_once),
	KUNIT_CASE(nvmetrace_ptrset_full_bucket_stays_open),
	KUNIT_CASE(nvmetrace_tag_gate_opens_per_queue),
	KUNIT_CASE(nvmetrace_tag_gate_shared_stays_open),
	{}
};

static struct kunit_suite nvmetrace_gate_suite = {
	.name = "nvmetrace_gate",
	.test_cases = nvmetrace_gate_cases,
};

kunit_test_suite(nvmetrace_gate_suite);

MODULE_DESCRIPTION("KUnit tests for nvmetrace's gate tables");
MODULE_LICENSE("GPL");
