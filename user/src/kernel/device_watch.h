// The devices a recording follows while it runs: NVMe-oF namespaces that a
// host connects, reconnects or loses, and nvmet namespaces a target enables
// or disables (adds or removes).  Each look is a rescan of sysfs
// (/sys/class/nvme) and configfs (nvmet subsystems), made at once when the
// kernel sends a uevent and at least every 5 s (every second without
// uevents); what differs from the last look is a change: the DEVICES block
// the recording keeps, the host disks to admit into the module's recording,
// and a line for the user per device.  It also watches the transport modules
// whose hooks need their layout (nvme_tcp, ...): one loaded (or loaded
// again) while recording is named in the change, for record to give the
// module its layout (NVMETRACE_CMD_LAYOUT).
#pragma once

#include "format/recfile.h"
#include "kernel/devices.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nvmetrace {

// Whether a host namespace is one the user named (-d): by its disk (nvme1n1,
// /dev/nvme1n1), a path disk of it, its controller (nvme1) or its subsystem
// NQN.  No names: every namespace.
bool namespace_selected(const HostNamespace& ns, const std::vector<std::string>& names);

class DeviceWatch {
public:
    struct Options {
        bool host = false;                    // follow host namespaces
        bool target = false;                  // follow nvmet namespaces
        std::string transport = {};           // host: only this transport ("": any fabric)
        std::vector<std::string> names = {};  // host: namespace_selected()'s names
        std::string sysfs_root = "/sys";
        std::string configfs_root = "/sys/kernel/config";
        bool uevents = true;  // listen for kernel uevents (else: the period only)
        // How often to look with nothing heard: without a uevent socket, and
        // with one (every host change is a uevent: a disk's add or remove, a
        // controller's NVME_EVENT=connected after a reset; the period is for
        // what is not, nvmet's configfs, and it costs the workload's CPU).
        uint64_t period_ns = 1'000'000'000;
        uint64_t uevent_period_ns = 5'000'000'000;
        // Modules to report when their BTF (sysfs_root/kernel/btf/<name>)
        // appears or is replaced by a load; `modules_started` the ones whose
        // layout the recording started with, as loaded then (any other
        // already loaded is reported at the first look).
        std::vector<std::string> modules = {};
        std::vector<std::string> modules_started = {};
    };
    struct Change {
        DeviceChange block;                // for the recording (monotonic_ns set by the caller)
        std::vector<uint32_t> admit;       // host disks new to the recording: paths, then heads
        std::vector<std::string> lines;    // one per device, for the user
        std::vector<std::string> modules;  // Options::modules loaded since the last look
        [[nodiscard]] bool empty() const {
            return block.added.empty() && block.gone.empty() && modules.empty();
        }
    };

    // host and target: what the recording started with (its META).
    DeviceWatch(Options opts, const std::vector<HostNamespace>& host,
                const std::vector<TargetNamespace>& target);
    ~DeviceWatch();
    DeviceWatch(const DeviceWatch&) = delete;
    DeviceWatch& operator=(const DeviceWatch&) = delete;

    // The uevent socket, for poll(): readable when the kernel said something.
    // -1 without one (not permitted here): the period alone.
    [[nodiscard]] int fd() const { return fd_; }
    // Looks again if a uevent came (or force) or the period has passed since
    // the last look; returns what changed, or nothing.  A look that fails
    // halfway (a device going away under it) is tried again at the next call.
    std::optional<Change> poll(uint64_t now_ns, bool force = false);

private:
    // One entry per device, as the recording's devices array has them, by a
    // key that changes when a device is replaced (name, dev, controller).
    std::map<std::string, nlohmann::json> look() const;
    // The identity of a module's BTF file as loaded (its inode: sysfs makes
    // a new one at each load); 0: not loaded.
    [[nodiscard]] uint64_t module_ino(const std::string& name) const;

    Options opts_;
    int fd_ = -1;
    uint64_t last_ = 0;
    std::map<std::string, nlohmann::json> known_;
    std::map<std::string, uint64_t> module_ino_;  // Options::modules, as last seen
};

}  // namespace nvmetrace
