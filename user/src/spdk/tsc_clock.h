// SPDK's trace times to CLOCK_MONOTONIC.  SPDK stamps its entries with the
// TSC (spdk_get_ticks() on x86).  The recorder reads a pair (TSC,
// CLOCK_MONOTONIC) when it starts and after every poll of the ring.  The line
// through the first pair and the latest one a second or more after it says
// where the clock is; SPDK's own rate stands in before.  A pair's read error
// (up to milliseconds when the reader is preempted on a loaded machine) is in
// that line, and a line that changed under a command (its start converted
// before a poll, its end after) once moved its duration by the difference of
// two pairs' errors (likely the one negative network of 30310 commands in
// 50-spdk beside another lane).  So the times follow a continuous mapping
// that is slewed toward the line, at most kMaxSlew off its rate, never
// stepped unless the line is more than kStepNs away (SPDK's own rate far
// off): a duration is off by at most that share, and the mapping's times
// meet the line within seconds.
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
    // kBaselineNs after it gives the line the mapping is slewed toward.
    static constexpr int64_t kBaselineNs = 1'000'000'000;
    // The mapping closes its distance to the line over kSlewNs of time, its
    // rate never more than kMaxSlew off the line's; a distance over kStepNs
    // is closed at once.
    static constexpr int64_t kSlewNs = 10'000'000'000;
    static constexpr double kMaxSlew = 1e-3;
    static constexpr int64_t kStepNs = 10'000'000;
    void add(Pair p);
    // A TSC as CLOCK_MONOTONIC ns; add() must have been called once.
    uint64_t ns(uint64_t tsc) const;
    // How often the mapping had to step (SPDK's rate far off, or the TSC
    // jumped): each step may cut through a command's duration.
    uint64_t steps() const { return steps_; }

private:
    long double at(uint64_t tsc) const;

    uint64_t rate_;
    std::optional<Pair> first_;
    // the mapping: ns at tsc, per_tick ns a tick from there; from the latest
    // pair on, and from the one before up to it
    struct Segment {
        uint64_t tsc = 0;
        long double ns = 0;
        long double per_tick = 0;
    };
    Segment seg_, prev_;
    uint64_t steps_ = 0;
};

}  // namespace nvmetrace::spdk
