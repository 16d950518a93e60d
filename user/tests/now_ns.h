// CLOCK_MONOTONIC in ns, the clock of the module's timestamps, for the test
// clients that time system calls in user space (io_edges, hookloop).
#pragma once

#include <time.h>

#include <cstdint>

namespace nvmetrace::test {

inline uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace nvmetrace::test
