#include "spdk/tsc_clock.h"

#include "util/error.h"

#include <time.h>

#include <climits>
#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace nvmetrace::spdk {

namespace {

int64_t mono_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

TscClock::Pair TscClock::now() {
#if defined(__x86_64__) || defined(__i386__)
    // the tightest of a few brackets of the TSC read by two clock reads
    Pair best{};
    int64_t best_width = INT64_MAX;
    for (int i = 0; i < 5; i++) {
        const int64_t a = mono_ns();
        const uint64_t tsc = __rdtsc();
        const int64_t b = mono_ns();
        if (b - a < best_width) {
            best_width = b - a;
            best = {tsc, a + (b - a) / 2};
        }
    }
    return best;
#else
    throw Error("recording an SPDK side reads SPDK's TSC: x86 only");
#endif
}

void TscClock::add(Pair p) {
    if (!cur_) {
        cur_ = p;
        return;
    }
    // pairs closer than 1 ms give a rate no better than SPDK's own
    if (p.mono_ns - cur_->mono_ns < 1'000'000 || p.tsc <= cur_->tsc)
        return;
    prev_ = cur_;
    cur_ = p;
}

uint64_t TscClock::ns(uint64_t tsc) const {
    const Pair& to = *cur_;
    long double per_tick = 1e9L / static_cast<long double>(rate_);
    Pair from = to;
    if (prev_) {
        from = *prev_;
        per_tick = static_cast<long double>(to.mono_ns - from.mono_ns) /
                   static_cast<long double>(to.tsc - from.tsc);
    }
    const long double d =
        (static_cast<long double>(tsc) - static_cast<long double>(from.tsc)) * per_tick;
    const long double t = static_cast<long double>(from.mono_ns) + d;
    return t <= 0 ? 0 : static_cast<uint64_t>(std::llround(t));
}

}  // namespace nvmetrace::spdk
