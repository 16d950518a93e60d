// CLOCK_MONOTONIC in nanoseconds: the clock of every record, read by the
// recorders (the module's rings, SPDK's trace rings).
#pragma once

#include <time.h>

#include <cstdint>

namespace nvmetrace {

inline uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace nvmetrace
