// `nvmetrace record --spdk-target` / `--spdk-host`: an SPDK NVMe-oF target,
// or an app on SPDK's NVMe/TCP driver, recorded from its own trace ring, with
// no module and no change to SPDK.  The ring is read every few milliseconds
// (RingFollower), its entries made into records (TargetCommands,
// HostCommands) on CLOCK_MONOTONIC, and written as any recording is.
#include "analysis/assembler.h"
#include "analysis/device_table.h"
#include "analysis/stats.h"
#include "cmd/record.h"
#include "format/recfile.h"
#include "kernel/devices.h"
#include "report/printer.h"
#include "spdk/host_commands.h"
#include "spdk/process.h"
#include "spdk/rdma_host_commands.h"
#include "spdk/rdma_host_probes.h"
#include "spdk/ring_follower.h"
#include "spdk/rpc.h"
#include "spdk/target_commands.h"
#include "spdk/tsc_clock.h"
#include "util/child_process.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/perf_samples.h"
#include "util/uprobe_events.h"
#include "version.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>

#include <fmt/core.h>

namespace nvmetrace {

namespace {

int64_t mono_ns() {
    return static_cast<int64_t>(monotonic_ns());
}

}  // namespace

namespace {

// The one process of an SPDK app with a trace ring that `arg` names.
spdk::Process traced_process(const std::string& opt, const std::string& arg, bool target) {
    const char* app = target ? "nvmf_tgt" : "the app";
    const char* start =
        target ? "-e nvmf_tcp:0x401,bdev:0x3 (TCP) or -e nvmf_rdma:0x101,bdev:0x3 (RDMA)"
               : "-y nvme_tcp:0x3 (spdk_nvme_perf) or -e nvme_tcp:0x3";
    const spdk::Source src = spdk::find_source(arg);
    std::vector<spdk::Process> traced;
    for (const auto& p : src.processes)
        if (!p.trace.empty())
            traced.push_back(p);
    if (src.processes.empty())
        throw Error(fmt::format("{} {}: no process of it is running; start {} with {} first", opt,
                                arg, app, start));
    if (traced.empty())
        throw Error(fmt::format("{} {}: process {} has no trace ring: start it with {}", opt, arg,
                                src.processes.front().pid, start));
    if (traced.size() > 1) {
        std::string pids;
        for (const auto& p : traced)
            pids += fmt::format(" {}", p.pid);
        throw Error(
            fmt::format("{} {}: {} processes of it run with a trace ring ({}): name one "
                        "by its pid",
                        opt, arg, traced.size(), pids.substr(1)));
    }
    return traced.front();
}

// The one running process that `arg` (a binary or a pid) names: an app
// recorded by uprobes needs no trace ring.
spdk::Process running_process(const std::string& arg) {
    const spdk::Source src = spdk::find_source(arg);
    if (src.processes.empty())
        throw Error(fmt::format(
            "--spdk-host {}: no process of it is running; start it, or let record start it "
            "(record --spdk-host APP -- APP ARGS)",
            arg));
    if (src.processes.size() > 1) {
        std::string pids;
        for (const auto& p : src.processes)
            pids += fmt::format(" {}", p.pid);
        throw Error(fmt::format("--spdk-host {}: {} processes of it run ({}): name one by its pid",
                                arg, src.processes.size(), pids.substr(1)));
    }
    if (src.processes.front().pid == 0)
        throw Error(
            fmt::format("--spdk-host {}: over RDMA, name the app's binary or pid, not a "
                        "trace file",
                        arg));
    return src.processes.front();
}

// The trace ring of an app the recorder started, into `out` once SPDK has
// set it up (its TSC rate and the tracepoints the role needs registered and
// on): followed from its oldest entry.  Throws Error when the app exits first, or
// has no ring after kRingWaitNs.
constexpr int64_t kRingWaitNs = 120'000'000'000;  // SPDK's start under emulation: tens of s
void wait_for_ring(ChildProcess& child, bool target, std::optional<spdk::RingFollower>& out) {
    const int64_t until = mono_ns() + kRingWaitNs;
    std::string why = "no trace ring: start it with -y nvme_tcp:0x3 (spdk_nvme_perf)";
    for (;;) {
        if (child.exited())
            throw Error(
                fmt::format("the app (process {}) exited with status {} before its "
                            "trace ring was set up",
                            child.pid(), child.status().value_or(-1)));
        if (const std::string trace = spdk::trace_of(child.pid()); !trace.empty()) {
            try {
                out.emplace(trace, true);
                bool all = true;
                for (const auto& need : spdk::needs(target, "tcp")) {
                    const spdk::Tpoint* t = out->layout().find(need.tpoint);
                    all = all && t && out->layout().enabled(t->id);
                }
                if (all)
                    return;
                out.reset();
                why =
                    fmt::format("{}: the tracepoints it needs are not on (-y nvme_tcp:0x3)", trace);
            } catch (const Error& e) {
                why = e.what();  // being set up
            }
        }
        if (mono_ns() > until) {
            child.signal(SIGINT);
            throw Error(fmt::format("the app (process {}): {}", child.pid(), why));
        }
        timespec nap{0, 5'000'000};
        nanosleep(&nap, nullptr);
    }
}

// A host recording's device for an SPDK app: it has no block device; its
// commands carry this dev (major 4095, the pid's low 20 bits as minor).
uint32_t spdk_host_dev(int pid) {
    return 4095u << 20 | (static_cast<uint32_t>(pid) & 0xfffffu);
}

// What the recording loop reads: SPDK's trace ring (TCP host, target) or the
// uprobes' samples (RDMA host), made into records by its converter.
struct SpdkSource {
    std::function<void()> poll;  // reads what is new and converts it
    std::function<void(uint64_t)> expire;
    std::function<std::vector<nvmetrace_rec>()> release, release_all;
    std::function<uint64_t()> lost;  // entries or samples lost before they were read
};

// Whether the host app's command line connects over RDMA ("trtype:RDMA" in a
// transport ID, as spdk_nvme_perf -r takes it).
bool args_name_rdma(const std::vector<std::string>& command) {
    for (const auto& a : command) {
        std::string l = a;
        std::transform(l.begin(), l.end(), l.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        if (l.find("trtype:rdma") != std::string::npos ||
            l.find("trtype=rdma") != std::string::npos)
            return true;
    }
    return false;
}

// A process's arguments (/proc/PID/cmdline); empty when it is gone.
std::vector<std::string> cmdline_of(int pid) {
    std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
    std::vector<std::string> args;
    std::string a;
    while (std::getline(in, a, '\0'))
        args.push_back(a);
    return args;
}

// The uprobes' samples held this long, then handed on in time order: each
// CPU's ring is in order, the rings are not with each other.
constexpr uint64_t kSampleHoldNs = 50'000'000;

}  // namespace

int run_record_spdk(const RecordOptions& opts) {
    const bool target = !opts.spdk_target.empty();
    const std::string opt = target ? "--spdk-target" : "--spdk-host";
    const std::string& arg = target ? opts.spdk_target : opts.spdk_host;
    if (target && !opts.spdk_host.empty())
        throw Error(
            "--spdk-target and --spdk-host: one SPDK app a recording; record the other beside it");
    for (const auto& r : opts.roles)
        if (r != (target ? "target" : "host"))
            throw Error(fmt::format(
                "{} records SPDK's {} alone: record the kernel's {} in a recording of its own "
                "(nvmetrace record -r {}, beside it)",
                opt, target ? "target" : "host", r, r));
    if (opts.sample == 0)
        throw Error("-s 0: sample 1 of N commands, N >= 1");
    if (!opts.transport.empty() && opts.transport != "tcp" && opts.transport != "rdma")
        throw Error(fmt::format("-t {}: the transport is tcp or rdma", opts.transport));
    // SPDK's RDMA initiator has no tracepoints: uprobes, placed before the app starts
    // (-t absent: the app's command line, or the running app's, names its transport)
    bool rdma_host = !target && opts.transport == "rdma";
    if (!target && opts.transport.empty()) {
        if (!opts.command.empty()) {
            rdma_host = args_name_rdma(opts.command);
        } else {
            const spdk::Source src = spdk::find_source(arg);
            if (src.processes.size() == 1 && src.processes.front().pid)
                rdma_host = args_name_rdma(cmdline_of(src.processes.front().pid));
        }
    }
    if (target && !opts.command.empty())
        throw Error(
            "--spdk-target -- CMD: start SPDK's target yourself (it is set up by RPC once it "
            "runs), then record it by its binary or pid");
    check_record_output(opts.output);

    // record --spdk-host APP -- APP ARGS: the recorder starts the app and follows its ring
    // (or its uprobes) from its first entry; the recording ends when it exits
    // the recording starts before the ring is first read (its times are after this)
    RecordingMeta meta = make_recording_meta();
    std::optional<ChildProcess> child;
    spdk::Process proc;
    std::optional<spdk::RingFollower> follower;
    std::optional<UprobeEvents> uprobes;
    std::optional<TracepointSampler> sampler;
    UprobeEvents::Event submit_ev, complete_ev;
    spdk::RdmaHostSites sites;
    auto place_uprobes = [&](const std::string& program) {
        sites = spdk::find_rdma_host_sites(program);
        uprobes.emplace(fmt::format("nvmetrace_{}", getpid()));
        submit_ev = uprobes->add("spdk_rdma_submit", sites.submit_file, sites.submit_offset,
                                 spdk::rdma_submit_args(sites));
        complete_ev = uprobes->add("spdk_rdma_complete", sites.complete_file, sites.complete_offset,
                                   spdk::rdma_complete_args());
    };
    if (!opts.command.empty()) {
        const std::string cmd = resolve_command(opts.command.front());
        std::error_code ec;
        const auto named = std::filesystem::canonical(arg, ec);
        if (ec || named != std::filesystem::canonical(cmd, ec))
            throw Error(fmt::format(
                "--spdk-host {} -- {}: with a command, --spdk-host names the same program", arg,
                opts.command.front()));
        if (rdma_host) {
            place_uprobes(cmd);
            // the events open on the child before its exec: its first command is seen
            child.emplace(ChildProcess::start(opts.command, -1, [&](pid_t pid) {
                sampler.emplace(pid, std::vector<uint64_t>{submit_ev.id, complete_ev.id});
            }));
            proc.pid = child->pid();
        } else {
            child.emplace(ChildProcess::start(opts.command));
            proc.pid = child->pid();
            wait_for_ring(*child, target, follower);
            proc.trace = follower->path();
        }
    } else if (rdma_host) {
        // a running app: each of its threads followed from now (SPDK starts its reactors
        // before its first command)
        proc = running_process(arg);
        std::error_code ec;
        const std::string exe =
            std::filesystem::read_symlink(fmt::format("/proc/{}/exe", proc.pid), ec).string();
        if (ec)
            throw Error(fmt::format("--spdk-host {}: its program is not known (/proc/{}/exe: {})",
                                    arg, proc.pid, ec.message()));
        place_uprobes(exe);
        sampler.emplace(proc.pid, std::vector<uint64_t>{submit_ev.id, complete_ev.id}, 256,
                        TracepointSampler::Mode::threads);
    } else {
        proc = traced_process(opt, arg, target);
        follower.emplace(proc.trace);
    }

    // The transport: asked for, or the one whose tracepoints are on.
    std::vector<std::string> transports;
    if (rdma_host) {
        transports.push_back("rdma");
    } else if (!target) {
        transports.push_back("tcp");
    } else if (opts.transport.empty()) {
        const spdk::TraceFile& layout = follower->layout();
        auto on = [&](std::string_view name) {
            const spdk::Tpoint* t = layout.find(name);
            return t && layout.enabled(t->id);
        };
        if (on("TCP_REQ_NEW"))
            transports.push_back("tcp");
        if (on("RDMA_REQ_NEW"))
            transports.push_back("rdma");
        if (transports.empty())
            transports.push_back("tcp");  // said below: its tracepoints are off
    } else {
        transports.push_back(opts.transport);
    }
    if (follower) {
        const spdk::TraceFile& layout = follower->layout();
        for (const auto& tr : transports)
            for (const auto& need : spdk::needs(target, tr)) {
                const spdk::Tpoint* t = layout.find(need.tpoint);
                if (!t || !layout.enabled(t->id))
                    throw Error(fmt::format(
                        "{}: SPDK's tracepoint {} ({}) is off in {}; nvmetrace probe {} {} says "
                        "how to start the app with it on",
                        opt, need.tpoint, need.group, proc.trace, opt, arg));
            }
    }

    // The target: which namespace each bdev serves, and its block size (SPDK's RPC socket)
    std::unordered_map<std::string, uint32_t> nsid_of;
    nlohmann::json devices = nlohmann::json::array();
    if (target) {
        const std::string sock = opts.spdk_rpc.empty() ? spdk::kDefaultRpcSocket : opts.spdk_rpc;
        try {
            const auto nss = spdk::namespaces_of(spdk::rpc_call(sock, "nvmf_get_subsystems"),
                                                 spdk::rpc_call(sock, "bdev_get_bdevs"));
            for (const auto& ns : nss) {
                nsid_of[ns.bdev] = ns.nsid;
                devices.push_back({{"kind", "target_ns"},
                                   {"subsysnqn", ns.subsysnqn},
                                   {"nsid", ns.nsid},
                                   {"device_path", "spdk bdev " + ns.bdev},
                                   {"lbs", ns.block_size},
                                   {"enabled", true}});
            }
        } catch (const Error& e) {
            fmt::print(stderr,
                       "nvmetrace: {}: namespaces and sizes not known (sizes in blocks); "
                       "--spdk-rpc names the socket of a target started with -r\n",
                       e.what());
        }
    } else {
        // the app is the host's one "disk"; its block size is not in SPDK's trace
        devices.push_back({{"kind", "disk"},
                           {"name", fmt::format("spdk:{}", proc.pid)},
                           {"dev", spdk_host_dev(proc.pid)},
                           {"lbs", 0},
                           {"nsid", 0},
                           {"cntlid", 0},
                           {"transport", transports.front()}});
    }

    // The converter and what feeds it
    std::optional<spdk::TscClock> clock;
    std::optional<spdk::TargetCommands> tconv;
    std::optional<spdk::HostCommands> hconv;
    std::optional<spdk::RdmaHostCommands> rconv;
    SpdkSource src;
    nlohmann::json spdk_meta = {
        {"role", target ? "target" : "host"},
        {"transport", transports.size() == 1 ? transports.front() : std::string("unknown")},
        {"app", arg},
        {"pid", proc.pid}};
    if (rdma_host) {
        rconv.emplace(sites.wr_offset, opts.sample, opts.seed, spdk_host_dev(proc.pid));
        spdk_meta["uprobes"] = {
            {"submit", fmt::format("{}:{:#x} ({})", sites.submit_file, sites.submit_offset,
                                   spdk::kRdmaSubmitFunction)},
            {"complete", fmt::format("{}:{:#x} ({})", sites.complete_file, sites.complete_offset,
                                     spdk::kRdmaCompleteFunction)},
            {"send_wr_offset", sites.wr_offset},
            {"req_offset", sites.req_offset},
            {"qpair_offset", sites.qpair_offset},
            {"qid_offset", sites.qid_offset}};
        auto pending = std::make_shared<std::vector<PerfSample>>();
        auto feed = [&, pending](uint64_t upto) {
            std::stable_sort(
                pending->begin(), pending->end(),
                [](const PerfSample& a, const PerfSample& b) { return a.time < b.time; });
            size_t n = 0;
            for (; n < pending->size() && (*pending)[n].time < upto; n++) {
                const PerfSample& ps = (*pending)[n];
                if (ps.event == 0)
                    rconv->submit(spdk::rdma_submit_of(ps, submit_ev));
                else
                    rconv->complete(spdk::rdma_complete_of(ps, complete_ev));
            }
            pending->erase(pending->begin(), pending->begin() + static_cast<ptrdiff_t>(n));
        };
        src.poll = [&, feed, pending] {
            sampler->read(*pending);
            const auto now = monotonic_ns();
            feed(now > kSampleHoldNs ? now - kSampleHoldNs : 0);
        };
        src.expire = [&](uint64_t now) { rconv->expire(now); };
        src.release = [&] { return rconv->release(); };
        src.release_all = [&, feed, pending] {
            sampler->read(*pending);
            feed(UINT64_MAX);
            return rconv->release_all();
        };
        src.lost = [&] { return sampler->lost(); };
    } else {
        spdk::RingFollower& ring = *follower;
        const spdk::TraceFile& layout = ring.layout();
        spdk_meta["trace"] = proc.trace;
        spdk_meta["tsc_rate"] = layout.tsc_rate;
        clock.emplace(layout.tsc_rate);
        clock->add(spdk::TscClock::now());
        const auto ns = [&clock](uint64_t tsc) { return clock->ns(tsc); };
        if (target)
            tconv.emplace(
                spdk::TargetTpoints::of(layout), opts.sample, opts.seed, ns,
                [&ring](uint16_t id) { return ring.owner(id); },
                [&nsid_of](const std::string& bdev) {
                    const auto it = nsid_of.find(bdev);
                    return it == nsid_of.end() ? uint32_t{0} : it->second;
                });
        else
            hconv.emplace(spdk::HostTpoints::of(layout), opts.sample, opts.seed,
                          spdk_host_dev(proc.pid), ns);
        auto feed = [&, target](const std::vector<spdk::RingFollower::Entry>& entries) {
            for (const auto& e : entries)
                target ? tconv->push(e.entry) : hconv->push(e.entry);
        };
        src.poll = [&, feed] {
            const auto entries = ring.poll();
            clock->add(spdk::TscClock::now());
            feed(entries);
        };
        src.expire = [&, target](uint64_t now) {
            target ? tconv->expire(now) : hconv->expire(now);
        };
        src.release = [&, target] { return target ? tconv->release() : hconv->release(); };
        src.release_all = [&, feed, target] {
            feed(ring.poll());
            return target ? tconv->release_all() : hconv->release_all();
        };
        src.lost = [&] { return ring.lost(); };
    }

    meta.tool_version = kToolVersion;
    meta.role = target ? "target" : "host";
    meta.transport = spdk_meta["transport"];
    meta.sample = opts.sample;
    meta.seed = opts.seed;
    meta.command_line = opts.command_line;
    meta.devices = devices;
    meta.extra["spdk"] = spdk_meta;

    const RecordOutput output = prepare_record_output(opts.output);
    if (const std::string note = record_output_note(output); !note.empty())
        fmt::print(stderr, "{}\n", note);
    RecordingWriter writer =
        RecordingWriter::open(output.path, recorder_writer_options(opts.sample, opts.zstd_level));
    writer.write_meta(meta);

    DeviceTable table;
    devices_from_json(meta.devices, table);
    const uint64_t interval_ns =
        opts.interval_s > 0 ? static_cast<uint64_t>(opts.interval_s * 1e9) : 0;
    bool header_printed = false;
    Stats stats(table,
                {.sample_n = opts.sample,
                 .interval_ns = interval_ns,
                 .origin_ns = static_cast<uint64_t>(meta.start_monotonic_ns)},
                [&](const Interval& iv) {
                    if (!header_printed) {
                        fmt::print("{}", live_header(interval_ns, !target));
                        header_printed = true;
                    }
                    fmt::print("{}", live_rows(iv));
                    std::fflush(stdout);
                });
    Assembler assembler(table, [&](const Command& c) { stats.add(c); });
    auto put = [&](const std::vector<nvmetrace_rec>& recs) {
        if (recs.empty())
            return;
        writer.append(recs);
        for (const auto& r : recs)
            assembler.push(r);
    };

    install_record_signals();

    if (rdma_host)
        fmt::print(
            "nvmetrace: profiling as host, SPDK's over RDMA (process {}, uprobes on {} and {}), "
            "sampling {}, saving records; Ctrl-C to stop\n",
            proc.pid, spdk::kRdmaSubmitFunction, spdk::kRdmaCompleteFunction,
            opts.sample == 1 ? std::string("every command")
                             : fmt::format("1 of {} commands", opts.sample));
    else
        fmt::print(
            "nvmetrace: profiling as {}, SPDK's (process {}, trace {}), sampling {}, saving "
            "records; Ctrl-C to stop\n",
            meta.role, proc.pid, proc.trace,
            opts.sample == 1 ? std::string("every command")
                             : fmt::format("1 of {} commands", opts.sample));
    std::fflush(stdout);
    const int64_t t0 = mono_ns();
    const int64_t until =
        opts.duration_s > 0 ? t0 + static_cast<int64_t>(opts.duration_s * 1e9) : INT64_MAX;
    bool gone = false;
    while (!record_stop_requested() && mono_ns() < until) {
        src.poll();
        src.expire(static_cast<uint64_t>(mono_ns()));
        put(src.release());
        writer.flush_if_due();
        if (child ? child->exited() : kill(proc.pid, 0) != 0 && errno == ESRCH) {
            gone = true;
            break;
        }
        timespec nap{0, 5'000'000};
        nanosleep(&nap, nullptr);
    }
    if (child && !gone) {
        // -d or a signal ended the recording first: the app ends too (SPDK's apps stop on
        // SIGINT), and its last entries are read
        child->signal(SIGINT);
        if (!child->wait(10'000)) {
            child->signal(SIGKILL);
            child->wait();
        }
    }
    const int64_t t_end = mono_ns();
    put(src.release_all());
    assembler.finish();
    if (interval_ns)
        stats.flush_interval(static_cast<uint64_t>(t_end));
    if (gone && !child)
        fmt::print(stderr, "nvmetrace: SPDK's {} (process {}) exited: recording ended\n", meta.role,
                   proc.pid);

    // what a uprobe hit costs here, measured on nvmetrace itself once the app is done: the
    // app's commands each passed two
    std::optional<spdk::UprobeCost> hit_ns;
    if (rdma_host) {
        try {
            hit_ns = spdk::measure_uprobe_cost(sites);
        } catch (const Error& e) {
            fmt::print(stderr, "nvmetrace: the uprobes' cost not measured: {}\n", e.what());
        }
    }
    const uint64_t lost = src.lost();
    RecordingTrailer trailer;
    trailer.lost = lost;
    uint64_t commands = 0;
    if (target) {
        const spdk::TargetCounts& tc = tconv->counts();
        commands = tc.commands;
        trailer.stats = {{"commands", tc.commands},
                         {"spdk",
                          {{"ring_entries_lost", lost},
                           {"not_sampled", tc.not_sampled},
                           {"no_bdev_io", tc.no_bdev_io},
                           {"unfinished", tc.unfinished},
                           {"abandoned", tc.abandoned},
                           {"in_flight_at_end", tc.cut_end},
                           {"no_qid", tc.no_qid},
                           {"no_nsid", tc.no_nsid}}}};
        if (tc.no_qid)
            fmt::print(stderr,
                       "nvmetrace: {} commands without a queue id (their queue pair's trace owner "
                       "named none): joined by LBA and time alone\n",
                       tc.no_qid);
    } else if (rdma_host) {
        const spdk::RdmaHostCounts& rc = rconv->counts();
        commands = rc.commands;
        trailer.stats = {{"commands", rc.commands},
                         {"spdk",
                          {{"samples_lost", lost},
                           {"not_sampled", rc.not_sampled},
                           {"other", rc.other},
                           {"unfinished", rc.unfinished},
                           {"mismatched", rc.mismatched},
                           {"abandoned", rc.abandoned},
                           {"in_flight_at_end", rc.cut_end}}}};
        if (rc.mismatched)
            fmt::print(stderr,
                       "nvmetrace: {} completions named another command id than their request's: "
                       "the request layout read from {} does not match the running code\n",
                       rc.mismatched, sites.complete_file);
        if (hit_ns) {
            trailer.stats["spdk"]["uprobe_submit_ns"] = hit_ns->submit_ns;
            trailer.stats["spdk"]["uprobe_complete_ns"] = hit_ns->complete_ns;
            const double sub = static_cast<double>(hit_ns->submit_ns) / 1e3,
                         cpl = static_cast<double>(hit_ns->complete_ns) / 1e3;
            fmt::print(stderr,
                       "nvmetrace: each command passed two uprobes, about {:.2f} us (submission) "
                       "and {:.2f} us (completion) a hit here (measured on nvmetrace itself): the "
                       "app ran slower by about {:.2f} us a command, part of it outside the "
                       "recorded span\n",
                       sub, cpl, sub + cpl);
        } else {
            fmt::print(stderr,
                       "nvmetrace: each command passed two uprobes (a trap each): the app ran "
                       "slower by their time, about one hit of it outside the recorded span\n");
        }
    } else {
        const spdk::HostCounts& hc = hconv->counts();
        commands = hc.commands;
        trailer.stats = {{"commands", hc.commands},
                         {"spdk",
                          {{"ring_entries_lost", lost},
                           {"not_sampled", hc.not_sampled},
                           {"other", hc.other},
                           {"unfinished", hc.unfinished},
                           {"abandoned", hc.abandoned},
                           {"in_flight_at_end", hc.cut_end}}}};
    }
    if (clock) {
        trailer.stats["spdk"]["tsc_steps"] = clock->steps();
        if (clock->steps())
            fmt::print(stderr,
                       "nvmetrace: SPDK's TSC times had to step {} time(s) to meet "
                       "CLOCK_MONOTONIC (its rate {} Hz was far off, or the TSC jumped): a "
                       "command across a step has a wrong duration\n",
                       clock->steps(), spdk_meta["tsc_rate"].get<uint64_t>());
    }
    writer.close(trailer);
    if (lost && rdma_host)
        fmt::print(stderr,
                   "nvmetrace: the kernel dropped {} uprobe samples (its perf rings were full): "
                   "their commands are missing\n",
                   lost);
    else if (lost)
        fmt::print(stderr,
                   "nvmetrace: SPDK overwrote {} trace entries before they were read: start "
                   "the app with a larger ring (--num-trace-entries)\n",
                   lost);

    const Summary summary = stats.summary(static_cast<uint64_t>(t_end - t0));
    fmt::print("nvmetrace: {} commands ({} records) written to {}\n\n", commands,
               writer.records_written(), output.path);
    ReportOptions ro;
    ro.detail = opts.detail;
    ro.origin_ns = static_cast<uint64_t>(meta.start_monotonic_ns);
    (target ? ro.lost_target : ro.lost_host) = lost;
    fmt::print("{}", summary_text(summary, assembler.counts(), ro));
    if (child) {
        const int st = child->status().value_or(1);
        if (st != 0)
            fmt::print(stderr, "nvmetrace: {} exited with status {}{}\n", opts.command.front(), st,
                       st > 128 ? fmt::format(" (signal {})", st - 128) : "");
        return st;
    }
    return 0;
}

}  // namespace nvmetrace
