// Which commands the module samples: user space's copy of the predicate in
// kmod/hooks.c, so the tool can tell which LBAs a recording covers and scale
// counts by 1-of-N.  Header-only; must stay bit-for-bit equal to the kernel's.
#pragma once

#include <stdint.h>

#include <limits>

namespace nvmetrace {

// The finalizer of splitmix64 (kmod/hooks.c nvmetrace_mix()): every input bit
// affects every output bit, so a threshold on it picks 1 of N uniformly.
constexpr uint64_t sample_mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

// Largest hash that is sampled at 1 of n (hooks.c: U64_MAX / n, and every
// hash for n == 1).  n == 0 is refused by the module; treat it as 1.
constexpr uint64_t sample_threshold(uint32_t n) {
    return n <= 1 ? std::numeric_limits<uint64_t>::max() : std::numeric_limits<uint64_t>::max() / n;
}

// Whether the module records a command starting at `lba` (namespace blocks).
constexpr bool sampled(uint64_t lba, uint64_t seed, uint32_t n) {
    return sample_mix(lba ^ seed) <= sample_threshold(n);
}

}  // namespace nvmetrace
