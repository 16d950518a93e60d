// `nvmetrace record` and `nvmetrace report`: record sampled commands from the
// module into a file, and analyse recordings.
#pragma once

#include <linux/nvmetrace.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
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

struct StartArgs;
// What fill_layouts() could not find: empty when found (or not needed).
struct LayoutNotes {
    std::string nvmet_error;  // target role: nvmet's layout (the role needs it)
    std::string tcp_error;    // host role: nvme-tcp's layout (its hooks need it)
};
// Private struct offsets from the running kernel's BTF into start.
LayoutNotes fill_layouts(uint32_t role, StartArgs& start);

struct ReportCommandOptions {
    std::vector<std::string> files;
    bool detail = false;
    bool json = false;
    bool commands = false;  // one JSON line per command instead of the report
};

int run_report(const ReportCommandOptions& opts);

// Puts the records drained from the per-CPU rings into one time order.  Each
// ring is in time order; across rings, a record is committed within
// microseconds of its timestamp, so once the newest drain is `window_ns` past
// a timestamp, no older record can still arrive.
class Reorderer {
public:
    explicit Reorderer(uint64_t window_ns) : window_ns_(window_ns) {}

    void add(std::span<const nvmetrace_rec> recs) {
        if (recs.empty())
            return;
        pending_.insert(pending_.end(), recs.begin(), recs.end());
        sorted_ = false;
    }

    // Hands every record older than now - window (all of them with
    // flush_all) to fn, as one span in ts order, and forgets them.
    template <class Fn>
    void release(uint64_t now_ns, bool flush_all, Fn&& fn) {
        if (!sorted_) {
            // stable: records of one ring with equal ts keep their commit order
            std::stable_sort(pending_.begin(), pending_.end(),
                             [](const auto& a, const auto& b) { return a.ts < b.ts; });
            sorted_ = true;
        }
        size_t n = pending_.size();
        if (!flush_all) {
            uint64_t limit = now_ns > window_ns_ ? now_ns - window_ns_ : 0;
            auto it = std::lower_bound(pending_.begin(), pending_.end(), limit,
                                       [](const nvmetrace_rec& r, uint64_t t) { return r.ts < t; });
            n = static_cast<size_t>(it - pending_.begin());
        }
        if (n == 0)
            return;
        fn(std::span<const nvmetrace_rec>(pending_.data(), n));
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    }

    size_t pending() const { return pending_.size(); }

private:
    uint64_t window_ns_;
    std::vector<nvmetrace_rec> pending_;
    bool sorted_ = true;
};

}  // namespace nvmetrace
