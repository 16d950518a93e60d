// SPDK's trace times to CLOCK_MONOTONIC.  SPDK stamps its entries with the
// TSC (spdk_get_ticks() on x86).  The recorder reads a pair (TSC,
// CLOCK_MONOTONIC) when it starts and after every poll of the ring; an
// entry's time is the first pair's plus its ticks since at the rate the
// first and the latest pair give, once they are a second or more apart
// (before: SPDK's own rate).  A pair's read error (up to milliseconds when the
// reader is preempted on a loaded machine) then shifts times by that much but
// durations by that much over the baseline: lines through pairs a few ms
// apart made a 7 ms command 4 % too long in a loaded lane.
#pragma once

#include <cstdint>
#include <optional>

namespace nvmetrace::spdk {

class TscClock {
public:
    struct Pair {
        uint64_t tsc = 0;
        int64_t mono_ns = 0;
    };
    // rate: the TSC's ticks a second as SPDK's trace says, used until two
    // pairs far enough apart are known.
    explicit TscClock(uint64_t rate) : rate_(rate ? rate : 1) {}

    // The TSC and CLOCK_MONOTONIC now (the tightest of a few brackets);
    // throws Error off x86.
    static Pair now();
    // A new pair: the first anchors the times, a later one at least
    // kBaselineNs after it gives the rate.
    static constexpr int64_t kBaselineNs = 1'000'000'000;
    void add(Pair p);
    // A TSC as CLOCK_MONOTONIC ns; add() must have been called once.
    uint64_t ns(uint64_t tsc) const;

private:
    uint64_t rate_;
    std::optional<Pair> first_;
    long double per_tick_ = 0;  // ns a tick, from the pairs; 0: not yet
};

}  // namespace nvmetrace::spdk
