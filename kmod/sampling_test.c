// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite nvmetrace_sampling: the sampling predicate of sample_core.h,
 * against splitmix64's published outputs (the tool's GoogleTest checks the
 * same values, so kernel and user space agree bit for bit).
 */
#include <kunit/test.h>
#include <linux/limits.h>
#include <linux/math64.h>

#include "sample_core.h"

#define GAMMA 0x9e3779b97f4a7c15ULL

static void nvmetrace_sampling_mix_known_values(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, nvmetrace_mix(0), 0ULL);
	KUNIT_EXPECT_EQ(test, nvmetrace_mix(1 * GAMMA), 0xe220a8397b1dcdafULL);
	KUNIT_EXPECT_EQ(test, nvmetrace_mix(2 * GAMMA), 0x6e789e6aa1b965f4ULL);
	KUNIT_EXPECT_EQ(test, nvmetrace_mix(3 * GAMMA), 0x06c45d188009454fULL);
}

static void nvmetrace_sampling_all_at_one(struct kunit *test)
{
	u64 lba;

	for (lba = 0; lba < 4096; lba++)
		KUNIT_EXPECT_TRUE(test, nvmetrace_sample_pick(lba, 7, U64_MAX));
}

/* 1 of 100 over 200k consecutive LBAs: within 10 % of 2000 */
static void nvmetrace_sampling_one_in_n(struct kunit *test)
{
	u64 threshold = div64_u64(U64_MAX, 100), lba, n = 0;

	for (lba = 0; lba < 200000; lba++)
		n += nvmetrace_sample_pick(lba, 12345, threshold);
	KUNIT_EXPECT_GT(test, n, 1800ULL);
	KUNIT_EXPECT_LT(test, n, 2200ULL);
}

/* the seed changes which LBAs are picked, not how many */
static void nvmetrace_sampling_seed_moves_the_pick(struct kunit *test)
{
	u64 threshold = div64_u64(U64_MAX, 10), lba, same = 0, a = 0;

	for (lba = 0; lba < 10000; lba++) {
		int x = nvmetrace_sample_pick(lba, 1, threshold);
		int y = nvmetrace_sample_pick(lba, 2, threshold);

		a += x;
		same += x && y;
	}
	KUNIT_EXPECT_GT(test, a, 800ULL);
	KUNIT_EXPECT_LT(test, same, a / 4);
}

static struct kunit_case nvmetrace_sampling_cases[] = {
	KUNIT_CASE(nvmetrace_sampling_mix_known_values),
	KUNIT_CASE(nvmetrace_sampling_all_at_one),
	KUNIT_CASE(nvmetrace_sampling_one_in_n),
	KUNIT_CASE(nvmetrace_sampling_seed_moves_the_pick),
	{}
};

static struct kunit_suite nvmetrace_sampling_suite = {
	.name = "nvmetrace_sampling",
	.test_cases = nvmetrace_sampling_cases,
};

kunit_test_suite(nvmetrace_sampling_suite);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("KUnit tests for nvmetrace's sampling predicate");
