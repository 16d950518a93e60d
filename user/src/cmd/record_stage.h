// The recorder's second stage: the work that may fall behind the rings.
//
// `record`'s drain thread only drains the per-CPU rings, puts their records
// in time order and, when records are stored raw, writes them.  Whatever can
// take longer than the rings can wait — compressing blocks, assembling
// commands and computing the live lines — runs here, on a thread of its own,
// fed with copies of the released records.  When this stage falls behind,
// records queue up in memory on the tool's side; the rings keep being drained
// at the same pace, so they do not drop records because of it.
//
// The live analysis gives up (and says so) when it falls more than
// live_backlog records behind: the recording is then summarised from the file
// once it stops, as it is without live lines.  The file itself never gives
// up: every record handed to push() reaches the writer, in order.
//
// Threads: push() and submit() are called by the drain thread only; the
// writer and the live callbacks are called by the stage's thread only, from
// its start until finish() returns.
#pragma once

#include "format/recfile.h"

#include <linux/nvmetrace.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace nvmetrace {

class RecordStage {
public:
    struct Options {
        // Where the records go, compressed as the writer is set up to; nullptr
        // when the drain thread writes them itself.
        RecordingWriter* writer = nullptr;
        // The live analysis: records in time order, then a tick with the
        // drain's clock after each drain's records.  Unset: no live lines.
        std::function<void(std::span<const nvmetrace_rec>)> live;
        std::function<void(uint64_t now_ns)> tick;
        // Devices that appeared or went (push_devices()), before the records
        // of the same batch: the live analysis's device table grows here.
        // The writer, if any, gets their DEVICES block first.
        std::function<void(const DeviceChange&)> devices = {};
        // How far (records queued, not yet handled) the live analysis may
        // fall behind before it gives up.
        size_t live_backlog = size_t{1} << 23;
    };

    explicit RecordStage(Options opts);
    // Without finish(): the stage is stopped and what is queued is dropped.
    ~RecordStage();
    RecordStage(const RecordStage&) = delete;
    RecordStage& operator=(const RecordStage&) = delete;

    // Drain thread: adds records (released in time order) to the next batch.
    // Their CPUs are not known.
    void push(std::span<const nvmetrace_rec> recs) {
        const CpuRun run{kCpuUnknown, static_cast<uint32_t>(recs.size())};
        push(recs, std::span(&run, 1));
    }
    // The same, with the CPUs they were recorded on (runs cover recs, in
    // order), which reach the writer with them.
    void push(std::span<const nvmetrace_rec> recs, std::span<const CpuRun> runs) {
        next_.insert(next_.end(), recs.begin(), recs.end());
        for (const CpuRun& r : runs)
            add_cpu_run(next_runs_, r);
    }
    // Drain thread: a change of the devices, handled before the next batch's
    // records.
    void push_devices(DeviceChange c) { next_devices_.push_back(std::move(c)); }
    // Drain thread: hands the batch on, with the drain's clock for the tick.
    // Rethrows what failed on the stage's thread (a write error).
    void submit(uint64_t now_ns);
    // Drain thread: rethrows what failed on the stage's thread, if anything.
    void check() const;
    // Handles everything submitted, stops the thread; rethrows its error.
    void finish();

    // Whether the live analysis saw every record (read after finish()).
    [[nodiscard]] bool live_complete() const { return live_ok_.load(); }
    // The most records that were ever queued for the stage at once.
    [[nodiscard]] uint64_t peak_backlog() const { return peak_.load(); }

private:
    struct Batch {
        std::vector<nvmetrace_rec> recs;
        std::vector<CpuRun> runs;  // recs' CPUs
        std::vector<DeviceChange> devices;
        uint64_t now_ns = 0;
    };
    void run();
    void handle(Batch& b);

    Options opts_;
    std::vector<nvmetrace_rec> next_;         // drain thread only
    std::vector<CpuRun> next_runs_;           // drain thread only: next_'s CPUs
    std::vector<DeviceChange> next_devices_;  // drain thread only

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Batch> queue_;                        // under mu_
    std::vector<std::vector<nvmetrace_rec>> spare_;  // under mu_: emptied buffers
    std::vector<std::vector<CpuRun>> spare_runs_;    // under mu_: likewise for runs
    bool done_ = false;                              // under mu_
    std::exception_ptr error_;                       // under mu_
    std::atomic<bool> failed_{false};
    std::atomic<uint64_t> backlog_{0};  // records queued or being handled
    std::atomic<uint64_t> peak_{0};
    std::atomic<bool> live_ok_{true};
    std::thread thread_;
};

}  // namespace nvmetrace
