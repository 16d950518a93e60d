#include "analysis/device_table.h"

#include <fmt/format.h>

namespace nvmetrace {

void DeviceTable::add_disk(uint32_t dev, std::string name, uint32_t block_size, uint16_t cntlid) {
    disks_[dev] = Disk{std::move(name), dev, block_size, cntlid};
}

void DeviceTable::add_path(uint32_t path_dev, uint32_t head_dev, std::string name,
                           uint16_t cntlid) {
    disks_[path_dev] = Disk{std::move(name), head_dev, 0, cntlid};
}

uint16_t DeviceTable::cntlid(uint32_t dev) const {
    auto it = disks_.find(dev);
    return it == disks_.end() ? 0 : it->second.cntlid;
}

void DeviceTable::add_target_namespace(uint32_t nsid, std::string name, uint32_t block_size) {
    target_ns_[nsid] = TargetNs{std::move(name), block_size};
}

uint32_t DeviceTable::head(uint32_t dev) const {
    auto it = disks_.find(dev);
    return it == disks_.end() ? dev : it->second.head;
}

std::string DeviceTable::disk_name(uint32_t dev) const {
    auto it = disks_.find(dev);
    if (it != disks_.end() && !it->second.name.empty())
        return it->second.name;
    return fmt::format("dev {}:{}", dev >> 20, dev & 0xfffff);
}

std::string DeviceTable::target_name(uint32_t nsid) const {
    auto it = target_ns_.find(nsid);
    if (it != target_ns_.end() && !it->second.name.empty())
        return it->second.name;
    return fmt::format("nsid {}", nsid);
}

uint32_t DeviceTable::target_block_size(uint32_t nsid) const {
    auto it = target_ns_.find(nsid);
    return it == target_ns_.end() ? 0 : it->second.block_size;
}

std::vector<std::string> DeviceTable::names() const {
    std::vector<std::string> out;
    for (const auto& [dev, d] : disks_)
        if (!d.name.empty())
            out.push_back(d.name);
    for (const auto& [nsid, ns] : target_ns_)
        if (!ns.name.empty())
            out.push_back(ns.name);
    return out;
}

}  // namespace nvmetrace
