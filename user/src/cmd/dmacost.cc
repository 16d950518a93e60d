#include "cmd/dmacost.h"

#include "analysis/device_table.h"
#include "cmd/pool.h"
#include "kernel/devices.h"
#include "util/error.h"
#include "util/json_num.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nvmetrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace nvmetrace {

namespace {

bool parse_maj_min(const std::string& s, unsigned& maj, unsigned& min) {
    char tail = 0;
    return std::sscanf(s.c_str(), "%u:%u%c", &maj, &min, &tail) == 2;
}

// A size limit as text; the kernel says SIZE_MAX for "none".
std::string limit_text(uint64_t bytes) {
    if (bytes == std::numeric_limits<uint64_t>::max())
        return "no limit";
    return size_text(bytes);
}

}  // namespace

BlockDevice resolve_block_device(const std::string& arg, const std::string& sysfs_root) {
    unsigned maj = 0, min = 0;
    if (arg.empty())
        throw Error("no block device given");
    if (parse_maj_min(arg, maj, min)) {
        if (maj == 0)
            throw Error(fmt::format("{}: major 0 is not a block device", arg));
        return {kernel_dev(maj, min), arg};
    }
    if (arg.find('/') != std::string::npos) {
        struct stat st {};
        if (stat(arg.c_str(), &st) != 0)
            throw errno_error(arg, errno);
        if (!S_ISBLK(st.st_mode))
            throw Error(fmt::format("{}: not a block device", arg));
        return {kernel_dev(major(st.st_rdev), minor(st.st_rdev)), arg};
    }
    const std::string attr = fmt::format("{}/class/block/{}/dev", sysfs_root, arg);
    std::ifstream in(attr);
    std::string line;
    if (!in || !std::getline(in, line) || !parse_maj_min(line, maj, min))
        throw Error(fmt::format(
            "{}: no such block device (not in {}/class/block; give /dev/NAME or MAJ:MIN)", arg,
            sysfs_root));
    return {kernel_dev(maj, min), arg};
}

OpenBlockDevice::OpenBlockDevice(int fd, std::string path, uint32_t dev)
    : fd_(fd), path_(std::move(path)), dev_(dev) {}

OpenBlockDevice::~OpenBlockDevice() {
    if (fd_ >= 0)
        ::close(fd_);
}

OpenBlockDevice::OpenBlockDevice(OpenBlockDevice&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), dev_(other.dev_) {}

OpenBlockDevice open_block_device(const BlockDevice& dev, const std::string& sysfs_root,
                                  const std::string& dev_root) {
    const std::string majmin = dev_number(dev.dev);
    std::string path = dev.name;
    if (path.find('/') == std::string::npos) {
        // the kernel's name of the node, as udev and devtmpfs make it
        const std::string uevent = fmt::format("{}/dev/block/{}/uevent", sysfs_root, majmin);
        std::ifstream in(uevent);
        if (!in)
            throw Error(
                fmt::format("{}: no block device {} here (no {})", dev.name, majmin, uevent));
        std::string line, devname;
        while (std::getline(in, line))
            if (line.starts_with("DEVNAME="))
                devname = line.substr(8);
        if (devname.empty())
            throw Error(
                fmt::format("{} ({}): no DEVNAME in {}/dev/block/{}/uevent: give its /dev path",
                            dev.name, majmin, sysfs_root, majmin));
        path = fmt::format("{}/{}", dev_root, devname);
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        throw Error(fmt::format(
            "{}: cannot open it for reading: {} (the module looks only at a device you can read)",
            path, std::strerror(err)));
    }
    OpenBlockDevice opened(fd, path, dev.dev);
    struct stat st {};
    if (fstat(fd, &st) != 0)
        throw errno_error(path, errno);
    if (!S_ISBLK(st.st_mode))
        throw Error(fmt::format("{}: not a block device", path));
    if (kernel_dev(major(st.st_rdev), minor(st.st_rdev)) != dev.dev)
        throw Error(fmt::format("{} is the device {}, not {} ({})", path,
                                dev_number(kernel_dev(major(st.st_rdev), minor(st.st_rdev))),
                                dev.name, majmin));
    return opened;
}

double median_ns(std::vector<uint32_t> ns) {
    if (ns.empty())
        return 0;
    const size_t mid = ns.size() / 2;
    std::nth_element(ns.begin(), ns.begin() + static_cast<ptrdiff_t>(mid), ns.end());
    const double hi = ns[mid];
    if (ns.size() % 2)
        return hi;
    const double lo = *std::max_element(ns.begin(), ns.begin() + static_cast<ptrdiff_t>(mid));
    return (lo + hi) / 2;
}

std::vector<DmaRow> dma_rows(const DmaCost& cost) {
    std::vector<DmaRow> rows;
    for (const DmaSize& s : cost.sizes) {
        DmaRow r{
            .bytes = s.bytes,
            .nents = s.nents,
            .mapped_nents = s.mapped_nents,
            .limits = s.limits,
            .error = s.error,
        };
        if (!s.error && !s.map_ns.empty()) {
            r.map_ns = median_ns(s.map_ns);
            r.premap_ns = median_ns(s.premap_ns);
            if (!s.folio_ns.empty())
                r.folio_ns = median_ns(s.folio_ns);
            if (s.bytes)
                r.map_ns_per_kib = r.map_ns * 1024.0 / s.bytes;
        }
        rows.push_back(r);
    }
    return rows;
}

std::vector<std::string> premapped_not_cheaper(const DmaCost& cost) {
    std::vector<std::string> sizes;
    for (const DmaRow& r : dma_rows(cost))
        if (!r.error && r.map_ns > 0 && r.premap_ns >= r.map_ns)
            sizes.push_back(size_text(r.bytes));
    return sizes;
}

std::string iommu_name(uint32_t iommu) {
    switch (iommu) {
        case NVMETRACE_DMA_IOMMU_NONE:
            return "none";
        case NVMETRACE_DMA_IOMMU_IDENTITY:
            return "passthrough (identity domain)";
        case NVMETRACE_DMA_IOMMU_TRANSLATING:
            return "translating";
        case NVMETRACE_DMA_IOMMU_OTHER:
            return "other (blocked or unmanaged domain)";
        default:
            return fmt::format("unknown({})", iommu);
    }
}

std::string limits_text(uint32_t limits) {
    std::vector<std::string> notes;
    if (limits & NVMETRACE_DMA_OVER_MAX_MAPPING)
        notes.emplace_back("over dma_max_mapping_size: not measured");
    if (limits & NVMETRACE_DMA_OVER_OPT)
        notes.emplace_back("over dma_opt_mapping_size");
    if (limits & NVMETRACE_DMA_OVER_QUEUE_BYTES)
        notes.emplace_back("over max_hw_sectors: split");
    if (limits & NVMETRACE_DMA_OVER_QUEUE_SEGS)
        notes.emplace_back("over max_segments: split");
    return fmt::format("{}", fmt::join(notes, "; "));
}

std::string dmacost_text(const DmaCost& c, const std::string& dev_name) {
    std::string out;
    if (!c.has_dma) {
        out += fmt::format("{}: no DMA: {}\n", dev_name, c.no_dma_reason);
        out += fmt::format("walked: {}\n", c.walk);
        return out;
    }
    out += fmt::format("{}: DMA device {}{}, node {}\n", dev_name, c.device,
                       c.driver.empty() ? "" : fmt::format(" ({})", c.driver), c.node);
    out += fmt::format("walked: {}\n", c.walk);
    out += fmt::format("IOMMU: {}", iommu_name(c.iommu));
    if (c.iommu_domain_type)
        out += fmt::format(" (domain type {:#x})", c.iommu_domain_type);
    out += "\n";
    out += fmt::format("dma_opt_mapping_size {}, dma_max_mapping_size {}, max segment {}\n",
                       limit_text(c.opt_size), limit_text(c.max_size), size_text(c.max_seg_size));
    out += fmt::format("queue: max_hw_sectors {}, max_segments {}\n", size_text(c.queue_max_bytes),
                       c.queue_max_segments);
    out += fmt::format(
        "medians of {} iterations; map+unmap: one scatterlist entry per 4 KiB page; 1 entry: the "
        "same bytes contiguous (a pool buffer); premapped: mapped once, synced per I/O\n",
        c.iters);
    out += fmt::format("{:>8} {:>5} {:>6} {:>14} {:>9} {:>12} {:>13}  {}\n", "size", "pages",
                       "segs", "map+unmap ns", "ns/KiB", "1 entry ns", "premapped ns", "notes");
    for (const DmaRow& r : dma_rows(c)) {
        if (r.error) {
            out += fmt::format(
                "{:>8} {:>5} {:>6} {:>14} {:>9} {:>12} {:>13}  {}\n", size_text(r.bytes), r.nents,
                "-", "-", "-", "-", "-",
                r.limits ? limits_text(r.limits) : fmt::format("not measured: error {}", r.error));
            continue;
        }
        const std::string folio = r.folio_ns < 0 ? "-" : fmt::format("{:.0f}", r.folio_ns);
        out += fmt::format("{:>8} {:>5} {:>6} {:>14.0f} {:>9.1f} {:>12} {:>13.0f}  {}\n",
                           size_text(r.bytes), r.nents, r.mapped_nents, r.map_ns, r.map_ns_per_kib,
                           folio, r.premap_ns, limits_text(r.limits));
    }
    const std::vector<std::string> dearer = premapped_not_cheaper(c);
    if (!dearer.empty())
        out += fmt::format(
            "note: premapped is no cheaper than map+unmap at {}: the per-I/O sync walks the "
            "scatterlist as the mapping does{}\n",
            fmt::join(dearer, ", "),
            c.iommu == NVMETRACE_DMA_IOMMU_TRANSLATING ? "" : " (no translating IOMMU to spare)");
    return out;
}

nlohmann::json dmacost_json(const DmaCost& c, const std::string& dev_name) {
    nlohmann::json j = {
        {"schema", json_schema("dmacost")},
        {"device", dev_name},
        {"dev", dev_number(c.dev)},
        {"has_dma", c.has_dma},
        {"walk", c.walk},
    };
    if (!c.has_dma) {
        j["no_dma_reason"] = c.no_dma_reason;
        return j;
    }
    j["dma_device"] = c.device;
    j["driver"] = c.driver;
    j["node"] = c.node;
    j["iommu"] = iommu_name(c.iommu);
    j["iommu_translating"] = c.iommu == NVMETRACE_DMA_IOMMU_TRANSLATING;
    j["iommu_domain_type"] = c.iommu_domain_type;
    j["dma_opt_mapping_size"] = c.opt_size;
    j["dma_max_mapping_size"] = c.max_size;
    j["max_segment_size"] = c.max_seg_size;
    j["queue_max_bytes"] = c.queue_max_bytes;
    j["queue_max_segments"] = c.queue_max_segments;
    j["iterations"] = c.iters;
    nlohmann::json sizes = nlohmann::json::array();
    for (const DmaRow& r : dma_rows(c)) {
        nlohmann::json s = {
            {"bytes", r.bytes},
            {"pages", r.nents},
            {"limits", r.limits},
            {"notes", limits_text(r.limits)},
        };
        if (r.error) {
            s["error"] = r.error;
        } else {
            s["dma_segments"] = r.mapped_nents;
            s["map_unmap_ns"] = r.map_ns;
            s["map_unmap_ns_per_kib"] = r.map_ns_per_kib;
            s["premapped_ns"] = r.premap_ns;
            s["premapped_cheaper"] = r.premap_ns < r.map_ns;
            if (r.folio_ns >= 0)
                s["map_unmap_one_entry_ns"] = r.folio_ns;
        }
        sizes.push_back(s);
    }
    j["sizes"] = sizes;
    return j;
}

}  // namespace nvmetrace
