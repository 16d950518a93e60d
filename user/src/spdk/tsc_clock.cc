#include "spdk/tsc_clock.h"

#include "util/clock.h"
#include "util/error.h"

#include <time.h>

#include <algorithm>
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
        seg_ = {p.tsc, static_cast<long double>(p.mono_ns), 1e9L / static_cast<long double>(rate_)};
        prev_ = seg_;
        return;
    }
    // the line over at least 1 s since the first pair: a pair's read error
    // (its bracket, up to milliseconds on a loaded machine) divided by a
    // second or more
    if (p.mono_ns - first_->mono_ns < kBaselineNs || p.tsc <= first_->tsc)
        return;
    const long double line = static_cast<long double>(p.mono_ns - first_->mono_ns) /
                             static_cast<long double>(p.tsc - first_->tsc);
    const long double here = at(p.tsc);
    const long double gap = static_cast<long double>(p.mono_ns) - here;
    prev_ = seg_;
    seg_.tsc = p.tsc;
    if (std::fabs(gap) > static_cast<long double>(kStepNs)) {
        seg_.ns = static_cast<long double>(p.mono_ns);
        seg_.per_tick = line;
        prev_ = seg_;  // nothing before the step follows the old mapping
        steps_++;
        return;
    }
    // continuous at this pair; toward the line, closing the gap over kSlewNs
    seg_.ns = here;
    long double slew = gap / static_cast<long double>(kSlewNs);
    slew =
        std::clamp(slew, static_cast<long double>(-kMaxSlew), static_cast<long double>(kMaxSlew));
    seg_.per_tick = line * (1 + slew);
}

long double TscClock::at(uint64_t tsc) const {
    // an entry the ring held from before the latest pair (read after it) is
    // on the segment it was made in, not the new one extrapolated back
    const Segment& s = tsc < seg_.tsc ? prev_ : seg_;
    return s.ns + (static_cast<long double>(tsc) - static_cast<long double>(s.tsc)) * s.per_tick;
}

uint64_t TscClock::ns(uint64_t tsc) const {
    const long double t = at(tsc);
    return t <= 0 ? 0 : static_cast<uint64_t>(std::llround(t));
}

}  // namespace nvmetrace::spdk
