// `nvmetrace dmacost`: device names, medians, the table and the JSON.
#include "cmd/dmacost.h"

#include "kernel/devices.h"
#include "tempdir.h"
#include "util/error.h"

#include <linux/nvmetrace.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(DmaCost, MedianOddEvenEmpty) {
    EXPECT_EQ(median_ns({}), 0);
    EXPECT_EQ(median_ns({5}), 5);
    EXPECT_EQ(median_ns({9, 1, 5}), 5);
    EXPECT_EQ(median_ns({10, 2, 4, 1000}), 7);  // (4 + 10) / 2: the outlier does not count
}

TEST(DmaCost, ResolvesMajMinAndSysfsNames) {
    EXPECT_EQ(resolve_block_device("259:3").dev, kernel_dev(259, 3));
    EXPECT_THROW(resolve_block_device("0:5"), Error);
    EXPECT_THROW(resolve_block_device(""), Error);

    const test::TempDir tmp("dmacost_test");  // removed even when an assertion fails
    const fs::path& root = tmp.root();
    fs::create_directories(root / "class/block/nvme0n1");
    std::ofstream(root / "class/block/nvme0n1/dev") << "259:0\n";
    EXPECT_EQ(resolve_block_device("nvme0n1", root.string()).dev, kernel_dev(259, 0));
    try {
        resolve_block_device("nvme9n9", root.string());
        ADD_FAILURE() << "no error for a missing device";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("nvme9n9: no such block device"));
    }
    try {
        resolve_block_device("/dev/null");
        ADD_FAILURE() << "no error for a character device";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("/dev/null: not a block device"));
    }
}

// The node comes from the kernel's DEVNAME; each wrong one says what is wrong.
TEST(DmaCost, OpensTheNodeTheKernelNames) {
    const test::TempDir tmp("dmacost_open_test");
    const fs::path sys = tmp.root() / "sys", dev = tmp.root() / "dev";
    fs::create_directories(sys / "dev/block/259:0");
    fs::create_directories(sys / "dev/block/259:1");
    fs::create_directories(dev);
    std::ofstream(sys / "dev/block/259:0/uevent") << "MAJOR=259\nMINOR=0\nDEVNAME=nvme0n1\n";
    std::ofstream(sys / "dev/block/259:1/uevent") << "MAJOR=259\nMINOR=1\n";
    auto error = [&](const BlockDevice& bd) -> std::string {
        try {
            open_block_device(bd, sys.string(), dev.string());
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    };
    // DEVNAME's node missing
    EXPECT_THAT(
        error({kernel_dev(259, 0), "nvme0n1"}),
        HasSubstr((dev / "nvme0n1").string() + ": cannot open it for reading: No such file"));
    // a regular file where the node should be
    std::ofstream(dev / "nvme0n1") << "x";
    EXPECT_THAT(error({kernel_dev(259, 0), "259:0"}),
                HasSubstr((dev / "nvme0n1").string() + ": not a block device"));
    // no DEVNAME: the user is told to give the path
    EXPECT_THAT(error({kernel_dev(259, 1), "259:1"}), HasSubstr("259:1 (259:1): no DEVNAME in"));
    // a device the kernel does not have
    EXPECT_THAT(error({kernel_dev(7, 250), "7:250"}),
                HasSubstr("7:250: no block device 7:250 here"));
    // a path is opened as given
    EXPECT_THAT(error({kernel_dev(259, 0), (dev / "nvme0n1").string()}),
                HasSubstr("not a block device"));
}

DmaCost pci_cost() {
    DmaCost c;
    c.dev = kernel_dev(259, 0);
    c.iters = 3;
    c.has_dma = true;
    c.walk = "nvme0n1 -> nvme0 -> 0000:00:04.0";
    c.device = "0000:00:04.0";
    c.driver = "nvme";
    c.opt_size = 128 << 10;
    c.max_size = std::numeric_limits<uint64_t>::max();
    c.max_seg_size = 1u << 31;
    c.iommu = NVMETRACE_DMA_IOMMU_TRANSLATING;
    c.iommu_domain_type = 0x7;
    c.queue_max_bytes = 512 << 10;
    c.queue_max_segments = 127;
    c.sizes.push_back({.bytes = 4096,
                       .nents = 1,
                       .mapped_nents = 1,
                       .limits = 0,
                       .error = 0,
                       .map_ns = {1000, 3000, 2000},
                       .premap_ns = {10, 30, 20},
                       .folio_ns = {900, 800, 700}});
    c.sizes.push_back({.bytes = 1 << 20,
                       .nents = 256,
                       .mapped_nents = 1,
                       .limits = NVMETRACE_DMA_OVER_OPT | NVMETRACE_DMA_OVER_QUEUE_BYTES |
                                 NVMETRACE_DMA_OVER_QUEUE_SEGS,
                       .error = 0,
                       .map_ns = {40960, 40960, 90000},
                       .premap_ns = {50, 50, 50},
                       .folio_ns = {}});
    c.sizes.push_back({.bytes = 2 << 20,
                       .nents = 512,
                       .limits = NVMETRACE_DMA_OVER_MAX_MAPPING,
                       .error = -7,
                       .map_ns = {},
                       .premap_ns = {},
                       .folio_ns = {}});
    return c;
}

TEST(DmaCost, RowsTakeMediansAndPerKib) {
    const std::vector<DmaRow> rows = dma_rows(pci_cost());
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].map_ns, 2000);
    EXPECT_EQ(rows[0].premap_ns, 20);
    EXPECT_EQ(rows[0].map_ns_per_kib, 500);
    EXPECT_EQ(rows[0].folio_ns, 800);
    EXPECT_EQ(rows[1].folio_ns, -1);  // not measured
    EXPECT_EQ(rows[1].map_ns, 40960);
    EXPECT_EQ(rows[1].map_ns_per_kib, 40);
    EXPECT_EQ(rows[2].error, -7);
    EXPECT_EQ(rows[2].map_ns, 0);
}

TEST(DmaCost, Text) {
    const std::string t = dmacost_text(pci_cost(), "nvme0n1");
    EXPECT_THAT(t, HasSubstr("nvme0n1: DMA device 0000:00:04.0 (nvme)"));
    EXPECT_THAT(t, HasSubstr("walked: nvme0n1 -> nvme0 -> 0000:00:04.0"));
    EXPECT_THAT(t, HasSubstr("IOMMU: translating (domain type 0x7)"));
    EXPECT_THAT(t, HasSubstr("dma_opt_mapping_size 128 KiB, dma_max_mapping_size no limit"));
    EXPECT_THAT(t, HasSubstr("queue: max_hw_sectors 512 KiB, max_segments 127"));
    EXPECT_THAT(t, HasSubstr("   4 KiB     1      1           2000     500.0          800"
                             "            20"));
    EXPECT_THAT(t, HasSubstr("   1 MiB   256      1          40960      40.0            -"
                             "            50"));
    EXPECT_THAT(t, HasSubstr("over dma_opt_mapping_size; over max_hw_sectors: split; over "
                             "max_segments: split"));
    EXPECT_THAT(t, HasSubstr("over dma_max_mapping_size: not measured"));
}

TEST(DmaCost, NoDmaSaysSoPlainly) {
    DmaCost c;
    c.has_dma = false;
    c.walk = "nvme1n1 -> nvme-subsys1";
    c.no_dma_reason = "no device above the disk does DMA";
    const std::string t = dmacost_text(c, "nvme1n1");
    EXPECT_THAT(t, HasSubstr("nvme1n1: no DMA: no device above the disk does DMA"));
    EXPECT_THAT(t, Not(HasSubstr("map+unmap")));
    const nlohmann::json j = dmacost_json(c, "nvme1n1");
    EXPECT_EQ(j["has_dma"], false);
    EXPECT_EQ(j["walk"], "nvme1n1 -> nvme-subsys1");
    EXPECT_FALSE(j.contains("sizes"));
}

TEST(DmaCost, Json) {
    const nlohmann::json j = dmacost_json(pci_cost(), "nvme0n1");
    EXPECT_EQ(j["dev"], "259:0");
    EXPECT_EQ(j["iommu_translating"], true);
    EXPECT_EQ(j["dma_opt_mapping_size"], 128 << 10);
    ASSERT_EQ(j["sizes"].size(), 3u);
    EXPECT_EQ(j["sizes"][0]["map_unmap_ns"], 2000.0);
    EXPECT_EQ(j["sizes"][0]["premapped_ns"], 20.0);
    EXPECT_EQ(j["sizes"][0]["map_unmap_one_entry_ns"], 800.0);
    EXPECT_FALSE(j["sizes"][1].contains("map_unmap_one_entry_ns"));
    EXPECT_EQ(j["sizes"][2]["error"], -7);
    EXPECT_FALSE(j["sizes"][2].contains("map_unmap_ns"));
}

// Premapping saves nothing when the sync walks the scatterlist as the mapping did (Debian's
// 6.1 without an IOMMU): the table says so under it, the JSON per size, and not otherwise.
TEST(DmaCost, PremappedNoCheaperIsNoted) {
    DmaCost c = pci_cost();
    EXPECT_TRUE(premapped_not_cheaper(c).empty());
    EXPECT_THAT(dmacost_text(c, "nvme0n1"), Not(HasSubstr("no cheaper")));
    EXPECT_EQ(dmacost_json(c, "nvme0n1")["sizes"][1]["premapped_cheaper"], true);

    c.iommu = NVMETRACE_DMA_IOMMU_NONE;
    c.sizes[1].premap_ns = {41000, 42000, 40000};  // median 41000 against map+unmap's 40960
    EXPECT_THAT(premapped_not_cheaper(c), ::testing::ElementsAre("1 MiB"));
    EXPECT_THAT(dmacost_text(c, "nvme0n1"),
                HasSubstr("note: premapped is no cheaper than map+unmap at 1 MiB: the per-I/O "
                          "sync walks the scatterlist as the mapping does (no translating IOMMU "
                          "to spare)\n"));
    const nlohmann::json j = dmacost_json(c, "nvme0n1");
    EXPECT_EQ(j["sizes"][0]["premapped_cheaper"], true);
    EXPECT_EQ(j["sizes"][1]["premapped_cheaper"], false);
    EXPECT_FALSE(j["sizes"][2].contains("premapped_cheaper"));  // not measured
}

TEST(DmaCost, IommuNames) {
    EXPECT_EQ(iommu_name(NVMETRACE_DMA_IOMMU_NONE), "none");
    EXPECT_EQ(iommu_name(NVMETRACE_DMA_IOMMU_IDENTITY), "passthrough (identity domain)");
    EXPECT_EQ(iommu_name(9), "unknown(9)");
}

}  // namespace
}  // namespace nvmetrace
