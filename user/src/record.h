// `nvmetrace record` and `nvmetrace report`: record sampled commands from the
// module into a file, and analyse recordings.
#pragma once

#include "analysis.h"
#include "recfile.h"
#include "ring_reader.h"

#include <linux/nvmetrace.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nvmetrace {

struct RecordOptions {
    std::vector<std::string> roles;  // "host", "target"
    std::string transport;           // "", "tcp", "rdma"
    uint32_t sample = 1;             // 1 of N
    uint64_t seed = 0;
    double duration_s = 0;             // 0: until Ctrl-C
    double interval_s = 0;             // live lines; 0: none
    std::string output;                // recording file
    std::vector<std::string> devices;  // host namespaces; empty: all fabrics namespaces
    bool detail = false;               // component table in the summary
    std::string device_node = "/dev/nvmetrace";
    std::vector<std::string> command_line;
};

int run_record(const RecordOptions& opts);

struct RecordingWriterOptions;
// How `record` writes its file when sampling 1 of `sample` commands.
RecordingWriterOptions recorder_writer_options(uint32_t sample);

struct StartArgs;
// What fill_layouts() could not find: empty when found (or not needed).
struct LayoutNotes {
    std::string nvmet_error;  // target role: nvmet's layout (the role needs it)
    std::string tcp_error;    // host role: nvme-tcp's layout (its hooks need it)
    std::string rdma_error;   // host role: nvme-rdma's layout (its hooks need it)
    std::string rdmat_error;  // target role: nvmet-rdma's layout (its hooks need it)
    std::string tcpt_error;   // target role: nvmet-tcp's layout (its hooks need it)
};
// Private struct offsets from the running kernel's BTF into start.
LayoutNotes fill_layouts(uint32_t role, StartArgs& start);
// The transport module a hook is in, by its function's name ("nvme_rdma"
// for nvme_rdma_recv_done), or "" for the block, nvme-core and nvmet hooks.
std::string_view transport_module(std::string_view hook);

struct ReportCommandOptions {
    std::vector<std::string> files;
    bool detail = false;
    bool json = false;
    bool commands = false;     // one JSON line per command instead of the report
    bool no_join = false;      // host and target reported apart even when both are there
    double join_window_s = 0;  // how long a command waits for its partner; 0: default
};

int run_report(const ReportCommandOptions& opts);

// Puts the records drained from the per-CPU rings into one time order.  Each
// ring is in time order (a record's timestamp is taken inside its
// reservation); across rings, a record is committed within microseconds of its
// timestamp, so once the newest drain is `window_ns` past a timestamp, no
// older record can still arrive.  Release merges the rings' streams: every
// record is copied once in and once out, never sorted.
class Reorderer {
public:
    explicit Reorderer(uint64_t window_ns) : window_ns_(window_ns) {}

    // recs: records drained from ring `cpu`, continuing its earlier ones.
    void add(uint32_t cpu, std::span<const nvmetrace_rec> recs) {
        if (recs.empty())
            return;
        if (cpu >= streams_.size())
            streams_.resize(cpu + 1);
        Stream& st = streams_[cpu];
        st.recs.insert(st.recs.end(), recs.begin(), recs.end());
    }

    // Hands every record older than now - window (all of them with
    // flush_all) to fn, as one span in ts order, and forgets them.
    template <class Fn>
    void release(uint64_t now_ns, bool flush_all, Fn&& fn) {
        const uint64_t limit =
            flush_all ? UINT64_MAX : (now_ns > window_ns_ ? now_ns - window_ns_ : 0);
        out_.clear();
        // One ring with records to release (the common case with one busy
        // CPU): they are in order already, hand them on in one piece.
        Stream* only = nullptr;
        size_t busy = 0;
        for (auto& st : streams_) {
            if (st.head < st.recs.size() && st.recs[st.head].ts < limit) {
                only = &st;
                busy++;
            }
        }
        if (busy == 1) {
            auto first = only->recs.begin() + static_cast<std::ptrdiff_t>(only->head);
            auto end = std::partition_point(
                first, only->recs.end(), [limit](const nvmetrace_rec& r) { return r.ts < limit; });
            out_.assign(first, end);
            only->head += static_cast<size_t>(end - first);
        }
        for (; busy > 1;) {
            Stream* best = nullptr;
            for (auto& st : streams_) {
                if (st.head < st.recs.size() && st.recs[st.head].ts < limit &&
                    (!best || st.recs[st.head].ts < best->recs[best->head].ts))
                    best = &st;
            }
            if (!best)
                break;
            out_.push_back(best->recs[best->head++]);
        }
        for (auto& st : streams_) {
            if (st.head == st.recs.size()) {
                st.recs.clear();
                st.head = 0;
            } else if (st.head > 4096 && st.head * 2 > st.recs.size()) {
                st.recs.erase(st.recs.begin(),
                              st.recs.begin() + static_cast<std::ptrdiff_t>(st.head));
                st.head = 0;
            }
        }
        if (!out_.empty())
            fn(std::span<const nvmetrace_rec>(out_.data(), out_.size()));
    }

    size_t pending() const {
        size_t n = 0;
        for (const auto& st : streams_)
            n += st.recs.size() - st.head;
        return n;
    }

private:
    struct Stream {
        std::vector<nvmetrace_rec> recs;
        size_t head = 0;
    };
    uint64_t window_ns_;
    std::vector<Stream> streams_;
    std::vector<nvmetrace_rec> out_;
};

// What `record` does with the rings each time it wakes up: drains them into
// the Reorderer, and hands what it releases, in time order, to the file and
// (with live lines) to the Assembler.  record_bench drives the same object
// over rings in memory.
class RecordLoop {
public:
    // 50 ms: records are committed within microseconds of their timestamps.
    static constexpr uint64_t kWindowNs = 50'000'000;

    // live: the Assembler of the live lines, or nullptr (records only go to
    // the file; the summary is computed from it once the recording stops).
    RecordLoop(RingReader& rings, RecordingWriter& writer, Assembler* live,
               uint64_t window_ns = kWindowNs)
        : rings_(rings), writer_(writer), live_(live), reorder_(window_ns) {}

    // Drains every ring; returns the records drained.
    uint64_t drain() {
        return rings_.drain(
            [this](uint32_t cpu, std::span<const nvmetrace_rec> recs) { reorder_.add(cpu, recs); });
    }
    // Writes (and assembles) what is older than now - window, or everything.
    void release(uint64_t now_ns, bool all) {
        reorder_.release(now_ns, all, [this](std::span<const nvmetrace_rec> recs) {
            writer_.append(recs);
            if (live_)
                for (const auto& r : recs)
                    live_->push(r);
        });
    }
    size_t pending() const { return reorder_.pending(); }

private:
    RingReader& rings_;
    RecordingWriter& writer_;
    Assembler* live_;
    Reorderer reorder_;
};

}  // namespace nvmetrace
