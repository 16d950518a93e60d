// SPDK's trace times to CLOCK_MONOTONIC.  SPDK stamps its entries with the
// TSC (spdk_get_ticks() on x86).  The recorder reads a pair (TSC,
// CLOCK_MONOTONIC) after every poll of the ring, and an entry's time is
// interpolated between the last two pairs: its time is then on the clock of
// the kernel's records, whatever rate SPDK measured for its TSC.  Between
// two polls the line through their pairs is exact to the pairs' read error
// (a few hundred ns under emulation, less on hardware); consecutive lines
// meet at their common pair, so times keep their order.
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
    // A new pair; one less than 1 ms after the last is not kept (its rate
    // would be no better than SPDK's).
    void add(Pair p);
    // A TSC as CLOCK_MONOTONIC ns; add() must have been called once.
    uint64_t ns(uint64_t tsc) const;

private:
    uint64_t rate_;
    std::optional<Pair> prev_, cur_;
};

}  // namespace nvmetrace::spdk
