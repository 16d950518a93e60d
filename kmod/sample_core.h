/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sample_core.h — which commands nvmetrace samples.
 *
 * Compiled into the module (probes/probe.h), the KUnit suite nvmetrace_sampling
 * (sampling_test.c) and the tool (user/src/analysis/sampling.h), so host, target and
 * the analysis agree bit for bit.
 *
 * A command is sampled at 1 of N when mix(lba ^ seed) <= U64_MAX / N (every
 * command when N == 1).  lba is the command's starting LBA in namespace
 * blocks, which host and target both know, so the two sides pick the same
 * commands without sharing any state.  mix() is the finalizer of splitmix64:
 * every input bit affects every output bit, so the threshold picks 1 of N
 * uniformly over LBAs.
 */
#ifndef NVMETRACE_SAMPLE_CORE_H
#define NVMETRACE_SAMPLE_CORE_H

#include <linux/types.h>

static inline __u64 nvmetrace_mix(__u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* threshold: U64_MAX / N, computed once per recording by the caller */
static inline int nvmetrace_sample_pick(__u64 lba, __u64 seed, __u64 threshold)
{
	return nvmetrace_mix(lba ^ seed) <= threshold;
}

#endif /* NVMETRACE_SAMPLE_CORE_H */
