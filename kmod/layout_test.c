// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite nvmetrace_layout: the module identity of layout_id.h, the
 * CRC-32C against its published check value and the values the tool's
 * GoogleTest checks (Crc32c.KnownVectors), so kernel and user space
 * agree bit for bit; and when a reloaded module's layout counts as START's.
 */
#include <kunit/test.h>
#include <linux/string.h>

#include "layout_id.h"

static void nvmetrace_layout_crc32c_known_values(struct kunit *test)
{
	static const u8 zeros[32];
	u8 ones[32];

	memset(ones, 0xff, sizeof(ones));
	KUNIT_EXPECT_EQ(test, nvmetrace_crc32c("123456789", 9), 0xe3069283u);
	KUNIT_EXPECT_EQ(test, nvmetrace_crc32c("", 0), 0u);
	/* RFC 3720 B.4: 32 bytes of zeros, of ones */
	KUNIT_EXPECT_EQ(test, nvmetrace_crc32c(zeros, sizeof(zeros)), 0x8a9136aau);
	KUNIT_EXPECT_EQ(test, nvmetrace_crc32c(ones, sizeof(ones)), 0x62a8ab43u);
}

/* One byte changed anywhere, e.g. an offset in a rebuilt module's BTF. */
static void nvmetrace_layout_crc32c_sees_a_change(struct kunit *test)
{
	u8 buf[64];
	u32 base;
	int i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = i * 7;
	base = nvmetrace_crc32c(buf, sizeof(buf));
	for (i = 0; i < sizeof(buf); i++) {
		buf[i] ^= 0x08;
		KUNIT_EXPECT_NE(test, nvmetrace_crc32c(buf, sizeof(buf)), base);
		buf[i] ^= 0x08;
	}
	KUNIT_EXPECT_EQ(test, nvmetrace_crc32c(buf, sizeof(buf)), base);
}

static void nvmetrace_layout_id_match_rules(struct kunit *test)
{
	const struct nvmetrace_layout_id a = { .known = true, .crc = 0x1234 };
	const struct nvmetrace_layout_id b = { .known = true, .crc = 0x1235 };
	const struct nvmetrace_layout_id none = { .known = false, .crc = 0x1234 };

	KUNIT_EXPECT_TRUE(test, nvmetrace_layout_id_match(&a, &a));
	KUNIT_EXPECT_FALSE(test, nvmetrace_layout_id_match(&a, &b));
	/* no identity from START, or none for the module loaded: never a match */
	KUNIT_EXPECT_FALSE(test, nvmetrace_layout_id_match(&none, &a));
	KUNIT_EXPECT_FALSE(test, nvmetrace_layout_id_match(&a, &none));
	KUNIT_EXPECT_FALSE(test, nvmetrace_layout_id_match(&none, &none));
}

static struct kunit_case nvmetrace_layout_cases[] = {
	KUNIT_CASE(nvmetrace_layout_crc32c_known_values),
	KUNIT_CASE(nvmetrace_layout_crc32c_sees_a_change),
	KUNIT_CASE(nvmetrace_layout_id_match_rules),
	{}
};

static struct kunit_suite nvmetrace_layout_suite = {
	.name = "nvmetrace_layout",
	.test_cases = nvmetrace_layout_cases,
};

kunit_test_suite(nvmetrace_layout_suite);

MODULE_DESCRIPTION("KUnit tests for nvmetrace's module layout identity");
MODULE_LICENSE("GPL");
