#include "analysis/device_table.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

namespace nvmetrace {

std::string dev_number(uint32_t dev) {
    return fmt::format("{}:{}", dev >> 20, dev & 0xfffff);
}

void DeviceTable::add(uint32_t dev, Disk d, uint64_t since) {
    auto [it, fresh] = disks_.try_emplace(dev);
    if (!fresh && d.head == dev && it->second.head == dev &&
        (it->second.name != d.name || instances_.count(dev))) {
        // another disk under this number: the number it goes by from since
        // (the number's first disk keeps it, a name seen before its alias)
        auto& v = instances_[dev];
        if (v.empty())
            v.push_back({0, dev, it->second.name});
        uint32_t id = 0;
        for (const Instance& e : v)
            if (e.name == d.name)
                id = e.id;
        if (!id)
            id = next_alias_++;
        auto pos = std::upper_bound(v.begin(), v.end(), since,
                                    [](uint64_t t, const Instance& e) { return t < e.since; });
        v.insert(pos, {since, id, d.name});
        if (id != dev) {
            d.head = id;
            add(id, std::move(d), since);
            return;
        }
    }
    std::vector<std::pair<uint64_t, uint16_t>> history = std::move(it->second.history);
    std::vector<uint64_t> gone = std::move(it->second.gone);
    if (fresh || history.empty())
        history = {{0, fresh ? d.cntlid : it->second.cntlid}};
    if (!fresh) {
        // entries come in time order; one out of order goes where it belongs
        auto pos = std::upper_bound(history.begin(), history.end(), since,
                                    [](uint64_t t, const auto& h) { return t < h.first; });
        history.insert(pos, {since, d.cntlid});
    }
    d.history = std::move(history);
    d.gone = std::move(gone);
    it->second = std::move(d);
}

void DeviceTable::add_disk(uint32_t dev, std::string name, uint32_t block_size, uint16_t cntlid,
                           uint64_t since) {
    add(dev, Disk{std::move(name), dev, block_size, cntlid, {}, {}}, since);
}

void DeviceTable::add_path(uint32_t path_dev, uint32_t head_dev, std::string name, uint16_t cntlid,
                           uint64_t since) {
    add(path_dev, Disk{std::move(name), head_dev, 0, cntlid, {}, {}}, since);
}

void DeviceTable::set_gone(uint32_t dev, uint64_t ts) {
    if (auto it = disks_.find(dev); it != disks_.end()) {
        auto& g = it->second.gone;
        g.insert(std::upper_bound(g.begin(), g.end(), ts), ts);
    }
}

uint64_t DeviceTable::gone_after(uint32_t dev, uint64_t ts) const {
    auto it = disks_.find(dev);
    if (it == disks_.end())
        return 0;
    const auto& g = it->second.gone;
    auto pos = std::lower_bound(g.begin(), g.end(), ts);
    return pos == g.end() ? 0 : *pos;
}

namespace {

// The first change of a controller-id history after ts (end: none).
template <typename H>
auto change_after(const H& h, uint64_t ts) {
    return std::upper_bound(h.begin(), h.end(), ts,
                            [](uint64_t t, const auto& e) { return t < e.first; });
}

}  // namespace

uint16_t DeviceTable::cntlid(uint32_t dev, uint64_t ts) const {
    auto it = disks_.find(dev);
    if (it == disks_.end())
        return 0;
    // the last change at or before ts (the first entry covers what came before)
    const auto& h = it->second.history;
    auto pos = change_after(h, ts);
    return pos == h.begin() ? h.front().second : std::prev(pos)->second;
}

uint16_t DeviceTable::cntlid_next(uint32_t dev, uint64_t ts, uint64_t within) const {
    auto it = disks_.find(dev);
    if (it == disks_.end())
        return 0;
    const auto& h = it->second.history;
    auto pos = change_after(h, ts);
    if (pos == h.end() || pos == h.begin() || pos->first - ts > within)
        return 0;
    return pos->second == std::prev(pos)->second ? 0 : pos->second;
}

void DeviceTable::add_target_namespace(uint32_t nsid, std::string name, uint32_t block_size) {
    target_ns_[nsid] = TargetNs{std::move(name), block_size};
}

uint32_t DeviceTable::head(uint32_t dev, uint64_t at) const {
    auto it = disks_.find(dev);
    const uint32_t h = it == disks_.end() ? dev : it->second.head;
    if (instances_.empty())
        return h;
    auto in = instances_.find(h);
    if (in == instances_.end())
        return h;
    const auto& v = in->second;
    auto pos = std::upper_bound(v.begin(), v.end(), at,
                                [](uint64_t t, const Instance& e) { return t < e.since; });
    return pos == v.begin() ? v.front().id : std::prev(pos)->id;
}

std::string DeviceTable::disk_name(uint32_t dev) const {
    auto it = disks_.find(dev);
    if (it != disks_.end() && !it->second.name.empty())
        return it->second.name;
    return "dev " + dev_number(dev);
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
