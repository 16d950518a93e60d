#include "kernel/devices.h"

#include "analysis/device_table.h"
#include "format/recfile.h"
#include "util/error.h"
#include "util/json_num.h"

#include <linux/nvmetrace.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/core.h>

namespace nvmetrace {

namespace fs = std::filesystem;

namespace {

// First line of a sysfs/configfs attribute, or "" when it cannot be read.
std::string read_attr(const fs::path& p) {
    std::ifstream in(p);
    std::string line;
    if (!in || !std::getline(in, line))
        return {};
    while (!line.empty() && (line.back() == '\n' || line.back() == ' '))
        line.pop_back();
    return line;
}

uint32_t read_u32(const fs::path& p) {
    std::string s = read_attr(p);
    if (s.empty())
        return 0;
    try {
        return static_cast<uint32_t>(std::stoul(s, nullptr, 0));
    } catch (...) {
        return 0;
    }
}

// "259:3" -> kernel dev_t
uint32_t read_dev(const fs::path& p) {
    std::string s = read_attr(p);
    unsigned maj = 0, min = 0;
    if (std::sscanf(s.c_str(), "%u:%u", &maj, &min) != 2)
        return 0;
    return kernel_dev(maj, min);
}

}  // namespace

std::vector<HostNamespace> find_host_namespaces(const std::string& transport,
                                                const std::string& sysfs_root) {
    std::vector<HostNamespace> out;
    fs::path cls = fs::path(sysfs_root) / "class/nvme";
    std::error_code ec;
    if (!fs::is_directory(cls, ec))
        return out;
    static const std::regex path_re(R"(nvme(\d+)c(\d+)n(\d+))");
    static const std::regex disk_re(R"(nvme(\d+)n(\d+))");
    std::vector<fs::path> ctrls;
    for (const auto& e : fs::directory_iterator(cls, ec))
        ctrls.push_back(e.path());
    std::sort(ctrls.begin(), ctrls.end());
    for (const auto& c : ctrls) {
        std::string tr = read_attr(c / "transport");
        if (tr.empty() || tr == "pcie")
            continue;
        if (!transport.empty() && tr != transport)
            continue;
        std::string ctrl = c.filename();
        uint32_t cntlid = read_u32(c / "cntlid");
        std::vector<fs::path> entries;
        for (const auto& e : fs::directory_iterator(c, ec))
            entries.push_back(e.path());
        std::sort(entries.begin(), entries.end());
        for (const auto& e : entries) {
            std::string name = e.filename();
            std::smatch m;
            HostNamespace ns;
            ns.ctrl = ctrl;
            ns.cntlid = cntlid;
            ns.transport = tr;
            ns.address = read_attr(c / "address");
            ns.subsysnqn = read_attr(c / "subsysnqn");
            if (std::regex_match(name, m, path_re)) {
                // a multipath path disk: its head is nvme<subsys>n<ns>
                std::string head = fmt::format("nvme{}n{}", m[1].str(), m[3].str());
                fs::path hb = fs::path(sysfs_root) / "block" / head;
                // a hidden path disk has no dev_t: the module names it by diskseq
                uint32_t pdev = read_dev(e / "dev");
                if (!pdev) {
                    // read while the disk may be going away: no number, no dev
                    const std::string seq = read_attr(e / "diskseq");
                    if (!seq.empty() && seq.find_first_not_of("0123456789") == std::string::npos)
                        pdev = NVMETRACE_DEV_HIDDEN(std::stoull(seq));
                }
                HostNamespace::Path p{name, pdev, ctrl, cntlid};
                auto it = std::find_if(out.begin(), out.end(),
                                       [&](const HostNamespace& h) { return h.name == head; });
                if (it != out.end()) {
                    it->paths.push_back(p);
                    continue;
                }
                ns.name = head;
                ns.dev = read_dev(hb / "dev");
                ns.block_size = read_u32(hb / "queue/logical_block_size");
                ns.nsid = read_u32(hb / "nsid");
                if (!ns.nsid)
                    ns.nsid = read_u32(e / "nsid");
                ns.paths.push_back(p);
                out.push_back(ns);
            } else if (std::regex_match(name, m, disk_re)) {
                ns.name = name;
                ns.dev = read_dev(e / "dev");
                ns.block_size = read_u32(e / "queue/logical_block_size");
                ns.nsid = read_u32(e / "nsid");
                out.push_back(ns);
            }
        }
    }
    return out;
}

const HostNamespace& pick_host_namespace(const std::vector<HostNamespace>& all,
                                         const std::string& arg) {
    std::string name = arg.rfind("/dev/", 0) == 0 ? arg.substr(5) : arg;
    for (const auto& ns : all) {
        if (ns.name == name)
            return ns;
        for (const auto& p : ns.paths)
            if (p.name == name)
                return ns;
    }
    std::string have;
    for (const auto& ns : all)
        have += (have.empty() ? "" : ", ") + ns.name;
    throw Error(
        fmt::format("{}: not an NVMe-oF namespace on this host ({})", arg,
                    have.empty() ? "none connected: nvme connect first" : "there are: " + have));
}

std::vector<TargetNamespace> find_target_namespaces(const std::string& configfs_root,
                                                    const std::string& sysfs_root) {
    std::vector<TargetNamespace> out;
    fs::path subs = fs::path(configfs_root) / "nvmet/subsystems";
    std::error_code ec;
    if (!fs::is_directory(subs, ec))
        return out;
    for (const auto& s : fs::directory_iterator(subs, ec)) {
        fs::path nsdir = s.path() / "namespaces";
        if (!fs::is_directory(nsdir, ec))
            continue;
        for (const auto& n : fs::directory_iterator(nsdir, ec)) {
            TargetNamespace t;
            t.subsysnqn = s.path().filename();
            t.nsid = static_cast<uint32_t>(std::strtoul(n.path().filename().c_str(), nullptr, 10));
            t.device_path = read_attr(n.path() / "device_path");
            if (t.device_path == "(null)")  // nvmet's word for "not set yet"
                t.device_path.clear();
            t.enabled = read_attr(n.path() / "enable") == "1";
            std::string base = fs::path(t.device_path).filename();
            t.block_size =
                read_u32(fs::path(sysfs_root) / "block" / base / "queue/logical_block_size");
            out.push_back(t);
        }
    }
    std::sort(out.begin(), out.end(), [](const TargetNamespace& a, const TargetNamespace& b) {
        return std::tie(a.subsysnqn, a.nsid) < std::tie(b.subsysnqn, b.nsid);
    });
    return out;
}

std::vector<std::string> find_nvmet_subsystems(const std::string& configfs_root) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& s : fs::directory_iterator(fs::path(configfs_root) / "nvmet/subsystems", ec))
        out.push_back(s.path().filename());
    std::sort(out.begin(), out.end());
    return out;
}

nlohmann::json devices_to_json(const std::vector<HostNamespace>& host,
                               const std::vector<TargetNamespace>& target) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& h : host) {
        arr.push_back({{"kind", "disk"},
                       {"name", h.name},
                       {"dev", h.dev},
                       {"lbs", h.block_size},
                       {"nsid", h.nsid},
                       {"ctrl", h.ctrl},
                       {"cntlid", h.cntlid},
                       {"transport", h.transport},
                       {"address", h.address},
                       {"subsysnqn", h.subsysnqn}});
        for (const auto& p : h.paths)
            arr.push_back({{"kind", "path"},
                           {"name", p.name},
                           {"dev", p.dev},
                           {"head_dev", h.dev},
                           {"ctrl", p.ctrl},
                           {"cntlid", p.cntlid}});
    }
    for (const auto& t : target)
        arr.push_back({{"kind", "target_ns"},
                       {"subsysnqn", t.subsysnqn},
                       {"nsid", t.nsid},
                       {"device_path", t.device_path},
                       {"lbs", t.block_size},
                       {"enabled", t.enabled}});
    return arr;
}

void devices_from_json(const nlohmann::json& devices, DeviceTable& table) {
    if (!devices.is_array())
        return;
    for (const auto& d : devices) {
        if (!d.is_object())
            continue;
        // the reader checked these fields (RecordingReader); a table built by
        // hand gets the same checks, and an absent or null field its default
        const auto num = [&](const char* k) { return json_int_or<uint32_t>(d, k, 0, "device"); };
        const auto str = [&](const char* k) {
            auto it = d.find(k);
            return it != d.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        const std::string kind = str("kind");
        // a device that appeared while recording: from when it holds
        const auto since = static_cast<uint64_t>(
            std::max<int64_t>(0, json_int_or<int64_t>(d, "appeared_ns", 0, "device")));
        if (kind == "disk") {
            table.add_disk(num("dev"), str("name"), num("lbs"),
                           json_int_or<uint16_t>(d, "cntlid", 0, "device"), since);
        } else if (kind == "path") {
            table.add_path(num("dev"), num("head_dev"), str("name"),
                           json_int_or<uint16_t>(d, "cntlid", 0, "device"), since);
        }
        if ((kind == "disk" || kind == "path") && d.contains("gone_ns"))
            table.set_gone(num("dev"), static_cast<uint64_t>(std::max<int64_t>(
                                           0, json_int_or<int64_t>(d, "gone_ns", 0, "device"))));
        if (kind == "target_ns") {
            const std::string name = fs::path(str("device_path")).filename();
            table.add_target_namespace(
                num("nsid"), name.empty() ? fmt::format("ns{}", num("nsid")) : name, num("lbs"));
        }
    }
}

void device_change_to_table(const DeviceChange& change, DeviceTable& table) {
    const auto at = static_cast<uint64_t>(std::max<int64_t>(0, change.monotonic_ns));
    for (const auto& g : change.gone) {
        const auto k = g.is_object() ? g.find("kind") : g.end();
        if (k != g.end() && (*k == "disk" || *k == "path"))
            table.set_gone(json_int_or<uint32_t>(g, "dev", 0, "device"), at);
    }
    nlohmann::json added = change.added;
    for (auto& d : added)
        if (d.is_object())
            d["appeared_ns"] = change.monotonic_ns;
    devices_from_json(added, table);
}

}  // namespace nvmetrace
