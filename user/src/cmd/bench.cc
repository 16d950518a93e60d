#include "cmd/bench.h"

#include "analysis/stats.h"
#include "bench/spdk_perf.h"
#include "cmd/record.h"
#include "git_commit.h"
#include "kernel/genl.h"
#include "util/child_process.h"
#include "util/error.h"
#include "util/json_num.h"
#include "version.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace nvmetrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace bench {

namespace {

template <class T>
std::vector<T> parse_list(const std::string& s, const char* what, T (*one)(const std::string&)) {
    std::vector<T> out;
    if (s.empty())
        return out;
    std::stringstream in(s);
    std::string part;
    while (std::getline(in, part, ','))
        out.push_back(one(part));
    if (out.empty())
        throw Error(fmt::format("{} '{}': empty list", what, s));
    return out;
}

uint32_t parse_count(const std::string& s) {
    try {
        size_t pos = 0;
        const unsigned long v = std::stoul(s, &pos);
        if (pos == s.size() && v > 0 && v <= 65536)
            return static_cast<uint32_t>(v);
    } catch (const std::exception&) {
    }
    throw Error(fmt::format("'{}' is not a count between 1 and 65536", s));
}

std::string read_first_line(const fs::path& p) {
    std::ifstream f(p);
    std::string s;
    if (f)
        std::getline(f, s);
    return s;
}

std::string utc_now() {
    const time_t t = time(nullptr);
    struct tm tm {};
    gmtime_r(&t, &tm);
    char buf[32];
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string fmt_num(double v, int prec) {
    return fmt::format("{:.{}f}", v, prec);
}

}  // namespace

std::vector<Cell> expand_profile(const std::string& profile, Pattern pattern, uint64_t size,
                                 uint32_t qd, uint32_t threads, const std::vector<uint64_t>& sizes,
                                 const std::vector<uint32_t>& qds,
                                 const std::vector<uint32_t>& thread_list, uint32_t reps) {
    std::vector<uint64_t> s;
    std::vector<uint32_t> q, t;
    std::string name = profile.empty() ? "single" : profile;
    if (profile.empty()) {
        s = {size};
        q = {qd};
        t = {threads};
    } else if (profile == "aisio") {
        // AISIO command rate: small random reads at QD128, 1 to 4 threads.
        pattern = Pattern::randread;
        s = {512, 4096, 8192};
        q = {128};
        t = {1, 2, 3, 4};
    } else if (profile == "kv") {
        // KV crossover: random reads 4 KiB .. 2 MiB at QD 1/16/64/128.
        pattern = Pattern::randread;
        for (uint64_t v = 4096; v <= (2u << 20); v *= 2)
            s.push_back(v);
        q = {1, 16, 64, 128};
        t = {1};
    } else {
        throw Error(fmt::format("--profile {}: use aisio or kv", profile));
    }
    if (!sizes.empty())
        s = sizes;
    if (!qds.empty())
        q = qds;
    if (!thread_list.empty())
        t = thread_list;
    std::vector<Cell> cells;
    for (uint32_t rep = 1; rep <= reps; rep++)
        for (uint64_t sz : s)
            for (uint32_t qq : q)
                for (uint32_t tt : t) {
                    Cell c;
                    c.index = static_cast<uint32_t>(cells.size()) + 1;
                    c.profile = name;
                    c.rep = rep;
                    c.pattern = pattern;
                    c.size = sz;
                    c.qd = qq;
                    c.threads = tt;
                    cells.push_back(c);
                }
    return cells;
}

const std::vector<std::string>& csv_columns() {
    static const std::vector<std::string> cols = {
        "cell",      "profile",     "rep",        "engine",      "device",      "pattern",
        "size",      "qd",          "threads",    "buf",         "fixed",       "status",
        "elapsed_s", "ios",         "failed",     "first_error", "fallbacks",   "iops",
        "mib_s",     "lat_mean_us", "lat_p50_us", "lat_p99_us",  "lat_p999_us", "busy_cores",
        "recording", "note"};
    return cols;
}

std::string csv_header() {
    std::string s;
    for (const auto& c : csv_columns())
        s += (s.empty() ? "" : ",") + c;
    return s + "\n";
}

std::string csv_quote(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos)
        return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"')
            out += '"';
        out += c == '\n' || c == '\r' ? ' ' : c;
    }
    return out + "\"";
}

std::string csv_row(const CellRow& row, const Device& dev, const RunSpec& spec) {
    const auto& c = row.cell;
    const auto& r = row.r;
    const bool measured = row.status != "skipped" && (r.ios > 0 || r.elapsed_s > 0);
    auto m = [&](double v, int prec) { return measured ? fmt_num(v, prec) : std::string(); };
    // spdk_nvme_perf has no fixed-buffer notion and no percentiles in its
    // summary: those fields stay empty on its rows, never a made-up 0
    auto k = [&](double v, int prec) { return row.control ? std::string() : m(v, prec); };
    std::vector<std::string> f = {std::to_string(c.index),
                                  c.profile,
                                  std::to_string(c.rep),
                                  row.control ? "spdk_nvme_perf" : engine_name(dev.engine),
                                  row.control ? row.trid : dev.path,
                                  pattern_name(c.pattern),
                                  std::to_string(c.size),
                                  std::to_string(c.qd),
                                  std::to_string(c.threads),
                                  row.control ? "spdk" : buf_name(spec.buf),
                                  row.control                               ? ""
                                  : spec.buf == BufKind::pool || spec.fixed ? "1"
                                                                            : "0",
                                  row.status,
                                  m(r.elapsed_s, 3),
                                  measured ? std::to_string(r.ios) : "",
                                  measured ? std::to_string(r.failed) : "",
                                  r.first_error,
                                  measured && !row.control ? std::to_string(r.fallbacks) : "",
                                  m(r.iops, 1),
                                  m(r.mib_s, 2),
                                  m(r.lat_mean_us, 2),
                                  k(r.lat_p50_us, 2),
                                  k(r.lat_p99_us, 2),
                                  k(r.lat_p999_us, 2),
                                  m(r.busy_cores, 3),
                                  row.recording,
                                  row.note};
    std::string s;
    for (size_t i = 0; i < f.size(); i++) {
        if (i)
            s += ',';
        s += csv_quote(f[i]);
    }
    return s + "\n";
}

json run_meta(const BenchOptions& opts, const Device& dev, const PoolParams& pool) {
    json m;
    m["format"] = "nvmetrace-bench-meta";
    m["format_version"] = 1;
    m["date"] = utc_now();
    struct utsname u {};
    uname(&u);
    m["kernel_release"] = u.release;
    m["kernel_version"] = u.version;
    m["machine"] = u.machine;
    m["hostname"] = u.nodename;
    m["tool_version"] = kToolVersion;
    m["tool_git_commit"] = NVMETRACE_GIT_COMMIT;
    std::string mv = "not loaded";
    if (fs::exists("/sys/module/nvmetrace")) {
        mv = read_first_line("/sys/module/nvmetrace/version");
        try {
            GenlClient g;
            mv = g.get_version().module_version;
        } catch (const std::exception&) {
        }
    }
    m["module_version"] = mv;
    // The kernel's checksum of the module's sources (MODULE_VERSION sets it):
    // it names the exact source state the loaded module was built from.
    m["module_srcversion"] = read_first_line("/sys/module/nvmetrace/srcversion");
    // quoted as a shell reads it back: --spdk-args "--no-huge -s 256" stays one word
    m["command_line"] = shell_words(opts.command_line);
    m["device"] = {{"path", dev.path},
                   {"engine", engine_name(dev.engine)},
                   {"disk", dev.disk},
                   {"model", dev.model},
                   {"serial", dev.serial},
                   {"firmware", dev.firmware},
                   {"subsysnqn", dev.subsysnqn},
                   {"transport", dev.transport},
                   {"bytes", dev.bytes},
                   {"lba_size", dev.lba_size},
                   {"max_hw_sectors_kb", dev.max_hw_sectors_kb},
                   {"max_sectors_kb", dev.max_sectors_kb},
                   {"premap_attrs", dev.premap_attrs}};
    m["pool"] = {{"module_loaded", pool.module_loaded},
                 {"available", pool.has_params},
                 {"pool_buf_kb", pool.buf_kb},
                 {"pool_nr", pool.nr}};
    m["cpus_online"] = sysconf(_SC_NPROCESSORS_ONLN);
    m["pin_cpus"] = opts.cpus;
    m["target_cpus"] = opts.target_cpus;
    m["profile"] = opts.profile.empty() ? "single" : opts.profile;
    m["buf"] = opts.buf;
    m["fixed"] = opts.fixed || opts.buf == "pool";
    m["duration_s"] = opts.duration_s;
    m["ios"] = opts.ios;
    m["ramp_s"] = opts.ramp_s;
    m["warmup_s"] = opts.warmup_s;
    m["reps"] = opts.reps;
    m["record"] = opts.record;
    m["record_sample"] = opts.record_sample;
    if (!opts.spdk_perf.empty()) {
        std::error_code ec;
        const fs::path real = fs::canonical(opts.spdk_perf, ec);
        m["control"] = {{"initiator", "spdk_nvme_perf"},
                        {"binary", ec ? opts.spdk_perf : real.string()},
                        {"trid", opts.spdk_trid},
                        {"args", opts.spdk_args},
                        {"cores", "the cells' threads, one worker each, on pin_cpus"}};
    }
    m["columns"] = csv_columns();
    return m;
}

namespace {

// A recording of one cell: `nvmetrace record -r host --dev DISK` run through
// run_record() in a child process, stopped with SIGINT (the way Ctrl-C stops
// it) when the cell is done.
class CellRecorder {
public:
    CellRecorder(const std::string& path, const std::string& disk, uint32_t sample) : path_(path) {
        std::fflush(stdout);
        std::fflush(stderr);
        pid_ = fork();
        if (pid_ < 0)
            throw errno_error("--record: fork", errno);
        if (pid_ == 0) {
            int rc = 1;
            const int log =
                open((path + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (log >= 0) {
                dup2(log, 1);
                dup2(log, 2);
            }
            try {
                RecordOptions o;
                o.roles = {"host"};
                o.devices = {disk};
                o.sample = sample;
                o.output = path;
                o.command_line = {"nvmetrace", "bench", "--record", "(cell)"};
                rc = run_record(o);
            } catch (const std::exception& e) {
                fmt::print(stderr, "nvmetrace: {}\n", e.what());
            }
            std::fflush(stdout);
            std::fflush(stderr);
            _exit(rc);
        }
        // Started when the module says it records (START has returned).
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        for (;;) {
            int st = 0;
            if (waitpid(pid_, &st, WNOHANG) == pid_) {
                pid_ = -1;
                throw Error(fmt::format("--record: the recorder did not start: {}", log_tail()));
            }
            try {
                GenlClient g;
                if (g.get_status().state == State::kRecording)
                    break;
            } catch (const std::exception&) {
            }
            if (std::chrono::steady_clock::now() > deadline) {
                stop_quietly();
                throw Error(
                    fmt::format("--record: the recorder did not start in 20 s: {}", log_tail()));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    ~CellRecorder() { stop_quietly(); }
    CellRecorder(const CellRecorder&) = delete;
    CellRecorder& operator=(const CellRecorder&) = delete;

    // Ends the recording; throws when the recorder failed.
    void stop() {
        if (pid_ <= 0)
            return;
        kill(pid_, SIGINT);
        int st = 0;
        while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            throw Error(fmt::format("--record: the recorder of {} failed: {}", path_, log_tail()));
    }

private:
    void stop_quietly() {
        try {
            stop();
        } catch (const std::exception&) {
        }
    }
    std::string log_tail() const {
        std::ifstream f(path_ + ".log");
        std::string line, last;
        while (std::getline(f, line))
            if (!line.empty())
                last = line;
        return last.empty() ? "no output (see " + path_ + ".log)" : last;
    }

    std::string path_;
    pid_t pid_ = -1;
};

// Writes never go to a device something uses.
void check_writable(const Device& dev) {
    std::ifstream mounts("/proc/mounts");
    std::string src, line;
    while (std::getline(mounts, line)) {
        src = line.substr(0, line.find(' '));
        if (src.starts_with("/dev/" + dev.disk))
            throw Error(fmt::format("{}: {} is mounted ({}): writes would destroy it", dev.path,
                                    src, line.substr(0, line.find(' ', src.size() + 1))));
    }
    std::error_code ec;
    const fs::path holders = fs::path("/sys/class/block") / dev.disk / "holders";
    if (fs::exists(holders) && !fs::is_empty(holders, ec))
        throw Error(fmt::format("{}: held by another device ({}): refusing to write to it",
                                dev.path, holders.string()));
}

std::string cell_label(const Cell& c, const Device& dev, const RunSpec& spec) {
    return fmt::format("{} {} qd{} x{} {} {} buf {}{}", pattern_name(c.pattern), size_label(c.size),
                       c.qd, c.threads, engine_name(dev.engine), dev.path, buf_name(spec.buf),
                       spec.buf != BufKind::pool && spec.fixed ? " (fixed)" : "");
}

std::string control_label(const CellRow& row) {
    return fmt::format("{} {} qd{} x{} spdk_nvme_perf {}", pattern_name(row.cell.pattern),
                       size_label(row.cell.size), row.cell.qd, row.cell.threads, row.trid);
}

std::string result_text(const CellRow& row, const Device& dev, const RunSpec& spec) {
    const auto& r = row.r;
    std::string s = (row.control ? control_label(row) : cell_label(row.cell, dev, spec)) + ": ";
    if (row.status == "skipped")
        return s + "skipped: " + row.note + "\n";
    if (row.status == "failed" && r.ios == 0 && r.elapsed_s == 0)
        return s + "failed: " + row.note + "\n";
    if (row.control)
        s += fmt::format(
            "{:.0f} IOPS, {:.1f} MiB/s, lat mean {:.1f} us, busy cores {:.2f}{}, {} I/Os in {:.0f} "
            "s, failed {}",
            r.iops, r.mib_s, r.lat_mean_us, r.busy_cores,
            spec.exclude.empty() ? "" : " (outside the target CPUs)", r.ios, r.elapsed_s, r.failed);
    else
        s += fmt::format(
            "{:.0f} IOPS, {:.1f} MiB/s, lat mean {:.1f} us p50 {:.1f} p99 {:.1f} p99.9 {:.1f}, "
            "busy cores {:.2f}{}, {} I/Os in {:.2f} s, failed {}, fallbacks {}",
            r.iops, r.mib_s, r.lat_mean_us, r.lat_p50_us, r.lat_p99_us, r.lat_p999_us, r.busy_cores,
            spec.exclude.empty() ? "" : " (outside the target CPUs)", r.ios, r.elapsed_s, r.failed,
            r.fallbacks);
    if (!r.first_error.empty())
        s += fmt::format("\n    first error: {}", r.first_error);
    if (!row.recording.empty())
        s += fmt::format("\n    recording: {}", row.recording);
    return s + "\n";
}

json result_json(const CellRow& row, const Device& dev, const RunSpec& spec) {
    const auto& r = row.r;
    json j = {{"schema", json_schema("bench")},
              {"cell", row.cell.index},
              {"profile", row.cell.profile},
              {"engine", row.control ? "spdk_nvme_perf" : engine_name(dev.engine)},
              {"device", row.control ? row.trid : dev.path},
              {"pattern", pattern_name(row.cell.pattern)},
              {"size", row.cell.size},
              {"qd", row.cell.qd},
              {"threads", row.cell.threads},
              {"buf", row.control ? "spdk" : buf_name(spec.buf)},
              {"status", row.status},
              {"note", row.note},
              {"ios", r.ios},
              {"failed", r.failed},
              {"first_error", r.first_error},
              {"fallbacks", r.fallbacks},
              {"elapsed_s", r.elapsed_s},
              {"iops", r.iops},
              {"mib_s", r.mib_s},
              {"lat_mean_us", r.lat_mean_us},
              {"lat_p50_us", r.lat_p50_us},
              {"lat_p99_us", r.lat_p99_us},
              {"lat_p999_us", r.lat_p999_us},
              {"busy_cores", r.busy_cores},
              {"recording", row.recording}};
    if (row.control) {
        // not in spdk_nvme_perf's summary: unknown, not 0
        for (const char* k : {"lat_p50_us", "lat_p99_us", "lat_p999_us", "fallbacks"})
            j[k] = nullptr;
    }
    return j;
}

// The premap proof: one passthrough read one logical block larger than the
// device's ordinary limit (max_hw_sectors_kb), from a pool buffer.  Only a
// kernel with the premapped request path (CONFIG_BLK_IOBUF_POOL) accepts it;
// the command is never split and nothing falls back.
int premap_proof(const BenchOptions& opts, const Device& dev, RunSpec spec) {
    if (dev.engine != Engine::passthru)
        throw Error(fmt::format(
            "--premap-proof needs the NVMe generic char device (/dev/ng...), not {}: the "
            "proof is one passthrough command",
            dev.path));
    if (dev.max_hw_sectors_kb == 0)
        throw Error(fmt::format("{}: no max_hw_sectors_kb in sysfs for {}", dev.path, dev.disk));
    // NVMe-oF controllers whose target reports no MDTS (nvmet) leave the
    // limit at UINT_MAX sectors: there is no ordinary limit to cross.
    if (dev.max_hw_sectors_kb >= (1u << 20))
        throw Error(fmt::format(
            "premap proof: {} has no finite ordinary request limit (max_hw_sectors_kb {}: its "
            "controller reports no MDTS), so no read can cross it: use a device whose "
            "controller has an MDTS (any PCIe NVMe drive)",
            dev.path, dev.max_hw_sectors_kb));
    spec.pattern = Pattern::read;
    spec.size = uint64_t{dev.max_hw_sectors_kb} * 1024 + dev.lba_size;
    spec.qd = 1;
    spec.threads = 1;
    spec.ios = 1;
    spec.ramp_s = 0;
    spec.offset = 0;
    spec.span = 0;
    fmt::print(
        "premap proof on {} ({}): one {}-byte passthrough read = max_hw_sectors_kb {} + one "
        "{}-byte logical block, from a {} buffer{}\n",
        dev.path, dev.disk, spec.size, dev.max_hw_sectors_kb, dev.lba_size, buf_name(spec.buf),
        spec.buf == BufKind::pool ? " (registered, IORING_URING_CMD_FIXED)" : "");
    if (dev.premap_attrs.empty()) {
        fmt::print("kernel: no premapped-pool queue attributes on {} (stock kernel)\n", dev.disk);
    } else {
        for (const auto& [k, v] : dev.premap_attrs)
            fmt::print("kernel: queue/{} = {}\n", k, v);
    }
    const RunResult r = run(dev, spec, opts.pool_node);
    if (r.ios == 1 && r.failed == 0) {
        if (spec.buf != BufKind::pool)
            throw Error(fmt::format(
                "premap proof: the {}-byte read completed, but from a {} buffer: that is no "
                "proof of the premapped path (use --buf pool)",
                spec.size, buf_name(spec.buf)));
        fmt::print(
            "premap proof: PASSED: the {}-byte read above the ordinary limit ({} KiB) "
            "completed from a pool buffer in {:.1f} us: this kernel used its premapped "
            "request path\n",
            spec.size, dev.max_hw_sectors_kb, r.lat_mean_us);
        return 0;
    }
    const std::string why = r.first_error.empty() ? "no completion" : r.first_error;
    if (dev.premap_attrs.empty())
        throw Error(fmt::format(
            "premap proof: this kernel has no premapped request path (CONFIG_BLK_IOBUF_POOL): "
            "the passthrough read one block over max_hw_sectors_kb={} was refused: {}",
            dev.max_hw_sectors_kb, why));
    throw Error(fmt::format(
        "premap proof: the kernel has premapped-pool attributes but refused the read one block "
        "over max_hw_sectors_kb={}: {}",
        dev.max_hw_sectors_kb, why));
}

std::string recording_path(const std::string& csv, uint32_t cell) {
    fs::path p(csv);
    const std::string stem = p.stem().string();
    return (p.parent_path() / fmt::format("{}-cell{:03}.ntr", stem, cell)).string();
}

std::string meta_path(const std::string& csv) {
    fs::path p(csv);
    return (p.parent_path() / (p.stem().string() + ".meta")).string();
}

std::string cpu_list_text(const std::vector<int>& cpus) {
    std::string s;
    for (int c : cpus)
        s += (s.empty() ? "" : ",") + std::to_string(c);
    return s;
}

// Whole seconds, as spdk_nvme_perf's -t and -a take them.
uint32_t whole_seconds(double v, const char* what) {
    const double r = std::round(v);
    if (std::fabs(v - r) > 1e-9 || r > 86400)
        throw Error(fmt::format(
            "--spdk-perf: spdk_nvme_perf measures whole seconds: give {} as a whole number "
            "(not {}) so both arms run the same time",
            what, v));
    return static_cast<uint32_t>(r);
}

// The control arm's fixed part, checked before any cell runs; pins both
// arms to the same cores (the first CPUs outside --target-cpus when --cpus
// is not given: SPDK's workers are pinned, so the kernel's threads are too).
PerfSpec control_spec(const BenchOptions& opts, const Device& dev, const std::vector<Cell>& cells,
                      RunSpec& spec) {
    PerfSpec p;
    p.binary = resolve_command(opts.spdk_perf);
    if (opts.ios)
        throw Error("--spdk-perf: spdk_nvme_perf runs for a time, not a count: give -d, not -n");
    if (opts.record)
        throw Error(
            "--spdk-perf with --record: the recording is of the kernel's side only; run "
            "the recorded matrix without the control arm");
    p.seconds = whole_seconds(opts.duration_s, "-d");
    if (p.seconds == 0)
        throw Error("--spdk-perf: -d must be at least 1 s");
    p.warmup_s = whole_seconds(opts.ramp_s, "--ramp");
    p.trid = opts.spdk_trid.empty() ? trid_from_device(dev) : opts.spdk_trid;
    std::istringstream in(opts.spdk_args);
    for (std::string a; in >> a;)
        p.extra.push_back(a);
    p.exclude = spec.exclude;
    uint32_t most = 1;
    for (const Cell& c : cells)
        most = std::max(most, c.threads);
    if (spec.cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) != 0)
            throw errno_error("sched_getaffinity", errno);
        for (int c = 0; c < CPU_SETSIZE && spec.cpus.size() < most; c++)
            if (CPU_ISSET(c, &set) && !spec.exclude.count(c))
                spec.cpus.push_back(c);
        if (spec.cpus.empty())
            throw Error("--spdk-perf: every CPU this process may use is in --target-cpus");
        fmt::print(stderr, "nvmetrace: both arms pinned to CPU(s) {} (give --cpus to choose)\n",
                   cpu_list_text(spec.cpus));
    }
    return p;
}

// spdk_nvme_perf on one cell: QD per worker and one worker per thread of the
// cell, on the cores the kernel's threads use.
CellRow control_row(const PerfSpec& base, const std::vector<int>& cpus, const Cell& c,
                    const std::string& skipped) {
    CellRow row;
    row.cell = c;
    row.control = true;
    row.trid = base.trid;
    if (!skipped.empty()) {
        row.status = "skipped";
        row.note = skipped;
        return row;
    }
    PerfSpec p = base;
    p.pattern = c.pattern;
    p.size = c.size;
    p.qd = c.qd;
    p.cores = cpus;
    if (p.cores.size() < c.threads) {
        row.status = "skipped";
        row.note = fmt::format(
            "{} threads need {} cores for SPDK's workers (one poller each); --cpus gives {}",
            c.threads, c.threads, p.cores.size());
        return row;
    }
    p.cores.resize(c.threads);
    try {
        std::string log;
        row.r = run_spdk_perf(p, &log);
        if (row.r.failed) {
            row.status = "failed";
            row.note = fmt::format("{} commands failed", row.r.failed);
        } else if (row.r.ios == 0) {
            row.status = "failed";
            row.note = "spdk_nvme_perf completed no I/O";
        } else {
            row.status = "ok";
        }
    } catch (const Error& e) {
        row.status = "failed";
        row.note = e.what();
    }
    return row;
}

}  // namespace
}  // namespace bench

int run_bench(const BenchOptions& opts) {
    using namespace bench;
    const Device dev = inspect_device(opts.device);
    const PoolParams pool = read_pool_params();

    RunSpec spec;
    spec.pattern = parse_pattern(opts.pattern);
    spec.size = parse_size(opts.size);
    spec.qd = opts.qd;
    spec.threads = opts.threads;
    spec.duration_s = opts.duration_s;
    spec.ios = opts.ios;
    spec.ramp_s = opts.ramp_s;
    const std::string buf = opts.buf.empty() ? (opts.premap_proof ? "pool" : "malloc") : opts.buf;
    spec.buf = parse_buf(buf);
    spec.fixed = opts.fixed;
    spec.seed = opts.seed;
    spec.offset = opts.offset == "0" ? 0 : parse_size(opts.offset);
    spec.span = opts.span.empty() ? 0 : parse_size(opts.span);
    if (!opts.cpus.empty()) {
        const auto set = parse_cpu_list(opts.cpus);
        spec.cpus.assign(set.begin(), set.end());
    }
    if (!opts.target_cpus.empty())
        spec.exclude = parse_cpu_list(opts.target_cpus);
    if (opts.duration_s <= 0 && opts.ios == 0)
        throw Error("--duration must be more than 0 (or give --ios N)");

    // The pool is there or the run stops here: never malloc in its place.
    if (spec.buf == BufKind::pool) {
        if (!pool.module_loaded)
            throw Error("--buf pool: the nvmetrace module is not loaded (modprobe nvmetrace)");
        if (!pool.has_params)
            throw Error(
                "--buf pool: this nvmetrace module has no buffer pool (no pool_buf_kb/pool_nr "
                "in /sys/module/nvmetrace/parameters): load a module built with the pool");
    }

    if (opts.premap_proof)
        return premap_proof(opts, dev, spec);

    if (is_write(spec.pattern))
        check_writable(dev);

    const auto sizes = parse_list<uint64_t>(opts.sizes, "--sizes", parse_size);
    const auto qds = parse_list<uint32_t>(opts.qds, "--qds", parse_count);
    const auto tl = parse_list<uint32_t>(opts.thread_list, "--thread-list", parse_count);
    if (opts.profile.empty() && (!sizes.empty() || !qds.empty() || !tl.empty()))
        throw Error("--sizes, --qds and --thread-list go with --profile aisio|kv");
    if (opts.reps == 0)
        throw Error("--reps must be 1 or more");
    const std::vector<Cell> cells = expand_profile(opts.profile, spec.pattern, spec.size, spec.qd,
                                                   spec.threads, sizes, qds, tl, opts.reps);
    if (opts.record && opts.output.empty())
        throw Error("--record needs -o FILE.csv: recordings are stored next to the CSV");
    std::optional<PerfSpec> control;
    if (!opts.spdk_perf.empty())
        control = control_spec(opts, dev, cells, spec);

    BenchOptions meta_opts = opts;
    if (control) {
        meta_opts.spdk_trid = control->trid;
        if (meta_opts.cpus.empty())
            meta_opts.cpus = cpu_list_text(spec.cpus);
    }
    std::ofstream csv;
    if (!opts.output.empty()) {
        csv.open(opts.output, std::ios::trunc);
        if (!csv)
            throw errno_error(fmt::format("cannot write {}", opts.output), errno);
        csv << csv_header() << std::flush;
        std::ofstream meta(meta_path(opts.output), std::ios::trunc);
        if (!meta)
            throw errno_error(fmt::format("cannot write {}", meta_path(opts.output)), errno);
        meta << json_text(run_meta(meta_opts, dev, pool), 2) << "\n";
    }

    if (opts.warmup_s > 0 && !cells.empty()) {
        RunSpec w = spec;
        w.pattern = cells.front().pattern;
        w.size = cells.front().size;
        w.qd = cells.front().qd;
        w.threads = cells.front().threads;
        w.duration_s = opts.warmup_s;
        w.ios = 0;
        w.ramp_s = 0;
        if (w.size % dev.lba_size == 0) {
            const RunResult r = run(dev, w, opts.pool_node);
            fmt::print("warm-up: {:.1f} s, {:.0f} IOPS (not reported)\n", r.elapsed_s, r.iops);
        }
    }

    uint32_t failed_cells = 0;
    json rows = json::array();
    for (const Cell& c : cells) {
        CellRow row;
        row.cell = c;
        RunSpec s = spec;
        s.pattern = c.pattern;
        s.size = c.size;
        s.qd = c.qd;
        s.threads = c.threads;
        if (c.size % dev.lba_size != 0) {
            if (opts.profile.empty())
                throw Error(fmt::format(
                    "I/O size {} is not a multiple of {}'s logical block size ({} bytes)", c.size,
                    dev.path, dev.lba_size));
            row.status = "skipped";
            row.note = fmt::format("the namespace has {}-byte logical blocks; {}-byte I/O needs {}",
                                   dev.lba_size, c.size,
                                   c.size < dev.lba_size ? "smaller blocks" : "a multiple");
        } else {
            try {
                std::optional<CellRecorder> rec;
                if (opts.record) {
                    const std::string path = recording_path(opts.output, c.index);
                    rec.emplace(path, dev.disk, opts.record_sample);
                    row.recording = fs::path(path).filename().string();
                }
                row.r = run(dev, s, opts.pool_node);
                if (rec)
                    rec->stop();
                if (row.r.failed) {
                    row.status = "failed";
                    row.note = fmt::format("{} of {} commands failed", row.r.failed, row.r.ios);
                } else if (row.r.ios == 0) {
                    row.status = "failed";
                    row.note = fmt::format(
                        "no I/O completed in the measured {:.2f} s: each takes longer (raise -d "
                        "or --ramp)",
                        row.r.elapsed_s);
                } else {
                    row.status = "ok";
                }
            } catch (const Error& e) {
                if (opts.profile.empty() && opts.output.empty())
                    throw;
                row.status = "failed";
                row.note = e.what();
            }
        }
        std::vector<CellRow> out{row};
        if (control)
            out.push_back(
                control_row(*control, s.cpus, c, row.status == "skipped" ? row.note : ""));
        for (const CellRow& o : out) {
            if (o.status == "failed")
                failed_cells++;
            if (opts.json)
                rows.push_back(result_json(o, dev, s));
            else
                fmt::print("{}", result_text(o, dev, s));
            std::fflush(stdout);
            if (csv.is_open())
                csv << csv_row(o, dev, s) << std::flush;
        }
    }
    if (opts.json)
        fmt::print("{}\n", json_text(rows, 2));
    const size_t total_rows = cells.size() * (control ? 2 : 1);
    if (!opts.output.empty())
        fmt::print(stderr, "nvmetrace: {} cells{} written to {} (+ {})\n", cells.size(),
                   control ? " x 2 arms (kernel, spdk_nvme_perf)" : "", opts.output,
                   meta_path(opts.output));
    if (failed_cells)
        throw Error(fmt::format("{} of {} {} failed{}", failed_cells, total_rows,
                                control ? "rows" : "cells",
                                opts.output.empty() ? "" : " (see " + opts.output + ")"));
    return 0;
}

}  // namespace nvmetrace
