#include "bench/spdk_perf.h"

#include "util/child_process.h"
#include "util/error.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

namespace nvmetrace::bench {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
        s.remove_prefix(1);
    while (!s.empty() &&
           (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
        s.remove_suffix(1);
    return s;
}

// The numbers after the last ':' of a results line: "Total : 1.0 2.0 ...".
std::vector<double> numbers_after_colon(std::string_view line) {
    std::vector<double> out;
    const size_t colon = line.rfind(':');
    if (colon == std::string_view::npos)
        return out;
    std::istringstream in{std::string(line.substr(colon + 1))};
    std::string tok;
    while (in >> tok) {
        double v = 0;
        auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
        if (ec != std::errc() || p != tok.data() + tok.size())
            return {};
        out.push_back(v);
    }
    return out;
}

}  // namespace

std::string trid_from_attrs(std::string_view transport, std::string_view address,
                            std::string_view subsysnqn, uint32_t nsid) {
    std::string trtype;
    if (transport == "tcp")
        trtype = "TCP";
    else if (transport == "rdma")
        trtype = "RDMA";
    else
        throw Error(fmt::format(
            "the control arm needs an NVMe-oF device on tcp or rdma (spdk_nvme_perf connects to "
            "its target itself); this one's transport is '{}': give --spdk-trid",
            transport.empty() ? "none (not NVMe-oF)" : std::string(transport)));
    std::map<std::string, std::string, std::less<>> kv;
    std::string_view rest = trim(address);
    while (!rest.empty()) {
        const size_t comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        const size_t eq = item.find('=');
        if (eq != std::string_view::npos)
            kv[std::string(trim(item.substr(0, eq)))] = std::string(trim(item.substr(eq + 1)));
        if (comma == std::string_view::npos)
            break;
        rest.remove_prefix(comma + 1);
    }
    const auto traddr = kv.find("traddr"), trsvcid = kv.find("trsvcid");
    if (traddr == kv.end() || trsvcid == kv.end() || traddr->second.empty())
        throw Error(fmt::format(
            "the controller's address '{}' has no traddr and trsvcid: give --spdk-trid", address));
    if (subsysnqn.empty())
        throw Error("the controller has no subsysnqn in sysfs: give --spdk-trid");
    const bool v6 = traddr->second.find(':') != std::string::npos;
    std::string trid =
        fmt::format("trtype:{} adrfam:{} traddr:{} trsvcid:{} subnqn:{}", trtype,
                    v6 ? "IPv6" : "IPv4", traddr->second, trsvcid->second, subsysnqn);
    if (nsid)
        trid += fmt::format(" ns:{}", nsid);
    return trid;
}

std::string trid_from_device(const Device& dev) {
    try {
        return trid_from_attrs(dev.transport, dev.address, dev.subsysnqn, dev.nsid);
    } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", dev.path, e.what()));
    }
}

std::string spdk_core_list(const std::vector<int>& cores) {
    std::string s = "[";
    for (size_t i = 0; i < cores.size(); i++)
        s += (i ? "," : "") + std::to_string(cores[i]);
    return s + "]";
}

std::vector<std::string> perf_argv(const PerfSpec& spec) {
    std::vector<std::string> a = {spec.binary};
    a.insert(a.end(), spec.extra.begin(), spec.extra.end());
    a.insert(a.end(), {"-q", std::to_string(spec.qd), "-o", std::to_string(spec.size), "-w",
                       pattern_name(spec.pattern), "-t", std::to_string(spec.seconds), "-c",
                       spdk_core_list(spec.cores), "-Q", "1", "-r", spec.trid});
    if (spec.warmup_s)
        a.insert(a.end(), {"-a", std::to_string(spec.warmup_s)});
    return a;
}

PerfOutput parse_perf_output(std::string_view text) {
    PerfOutput o;
    while (!text.empty()) {
        // a line ends at \n; perf's warm-up progress rewrites its line with \r
        const size_t end = text.find_first_of("\r\n");
        const std::string_view line = trim(text.substr(0, end));
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
        if (line.empty())
            continue;
        o.last_line = std::string(line);
        if (line.starts_with("Initialization complete. Launching workers")) {
            o.launched = true;
        } else if (line.find("completed with error") != std::string_view::npos ||
                   line.starts_with("starting I/O failed")) {
            o.failed++;
            if (o.first_error.empty())
                o.first_error = std::string(line);
        } else if (line.starts_with("Total ")) {
            const auto v = numbers_after_colon(line);
            if (v.size() == 5) {
                o.has_total = true;
                o.iops = v[0];
                o.mib_s = v[1];
                o.lat_mean_us = v[2];
                o.lat_min_us = v[3];
                o.lat_max_us = v[4];
            }
        }
    }
    return o;
}

RunResult run_spdk_perf(const PerfSpec& spec, std::string* log) {
    if (spec.cores.empty())
        throw Error("spdk_nvme_perf: no cores to run on");
    // Its standard output on a terminal is line-buffered: each line comes
    // when printed, the launch of its workers included.
    int master = -1, slave = -1;
    if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0)
        throw errno_error("spdk_nvme_perf: openpty", errno);
    fcntl(master, F_SETFD, FD_CLOEXEC);
    fcntl(slave, F_SETFD, FD_CLOEXEC);
    struct Fds {
        int a, b;
        ~Fds() {
            if (a >= 0)
                close(a);
            if (b >= 0)
                close(b);
        }
    } fds{master, slave};
    ChildProcess child = ChildProcess::start(perf_argv(spec), slave);
    close(slave);
    fds.b = -1;

    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::seconds(spec.seconds + spec.warmup_s) +
                          std::chrono::seconds(spec.timeout_s);
    std::string text;
    size_t scanned = 0;
    std::optional<std::map<int, CpuTicks>> before, after;
    bool launched = false;
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
        if (left.count() <= 0) {
            child.signal(SIGKILL);
            child.wait();
            if (log)
                *log = text;
            const PerfOutput o = parse_perf_output(text);
            throw Error(fmt::format("spdk_nvme_perf did not finish in {} s{}",
                                    spec.seconds + spec.warmup_s + spec.timeout_s,
                                    o.last_line.empty() ? "" : ": last said: " + o.last_line));
        }
        pollfd p{master, POLLIN, 0};
        const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
        if (n < 0 && errno != EINTR)
            throw errno_error("spdk_nvme_perf: poll", errno);
        if (n <= 0)
            continue;
        char buf[4096];
        const ssize_t got = read(master, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;  // EIO: every writer of the terminal has closed it (it exited)
        text.append(buf, static_cast<size_t>(got));
        // whole lines only: the snapshots are taken as the lines come
        const size_t last_nl = text.rfind('\n');
        if (last_nl == std::string::npos || last_nl < scanned)
            continue;
        std::string_view fresh(text.data() + scanned, last_nl + 1 - scanned);
        scanned = last_nl + 1;
        if (!launched &&
            fresh.find("Initialization complete. Launching workers") != std::string_view::npos) {
            launched = true;
            before = read_proc_stat();
            // the results may be in the same read
            const size_t at = fresh.find("Launching workers");
            fresh.remove_prefix(at);
        }
        if (launched && !after && fresh.find("====") != std::string_view::npos) {
            // its results: the workers have stopped
            after = read_proc_stat();
        }
    }
    const std::optional<int> status = child.wait(10'000);
    if (!status) {
        child.signal(SIGKILL);
        child.wait();
    }
    if (log)
        *log = text;
    const PerfOutput o = parse_perf_output(text);
    if (!o.has_total) {
        throw Error(fmt::format(
            "spdk_nvme_perf printed no results (exit {}){}", status ? std::to_string(*status) : "?",
            o.last_line.empty() ? ": no output" : ": last said: " + o.last_line));
    }
    if (!before || !after)
        throw Error(
            "spdk_nvme_perf printed results, but not when its workers started and stopped "
            "('Initialization complete. Launching workers.' and the results' '====' line): "
            "the cores it kept busy cannot be measured (another spdk_nvme_perf version?)");
    RunResult r;
    r.elapsed_s = spec.seconds;
    r.iops = o.iops;
    r.mib_s = o.mib_s;
    r.lat_mean_us = o.lat_mean_us;
    r.ios = static_cast<uint64_t>(std::llround(o.iops * spec.seconds));
    r.bytes = r.ios * spec.size;
    r.failed = o.failed;
    r.first_error = o.first_error;
    r.busy_cores = busy_cores(*before, *after, spec.exclude);
    return r;
}

}  // namespace nvmetrace::bench
