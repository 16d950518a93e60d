/* SPDX-License-Identifier: GPL-2.0 */
/*
 * layout_id.h — the identity of a module whose private layout START carried
 * (NVMETRACE_L_BTF_*): the CRC-32C of the module's BTF, which user space
 * takes over /sys/kernel/btf/<module> and the module notifier over the
 * .BTF section of a module being loaded (the bytes that file exposes).
 *
 * Header-only pure logic, so the KUnit suite (layout_test.c) runs it on UML;
 * the tool's crc32c() (user/src/format/recfile.h) computes the same values.
 * Bitwise rather than the kernel's crc32c(), whose header and module moved
 * between the kernels nvmetrace builds for: it runs only in a module
 * notifier, over some tens of KiB, never on the I/O path.
 */
#ifndef NVMETRACE_LAYOUT_ID_H
#define NVMETRACE_LAYOUT_ID_H

#include <linux/types.h>

/* The reflected Castagnoli polynomial. */
#define NVMETRACE_CRC32C_POLY	0x82f63b78u

/* CRC-32C of data[0..len), initial and final value ~0 ("123456789": 0xe3069283). */
static inline u32 nvmetrace_crc32c(const void *data, size_t len)
{
	const u8 *p = data;
	u32 crc = ~0u;
	int k;

	while (len--) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (NVMETRACE_CRC32C_POLY & -(crc & 1));
	}
	return ~crc;
}

/* A module's identity: known only when it has BTF (and START gave one). */
struct nvmetrace_layout_id {
	bool known;
	u32 crc;
};

/*
 * Whether a module loaded again has the layout START carried: only when both
 * identities are known and equal.  Unknown on either side is a mismatch: a
 * layout that cannot be shown to be the same is not used.
 */
static inline bool nvmetrace_layout_id_match(const struct nvmetrace_layout_id *start,
					     const struct nvmetrace_layout_id *now)
{
	return start->known && now->known && start->crc == now->crc;
}

#endif /* NVMETRACE_LAYOUT_ID_H */
