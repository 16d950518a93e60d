#include "spdk/process.h"

#include "spdk/rdma_host_probes.h"
#include "spdk/trace_file.h"
#include "util/error.h"
#include "util/uprobe_events.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/core.h>

namespace nvmetrace::spdk {

namespace fs = std::filesystem;

namespace {

bool all_digits(std::string_view s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

std::string canonical_or_empty(const fs::path& p) {
    std::error_code ec;
    fs::path c = fs::canonical(p, ec);
    return ec ? std::string() : c.string();
}

}  // namespace

std::string trace_of(int pid, const std::string& proc) {
    std::ifstream maps(fmt::format("{}/{}/maps", proc, pid));
    std::string line;
    while (std::getline(maps, line)) {
        const size_t at = line.find("/dev/shm/");
        if (at == std::string::npos)
            continue;
        std::string path = line.substr(at);
        if (path.ends_with(" (deleted)"))
            continue;  // SPDK removed it: nothing to open
        if (fs::path(path).filename().string().find("_trace.") != std::string::npos)
            return path;
    }
    return {};
}

Source find_source(const std::string& arg, const std::string& proc, const std::string& shm) {
    Source src;
    if (all_digits(arg)) {
        int pid = 0;
        std::from_chars(arg.data(), arg.data() + arg.size(), pid);
        if (!fs::exists(fmt::format("{}/{}", proc, pid)))
            throw Error(fmt::format("no process {} is running", pid));
        src.processes.push_back({pid, trace_of(pid, proc)});
        return src;
    }
    const fs::path p(arg);
    const std::string name = p.filename().string();
    if (name.find("_trace.") != std::string::npos || p.parent_path() == shm) {
        // a trace file, by path or by its shared-memory name
        const fs::path file = p.has_parent_path() ? p : fs::path(shm) / p;
        if (!fs::exists(file))
            throw Error(
                fmt::format("{}: no such trace file (an SPDK app writes "
                            "{}/<app>_trace.<shm id> or .pid<pid> when started with -e)",
                            file.string(), shm));
        src.processes.push_back({0, file.string()});
        return src;
    }
    if (!fs::exists(p))
        throw Error(
            fmt::format("{}: no such file; name the SPDK app's binary (build/bin/nvmf_tgt, "
                        "build/bin/spdk_nvme_perf), its pid or its trace file",
                        arg));
    src.binary = canonical_or_empty(p);
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(proc, ec)) {
        const std::string pid = d.path().filename().string();
        if (!all_digits(pid))
            continue;
        if (canonical_or_empty(d.path() / "exe") != src.binary)
            continue;
        const int n = std::stoi(pid);
        src.processes.push_back({n, trace_of(n, proc)});
    }
    return src;
}

std::vector<Need> needs(bool target, std::string_view transport) {
    if (target && transport == "tcp")
        return {{"TCP_REQ_NEW", "nvmf_tcp", "a command's capsule received"},
                {"TCP_REQ_RDY_TO_COMPLETE", "nvmf_tcp", "its response handed to the socket"},
                {"BDEV_IO_START", "bdev", "the bdev I/O: LBA and length"},
                {"BDEV_IO_DONE", "bdev", "the bdev I/O done"}};
    if (target)
        return {{"RDMA_REQ_NEW", "nvmf_rdma", "a command's capsule received"},
                {"RDMA_REQ_RDY_TO_COMPL", "nvmf_rdma", "its response handed to the NIC"},
                {"BDEV_IO_START", "bdev", "the bdev I/O: LBA and length"},
                {"BDEV_IO_DONE", "bdev", "the bdev I/O done"}};
    if (transport == "tcp")
        return {{"NVME_TCP_SUBMIT", "nvme_tcp", "a command sent: cid, opcode, LBA, length"},
                {"NVME_TCP_COMPLETE", "nvme_tcp", "its completion: cid, status"}};
    return {};
}

namespace {

// The RDMA host's part of probe: the uprobes' places and the request's
// layout in the app's binary and libraries, and whether uprobes can be made.
bool probe_rdma_host(const Source& src, const std::string& arg) {
    std::string binary = src.binary;
    if (binary.empty() && !src.processes.empty() && src.processes.front().pid)
        binary = canonical_or_empty(fmt::format("/proc/{}/exe", src.processes.front().pid));
    fmt::print("  over RDMA: uprobes (SPDK's NVMe/RDMA initiator has no tracepoints)\n");
    if (binary.empty()) {
        fmt::print("  absent {}: not a program; name the app's binary\n", arg);
        return false;
    }
    RdmaHostSites sites;
    try {
        sites = find_rdma_host_sites(binary);
    } catch (const Error& e) {
        fmt::print("  absent {}\n", e.what());
        return false;
    }
    fmt::print("  {:<6} {:<38} {}:{:#x}: a command's capsule: cid, opcode, LBA, length\n", "ok",
               kRdmaSubmitFunction, sites.submit_file, sites.submit_offset);
    fmt::print("  {:<6} {:<38} {}:{:#x}: its completion: cid, status\n", "ok",
               kRdmaCompleteFunction, sites.complete_file, sites.complete_offset);
    fmt::print("  {:<6} {:<38} send_wr at {} (debug information): a completion's request\n", "ok",
               "struct spdk_nvme_rdma_req", sites.wr_offset);
    bool ok = true;
    try {
        const std::string dir = tracefs_dir();
        if (access((dir + "/uprobe_events").c_str(), W_OK) == 0) {
            fmt::print("  {:<6} {:<38} {}/uprobe_events\n", "ok", "uprobe events", dir);
        } else {
            fmt::print("  {:<6} {:<38} {}/uprobe_events is not writable (root is needed)\n", "off",
                       "uprobe events", dir);
            ok = false;
        }
    } catch (const Error& e) {
        fmt::print("  {:<6} {:<38} {}\n", "absent", "uprobe events", e.what());
        ok = false;
    }
    if (ok)
        fmt::print(
            "  record it while it runs (nvmetrace record --spdk-host {0}), or from its "
            "start (nvmetrace record --spdk-host {0} -- {0} ARGS)\n",
            binary);
    return ok;
}

}  // namespace

bool probe_role(bool target, const std::string& arg,
                const std::vector<std::string>& transports_asked) {
    const char* role = target ? "target" : "host";
    Source src = find_source(arg);
    fmt::print("spdk {}: {}\n", role, arg);
    std::vector<std::string> transports = transports_asked;
    bool rdma_ok = false;
    if (const auto r = std::find(transports.begin(), transports.end(), "rdma");
        !target && r != transports.end()) {
        transports.erase(r);
        rdma_ok = probe_rdma_host(src, arg);
        if (transports.empty()) {
            fmt::print("  load: {}\n\n", rdma_ok ? "ok" : "FAILED");
            return rdma_ok;
        }
    }
    // the app's option that turns tracepoint groups on: -e, but -y for spdk_nvme_perf
    // (its -e is metadata)
    std::string app = src.binary.empty() ? std::string() : fs::path(src.binary).filename().string();
    if (app.empty() && !src.processes.empty() && src.processes.front().pid)
        app = fs::path(canonical_or_empty(fmt::format("/proc/{}/exe", src.processes.front().pid)))
                  .filename()
                  .string();
    const std::string flag = app == "spdk_nvme_perf" ? "-y" : "-e";
    if (app.empty())
        app = target ? "nvmf_tgt" : "the app";
    const std::string start_as =
        target ? fmt::format("{} {} nvmf_tcp,bdev (or {} nvmf_rdma,bdev)", app, flag, flag)
               : fmt::format("{} {} nvme_tcp", app, flag);
    if (src.processes.empty()) {
        fmt::print(
            "  running processes: none: record reads the trace ring of a running SPDK app; "
            "start it with its tracepoints on ({})\n  load: {}\n\n",
            start_as, rdma_ok ? "ok" : "FAILED");
        return rdma_ok;
    }
    bool ok = true;
    for (const Process& pr : src.processes) {
        const std::string who = pr.pid ? fmt::format("process {}", pr.pid) : pr.trace;
        if (pr.trace.empty()) {
            fmt::print("  {}: no trace ring: it runs without tracepoints; start it as {}\n", who,
                       start_as);
            ok = false;
            continue;
        }
        TraceFile tf;
        try {
            tf = TraceFile::read(pr.trace);
        } catch (const Error& e) {
            fmt::print("  {}: {}\n", who, e.what());
            ok = false;
            continue;
        }
        const uint64_t entries = tf.lcores.empty() ? 0 : tf.lcores.front().num_entries;
        fmt::print("  {}: trace {}: {} core{}, {} entries a core, TSC {:.3f} GHz\n", who, pr.trace,
                   tf.lcores.size(), tf.lcores.size() == 1 ? "" : "s", entries,
                   static_cast<double>(tf.tsc_rate) / 1e9);
        bool any = false;
        for (const std::string& tr : transports) {
            const std::vector<Need> want = needs(target, tr);
            // each transport's list is whole (the bdev's tracepoints are in both): a heading
            // tells them apart when probe checks more than one
            if (transports.size() > 1)
                fmt::print("  over {}:\n", tr == "rdma" ? "RDMA" : "TCP");
            if (want.empty()) {
                fmt::print(
                    "  {:<6} {:<22} SPDK's NVMe/{} initiator has no tracepoints: its "
                    "commands cannot be timed from the trace ring\n",
                    "absent", tr, tr == "rdma" ? "RDMA" : tr);
                continue;
            }
            bool all = true;
            // the groups with a needed tracepoint off, and the mask of what is needed in
            // each: -e GROUP:MASK turns on only those (the whole groups cost more)
            std::map<std::string_view, uint64_t> off;
            for (const Need& n : want) {
                const Tpoint* t = tf.find(n.tpoint);
                std::string_view state = "ok";
                std::string note;
                if (!t) {
                    state = "absent";
                    note = fmt::format("not registered: this app has no {} support linked in",
                                       n.group);
                    all = false;
                } else if (!tf.enabled(t->id)) {
                    state = "off";
                    note = fmt::format("group {} not enabled", n.group);
                    off[n.group] = 0;
                    all = false;
                } else {
                    note = fmt::format("{}, {} hits", n.what, tf.hits(t->id));
                }
                fmt::print("  {:<6} {:<22} {:<10} {}\n", state, n.tpoint, n.group, note);
            }
            if (!off.empty()) {
                for (const Need& n : want)
                    if (const Tpoint* t = tf.find(n.tpoint); t && off.count(n.group))
                        off[n.group] |= uint64_t{1} << (t->id % 64);
                std::string groups;
                for (const auto& [g, mask] : off)
                    groups += fmt::format("{}{}:{:#x}", groups.empty() ? "" : ",", g, mask);
                fmt::print(
                    "  start it with {} {} to record over {} (only the tracepoints "
                    "nvmetrace reads)\n",
                    flag, groups, tr);
            }
            any = any || all;
        }
        ok = ok && any;
    }
    ok = ok || rdma_ok;
    fmt::print("  load: {}\n\n", ok ? "ok" : "FAILED");
    return ok;
}

}  // namespace nvmetrace::spdk
