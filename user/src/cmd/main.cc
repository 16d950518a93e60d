// nvmetrace: control the nvmetrace module and read what it records.
//
// Exit status: 0 success, 1 error (one line on stderr), 2 usage error;
// compare --exit-code: 1 when something moved, 3 an error.
#include "cmd/bench.h"
#include "cmd/compare.h"
#include "cmd/dmacost.h"
#include "cmd/export.h"
#include "cmd/pool.h"
#include "cmd/probe.h"
#include "cmd/record.h"
#include "cmd/report.h"
#include "cmd/script.h"
#include "cmd/status.h"
#include "kernel/genl.h"
#include "util/error.h"
#include "util/json_num.h"
#include "version.h"

#include <linux/nvmetrace.h>
#include <stdio.h>

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace nvmetrace {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// Tool version, then the module's if it is loaded.  Never fails: a version
// query that goes wrong is reported on the module line.
std::string version_text() {
    std::string out = fmt::format("nvmetrace {}\n", kToolVersion);
    try {
        GenlClient client;
        ModuleVersion v = client.get_version();
        out += fmt::format("module {} (ABI {}, ring layout {})", v.module_version, v.abi_version,
                           v.ring_version);
    } catch (const ModuleNotLoaded&) {
        out += "module not loaded";
    } catch (const std::exception& e) {
        out += fmt::format("module: {}", e.what());
    }
    return out;
}

int cmd_status(bool json) {
    GenlClient client;
    ModuleVersion version = client.get_version();
    Status status = client.get_status();
    if (json)
        fmt::print("{}\n", json_text(status_json(version, status), 2));
    else
        fmt::print("{}", status_text(version, status));
    return 0;
}

// POOL_GET and DMA_COST name a device by a descriptor open on it from ABI 7 on.
void need_device_fd_abi(GenlClient& client, const char* what) {
    const ModuleVersion v = client.get_version();
    if (v.abi_version < 7)
        throw Error(fmt::format(
            "{}: the loaded module (ABI {}) takes a device by number, which this tool no "
            "longer sends; load the nvmetrace.ko of this version (ABI {})",
            what, v.abi_version, NVMETRACE_ABI_VERSION));
}

int cmd_pool(bool json, const std::string& dev_arg) {
    std::optional<BlockDevice> dev;
    std::optional<OpenBlockDevice> opened;
    if (!dev_arg.empty()) {
        dev = resolve_block_device(dev_arg);
        opened.emplace(open_block_device(*dev));
    }
    GenlClient client;
    if (opened)
        need_device_fd_abi(client, "pool --dev");
    PoolInfo pool =
        client.pool_get(opened ? std::optional<DeviceRef>(opened->ref()) : std::nullopt);
    const std::string name = dev ? dev->name : "";
    if (json)
        fmt::print("{}\n", json_text(pool_json(pool, name), 2));
    else
        fmt::print("{}", pool_text(pool, name));
    return 0;
}

int cmd_dmacost(bool json, const std::string& dev_arg, uint32_t iters) {
    const BlockDevice dev = resolve_block_device(dev_arg);
    const OpenBlockDevice opened = open_block_device(dev);
    GenlClient client;
    need_device_fd_abi(client, "dmacost");
    DmaCost cost = client.dma_cost(opened.ref(), iters);
    if (json)
        fmt::print("{}\n", json_text(dmacost_json(cost, dev.name), 2));
    else
        fmt::print("{}", dmacost_text(cost, dev.name));
    return 0;
}

// compare's runs: two recordings, or each run's with --a and --b.
int run_compare_command(CompareOptions& cmp, const std::vector<std::string>& runs,
                        double min_change_pct, double min_share_pct) {
    if (!runs.empty()) {
        if (runs.size() != 2 || !cmp.a.empty() || !cmp.b.empty())
            throw Error(
                "compare: give two recordings (compare A.ntr B.ntr), or each run's "
                "recordings with --a and --b (compare --a H.ntr T.ntr --b H2.ntr T2.ntr)");
        cmp.a = {runs[0]};
        cmp.b = {runs[1]};
    }
    cmp.rule.min_change = min_change_pct / 100;
    cmp.rule.min_share = min_share_pct / 100;
    return run_compare(cmp);
}

int run(int argc, char** argv) {
    CLI::App app{"Per-command NVMe latency tracing (host and target)", "nvmetrace"};
    app.set_version_flag("--version", version_text);
    app.require_subcommand(1);
    app.footer(
        "Examples:\n  nvmetrace record -r host -- fio job.fio\n  nvmetrace report "
        "nvmetrace.ntr\n  nvmetrace compare before.ntr after.ntr\n\nExit status: 0 success, 1 "
        "error (one line on stderr), 2 usage error.\nnvmetrace COMMAND --help shows a command's "
        "options.");

    bool json = false;
    CLI::App* status = app.add_subcommand("status", "Show the module's version, state and rings");
    status->footer("Examples:\n  nvmetrace status\n  nvmetrace status --json | jq .state");
    status->add_flag("--json", json, "Print one JSON object instead of a table");

    RecordOptions rec;
    rec.command_line.assign(argv, argv + argc);
    // record [options] -- CMD ARGS: CLI11 sees what comes before the "--"
    bool rec_separator = false;
    const int parse_argc = split_record_command(argc, argv, rec.command, rec_separator);
    CLI::App* record = app.add_subcommand("record", "Record sampled commands into a file");
    record->footer(
        "Examples:\n  nvmetrace record -- fio job.fio       # while fio runs, into nvmetrace.ntr; "
        "host and/or\n                                        # target from what this machine has\n"
        "  nvmetrace record -r host -r target -d 20 -o all.ntr\n  nvmetrace record "
        "-r host -s 100 -i 1           # 1 of 100 commands, a live line a second\n  nvmetrace "
        "record -s 100 --spdk-target build/bin/nvmf_tgt -o target.ntr\n\nWith -- CMD "
        "ARGS the exit status is CMD's (128 + signal); else 0, 1 error, 2 usage error.");
    record
        ->add_option("-r,--role", rec.roles,
                     "host and/or target (-r host -r target for both; default: what this "
                     "machine has, NVMe-oF namespaces and/or nvmet subsystems)")
        ->check(CLI::IsMember({"host", "target"}));
    record->add_option("-t,--transport", rec.transport, "Only controllers of this transport")
        ->check(CLI::IsMember({"tcp", "rdma"}));
    record->add_option("-s,--sample", rec.sample, "Record 1 of N commands (default 1: all)")
        ->check(CLI::PositiveNumber);
    record->add_option("--seed", rec.seed, "Sampling hash seed (both sides must use the same)");
    record
        ->add_option(
            "-d,--duration", rec.duration_s,
            "Seconds to record (default: until Ctrl-C; with -- CMD: until CMD exits, at most this)")
        ->check(CLI::NonNegativeNumber);
    record->add_option("-i,--interval", rec.interval_s, "Print a live line every SECS")
        ->check(CLI::NonNegativeNumber);
    record->add_option("-o,--output", rec.output,
                       fmt::format("Recording file (default {}; a file there is first moved to "
                                   "FILE.old)",
                                   kDefaultRecordOutput));
    record->add_option("--zstd", rec.zstd_level,
                       "zstd level of the records: 1..19, negative for zstd's fast levels, 0 "
                       "stored raw (default: 0 at -s 1, where CPU matters more than size; else 1)");
    record
        ->add_option("--realtime", rec.realtime,
                     "Drain the rings at this SCHED_FIFO priority (1..99), as perf record -r: "
                     "where busy threads (nvme-tcp's workers run at nice -20) starve the "
                     "recorder and the rings drop records; what it starts runs as usual")
        ->check(CLI::Range(1, 99));
    record->add_option("--dev", rec.devices,
                       "Host namespace to trace: its disk (nvme1n1), controller (nvme1) or "
                       "subsystem NQN, present or to come (default: every NVMe-oF one, those "
                       "that appear while recording too)");
    record->add_flag("--detail", rec.detail, "Print the component table in the summary");
    record->add_option("--spdk-target", rec.spdk_target,
                       "Record SPDK's NVMe-oF target (nvmf_tgt) from its trace ring: its "
                       "binary, pid or trace file (/dev/shm/nvmf_trace.*); no module needed");
    record->add_option("--spdk-host", rec.spdk_host,
                       "Record an app on SPDK's NVMe driver: over TCP from its trace ring "
                       "(spdk_nvme_perf -y nvme_tcp:0x3; its binary, pid or trace file), over "
                       "RDMA by uprobes from its start (--spdk-host APP -- APP ARGS); no module "
                       "needed");
    record->add_option("--spdk-rpc", rec.spdk_rpc,
                       "The SPDK target's RPC socket, for its namespaces and block sizes "
                       "(default /var/tmp/spdk.sock)");

    ProbeOptions probe_opts;
    CLI::App* probe = app.add_subcommand("probe", "Which hooks can attach on this kernel");
    probe->footer(
        "Examples:\n  nvmetrace probe -r host -r target\n  nvmetrace probe -r host -t rdma\n"
        "  nvmetrace probe -r host -t tcp --spdk-target build/bin/nvmf_tgt");
    probe->add_option("-r,--role", probe_opts.roles, "host and/or target")
        ->check(CLI::IsMember({"host", "target"}));
    probe->add_option("--spdk-target", probe_opts.spdk_target,
                      "The target is SPDK's nvmf_tgt: its binary, pid or trace file "
                      "(/dev/shm/nvmf_trace.*); checks its trace ring, not nvmet's hooks");
    probe->add_option("--spdk-host", probe_opts.spdk_host,
                      "The host is an app on SPDK's NVMe driver (spdk_nvme_perf): its binary, "
                      "pid or trace file; checks its trace ring (TCP) or its uprobes' places "
                      "(RDMA), not the kernel host's hooks");
    probe->add_option("-t,--transport", probe_opts.transport, "tcp or rdma")
        ->check(CLI::IsMember({"tcp", "rdma"}));

    bool pool_json_out = false;
    std::string pool_dev;
    CLI::App* pool = app.add_subcommand(
        "pool", "Show the module's premapped-buffer test pool and the kernel's blk_iobuf pool");
    pool->footer("Examples:\n  nvmetrace pool\n  nvmetrace pool --json --dev nvme0n1");
    pool->add_flag("--json", pool_json_out, "Print one JSON object");
    pool->add_option("--dev", pool_dev,
                     "Block device whose queue's blk_iobuf pool to show (kernels that have one)");

    bool dma_json = false;
    std::string dma_dev;
    uint32_t dma_iters = 0;
    CLI::App* dmacost = app.add_subcommand(
        "dmacost", "DMA map+unmap cost per I/O size on a block device's DMA device");
    dmacost->footer(
        "Examples:\n  nvmetrace dmacost nvme0n1\n  nvmetrace dmacost -n 64 --json /dev/nvme0n1");
    dmacost
        ->add_option("device", dma_dev,
                     "Block device: /dev/nvme0n1, nvme0n1 or MAJ:MIN (opened for reading: the "
                     "module measures only a device you can read)")
        ->required();
    dmacost
        ->add_option("-n,--iterations", dma_iters,
                     fmt::format("Iterations per size, 1..{} (default {})", NVMETRACE_DMA_ITERS_MAX,
                                 NVMETRACE_DMA_ITERS_DEFAULT))
        ->check(CLI::Range(1, NVMETRACE_DMA_ITERS_MAX));
    dmacost->add_flag("--json", dma_json, "Print one JSON object");

    CLI::App* stop =
        app.add_subcommand("stop", "Stop a recording (one whose recorder is gone stops by itself)");
    stop->footer("Examples:\n  nvmetrace stop");

    ReportCommandOptions rep;
    CLI::App* report = app.add_subcommand("report", "Where the recorded commands spent their time");
    report->footer(
        "Examples:\n  nvmetrace report nvmetrace.ntr\n  nvmetrace report --detail host.ntr "
        "target.ntr\n  nvmetrace report --json host.ntr | jq .\n  nvmetrace report --html "
        "report.html host.ntr target.ntr");
    report->add_option("files", rep.files, "Recordings")->required();
    report->add_flag("--detail", rep.detail, "Every component in path order, with p50/p99");
    report->add_flag("--json", rep.json, "JSON instead of text");
    report
        ->add_option("--html", rep.html,
                     "Write the report with its plots as one self-contained HTML page to FILE")
        ->type_name("FILE");
    report->add_flag("--no-join", rep.no_join,
                     "Report the host's and the target's commands apart, without joining them");
    report->add_flag("--commands", rep.commands,
                     "One JSON line per command (its events' timestamps) instead of the report");

    ExportOptions exo;
    CLI::App* exp = app.add_subcommand(
        "export", "Recordings as a Chrome trace-event JSON file for ui.perfetto.dev");
    exp->add_option("files", exo.files, "Recordings (a host's and a target's are joined)")
        ->required();
    exp->add_option("-o,--output", exo.output,
                    "Trace file (default: <first recording>.trace.json here; - for stdout)");
    exp->add_flag("--no-join", exo.no_join,
                  "Export the host's and the target's commands apart, without joining them");
    exp->add_option("--join-window", exo.join_window_s,
                    "Seconds a command waits for its partner on the other side (2)");

    ScriptOptions scr;
    double scr_from = 0, scr_to = 0;
    CLI::App* script = app.add_subcommand(
        "script",
        "Every record, one line each in time order, with its CPU (as perf script, blkparse)");
    script->footer(
        "Examples:\n  nvmetrace script nvmetrace.ntr\n  nvmetrace script -e "
        "nvme_setup,nvme_complete -d nvme0n1 --from 2 --to 3 --json h.ntr\n  nvmetrace "
        "script --cpu 0-3,8 h.ntr");
    script->add_option("files", scr.files, "Recordings")->required();
    script->add_option("-e,--event", scr.events, "Only these events (bio_queue,nvme_setup,...)")
        ->delimiter(',');
    script->add_option("-d,--device", scr.devices, "Only these devices (nvme0n1, a target's)")
        ->delimiter(',');
    CLI::Option* from_opt =
        script->add_option("--from", scr_from, "From this many seconds after the start");
    CLI::Option* to_opt =
        script->add_option("--to", scr_to, "Up to this many seconds after the start");
    std::string scr_cpus;
    CLI::Option* cpu_opt =
        script->add_option("--cpu", scr_cpus,
                           "Only records recorded on these CPUs (0-3,8; records of an unknown "
                           "CPU are left out)");
    script->add_flag("--json", scr.json, "One JSON object a line");

    CompareOptions cmp;
    std::vector<std::string> cmp_runs;
    double min_change_pct = cmp.rule.min_change * 100, min_share_pct = cmp.rule.min_share * 100;
    CLI::App* compare = app.add_subcommand(
        "compare", "Two runs side by side: per group and stage, A, B, delta, ratio, what moved");
    compare->footer(
        "Examples:\n  nvmetrace compare before.ntr after.ntr\n  nvmetrace compare --a h.ntr t.ntr "
        "--b h2.ntr t2.ntr --json\n  nvmetrace compare --exit-code base.ntr new.ntr || echo "
        "moved\n\nExit status: 0 success, 1 error, 2 usage error; with --exit-code 0 nothing "
        "moved,\n1 a stage or end to end moved, 2 usage error, 3 error.");
    compare->add_option("runs", cmp_runs, "A.ntr B.ntr: one recording per run");
    compare->add_option("--a", cmp.a, "Recordings of run A (e.g. its host's and target's)");
    compare->add_option("--b", cmp.b, "Recordings of run B");
    compare->add_flag("--json", cmp.json, "JSON instead of text");
    compare->add_flag("--exit-code", cmp.exit_code,
                      "Exit 1 when a stage or end to end moved, 0 when nothing did (errors: 3)");
    compare->add_option("--confidence", cmp.rule.confidence,
                        "Two-sided confidence that a difference of means is not noise (0.999)");
    compare->add_option("--min-change", min_change_pct,
                        "Smallest change that counts, % of A's stage mean (10)");
    compare->add_option("--min-share", min_share_pct,
                        "Smallest change that counts, % of A's end to end (2)");
    report->add_option("--join-window", rep.join_window_s,
                       "Seconds a command waits for its partner on the other side (2)");
    BenchOptions bo;
    bo.command_line.assign(argv, argv + argc);
    bo.buf.clear();  // malloc, or pool for --premap-proof
    CLI::App* bench = app.add_subcommand(
        "bench", "I/O benchmark through the block device (O_DIRECT) or NVMe passthrough (/dev/ng)");
    bench->footer(
        "Examples:\n  nvmetrace bench /dev/ng0n1 --rw randread --bs 4k --iodepth 32 --runtime 10\n "
        " nvmetrace bench /dev/nvme0n1 --profile kv -o kv.csv --record");
    bench->add_option("device", bo.device, "/dev/nvmeXnY (block path) or /dev/ngXnY (passthrough)")
        ->required();
    bench->add_option("-p,--pattern,--rw", bo.pattern, "randread, randwrite, read or write")
        ->capture_default_str();
    bench->add_option("-b,--size,--bs", bo.size, "I/O size (512, 4k, 2m)")->capture_default_str();
    bench->add_option("-q,--qd,--iodepth", bo.qd, "Queue depth per thread")->capture_default_str();
    bench->add_option("-j,--threads,--numjobs", bo.threads, "Threads, one io_uring each")
        ->capture_default_str();
    bench->add_option("-d,--duration,--runtime", bo.duration_s, "Measured seconds per cell")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    bench->add_option("-n,--ios", bo.ios, "Measure this many I/Os instead of a duration");
    bench->add_option("--ramp", bo.ramp_s, "Unmeasured seconds at the start of every cell")
        ->check(CLI::NonNegativeNumber);
    bench->add_option("--warmup", bo.warmup_s, "Unmeasured seconds once before the first cell")
        ->check(CLI::NonNegativeNumber);
    bench->add_option("--buf", bo.buf, "Buffers: malloc, hugepage or pool (the module's)");
    bench->add_flag("--fixed", bo.fixed, "Register malloc/hugepage buffers as fixed buffers");
    bench->add_option("--cpus", bo.cpus, "Pin thread i to the i-th CPU of this list (0-3,6)");
    bench->add_option("--target-cpus", bo.target_cpus,
                      "CPUs left out of busy_cores (the target's cores)");
    bench->add_option("--offset", bo.offset, "First byte of the device to use");
    bench->add_option("--span", bo.span, "Bytes of the device to use (default: to the end)");
    bench->add_option("--seed", bo.seed, "Seed of the random offsets");
    bench->add_option("--profile", bo.profile, "Matrix: aisio or kv")
        ->check(CLI::IsMember({"aisio", "kv"}));
    bench->add_option("--sizes", bo.sizes, "Override the profile's sizes (4k,64k)");
    bench->add_option("--qds", bo.qds, "Override the profile's queue depths (1,16)");
    bench->add_option("--thread-list", bo.thread_list, "Override the profile's thread counts");
    bench->add_option("--reps", bo.reps, "Repetitions of every cell")->capture_default_str();
    bench->add_option("-o,--output", bo.output, "CSV file (a .meta sidecar is written next to it)");
    bench->add_flag("--record", bo.record, "Store an nvmetrace recording per cell (needs -o)");
    bench->add_option("--record-sample", bo.record_sample, "Record 1 of N commands")
        ->check(CLI::PositiveNumber);
    bench->add_flag("--premap-proof", bo.premap_proof,
                    "One passthrough read a block over max_hw_sectors_kb, from a pool buffer");
    bench->add_flag("--json", bo.json, "Print the cells as JSON instead of text");
    bench->add_option("--spdk-perf", bo.spdk_perf,
                      "Control arm: run every cell through this spdk_nvme_perf too");
    bench->add_option("--spdk-trid", bo.spdk_trid,
                      "Its transport ID (default: the device's controller, from sysfs)");
    bench->add_option("--spdk-args", bo.spdk_args,
                      "Its own arguments first, e.g. \"--no-huge -s 256\"");

    try {
        app.parse(parse_argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // CLI11 reports an unknown command as a missing subcommand.
        const std::vector<std::string> extra = app.remaining();
        if (!extra.empty() && app.get_subcommands().empty())
            fmt::print(stderr, "nvmetrace: unknown {} '{}' (see nvmetrace --help)\n",
                       extra.front().starts_with('-') ? "option" : "command", extra.front());
        else
            fmt::print(stderr, "nvmetrace: {} (see nvmetrace --help)\n", e.what());
        return kExitUsage;
    }

    if (status->parsed())
        return cmd_status(json);
    if (record->parsed()) {
        if (rec_separator && rec.command.empty()) {
            fmt::print(stderr,
                       "nvmetrace: record: no command after --: give the workload to record "
                       "while it runs (record -r host -- fio job.fio)\n");
            return kExitUsage;
        }
        return run_record(rec);
    }
    if (probe->parsed())
        return run_probe(probe_opts);
    if (pool->parsed())
        return cmd_pool(pool_json_out, pool_dev);
    if (dmacost->parsed())
        return cmd_dmacost(dma_json, dma_dev, dma_iters);
    if (stop->parsed()) {
        GenlClient client;
        client.stop();
        return 0;
    }
    if (report->parsed())
        return run_report(rep);
    if (exp->parsed())
        return run_export(exo);
    if (script->parsed()) {
        if (from_opt->count())
            scr.from_s = scr_from;
        if (to_opt->count())
            scr.to_s = scr_to;
        if (cpu_opt->count())
            scr.cpus = parse_cpu_list(scr_cpus);
        return run_script(scr);
    }
    if (compare->parsed()) {
        if (cmp.exit_code) {
            // 1 means "moved" here: an error must not look like it
            try {
                return run_compare_command(cmp, cmp_runs, min_change_pct, min_share_pct);
            } catch (const std::exception& e) {
                fmt::print(stderr, "nvmetrace: {}\n", e.what());
                return kCompareError;
            }
        }
        return run_compare_command(cmp, cmp_runs, min_change_pct, min_share_pct);
    }
    if (bench->parsed())
        return run_bench(bo);
    return kExitUsage;  // unreachable: require_subcommand(1)
}

}  // namespace
}  // namespace nvmetrace

int main(int argc, char** argv) {
    try {
        return nvmetrace::run(argc, argv);
    } catch (const std::exception& e) {
        fmt::print(stderr, "nvmetrace: {}\n", e.what());
        return nvmetrace::kExitError;
    }
}
