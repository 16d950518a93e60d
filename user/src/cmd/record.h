// `nvmetrace record`: record sampled commands from the module into a file.
#pragma once

#include "analysis/assembler.h"
#include "cmd/record_stage.h"
#include "format/recfile.h"
#include "kernel/record_queue.h"
#include "kernel/ring_reader.h"

#include <linux/nvmetrace.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace nvmetrace {

struct RecordOptions {
    std::vector<std::string> roles;  // "host", "target"
    std::string transport;           // "", "tcp", "rdma"
    uint32_t sample = 1;             // 1 of N
    uint64_t seed = 0;
    double duration_s = 0;             // 0: until Ctrl-C
    double interval_s = 0;             // live lines; 0: none
    std::optional<int> zstd_level;     // --zstd; default: recorder_writer_options()
    std::string output;                // recording file; "": kDefaultRecordOutput
    std::vector<std::string> devices;  // host namespaces; empty: all fabrics namespaces
    bool detail = false;               // component table in the summary
    std::string device_node = "/dev/nvmetrace";
    std::vector<std::string> command_line;
    std::vector<std::string> command;  // record -- CMD ARGS: record while it runs
    std::string spdk_target;           // --spdk-target: SPDK's nvmf_tgt (binary, pid, trace)
    std::string spdk_rpc;              // --spdk-rpc: its RPC socket ("": SPDK's default)
    std::string spdk_host;             // --spdk-host: an app on SPDK's NVMe/TCP driver
    int realtime = 0;                  // --realtime: SCHED_FIFO priority of the drain; 0: none
};

// `record [options] -- CMD ARGS...`: the arguments after record's first
// "--" are the command to run, whatever they look like (fio's own options).
// Returns how many of argv come before that "--" (argc when there is none,
// or when the subcommand is not record) and puts the rest in `command`;
// `separator` says whether the "--" was there.
int split_record_command(int argc, char** argv, std::vector<std::string>& command, bool& separator);

// The role when -r is not given, from what the machine has: NVMe-oF
// namespaces (or --dev naming one) make it a host, nvmet subsystems a
// target, both make it both.  `said` gets the line record prints about it.
// Throws Error when the machine has neither.
uint32_t role_from_machine(size_t host_namespaces, bool devices_named, size_t nvmet_subsystems,
                           std::string& said);

// --realtime PRIO: the calling thread (record's drain) at SCHED_FIFO PRIO,
// with SCHED_RESET_ON_FORK so that threads and processes it starts are not.
// Throws Error (out of range, not permitted).
void drain_at_realtime(int prio);
// What record says when its rings dropped records: how to lose none.
std::string lost_advice(uint64_t lost, const RecordOptions& opts);

// Records until -d, Ctrl-C or, with opts.command, that command's exit.
// Returns 0, or with a command its status as a shell gives it (its exit
// code, or 128 + the signal that ended it).
int run_record(const RecordOptions& opts);
// Ctrl-C and SIGTERM end a recording cleanly: once install_record_signals()
// has run, record_stop_requested() says whether one came.
void install_record_signals();
bool record_stop_requested();
// record --spdk-target / --spdk-host: SPDK's target, or an app on SPDK's
// NVMe/TCP driver, from its trace ring (cmd/record_spdk.cc).
int run_record_spdk(const RecordOptions& opts);

// The recording's name when -o is not given: in the current folder, as
// perf record's perf.data.
inline constexpr const char* kDefaultRecordOutput = "nvmetrace.ntr";

// Where a recording goes, and where the file that was there went.
struct RecordOutput {
    std::string path;       // the file to write
    std::string kept_as;    // path + ".old" when a file was there; else ""
    bool replaced = false;  // kept_as replaced an older .old
};
// Picks the file (`output`, or kDefaultRecordOutput when empty) and moves a
// regular file of that name out of the way to NAME.old (an older NAME.old
// is replaced), as perf record does with perf.data: a recording is never
// overwritten by the next one.  Throws Error when `output` is a folder or the
// rename fails.
RecordOutput prepare_record_output(const std::string& output);
// Throws the Error prepare_record_output() would for a folder, moving nothing.
void check_record_output(const std::string& output);
// What record says on stderr about it ("" when nothing was moved).
std::string record_output_note(const RecordOutput& out);

struct RecordingWriterOptions;
// How `record` writes its file when sampling 1 of `sample` commands, with
// blocks compressed at zstd_level (0: stored raw) if one is given.
RecordingWriterOptions recorder_writer_options(uint32_t sample,
                                               std::optional<int> zstd_level = std::nullopt);

struct StartArgs;
// What fill_layouts() could not find: empty when found (or not needed).
struct LayoutNotes {
    std::string host_error;  // host role: nvme-core's tracepoints differ (the role needs them)
    std::string host_tracepoints;    // how many of nvme-core's were checked against BTF
    std::string target_tracepoints;  // the same for nvmet's
    std::string nvmet_error;  // target role: nvmet's layout and tracepoints (the role needs them)
    std::string tcp_error;    // host role: nvme-tcp's layout (its hooks need it)
    std::string rdma_error;   // host role: nvme-rdma's layout (its hooks need it)
    std::string rdmat_error;  // target role: nvmet-rdma's layout (its hooks need it)
    std::string tcpt_error;   // target role: nvmet-tcp's layout (its hooks need it)
    std::string aio_error;    // host role: the aio iocb's layout (AIO_REAP needs it)
};
// Private struct offsets from the running kernel's BTF into start.
LayoutNotes fill_layouts(uint32_t role, StartArgs& start);
// One transport module's layout (nvme_tcp, nvme_rdma, nvmet_tcp or
// nvmet_rdma) and its BTF identity into start: "" when found, else why not.
std::string transport_layout(std::string_view module, StartArgs& start);
// The transport module a hook is in, by its function's name ("nvme_rdma"
// for nvme_rdma_recv_done), or "" for the block, nvme-core and nvmet hooks.
std::string_view transport_module(std::string_view hook);

// Why a hook is NVMETRACE_HOOK_STALE: "layout of the reloaded nvme_tcp
// differs from START's: restart the recording".
std::string stale_note(std::string_view hook);

// Puts the records drained from the per-CPU rings into one time order.  Each
// ring is in time order (a record's timestamp is taken inside its
// reservation); across rings, a record is committed within microseconds of its
// timestamp, so once the newest drain is `window_ns` past a timestamp, no
// older record can still arrive.  Release merges the rings' streams, never
// sorting: with one ring to release from (one busy CPU) its records go out
// from where they were drained to, else they are merged into one array.
class Reorderer {
public:
    explicit Reorderer(uint64_t window_ns) : window_ns_(window_ns) {}

    // recs: records drained from ring `cpu`, continuing its earlier ones.
    void add(uint32_t cpu, std::span<const nvmetrace_rec> recs) {
        if (!recs.empty())
            stream(cpu).push_back(recs);
    }
    // Ring `cpu`'s queue, to drain into directly (RingReader::drain_into).
    RecordQueue& stream(uint32_t cpu) {
        if (cpu >= streams_.size())
            streams_.resize(cpu + 1);
        return streams_[cpu];
    }

    // Hands every record older than now - window (all of them with
    // flush_all) to fn, in ts order, in one or more spans, and forgets them.
    // fn(recs), or fn(recs, runs) to be told which ring (CPU) each record
    // came from: runs (CpuRun) cover recs in order.
    template <class Fn>
    void release(uint64_t now_ns, bool flush_all, Fn&& fn) {
        constexpr bool with_cpus =
            std::is_invocable_v<Fn&, std::span<const nvmetrace_rec>, std::span<const CpuRun>>;
        const uint64_t limit =
            flush_all ? UINT64_MAX : (now_ns > window_ns_ ? now_ns - window_ns_ : 0);
        RecordQueue* only = nullptr;
        size_t busy = 0;
        for (auto& st : streams_) {
            if (!st.empty() && st.front().ts < limit) {
                only = &st;
                busy++;
            }
        }
        if (busy == 1) {
            // in order already: hand them on in place
            size_t lo = 0, hi = only->size();
            if ((*only)[hi - 1].ts >= limit) {
                while (lo < hi) {
                    const size_t mid = lo + (hi - lo) / 2;
                    if ((*only)[mid].ts < limit)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
            } else {
                lo = hi;
            }
            const auto cpu = static_cast<uint32_t>(only - streams_.data());
            for (size_t n = lo; n > 0;) {
                std::span<const nvmetrace_rec> piece = only->front_span(n);
                if constexpr (with_cpus) {
                    const CpuRun run{cpu, static_cast<uint32_t>(piece.size())};
                    fn(piece, std::span<const CpuRun>(&run, 1));
                } else {
                    fn(piece);
                }
                only->pop_front(piece.size());
                n -= piece.size();
            }
            return;
        }
        out_.clear();
        runs_.clear();
        for (; busy > 1;) {
            RecordQueue* best = nullptr;
            for (auto& st : streams_) {
                if (!st.empty() && st.front().ts < limit &&
                    (!best || st.front().ts < best->front().ts))
                    best = &st;
            }
            if (!best)
                break;
            out_.push_back(best->front());
            best->pop_front(1);
            if constexpr (with_cpus) {
                // one compare a record; a new run only where the CPU changes
                add_cpu_run(runs_, {static_cast<uint32_t>(best - streams_.data()), 1});
            }
        }
        if (out_.empty())
            return;
        if constexpr (with_cpus)
            fn(std::span<const nvmetrace_rec>(out_.data(), out_.size()),
               std::span<const CpuRun>(runs_));
        else
            fn(std::span<const nvmetrace_rec>(out_.data(), out_.size()));
    }

    size_t pending() const {
        size_t n = 0;
        for (const auto& st : streams_)
            n += st.size();
        return n;
    }

private:
    uint64_t window_ns_;
    std::vector<RecordQueue> streams_;
    std::vector<nvmetrace_rec> out_;
    std::vector<CpuRun> runs_;  // out_'s CPUs
};

// What `record` does with the rings each time it wakes up: drains them into
// the Reorderer, and hands what it releases, in time order, to the file
// (writer: records stored raw are written by the drain thread itself), to the
// second stage (stage: compression, live lines; see record_stage.h) and, for
// record_bench, which measures the whole cost on one thread, to an Assembler.
class RecordLoop {
public:
    // 50 ms: records are committed within microseconds of their timestamps.
    static constexpr uint64_t kWindowNs = 50'000'000;

    RecordLoop(RingReader& rings, RecordingWriter* writer, Assembler* live,
               RecordStage* stage = nullptr, uint64_t window_ns = kWindowNs)
        : rings_(rings), writer_(writer), live_(live), stage_(stage), reorder_(window_ns) {}

    // Drains every ring; returns the records drained.
    uint64_t drain() {
        return rings_.drain_into(
            [this](uint32_t cpu) -> RecordQueue& { return reorder_.stream(cpu); });
    }
    // Hands on what is older than now - window, or everything.
    void release(uint64_t now_ns, bool all) {
        reorder_.release(now_ns, all,
                         [this](std::span<const nvmetrace_rec> recs, std::span<const CpuRun> runs) {
                             if (writer_)
                                 writer_->append(recs, runs);
                             if (stage_)
                                 stage_->push(recs, runs);
                             if (live_)
                                 for (const auto& r : recs)
                                     live_->push(r);
                         });
    }
    size_t pending() const { return reorder_.pending(); }
    // Once nothing records and the rings are drained: a drop run that ended
    // the recording has no marker in the rings; add the one its control page
    // describes, so that the markers account for every lost record.
    // Returns how many were added.
    size_t close_open_gaps() {
        size_t n = 0;
        for (const RingStats& st : rings_.stats()) {
            if (st.gap_recs == 0)
                continue;
            const nvmetrace_rec m = open_gap_marker(st);
            reorder_.add(st.cpu, std::span(&m, 1));
            n++;
        }
        return n;
    }

private:
    RingReader& rings_;
    RecordingWriter* writer_;
    Assembler* live_;
    RecordStage* stage_;
    Reorderer reorder_;
};

}  // namespace nvmetrace
