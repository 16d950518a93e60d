#include "analysis/sampling.h"

#include <stdint.h>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

// splitmix64's published outputs for seed 0 are mix(k * golden gamma).
constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
TEST(Sampling, MatchesSplitmix64Outputs) {
    EXPECT_EQ(sample_mix(0), 0u);
    EXPECT_EQ(sample_mix(1 * kGamma), 0xe220a8397b1dcdafull);
    EXPECT_EQ(sample_mix(2 * kGamma), 0x6e789e6aa1b965f4ull);
    EXPECT_EQ(sample_mix(3 * kGamma), 0x06c45d188009454full);
}

TEST(Sampling, ThresholdIsKernelsDivision) {
    EXPECT_EQ(sample_threshold(0), UINT64_MAX);
    EXPECT_EQ(sample_threshold(1), UINT64_MAX);
    EXPECT_EQ(sample_threshold(2), UINT64_MAX / 2);
    EXPECT_EQ(sample_threshold(100), UINT64_MAX / 100);
}

TEST(Sampling, OneOfNIsEverythingForNOne) {
    for (uint64_t lba = 0; lba < 1000; lba++)
        EXPECT_TRUE(sampled(lba, 0x1234, 1));
}

TEST(Sampling, SeedXorsTheLba) {
    // The predicate is on lba ^ seed: the seed moves which LBAs are sampled.
    EXPECT_EQ(sampled(5, 0, 100), sample_mix(5) <= UINT64_MAX / 100);
    EXPECT_EQ(sampled(5, 7, 100), sample_mix(5 ^ 7) <= UINT64_MAX / 100);
}

TEST(Sampling, OneOfHundredIsAboutOnePercent) {
    uint64_t hits = 0;
    const uint64_t n = 1'000'000;
    for (uint64_t lba = 0; lba < n; lba++)
        hits += sampled(lba * 8, 0xdeadbeef, 100);
    // binomial(1e6, 0.01): sigma ~ 99.5; allow 5 sigma
    EXPECT_NEAR(static_cast<double>(hits), 10'000.0, 500.0);
}

}  // namespace
}  // namespace nvmetrace
