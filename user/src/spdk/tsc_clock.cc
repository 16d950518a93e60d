#include "spdk/tsc_clock.h"

#include "util/clock.h"
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
    return static_cast<int64_t>(monotonic_ns());
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
    if (!first_) {
        first_ = p;
        return;
    }
    // the rate over at least 1 s since the first pair: a pair's read error (its
    // bracket, up to milliseconds on a loaded machine) divided by a second or more
    if (p.mono_ns - first_->mono_ns < kBaselineNs || p.tsc <= first_->tsc)
        return;
    per_tick_ = static_cast<long double>(p.mono_ns - first_->mono_ns) /
                static_cast<long double>(p.tsc - first_->tsc);
}

uint64_t TscClock::ns(uint64_t tsc) const {
    const long double per_tick = per_tick_ > 0 ? per_tick_ : 1e9L / static_cast<long double>(rate_);
    const long double d =
        (static_cast<long double>(tsc) - static_cast<long double>(first_->tsc)) * per_tick;
    const long double t = static_cast<long double>(first_->mono_ns) + d;
    return t <= 0 ? 0 : static_cast<uint64_t>(std::llround(t));
}

}  // namespace nvmetrace::spdk
