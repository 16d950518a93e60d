// Which commands the module samples: the module's own predicate
// (kmod/sample_core.h), so the tool can tell which LBAs a recording covers and
// scale counts by 1-of-N.
#pragma once

#include "sample_core.h"

#include <stdint.h>

#include <limits>

namespace nvmetrace {

// The finalizer of splitmix64, as the module computes it.
inline uint64_t sample_mix(uint64_t x) {
    return nvmetrace_mix(x);
}

// Largest hash that is sampled at 1 of n (hooks.c: U64_MAX / n, and every
// hash for n == 1).  n == 0 is refused by the module; treat it as 1.
constexpr uint64_t sample_threshold(uint32_t n) {
    return n <= 1 ? std::numeric_limits<uint64_t>::max() : std::numeric_limits<uint64_t>::max() / n;
}

// Whether the module records a command starting at `lba` (namespace blocks).
inline bool sampled(uint64_t lba, uint64_t seed, uint32_t n) {
    return nvmetrace_sample_pick(lba, seed, sample_threshold(n)) != 0;
}

}  // namespace nvmetrace
