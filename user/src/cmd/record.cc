#include "cmd/record.h"

#include "analysis/assembler.h"
#include "analysis/join.h"
#include "analysis/stats.h"
#include "format/recfile.h"
#include "kernel/btf_layout.h"
#include "kernel/device_watch.h"
#include "kernel/devices.h"
#include "kernel/genl.h"
#include "kernel/ring_reader.h"
#include "report/printer.h"
#include "util/child_process.h"
#include "util/clock.h"
#include "util/error.h"
#include "version.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/core.h>
#include <fmt/ranges.h>

namespace nvmetrace {

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) {
    g_stop.store(true);
}

}  // namespace

// Ctrl-C and SIGTERM end the recording cleanly (no SA_RESTART: the poll
// sleep is cut short).
void install_record_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

bool record_stop_requested() {
    return g_stop.load();
}

namespace {

uint32_t roles_mask(const std::vector<std::string>& roles) {
    uint32_t mask = 0;
    for (const auto& r : roles) {
        if (r == "host")
            mask |= NVMETRACE_ROLE_HOST;
        else if (r == "target")
            mask |= NVMETRACE_ROLE_TARGET;
        else
            throw Error(fmt::format("-r {}: the role is host or target", r));
    }
    if (!mask)
        throw Error("no role: -r host or -r target");
    return mask;
}

std::string role_name(uint32_t mask) {
    if (mask == (NVMETRACE_ROLE_HOST | NVMETRACE_ROLE_TARGET))
        return "host+target";
    return mask & NVMETRACE_ROLE_HOST ? "host" : "target";
}

}  // namespace

uint32_t role_from_machine(size_t host_namespaces, bool devices_named, size_t nvmet_subsystems,
                           std::string& said) {
    uint32_t role = 0;
    std::vector<std::string> why;
    if (host_namespaces || devices_named) {
        role |= NVMETRACE_ROLE_HOST;
        why.push_back(host_namespaces ? fmt::format("{} NVMe-oF namespace{}", host_namespaces,
                                                    host_namespaces == 1 ? "" : "s")
                                      : std::string("--dev names a host namespace"));
    }
    if (nvmet_subsystems) {
        role |= NVMETRACE_ROLE_TARGET;
        why.push_back(fmt::format("{} nvmet subsystem{}", nvmet_subsystems,
                                  nvmet_subsystems == 1 ? "" : "s"));
    }
    if (!role)
        throw Error(
            "no role given (-r host or -r target), and this machine has neither an NVMe-oF "
            "namespace (nvme connect ...) nor an nvmet subsystem (/sys/kernel/config/nvmet) "
            "to take it from");
    said = fmt::format("recording as {}: this machine has {} (-r host or -r target to choose)",
                       role_name(role), fmt::join(why, " and "));
    return role;
}

namespace {

std::string sampling_words(uint32_t n) {
    return n == 1 ? "every command" : fmt::format("1 of {} commands", n);
}

// Hooks asked for that do not run (their function is absent or inlined in
// this kernel, their module is not loaded, their layout is unknown): their
// components are merged with their neighbours', never made up.
void report_hooks(GenlClient& genl, const std::string& transport) {
    for (const auto& h : genl.get_hooks()) {
        const std::string_view mod = transport_module(h.name);
        // another transport's hooks, its module not loaded: nothing to say
        if (!mod.empty() &&
            (h.state == NVMETRACE_HOOK_WAITING ||
             (h.state == NVMETRACE_HOOK_FAILED && h.error == -ENODATA)) &&
            !std::filesystem::exists(fmt::format("/sys/module/{}", mod)) &&
            (transport.empty() || !mod.ends_with(transport)))
            continue;
        const char* why = nullptr;
        std::string stale;
        switch (h.state) {
            case NVMETRACE_HOOK_WAITING:
                why = "WAITING (its module is not loaded, or the function is not in it)";
                break;
            case NVMETRACE_HOOK_ABSENT:
                why = "ABSENT in this kernel";
                break;
            case NVMETRACE_HOOK_FAILED:
                why = h.error == -ENODATA ? "FAILED: its struct layout is unknown (BTF)" : "FAILED";
                break;
            case NVMETRACE_HOOK_STALE:
                stale = "STALE: " + stale_note(h.name);
                why = stale.c_str();
                break;
            default:
                break;
        }
        if (why)
            fmt::print(stderr, "nvmetrace: hook {}: {} (error {})\n", h.name, why, h.error);
    }
}

}  // namespace

std::string_view transport_module(std::string_view hook) {
    for (std::string_view m : {"nvme_tcp", "nvmet_tcp", "nvme_rdma", "nvmet_rdma"})
        if (hook.starts_with(m) && hook.size() > m.size() && hook[m.size()] == '_')
            return m;
    return "";
}

std::string stale_note(std::string_view hook) {
    std::string_view mod = transport_module(hook);
    if (mod.empty())
        mod = hook.starts_with("nvmet_") ? "nvmet" : "its module";
    return fmt::format("layout of the reloaded {} differs from START's: restart the recording",
                       mod);
}

namespace {

// What probe says of a module's tracepoints against BTF.
std::string tracepoints_note(std::string_view module, const BtfLayout& btf, int checked) {
    if (!btf.ok())
        return fmt::format("{} tracepoints: not checked against BTF ({} not loaded)", module,
                           module);
    if (checked == 0)
        return fmt::format("{} tracepoints: not checked (no btf_trace_ types in BTF)", module);
    return fmt::format("{} tracepoints: {} checked against BTF", module, checked);
}

}  // namespace

std::string transport_layout(std::string_view module, StartArgs& start) {
    const std::string mod(module);
    BtfLayout btf = BtfLayout::load(mod);
    if (!btf.ok())
        return btf.error();
    std::optional<std::vector<uint32_t>> offsets;
    std::vector<uint32_t>* layout = nullptr;
    std::optional<uint32_t>* id = nullptr;
    if (module == "nvme_tcp") {
        if (auto l = btf.nvme_tcp())
            offsets = l->offsets;
        layout = &start.tcp_layout;
        id = &start.tcp_btf;
    } else if (module == "nvme_rdma") {
        if (auto l = btf.nvme_rdma())
            offsets = l->offsets;
        layout = &start.rdma_layout;
        id = &start.rdma_btf;
    } else if (module == "nvmet_tcp") {
        if (auto l = btf.nvmet_tcp())
            offsets = l->offsets;
        layout = &start.tcpt_layout;
        id = &start.tcpt_btf;
    } else if (module == "nvmet_rdma") {
        if (auto l = btf.nvmet_rdma())
            offsets = l->offsets;
        layout = &start.rdmat_layout;
        id = &start.rdmat_btf;
    } else {
        return fmt::format("{} is not a transport module", module);
    }
    if (!offsets)
        return btf.error();
    *layout = std::move(*offsets);
    *id = module_btf_id(mod);
    return {};
}

LayoutNotes fill_layouts(uint32_t role, StartArgs& start) {
    LayoutNotes notes;
    if (role & NVMETRACE_ROLE_TARGET) {
        BtfLayout btf = BtfLayout::load("nvmet");
        auto l = btf.ok() ? btf.nvmet() : std::nullopt;
        // nvmet's tracepoints must pass what the target's probes take: a
        // role whose first and last events would read the wrong arguments
        // is not recorded at all.
        int checked = 0;
        auto proto = l ? btf.probe_prototype_mismatch("nvmet", &checked) : std::nullopt;
        notes.target_tracepoints = tracepoints_note("nvmet", btf, checked);
        if (l && !proto) {
            start.layout = {l->req_cmd.offset, l->req_cqe.offset, l->req_sq.offset,
                            l->sq_ctrl.offset, l->sq_qid.offset,  l->ctrl_cntlid.offset};
            start.nvmet_btf = module_btf_id("nvmet");
        } else
            notes.nvmet_error = proto ? "nvmet's " + *proto : "nvmet's layout: " + btf.error();
    }
    // The same for nvme-core's tracepoints and the host role, when nvme_core
    // is loaded (else its tracepoints attach when it is, unchecked).
    if (role & NVMETRACE_ROLE_HOST) {
        BtfLayout btf = BtfLayout::load("nvme_core");
        int checked = 0;
        if (auto proto = btf.probe_prototype_mismatch("nvme_core", &checked))
            notes.host_error = "nvme_core's " + *proto;
        notes.host_tracepoints = tracepoints_note("nvme_core", btf, checked);
    }
    // Likewise nvmet-tcp's for the target's transport hooks, which read
    // nvmet's fields as well: only with nvmet's layout.
    if ((role & NVMETRACE_ROLE_TARGET) && !start.layout.empty())
        notes.tcpt_error = transport_layout("nvmet_tcp", start);
    // Without nvme-tcp's layout (nvme_tcp not loaded, no module BTF) its
    // hooks stay off and the analysis merges the components they would split.
    if (role & NVMETRACE_ROLE_HOST) {
        notes.tcp_error = transport_layout("nvme_tcp", start);
        notes.rdma_error = transport_layout("nvme_rdma", start);
    }
    // The kernel's aio_kiocb names the user's iocb of an aio command: without
    // it the aio hooks still record, but no command is matched with its reap.
    if (role & NVMETRACE_ROLE_HOST) {
        BtfLayout btf = BtfLayout::load_vmlinux();
        auto l = btf.ok() ? btf.aio() : std::nullopt;
        if (l)
            start.aio_layout = l->offsets;
        else
            notes.aio_error = btf.error();
        // iomap's fast path of a small O_DIRECT read (7.3 on): its bio beside the kiocb.
        // A kernel without the struct has no such path: nothing to say.
        if (auto d = btf.ok() ? btf.dio_simple() : std::nullopt)
            start.dio_simple_layout = d->offsets;
    }
    // nvmet-rdma's hooks read nvmet's fields as well: only with nvmet's layout.
    if ((role & NVMETRACE_ROLE_TARGET) && !start.layout.empty())
        notes.rdmat_error = transport_layout("nvmet_rdma", start);
    return notes;
}

RecordingWriterOptions recorder_writer_options(uint32_t sample, std::optional<int> zstd_level) {
    RecordingWriterOptions wopts;
    // A block at least every second: a recorder killed or a machine that
    // loses power keeps all but the last second.
    wopts.flush_interval = std::chrono::seconds(1);
    // Every command sampled means many records a second: stored raw.  zstd
    // costs ~13 instructions a byte even at its fast level -5 (~640 a
    // record, more than all the rest of the recorder; tools/bench-record;
    // in the icount guest +10k instructions per 4k I/O) for a file ~4.6x
    // smaller.
    if (sample == 1)
        wopts.zstd_level = 0;
    if (zstd_level)
        wopts.zstd_level = *zstd_level;
    // Raw, a drain's worth of records at high rates goes to the file as it
    // is, without a copy into the writer's buffer.  Compressed blocks stay
    // large: zstd starts afresh for each one.
    if (wopts.zstd_level == 0)
        wopts.direct_records = 1024;
    return wopts;
}

void check_record_output(const std::string& output) {
    const std::string path = output.empty() ? kDefaultRecordOutput : output;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw Error(fmt::format("-o {}: a folder; name a file in it (-o {}/{})", path, path,
                                kDefaultRecordOutput));
}

RecordOutput prepare_record_output(const std::string& output) {
    namespace fs = std::filesystem;
    RecordOutput out;
    out.path = output.empty() ? kDefaultRecordOutput : output;
    std::error_code ec;
    const fs::file_status st = fs::status(out.path, ec);
    check_record_output(out.path);
    if (!fs::is_regular_file(st))
        return out;  // none yet, or a device or FIFO written as it is
    out.kept_as = out.path + ".old";
    out.replaced = fs::exists(fs::symlink_status(out.kept_as, ec));
    if (fs::is_directory(fs::symlink_status(out.kept_as, ec)))
        throw Error(
            fmt::format("{} exists and {} is a folder: move one of them, or name "
                        "another file with -o",
                        out.path, out.kept_as));
    if (std::rename(out.path.c_str(), out.kept_as.c_str()) != 0)
        throw errno_error(fmt::format("{} exists and cannot be kept as {} (name another file "
                                      "with -o)",
                                      out.path, out.kept_as),
                          errno);
    return out;
}

std::string record_output_note(const RecordOutput& out) {
    if (out.kept_as.empty())
        return "";
    return fmt::format("nvmetrace: {} exists: moved to {}{}", out.path, out.kept_as,
                       out.replaced ? " (replacing the older one)" : "");
}

int split_record_command(int argc, char** argv, std::vector<std::string>& command,
                         bool& separator) {
    separator = false;
    command.clear();
    // the subcommand: the first argument that is not an option
    int sub = 1;
    while (sub < argc && argv[sub][0] == '-')
        sub++;
    if (sub >= argc || std::string_view(argv[sub]) != "record")
        return argc;
    for (int i = sub + 1; i < argc; i++) {
        if (std::string_view(argv[i]) == "--") {
            separator = true;
            command.assign(argv + i + 1, argv + argc);
            return i;
        }
    }
    return argc;
}

std::string lost_advice(uint64_t lost, const RecordOptions& opts) {
    std::vector<std::string> ways;
    if (!opts.realtime)
        ways.emplace_back("run the recorder at a real-time priority (--realtime 1)");
    ways.emplace_back("load the module with larger rings (ring_kb=KiB per CPU)");
    if (opts.sample < 1000)
        ways.emplace_back(fmt::format("sample fewer commands (-s {})",
                                      opts.sample < 10 ? 100 : uint64_t{opts.sample} * 10));
    return fmt::format(
        "the rings dropped {} records: the recorder did not keep up (the lost: line says where); "
        "to lose none, {}",
        lost, fmt::join(ways, ", or "));
}

void drain_at_realtime(int prio) {
    const int lo = sched_get_priority_min(SCHED_FIFO), hi = sched_get_priority_max(SCHED_FIFO);
    if (prio < lo || prio > hi)
        throw Error(fmt::format("--realtime {}: the SCHED_FIFO priority is {}..{}", prio, lo, hi));
    // The calling thread only, and none it starts: the second stage's
    // thread and the command of record -- CMD run as they would have.
    sched_param sp{};
    sp.sched_priority = prio;
    if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) != 0)
        throw errno_error(fmt::format("--realtime {}: the recorder may not run at SCHED_FIFO "
                                      "priority {} without root, CAP_SYS_NICE or an "
                                      "RLIMIT_RTPRIO of {}",
                                      prio, prio, prio),
                          errno);
}

int run_record(const RecordOptions& opts) {
    // Before anything is started: a priority the caller may not take is
    // said while nothing is lost.
    if (opts.realtime)
        drain_at_realtime(opts.realtime);
    if (!opts.spdk_target.empty() || !opts.spdk_host.empty())
        return run_record_spdk(opts);
    uint32_t role = 0;
    if (opts.roles.empty()) {
        std::string said;
        role = role_from_machine(find_host_namespaces(opts.transport).size(), !opts.devices.empty(),
                                 find_nvmet_subsystems().size(), said);
        fmt::print(stderr, "nvmetrace: {}\n", said);
    } else {
        role = roles_mask(opts.roles);
    }
    if (opts.sample == 0)
        throw Error("-s 0: sample 1 of N commands, N >= 1");
    // A command that cannot run is said before anything is started or written.
    if (!opts.command.empty())
        resolve_command(opts.command.front());
    check_record_output(opts.output);
    if (!opts.transport.empty() && opts.transport != "tcp" && opts.transport != "rdma")
        throw Error(fmt::format("-t {}: the transport is tcp or rdma", opts.transport));
    if (opts.zstd_level &&
        (*opts.zstd_level < ZSTD_minCLevel() || *opts.zstd_level > ZSTD_maxCLevel()))
        throw Error(fmt::format("--zstd {}: the level is {}..{} (0: records stored raw)",
                                *opts.zstd_level, ZSTD_minCLevel(), ZSTD_maxCLevel()));

    GenlClient genl;
    const ModuleVersion mv = genl.get_version();
    const Status status = genl.get_status();
    if (status.state == State::kRecording)
        throw Error(
            "the module is already recording (another nvmetrace record?); "
            "nvmetrace status shows it");

    StartArgs start;
    start.role = role;
    start.sample = opts.sample;
    start.seed = opts.seed;

    // Host: which namespaces (and their multipath path disks) to trace.  A
    // module of ABI 5 or later is told the devices that appear later too
    // (ADMIT), so the recording may start before any exists.
    const bool follow_devices = mv.abi_version >= 5;
    const std::string over = opts.transport.empty() ? "" : " over " + opts.transport;
    std::vector<HostNamespace> host_ns;
    if (role & NVMETRACE_ROLE_HOST) {
        std::vector<HostNamespace> all = find_host_namespaces(opts.transport);
        if (opts.devices.empty()) {
            host_ns = all;
        } else if (follow_devices) {
            for (const auto& ns : all)
                if (namespace_selected(ns, opts.devices))
                    host_ns.push_back(ns);
            for (const auto& d : opts.devices) {
                const bool found = std::any_of(all.begin(), all.end(), [&](const auto& ns) {
                    return namespace_selected(ns, {d});
                });
                if (!found)
                    fmt::print(stderr,
                               "nvmetrace: --dev {}: no such NVMe-oF namespace, controller or "
                               "subsystem{} yet: recorded if it appears\n",
                               d, over);
            }
        } else {
            for (const auto& d : opts.devices)
                host_ns.push_back(pick_host_namespace(all, d));
        }
        if (host_ns.empty() && !follow_devices)
            throw Error(fmt::format(
                "no NVMe-oF namespace{} on this host: connect one (nvme connect ...) or record "
                "-r target (a module of ABI 5 or later, this one is {}, can start before one is "
                "connected)",
                over, mv.abi_version));
        if (host_ns.empty() && opts.devices.empty())
            fmt::print(stderr,
                       "nvmetrace: no NVMe-oF namespace{} on this host yet: recording those "
                       "that appear\n",
                       over);
        for (const auto& ns : host_ns) {
            start.devs.push_back(ns.dev);
            for (const auto& p : ns.paths)
                start.devs.push_back(p.dev);
        }
        if (start.devs.size() > NVMETRACE_MAX_DEVS)
            throw Error(
                fmt::format("{} block devices: at most {} per recording (name some with "
                            "--dev)",
                            start.devs.size(), NVMETRACE_MAX_DEVS));
        start.dev_filter = follow_devices;
    }

    // Private layouts from this kernel's BTF: nvmet's for the target role
    // (required), nvme-tcp's for the host's transport hooks (optional).
    std::vector<TargetNamespace> target_ns;
    const LayoutNotes layouts = fill_layouts(role, start);
    if ((role & NVMETRACE_ROLE_HOST) && !layouts.host_error.empty())
        throw Error(fmt::format("host role: {}", layouts.host_error));
    if (role & NVMETRACE_ROLE_TARGET) {
        if (!layouts.nvmet_error.empty())
            throw Error(fmt::format("target role: {}", layouts.nvmet_error));
        target_ns = find_target_namespaces();
    }
    // A transport module loaded while recording gets its layout then (ABI
    // 6: LAYOUT); an older module reads layouts at START only.
    const bool late_layouts = mv.abi_version >= 6;
    if (!layouts.tcp_error.empty() && (role & NVMETRACE_ROLE_HOST) &&
        !std::filesystem::exists("/sys/module/nvme_tcp") &&
        (opts.transport.empty() || opts.transport == "tcp")) {
        if (late_layouts)
            fmt::print(stderr,
                       "nvmetrace: nvme_tcp is not loaded yet: its hooks attach when it is\n");
        else
            // its layout is read from its BTF at START only: a connect that
            // loads the module later finds the hooks off
            fmt::print(stderr,
                       "nvmetrace: nvme-tcp transport hooks off: nvme_tcp is not loaded "
                       "(modprobe nvme_tcp before recording: a module of ABI {} takes its "
                       "layout when the recording starts only)\n",
                       mv.abi_version);
    } else if (!layouts.tcp_error.empty())
        fmt::print(stderr, "nvmetrace: nvme-tcp transport hooks off: {}\n", layouts.tcp_error);
    if (!start.dio_simple_layout.empty() && mv.abi_version < 8) {
        // a module before ABI 8 refuses the group it does not know
        start.dio_simple_layout.clear();
        fmt::print(stderr,
                   "nvmetrace: small O_DIRECT reads of files start at their bio: the module "
                   "(ABI {}) predates iomap's fast path\n",
                   mv.abi_version);
    }
    if (!start.aio_layout.empty() && mv.abi_version < 4) {
        // a module before ABI 4 refuses the group it does not know
        start.aio_layout.clear();
        fmt::print(stderr,
                   "nvmetrace: aio iocbs not followed to their reap: the module (ABI {}) "
                   "predates them\n",
                   mv.abi_version);
    }
    if (!layouts.aio_error.empty())
        fmt::print(stderr, "nvmetrace: aio iocbs not followed to their reap (no aio_reap): {}\n",
                   layouts.aio_error);
    // nvmet-tcp's, nvme-rdma's and nvmet-rdma's: said when their transport
    // is asked for or their module is loaded.
    auto wanted = [&](const char* transport, const char* module) {
        return opts.transport == transport ||
               (opts.transport.empty() &&
                std::filesystem::exists(fmt::format("/sys/module/{}", module)));
    };
    if (!layouts.tcpt_error.empty() && wanted("tcp", "nvmet_tcp"))
        fmt::print(stderr, "nvmetrace: nvmet-tcp transport hooks off: {}\n", layouts.tcpt_error);
    if (!layouts.rdma_error.empty() && wanted("rdma", "nvme_rdma"))
        fmt::print(stderr, "nvmetrace: nvme-rdma transport hooks off: {}\n", layouts.rdma_error);
    if (!layouts.rdmat_error.empty() && wanted("rdma", "nvmet_rdma"))
        fmt::print(stderr, "nvmetrace: nvmet-rdma transport hooks off: {}\n", layouts.rdmat_error);

    RingReader rings = RingReader::open(opts.device_node, status.rings);
    // Whatever an earlier recording left in the rings is not ours.
    rings.drain([](uint32_t, std::span<const nvmetrace_rec>) {});
    const uint64_t lost_before = rings.lost();
    std::vector<uint64_t> lost_before_cpu;
    for (const auto& st : rings.stats())
        lost_before_cpu.push_back(st.lost);

    RecordingMeta meta = make_recording_meta();
    meta.module_version = mv.module_version;
    meta.tool_version = kToolVersion;
    meta.role = role_name(role);
    meta.transport = opts.transport.empty() ? "unknown" : opts.transport;
    if (opts.transport.empty() && !host_ns.empty())
        meta.transport = host_ns.front().transport;
    meta.sample = opts.sample;
    meta.seed = opts.seed;
    meta.command_line = opts.command_line;
    meta.devices = devices_to_json(host_ns, target_ns);

    const RecordingWriterOptions wopts = recorder_writer_options(opts.sample, opts.zstd_level);
    const RecordOutput output = prepare_record_output(opts.output);
    if (const std::string note = record_output_note(output); !note.empty())
        fmt::print(stderr, "{}\n", note);
    RecordingWriter writer = RecordingWriter::open(output.path, wopts);
    writer.write_meta(meta);

    DeviceTable table;
    devices_from_json(meta.devices, table);
    const uint64_t interval_ns =
        opts.interval_s > 0 ? static_cast<uint64_t>(opts.interval_s * 1e9) : 0;
    const bool host_only = role == NVMETRACE_ROLE_HOST;
    bool header_printed = false;
    Stats stats(table,
                {.sample_n = opts.sample,
                 .interval_ns = interval_ns,
                 .origin_ns = static_cast<uint64_t>(meta.start_monotonic_ns)},
                [&](const Interval& iv) {
                    if (!header_printed) {
                        fmt::print("{}", live_header(interval_ns, host_only));
                        header_printed = true;
                    }
                    fmt::print("{}", live_rows(iv));
                    std::fflush(stdout);
                });
    Assembler assembler(table, [&](const Command& c) { stats.add(c); });

    install_record_signals();
    genl.start(start);
    report_hooks(genl, opts.transport);
    if (const std::string only = module_bench_hooks(); !only.empty())
        fmt::print(stderr,
                   "nvmetrace: the module was loaded with bench_hooks={}: only those hooks "
                   "attach, and the recording misses the others' events (reload it without)\n",
                   only);
    if (module_bench_nop())
        fmt::print(stderr,
                   "nvmetrace: the module was loaded with bench_nop: its hooks attach with "
                   "handlers that do nothing, and the recording holds no command (reload it "
                   "without)\n");
    const uint64_t t0 = monotonic_ns();
    if (opts.command.empty())
        fmt::print("nvmetrace: profiling as {}, sampling {}, saving records; Ctrl-C to stop\n",
                   meta.role, sampling_words(opts.sample));
    else
        fmt::print(
            "nvmetrace: profiling as {}, sampling {}, saving records while {} runs; Ctrl-C "
            "stops both\n",
            meta.role, sampling_words(opts.sample), opts.command.front());
    std::fflush(stdout);
    // record -- CMD: CMD runs as the caller, with the same environment, once
    // the recording has started.  One that fails to start leaves no file.
    std::optional<ChildProcess> child;
    if (!opts.command.empty()) {
        try {
            child.emplace(ChildProcess::start(opts.command));
        } catch (...) {
            genl.stop();
            std::error_code ec;
            std::filesystem::remove(output.path, ec);
            if (!output.kept_as.empty())
                std::filesystem::rename(output.kept_as, output.path, ec);
            throw;
        }
    }

    // The drain thread drains the rings and, when records are stored raw,
    // writes them; compressing blocks and the live lines (assembling and
    // statistics) are the second stage's, on a thread of its own, so that
    // neither can make the rings drop records by falling behind.  Without
    // live lines the summary is computed from the file once the recording
    // stops (its cost is then not paid while the workload runs).
    const bool live = interval_ns > 0;
    const bool compressed = wopts.zstd_level != 0;
    std::optional<RecordStage> stage;
    if (live || compressed) {
        RecordStage::Options so;
        so.writer = compressed ? &writer : nullptr;
        if (live) {
            // the live analysis's table, on the stage's thread
            so.devices = [&](const DeviceChange& c) { device_change_to_table(c, table); };
            so.live = [&](std::span<const nvmetrace_rec> recs) {
                for (const auto& r : recs)
                    assembler.push(r);
            };
            so.tick = [&](uint64_t now) {
                stats.advance(now > 100'000'000 ? now - 100'000'000 : 0);
            };
        }
        stage.emplace(std::move(so));
    }
    RecordLoop loop(rings, compressed ? nullptr : &writer, nullptr, stage ? &*stage : nullptr);

    // Devices that come and go while recording: host disks are admitted into
    // the module's recording first, then the change is kept in the file with
    // the time from which their commands are recorded.
    std::optional<DeviceWatch> watch;
    if (((role & NVMETRACE_ROLE_HOST) && follow_devices) || (role & NVMETRACE_ROLE_TARGET)) {
        DeviceWatch::Options wo;
        wo.host = (role & NVMETRACE_ROLE_HOST) && follow_devices;
        wo.target = role & NVMETRACE_ROLE_TARGET;
        wo.transport = opts.transport;
        wo.names = opts.devices;
        if (late_layouts) {
            // the transports this recording may use, and those START had
            const auto want = [&](const char* mod, uint32_t r, const char* transport,
                                  const std::optional<uint32_t>& started) {
                if (!(role & r) || (!opts.transport.empty() && opts.transport != transport))
                    return;
                if (r == NVMETRACE_ROLE_TARGET && start.layout.empty())
                    return;  // the target transports read nvmet's fields too
                wo.modules.emplace_back(mod);
                if (started)
                    wo.modules_started.emplace_back(mod);
            };
            want("nvme_tcp", NVMETRACE_ROLE_HOST, "tcp", start.tcp_btf);
            want("nvme_rdma", NVMETRACE_ROLE_HOST, "rdma", start.rdma_btf);
            want("nvmet_tcp", NVMETRACE_ROLE_TARGET, "tcp", start.tcpt_btf);
            want("nvmet_rdma", NVMETRACE_ROLE_TARGET, "rdma", start.rdmat_btf);
        }
        watch.emplace(wo, host_ns, target_ns);
    }
    // A transport module loaded (or loaded again) while recording: its
    // layout from its BTF now, so its hooks attach.
    auto give_layout = [&](const std::string& mod) {
        StartArgs groups;
        std::string why = transport_layout(mod, groups);
        if (why.empty()) {
            try {
                genl.layout(groups);
            } catch (const Error& e) {
                why = e.what();
            }
        }
        if (!why.empty()) {
            fmt::print(stderr, "nvmetrace: {} loaded: its hooks stay off: {}\n", mod, why);
            return;
        }
        // a stand-in not needed (SPARE) and a function inlined into its
        // stand-in's (INLINED) are as they are at START
        int on = 0;
        std::vector<std::string> off;
        for (const auto& h : genl.get_hooks()) {
            if (transport_module(h.name) != mod)
                continue;
            if (h.state == NVMETRACE_HOOK_ATTACHED)
                on++;
            else if (h.state != NVMETRACE_HOOK_SPARE && h.state != NVMETRACE_HOOK_INLINED)
                off.push_back(fmt::format("{} (state {}, error {})", h.name, h.state, h.error));
        }
        if (off.empty())
            fmt::print(stderr, "nvmetrace: {} loaded: its {} hooks attached\n", mod, on);
        else
            fmt::print(stderr, "nvmetrace: {} loaded: {} hooks attached, not: {}\n", mod, on,
                       fmt::join(off, ", "));
    };
    auto follow = [&](uint64_t now, bool force) {
        if (!watch)
            return;
        std::optional<DeviceWatch::Change> c = watch->poll(now, force);
        if (!c)
            return;
        for (const std::string& mod : c->modules)
            give_layout(mod);
        if (c->block.added.empty() && c->block.gone.empty())
            return;
        if (!c->admit.empty()) {
            try {
                genl.admit(c->admit);
            } catch (const Error& e) {
                for (auto& d : c->block.added)
                    if (d.value("kind", "") != "target_ns")
                        d["not_recorded"] = e.what();
                fmt::print(stderr, "nvmetrace: devices that appeared are not recorded: {}\n",
                           e.what());
            }
        }
        // from this instant on, the admitted devices' commands are recorded
        c->block.monotonic_ns = static_cast<int64_t>(monotonic_ns());
        for (const std::string& line : c->lines)
            fmt::print(stderr, "nvmetrace: {}\n", line);
        if (stage)
            stage->push_devices(c->block);
        if (!compressed)
            writer.write_devices(c->block);
    };
    // A drain that found a ring an eighth full or more goes round again at
    // once instead of sleeping: bursts must not fill the rings.  One that
    // found little (under 1/64 of a ring) sleeps longer: fewer wake-ups when
    // few commands are sampled.
    const uint64_t busy_drain = uint64_t{status.rings.nr_recs} / 8;
    const uint64_t quiet_drain = uint64_t{status.rings.nr_recs} / 64;
    const uint64_t end_at =
        opts.duration_s > 0 ? t0 + static_cast<uint64_t>(opts.duration_s * 1e9) : UINT64_MAX;
    bool child_exited = false;
    try {
        follow(monotonic_ns(), true);  // what appeared since the devices were listed
        while (!g_stop.load() && !child_exited) {
            uint64_t now = monotonic_ns();
            if (now >= end_at)
                break;
            follow(now, false);
            const uint64_t drained = loop.drain();
            loop.release(now, false);
            if (stage)
                stage->submit(now);
            if (!compressed)
                writer.flush_if_due();
            // the nap is a poll on the command's pidfd (its exit ends the
            // recording at once) and on the device watch's uevents (a device
            // that appears is admitted at once)
            pollfd p[2];
            nfds_t np = 0;
            if (child)
                p[np++] = {child->pidfd(), POLLIN, 0};
            if (watch && watch->fd() >= 0)
                p[np++] = {watch->fd(), POLLIN, 0};
            const int nap_ms = drained >= busy_drain ? 0 : drained < quiet_drain ? 50 : 10;
            if (np) {
                if (poll(p, np, nap_ms) > 0 && child)
                    child_exited = p[0].revents != 0;
            } else if (nap_ms) {
                timespec nap{0, nap_ms * 1'000'000L};
                nanosleep(&nap, nullptr);
            }
        }
        // a last look: a device that came or went since the one before is
        // in the file, with its time, even when no uevent woke the watch
        // (nvmet's configfs sends none)
        follow(monotonic_ns(), true);
    } catch (...) {
        genl.stop();
        throw;
    }
    // a module loaded again meanwhile whose layout is not START's: its
    // hooks stopped recording then, and the components they split merged
    for (const auto& h : genl.get_hooks())
        if (h.state == NVMETRACE_HOOK_STALE)
            fmt::print(stderr, "nvmetrace: hook {}: STALE: {}\n", h.name, stale_note(h.name));
    genl.stop();
    if (child && !child->exited()) {
        // -d or a signal ended the recording first: the command ends too
        // (Ctrl-C in a terminal has already sent it SIGINT)
        if (!g_stop.load())
            fmt::print(stderr, "nvmetrace: -d {} s reached: sending SIGTERM to {}\n",
                       opts.duration_s, opts.command.front());
        child->signal(SIGTERM);
        if (!child->wait(5000)) {
            fmt::print(stderr, "nvmetrace: {} still runs 5 s after SIGTERM: sending SIGKILL\n",
                       opts.command.front());
            child->signal(SIGKILL);
            child->wait();
        }
    }
    const uint64_t t_end = monotonic_ns();
    loop.drain();
    loop.close_open_gaps();
    loop.release(t_end, true);
    if (stage) {
        stage->submit(t_end);
        stage->finish();
        if (stage->peak_backlog() > uint64_t{status.rings.nr_recs})
            fmt::print(stderr,
                       "nvmetrace: the second stage (compression, live lines) fell up to {} "
                       "records behind the rings; no record was lost for it\n",
                       stage->peak_backlog());
    }
    // The live analysis saw every record, or the summary comes from the file.
    std::optional<Stats> file_stats;
    std::optional<Assembler> file_assembler;
    Stats* summary_stats = &stats;
    Assembler* summary_assembler = &assembler;
    if (!live || !stage->live_complete()) {
        if (live) {
            file_stats.emplace(table, Stats::Options{.sample_n = opts.sample});
            file_assembler.emplace(table, [&](const Command& c) { file_stats->add(c); });
            summary_stats = &*file_stats;
            summary_assembler = &*file_assembler;
        }
        writer.flush();
        summary_assembler->set_gaps(gap_runs_in(output.path));
        RecordingReader back = RecordingReader::open(output.path);
        // the devices as the file has them: those that came, and when they
        // went (a command in flight then is incomplete for that reason)
        table = DeviceTable();
        devices_from_json(back.meta().devices, table);
        back.for_each([&](std::span<const nvmetrace_rec> recs) {
            for (const auto& r : recs)
                summary_assembler->push(r);
        });
    }
    summary_assembler->finish();
    if (interval_ns && summary_stats == &stats)
        stats.flush_interval(t_end);

    RecordingTrailer trailer;
    trailer.lost = rings.lost() - lost_before;
    for (const auto& st : rings.stats())
        trailer.lost_per_cpu.push_back(st.lost - lost_before_cpu.at(st.cpu));
    const AssemblyCounts& counts = summary_assembler->counts();
    trailer.stats = {{"commands", counts.complete}, {"incomplete", counts.incomplete()}};
    writer.close(trailer);

    const Summary summary = summary_stats->summary(t_end - t0);
    fmt::print("nvmetrace: {} commands ({} records) written to {}\n\n", counts.complete,
               writer.records_written(), output.path);
    ReportOptions ro;
    ro.detail = opts.detail;
    ro.origin_ns = static_cast<uint64_t>(meta.start_monotonic_ns);
    ro.lost_host = role & NVMETRACE_ROLE_HOST ? trailer.lost : 0;
    ro.lost_target = role == NVMETRACE_ROLE_TARGET ? trailer.lost : 0;
    fmt::print("{}", summary_text(summary, counts, ro));
    if (trailer.lost) {
        std::fflush(stdout);  // after the summary, not inside it
        fmt::print(stderr, "nvmetrace: {}\n", lost_advice(trailer.lost, opts));
    }
    if (child) {
        const int st = *child->status();
        if (st != 0)
            fmt::print(stderr, "nvmetrace: {} exited with status {}{}\n", opts.command.front(), st,
                       st > 128 ? fmt::format(" (signal {})", st - 128) : "");
        return st;
    }
    return 0;
}

}  // namespace nvmetrace
