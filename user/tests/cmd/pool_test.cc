// `nvmetrace pool` text and JSON.
#include "cmd/pool.h"

#include <linux/nvmetrace.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

PoolInfo two_mib_pool() {
    PoolInfo p;
    p.buf_size = 2 << 20;
    p.nr_asked = 4;
    p.allocated = 4;
    p.bytes = 8 << 20;
    p.order = 9;
    p.min_order = 9;
    p.folios = 4;
    p.node = 0;
    p.mappings = 1;
    p.mmap_offset = NVMETRACE_POOL_MMAP_OFFSET;
    return p;
}

TEST(Pool, SizeText) {
    EXPECT_EQ(size_text(512), "512 B");
    EXPECT_EQ(size_text(4096), "4 KiB");
    EXPECT_EQ(size_text(2 << 20), "2 MiB");
    EXPECT_EQ(size_text(1536ull << 20), "1.5 GiB");
}

TEST(Pool, TextOfAPool) {
    const std::string t = pool_text(two_mib_pool(), "");
    EXPECT_THAT(t, HasSubstr("4 x 2 MiB buffers (4 asked for), 8 MiB"));
    EXPECT_THAT(t, HasSubstr("folios       4 of order 9\n"));
    EXPECT_THAT(t, HasSubstr("0 buffers with smaller folios"));
    EXPECT_THAT(t, HasSubstr("offset 0x10000000000"));
    EXPECT_THAT(t, HasSubstr("kernel pool: absent (kernel built without CONFIG_BLK_IOBUF_POOL)"));
}

TEST(Pool, TextSaysFallbacksAndSmallestOrder) {
    PoolInfo p = two_mib_pool();
    p.fallbacks = 1;
    p.min_order = 3;
    p.folios = 67;
    const std::string t = pool_text(p, "");
    EXPECT_THAT(t, HasSubstr("folios       67, order 9 asked for, smallest order 3"));
    EXPECT_THAT(t, HasSubstr("1 buffer with smaller folios"));
}

TEST(Pool, TextWithoutAPoolSaysHowToGetOne) {
    PoolInfo p;
    const std::string t = pool_text(p, "");
    EXPECT_THAT(t, HasSubstr("none (load the module with pool_nr=N pool_buf_kb=KB)"));
    EXPECT_THAT(t, Not(HasSubstr("fallbacks")));
}

TEST(Pool, KernelPoolOfADevice) {
    PoolInfo p = two_mib_pool();
    p.kpool = NVMETRACE_KPOOL_ACTIVE;
    p.kpool_order = 9;
    p.kpool_folio_size = 2 << 20;
    p.kpool_capacity = 256;
    p.kpool_in_use = 3;
    p.kpool_available = 253;
    p.kpool_high_water = 7;
    p.kpool_alloc_failures = 2;
    const std::string t = pool_text(p, "nvme0n1");
    EXPECT_THAT(t, HasSubstr("kernel pool (nvme0n1): active"));
    EXPECT_THAT(t, HasSubstr("order 9, 256 folios of 2 MiB, 3 in use, 253 available, high water "
                             "7, 2 failed allocations"));
    const nlohmann::json j = pool_json(p, "nvme0n1");
    EXPECT_EQ(j["kernel_pool"]["state"], "active");
    EXPECT_EQ(j["kernel_pool"]["capacity"], 256);
    EXPECT_EQ(j["kernel_pool"]["device"], "nvme0n1");
}

TEST(Pool, KernelPoolStates) {
    EXPECT_EQ(kpool_state_key(NVMETRACE_KPOOL_ABSENT), "absent");
    EXPECT_EQ(kpool_state_key(NVMETRACE_KPOOL_NONE), "none");
    EXPECT_EQ(kpool_state_key(NVMETRACE_KPOOL_UNKNOWN_API), "unknown_api");
    EXPECT_EQ(kpool_state_name(99), "unknown(99)");
}

TEST(Pool, Json) {
    const nlohmann::json j = pool_json(two_mib_pool(), "");
    EXPECT_EQ(j["buf_size"], 2 << 20);
    EXPECT_EQ(j["nr_bufs"], 4);
    EXPECT_EQ(j["allocated"], 4);
    EXPECT_EQ(j["fallbacks"], 0);
    EXPECT_EQ(j["bytes"], 8 << 20);
    EXPECT_EQ(j["order"], 9);
    EXPECT_EQ(j["mappings"], 1);
    EXPECT_EQ(j["mmap_offset"], NVMETRACE_POOL_MMAP_OFFSET);
    EXPECT_EQ(j["kernel_pool"]["state"], "absent");
    EXPECT_FALSE(j["kernel_pool"].contains("capacity"));
}

}  // namespace
}  // namespace nvmetrace
