// The computation of `nvmetrace compare`: two runs side by side, per group and stage, and which
// stages moved beyond noise.
//
// Each run is one or more recordings (a host's and its target's are joined,
// as in `report`).  Groups of A and B are paired by label (op, size, device)
// and view; a group whose device was renamed between the runs is paired with
// the only unpaired group of B of the same op, size and view.
//
// The rule (documented in README.md and Documentation/design.md): a stage
// moved when
//   1. its per-command times differ beyond noise: the Mann-Whitney rank test
//      of A's against B's (from the per-stage histograms: values within 0.05 %
//      share a rank) has |z| above the two-sided confidence's (99.9 % by
//      default: z = 3.29), in the direction of the means' difference, and
//   2. it matters: |mean_B - mean_A| is at least min_change of A's mean for
//      the stage (10 %) and at least min_share of A's end to end (2 %).
// A rank test, not a test on the means: latencies are skewed and a few
// stalls make a standard deviation useless, while ranks ignore how far an
// outlier lies; (2) keeps a tiny stage with a tight distribution from being
// flagged for a change nobody would act on.
#pragma once

#include "analysis/components.h"
#include "analysis/stats.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nvmetrace {

struct CompareRule {
    double confidence = 0.999;  // two-sided, for the difference of the means
    double min_change = 0.10;   // of A's stage mean
    double min_share = 0.02;    // of A's end-to-end mean
};

// The z of a two-sided confidence (0.999 -> 3.29).
double z_for_confidence(double confidence);

struct Moments {
    uint64_t n = 0;
    double mean_us = 0, sd_us = 0;
    const Histogram* hist = nullptr;  // the per-command times, for the rank test
};

// The Mann-Whitney z of B's values against A's (> 0: B's tend to be larger),
// normal approximation; 0 when either is empty.
double rank_z(const Histogram& a, const Histogram& b);

struct StageDelta {
    std::string name;
    std::string id;               // stable: what the two runs' stages were matched by
    std::optional<Moments> a, b;  // absent: the stage is not in that run's group
    double delta_us = 0;          // b - a
    double ratio = 0;             // b / a (0 when a's mean is 0)
    double z = 0;                 // rank test (rank_z), > 0: B larger
    int moved = 0;                // +1 up, -1 down, 0 not beyond noise (or absent)
};

struct GroupDelta {
    std::string label;  // A's (B's when renamed: "nvme0n1 -> nvme1n1")
    View view = View::host_only;
    Moments a, b;                    // end to end
    std::vector<StageDelta> stages;  // A's stages in order, then B's extra ones
    StageDelta end_to_end;
};

struct Comparison {
    CompareRule rule;
    double z = 0;
    std::vector<GroupDelta> groups;
    std::vector<std::string> only_a, only_b;  // group labels without a partner
};

Comparison compare_summaries(const Summary& a, const Summary& b, const CompareRule& rule = {});

}  // namespace nvmetrace
