// Which block devices and target namespaces a recording covers, read from
// sysfs (host: /sys/class/nvme) and configfs (target: nvmet subsystems).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvmetrace {

class DeviceTable;
struct DeviceChange;

// The kernel's dev_t encoding (major << 20 | minor), as in struct nvmetrace_rec.
constexpr uint32_t kernel_dev(uint32_t major, uint32_t minor) {
    return major << 20 | minor;
}

// One block device of a fabrics controller: a namespace's head disk (or, without
// multipath, the namespace disk itself) and each path disk under it.
struct HostNamespace {
    std::string name;         // nvme1n1 (the disk users open)
    uint32_t dev = 0;         // its dev_t, kernel encoding
    uint32_t block_size = 0;  // logical block size, bytes
    uint32_t nsid = 0;
    std::string ctrl;  // nvme1
    uint32_t cntlid = 0;
    std::string transport;  // tcp, rdma, loop, pcie
    std::string address;    // traddr=...,trsvcid=...
    std::string subsysnqn;
    struct Path {
        std::string name;  // nvme1c1n1
        uint32_t dev = 0;
        std::string ctrl;
        uint32_t cntlid = 0;
    };
    std::vector<Path> paths;  // empty without multipath
};

// A namespace an nvmet subsystem exports.
struct TargetNamespace {
    std::string subsysnqn;
    uint32_t nsid = 0;
    std::string device_path;  // /dev/nullb0
    uint32_t block_size = 0;
    bool enabled = false;
};

// Host namespaces on fabrics controllers (transport != pcie), optionally only
// those of `transport`, found below sysfs_root (/sys normally).
std::vector<HostNamespace> find_host_namespaces(const std::string& transport = "",
                                                const std::string& sysfs_root = "/sys");

// Resolve a user's device argument (nvme1n1, /dev/nvme1n1) among `all`; throws
// Error naming what exists when it is unknown.
const HostNamespace& pick_host_namespace(const std::vector<HostNamespace>& all,
                                         const std::string& arg);

// Namespaces of every nvmet subsystem below configfs_root
// (/sys/kernel/config normally).
std::vector<TargetNamespace> find_target_namespaces(
    const std::string& configfs_root = "/sys/kernel/config",
    const std::string& sysfs_root = "/sys");

// Names of the nvmet subsystems below configfs_root, with or without
// namespaces (a target that is being set up is still a target).
std::vector<std::string> find_nvmet_subsystems(
    const std::string& configfs_root = "/sys/kernel/config");

// The recording's `devices` array and back.
nlohmann::json devices_to_json(const std::vector<HostNamespace>& host,
                               const std::vector<TargetNamespace>& target);
void devices_from_json(const nlohmann::json& devices, DeviceTable& table);
// One DEVICES block's change into a table, as a reader of the file would
// see it (the devices added from its instant on, those gone gone then).
void device_change_to_table(const DeviceChange& change, DeviceTable& table);

}  // namespace nvmetrace
