// `nvmetrace dmacost DEV`: what dma_map_sg() + dma_unmap_sg() cost per I/O
// size on a block device's DMA device, against a buffer mapped once and kept,
// from the raw times the module measured (NVMETRACE_CMD_DMA_COST).
#pragma once

#include "kernel/genl.h"

#include <stdint.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvmetrace {

// A block device named on the command line.
struct BlockDevice {
    uint32_t dev = 0;  // kernel dev_t encoding
    std::string name;  // as the user wrote it, e.g. "nvme0n1" or "/dev/nvme0n1"
};

// "/dev/nvme0n1", "nvme0n1" (looked up in SYSFS/class/block/NAME/dev) or
// "259:0".  Throws Error saying what is wrong.
BlockDevice resolve_block_device(const std::string& arg, const std::string& sysfs_root = "/sys");

// A block device open for reading, for the module's POOL_GET and DMA_COST: the
// module looks only at a device its caller can open.  Closed with the object.
class OpenBlockDevice {
public:
    OpenBlockDevice(int fd, std::string path, uint32_t dev);
    ~OpenBlockDevice();
    OpenBlockDevice(OpenBlockDevice&& other) noexcept;
    OpenBlockDevice& operator=(OpenBlockDevice&&) = delete;
    OpenBlockDevice(const OpenBlockDevice&) = delete;
    OpenBlockDevice& operator=(const OpenBlockDevice&) = delete;

    [[nodiscard]] DeviceRef ref() const { return {dev_, fd_}; }
    [[nodiscard]] const std::string& path() const { return path_; }

private:
    int fd_;
    std::string path_;
    uint32_t dev_;
};

// Opens the node of dev read-only: dev.name when it is a path, else
// DEV_ROOT/DEVNAME from SYSFS/dev/block/MAJ:MIN/uevent.  Throws Error saying
// what is wrong (no node, no permission, a node of another device).
OpenBlockDevice open_block_device(const BlockDevice& dev, const std::string& sysfs_root = "/sys",
                                  const std::string& dev_root = "/dev");

// Median of raw nanoseconds (mean of the middle two for an even count); 0 for
// none.
double median_ns(std::vector<uint32_t> ns);

// One table row, medians computed.
struct DmaRow {
    uint32_t bytes = 0;
    uint32_t nents = 0;
    uint32_t mapped_nents = 0;
    uint32_t limits = 0;   // NVMETRACE_DMA_OVER_*
    int32_t error = 0;     // -errno: not measured
    double map_ns = 0;     // median map + unmap
    double premap_ns = 0;  // median premapped (sync only)
    double folio_ns = -1;  // median map + unmap as one contiguous entry; -1: not measured
    double map_ns_per_kib = 0;
};

std::vector<DmaRow> dma_rows(const DmaCost& cost);

// The sizes ("1 MiB", ...) whose premapped median is not below their map+unmap median: without a
// translating IOMMU a kernel that syncs every scatterlist entry gains nothing by premapping.
std::vector<std::string> premapped_not_cheaper(const DmaCost& cost);

// "none", "passthrough (identity domain)", "translating", "other (blocked or
// unmanaged domain)".
std::string iommu_name(uint32_t iommu);

// The notes of a row's limits: "over dma_opt_mapping_size", ...
std::string limits_text(uint32_t limits);

std::string dmacost_text(const DmaCost& cost, const std::string& dev_name);
nlohmann::json dmacost_json(const DmaCost& cost, const std::string& dev_name);

}  // namespace nvmetrace
