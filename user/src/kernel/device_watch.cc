#include "kernel/device_watch.h"

#include "analysis/device_table.h"

#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include <fmt/format.h>

namespace nvmetrace {

bool namespace_selected(const HostNamespace& ns, const std::vector<std::string>& names) {
    if (names.empty())
        return true;
    for (const std::string& arg : names) {
        const std::string n = arg.rfind("/dev/", 0) == 0 ? arg.substr(5) : arg;
        if (n == ns.name || n == ns.ctrl || (!ns.subsysnqn.empty() && n == ns.subsysnqn))
            return true;
        for (const auto& p : ns.paths)
            if (n == p.name || n == p.ctrl)
                return true;
    }
    return false;
}

namespace {

std::string entry_key(const nlohmann::json& d) {
    const auto s = [&](const char* k) {
        auto it = d.find(k);
        return it == d.end() ? std::string() : it->dump();
    };
    if (d.value("kind", "") == "target_ns")
        return fmt::format("target_ns|{}|{}|{}", s("subsysnqn"), s("nsid"), s("device_path"));
    // a path's head is part of it: a head made anew under another number
    // (seen in a reconnect) changes its paths too, so the table ties them
    // to the number their commands' bios are queued on
    return fmt::format("{}|{}|{}|{}|{}|{}", s("kind"), s("name"), s("dev"), s("ctrl"), s("cntlid"),
                       s("head_dev"));
}

// A target namespace takes commands only while enabled (nvmet refuses a new
// device_path then): one being set up is followed from its enable on, once,
// and one disabled has gone for the recording.
std::vector<TargetNamespace> enabled_only(std::vector<TargetNamespace> target) {
    std::erase_if(target, [](const TargetNamespace& t) { return !t.enabled; });
    return target;
}

std::string describe(const nlohmann::json& d) {
    const std::string kind = d.value("kind", "");
    if (kind == "target_ns")
        return fmt::format("target namespace {} of {} ({})", d.value("nsid", 0u),
                           d.value("subsysnqn", ""), d.value("device_path", ""));
    if (kind == "path")
        return fmt::format("path {} ({}, cntlid {})", d.value("name", ""), d.value("ctrl", ""),
                           d.value("cntlid", 0u));
    return fmt::format("{} ({} {}, {}, cntlid {})", d.value("name", ""), d.value("transport", ""),
                       d.value("subsysnqn", ""), d.value("ctrl", ""), d.value("cntlid", 0u));
}

}  // namespace

DeviceWatch::DeviceWatch(Options opts, const std::vector<HostNamespace>& host,
                         const std::vector<TargetNamespace>& target)
    : opts_(std::move(opts)) {
    for (const auto& d : devices_to_json(host, enabled_only(target)))
        known_.emplace(entry_key(d), d);
    for (const auto& m : opts_.modules) {
        const bool started = std::find(opts_.modules_started.begin(), opts_.modules_started.end(),
                                       m) != opts_.modules_started.end();
        module_ino_[m] = started ? module_ino(m) : 0;
    }
    if (opts_.uevents) {
        fd_ = socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
        if (fd_ >= 0) {
            sockaddr_nl sa{};
            sa.nl_family = AF_NETLINK;
            sa.nl_groups = 1;  // the kernel's own uevents
            if (bind(fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
                close(fd_);
                fd_ = -1;
            }
        }
    }
}

DeviceWatch::~DeviceWatch() {
    if (fd_ >= 0)
        close(fd_);
}

uint64_t DeviceWatch::module_ino(const std::string& name) const {
    struct stat st {};
    if (stat(fmt::format("{}/kernel/btf/{}", opts_.sysfs_root, name).c_str(), &st) != 0)
        return 0;
    return static_cast<uint64_t>(st.st_ino);
}

std::map<std::string, nlohmann::json> DeviceWatch::look() const {
    std::vector<HostNamespace> host;
    if (opts_.host) {
        for (auto& ns : find_host_namespaces(opts_.transport, opts_.sysfs_root))
            if (namespace_selected(ns, opts_.names))
                host.push_back(std::move(ns));
    }
    std::vector<TargetNamespace> target;
    if (opts_.target)
        target = enabled_only(find_target_namespaces(opts_.configfs_root, opts_.sysfs_root));
    std::map<std::string, nlohmann::json> out;
    for (auto& d : devices_to_json(host, target))
        out.emplace(entry_key(d), std::move(d));
    return out;
}

std::optional<DeviceWatch::Change> DeviceWatch::poll(uint64_t now_ns, bool force) {
    bool heard = false;
    if (fd_ >= 0) {
        char buf[8192];
        for (;;) {
            const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
            if (n > 0) {
                // block devices, nvme controllers and modules; other
                // subsystems are not ours
                const std::string_view m(buf, static_cast<size_t>(n));
                if (m.find("SUBSYSTEM=block") != m.npos || m.find("SUBSYSTEM=nvme") != m.npos ||
                    (!opts_.modules.empty() && m.find("SUBSYSTEM=module") != m.npos))
                    heard = true;
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == ENOBUFS) {  // uevents were lost: look anyway
                heard = true;
                continue;
            }
            break;
        }
    }
    const uint64_t period = fd_ >= 0 ? opts_.uevent_period_ns : opts_.period_ns;
    if (!force && !heard && now_ns - last_ < period)
        return std::nullopt;
    last_ = now_ns;
    std::map<std::string, nlohmann::json> now;
    try {
        now = look();
    } catch (const std::exception&) {
        last_ = 0;  // a device went away under the scan: look again next time
        return std::nullopt;
    }
    Change c;
    // modules first: record gives a transport its layout before admitting
    // the disks that appeared with it
    for (auto& [name, ino] : module_ino_) {
        const uint64_t now_ino = module_ino(name);
        if (now_ino != 0 && now_ino != ino)
            c.modules.push_back(name);
        ino = now_ino;
    }
    // a disk that stays but changes controller (a reset or a reconnect
    // gives it another controller id): gone and added, one line
    std::map<std::string, const nlohmann::json*> was;
    for (const auto& [k, d] : known_)
        if (!now.count(k))
            was.emplace(device_gone_entry(d).dump(), &d);
    std::vector<uint32_t> paths;
    for (const auto& [k, d] : now) {
        if (known_.count(k))
            continue;
        c.block.added.push_back(d);
        const std::string kind = d.value("kind", "");
        if ((kind == "disk" || kind == "path") && d.value("dev", 0u) != 0)
            (kind == "path" ? paths : c.admit).push_back(d.value("dev", 0u));
        const auto w = was.find(device_gone_entry(d).dump());
        if (w != was.end() && kind != "target_ns" &&
            w->second->value("cntlid", 0u) != d.value("cntlid", 0u))
            c.lines.push_back(fmt::format("{}: controller id was {}: recording it", describe(d),
                                          w->second->value("cntlid", 0u)));
        else if (w != was.end() && kind == "path")
            c.lines.push_back(fmt::format("{}: its disk is now dev {}: recording it", describe(d),
                                          dev_number(d.value("head_dev", 0u))));
        else
            c.lines.push_back(fmt::format("{} appeared: recording it", describe(d)));
    }
    // the paths first: a command is queued on its head and issued on a path,
    // so one that began after its head was admitted has every record
    c.admit.insert(c.admit.begin(), paths.begin(), paths.end());
    std::set<std::string> changed;
    for (const auto& d : c.block.added)
        changed.insert(device_gone_entry(d).dump());
    for (const auto& [k, d] : known_) {
        if (now.count(k))
            continue;
        c.block.gone.push_back(device_gone_entry(d));
        if (!changed.count(device_gone_entry(d).dump()))
            c.lines.push_back(fmt::format("{} went away", describe(d)));
    }
    known_ = std::move(now);
    if (c.empty())
        return std::nullopt;
    return c;
}

}  // namespace nvmetrace
