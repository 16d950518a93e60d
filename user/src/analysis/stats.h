// Statistics of finished commands, per group (op, size, device).
//
// Stats takes the Assembler's commands one at a time and keeps, per group,
// fixed-size accumulators: exact sums (so means, and the sum of stages, are
// exact to the nanosecond) and log-linear histograms for percentiles (bounded
// relative error, see Histogram).  Memory does not grow with the number of
// commands.  summary() turns them into the numbers the report prints;
// interval snapshots (every `interval_ns`) feed the live lines.
#pragma once

#include "analysis/components.h"

#include <stdint.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace nvmetrace {

// Counts of values in log-linear buckets: exact below 2^SubBits ns, then
// 2^SubBits buckets per power of two.  A quantile is the midpoint of the
// bucket holding the nearest-rank value, clamped to the observed min and max,
// so it is within kMaxRelativeError of the exact nearest-rank value.  Memory
// grows only with the largest value seen (2^SubBits counters per power of two).
template <int SubBits>
class LogHistogram {
public:
    static constexpr int kSubBits = SubBits;
    static constexpr double kMaxRelativeError = 1.0 / (2 << kSubBits);

    void add(int64_t v) {  // negative values count as 0
        const uint64_t u = v < 0 ? 0 : static_cast<uint64_t>(v);
        const size_t b = bucket(u);
        if (b >= counts_.size())
            counts_.resize(b + 1);
        counts_[b]++;
        min_ = n_ ? std::min(min_, v) : v;
        max_ = n_ ? std::max(max_, v) : v;
        n_++;
    }
    void merge(const LogHistogram& o) {
        if (!o.n_)
            return;
        if (o.counts_.size() > counts_.size())
            counts_.resize(o.counts_.size());
        for (size_t i = 0; i < o.counts_.size(); i++)
            counts_[i] += o.counts_[i];
        min_ = n_ ? std::min(min_, o.min_) : o.min_;
        max_ = n_ ? std::max(max_, o.max_) : o.max_;
        n_ += o.n_;
    }
    void clear() {
        std::fill(counts_.begin(), counts_.end(), 0);
        n_ = 0;
        min_ = max_ = 0;
    }

    uint64_t count() const { return n_; }
    int64_t min() const { return min_; }
    int64_t max() const { return max_; }
    // Nearest rank: the smallest value with at least ceil(q * count) values at
    // or below it.  0 when empty.
    double quantile(double q) const {
        if (!n_)
            return 0;
        const uint64_t rank = nearest_rank(q, n_);
        uint64_t seen = 0;
        for (size_t b = 0; b < counts_.size(); b++) {
            seen += counts_[b];
            if (seen >= rank) {
                const double mid = static_cast<double>(bucket_low(b)) +
                                   static_cast<double>(bucket_width(b) - 1) / 2.0;
                return std::clamp(mid, static_cast<double>(min_), static_cast<double>(max_));
            }
        }
        return static_cast<double>(max_);
    }
    // fn(low, count) for every non-empty bucket, in value order (for rank tests:
    // two histograms share their buckets).
    template <class Fn>
    void for_each_bucket(Fn&& fn) const {
        for (size_t b = 0; b < counts_.size(); b++)
            if (counts_[b])
                fn(bucket_low(b), counts_[b]);
    }

    // The bucket of a value, and the smallest value of a bucket.
    static size_t bucket(uint64_t v) {
        if (v < kSub)
            return static_cast<size_t>(v);
        const int e = 63 - std::countl_zero(v);  // >= kSubBits
        const int shift = e - kSubBits;
        return static_cast<size_t>((shift + 1) * kSub + ((v >> shift) - kSub));
    }
    static uint64_t bucket_low(size_t b) {
        if (b < kSub)
            return b;
        const uint64_t k = b / kSub, m = b % kSub;
        return (kSub + m) << (k - 1);
    }
    static uint64_t bucket_width(size_t b) { return b < kSub ? 1 : uint64_t{1} << (b / kSub - 1); }

    // ceil(q * n), at least 1 and at most n, without 0.99 * 100 becoming
    // 100.000...01 and then 101.
    static uint64_t nearest_rank(double q, uint64_t n) {
        const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(n) - 1e-9));
        return std::clamp<uint64_t>(rank, 1, n);
    }

private:
    static constexpr uint64_t kSub = uint64_t{1} << kSubBits;

    std::vector<uint64_t> counts_;
    uint64_t n_ = 0;
    int64_t min_ = 0, max_ = 0;
};

// The report's percentiles: within 0.049 % (about 8 KiB per power of two above 1 us).
using Histogram = LogHistogram<10>;
// Per-queue percentiles and the tail's bins: within 1.6 % (32 buckets per power of two).
using CoarseHistogram = LogHistogram<5>;

// A sum of durations: 128 bits, exact, and no overflow however many there are
// (each is below 2^61 in magnitude: kMaxRecordTs).
__extension__ typedef __int128 DurationSum;

// Sum, count and histogram of one duration.
struct Accumulator {
    uint64_t n = 0;
    DurationSum sum = 0;  // ns; exact
    int64_t min = INT64_MAX;
    uint64_t negative = 0;  // values below 0: events out of causal order
    Histogram hist;

    void add(int64_t v) {
        n++;
        sum += v;
        min = std::min(min, v);
        negative += v < 0;
        hist.add(v);
    }
    double mean_us() const { return n ? static_cast<double>(sum) / n / 1e3 : 0.0; }
};

// ----------------------------------------------------------------- summaries

struct StageSummary {
    std::string name;
    StageColumn column;
    bool not_recorded = false;  // the target's side is inside, unrecorded
    bool merged = false;        // several stages: a boundary record is missing
    double mean_us = 0;
    double share = 0;   // of the end-to-end mean, 0..1
    double avg_qd = 0;  // commands in this stage on average (Little's law)
    double sd_us = 0;   // standard deviation over the group's commands
    Histogram hist;     // the per-command times (compare's rank test)
    std::string id{};   // stable (stage_id()): what JSON and compare key on
};

struct ComponentSummary {
    std::string name;
    int depth = 0;  // 1: a detail inside the row above
    bool merged = false;
    uint64_t n = 0;
    double mean_us = 0, avg_qd = 0, p50_us = 0, p99_us = 0;
    double min_us = 0;      // the smallest of one command
    uint64_t negative = 0;  // commands for which it came out negative
    std::string id{};       // stable (component_id())
};

// Where a group's tail comes from: the commands clearly above a high
// percentile of the end to end, and how far each stage and component of
// theirs is from that stage's or component's median over all the group's
// commands.  The commands are taken by bins (CoarseHistogram's buckets of the
// end to end): those of the bins above the bin that holds the percentile's
// command, so every one of them is above the percentile, and those above it
// by less than the bin's width (3.1 % at most) are left out; `n` and
// `threshold_us` say exactly which commands the tail holds.
struct TailRow {
    std::string name;
    std::string id{};
    double p50_us = 0;        // median over all the group's commands
    double tail_mean_us = 0;  // mean over the tail's commands
    double beyond_us = 0;     // tail_mean_us - p50_us
    double share = 0;         // of the sum of beyond_us over the rows, 0..1 (may be < 0)
};

struct TailSummary {
    double q = 0;             // 0.99, 0.999
    double quantile_us = 0;   // the group's end-to-end quantile q
    double threshold_us = 0;  // the tail: commands at or above this end to end
    uint64_t n = 0;           // commands in the tail; 0: none clearly above the quantile
    double fraction = 0;      // n / the group's commands
    double mean_us = 0;       // their end-to-end mean
    double p50_us = 0;        // the group's end-to-end median
    std::vector<TailRow> stages;
    std::vector<TailRow> components;  // depth-0, path order (the seam left out)
};

// One NVMe queue of a group: host commands by their controller and queue id
// (a joined command's target side is on the same queue of the same
// controller), target commands by theirs.
struct QueueSummary {
    uint16_t cntlid = 0;  // 0: unknown
    uint16_t qid = 0;
    uint64_t n = 0;
    double mean_us = 0, p99_us = 0;  // end to end; p99 within CoarseHistogram's error
};

struct GroupSummary {
    size_t id = 0;      // the group's IntervalRow::group (not in the JSON)
    std::string label;  // "read 4KiB nvme1n1", + " (no nvme_setup_cmd)" if merged
    Op op = Op::read;
    std::string size_label;  // "4KiB", or "8 blocks" when the block size is unknown
    uint64_t size = 0;
    std::string device;
    bool passthru = false;     // passthrough commands (NVMe generic char device): no bio
    bool resent = false;       // host: their bios failed over on an earlier request first
    bool spdk_target = false;  // their target side is SPDK's: its stages say so
    View view = View::host_only;
    std::vector<std::string> missing;  // hooks with no record for these commands
    Span span;                         // what its end to end runs from and to
    // io_uring, CQEs taken from the mapped ring (span.reap_ring): the end to end
    // ends where the kernel saw each taken (the task's next io_uring_enter()
    // entry); user space took it within this much before (after its last return)
    double reap_window_mean_us = 0, reap_window_max_us = 0;
    uint64_t n = 0;          // sampled commands
    double rate = 0;         // estimated commands/s (n * N / duration)
    double bytes_per_s = 0;  // estimated
    double mean_us = 0, p50_us = 0, p99_us = 0, p999_us = 0;
    double avg_qd = 0;  // end to end
    double sd_us = 0;   // of the end to end
    Histogram hist;     // of the end to end
    std::vector<StageSummary> stages;
    std::vector<ComponentSummary> components;  // path order, then "end to end"
    // p99 and p99.9 where the group has enough commands for one (1 / (1 - q))
    std::vector<TailSummary> tails;
    std::vector<QueueSummary> queues;  // by controller, then queue; those with a queue id
};

struct OpThroughput {
    Op op = Op::read;
    double iops = 0;
    double bytes_per_s = 0;
    bool bytes_unknown = false;  // some of its commands' sizes are in blocks of no known size
};

struct Summary {
    double duration_s = 0;
    uint32_t sample_n = 1;
    std::vector<OpThroughput> throughput;  // per op present; host commands if any
    std::vector<GroupSummary> groups;      // ordered by op, size, device
    uint64_t failed = 0;                   // non-zero status: not in any group
    uint64_t failed_over = 0;              // host requests whose bios failed over (sent again
                               // on a later request, which is reported): not in any group
};

struct IntervalRow {
    size_t group = 0;  // which group (GroupSummary::id): labels need not be unique
    std::string label;
    View view = View::host_only;
    uint64_t n = 0;
    double rate = 0;  // estimated commands/s
    double mean_us = 0, p50_us = 0, p99_us = 0;
    // Share of the mean per live column; marker '*' (not recorded) or '+'
    // (merged with the next stages), or 0.
    std::array<std::optional<double>, kStageColumns> share{};
    std::array<char, kStageColumns> marker{};
};

struct Interval {
    double start_s = 0, end_s = 0;  // since the origin
    std::vector<IntervalRow> rows;  // groups with commands in the interval
};

// ----------------------------------------------------------------- stats

class Stats {
public:
    struct Options {
        uint32_t sample_n = 1;     // 1 of N commands sampled
        uint64_t interval_ns = 0;  // 0: no interval snapshots
        uint64_t origin_ns = 0;    // start of the recording; 0: first command's first event
        std::span<const ComponentDef> table = kComponents;
    };
    using IntervalSink = std::function<void(const Interval&)>;

    Stats(const DeviceTable& devices, Options opts, IntervalSink sink = {});
    ~Stats();
    Stats(const Stats&) = delete;
    Stats& operator=(const Stats&) = delete;

    // The device part of a host group's label (default: the disk's name);
    // with it, host groups are also split per recording and controller
    // (Command::origin, cntlid).  Before the first add().
    void set_device_label(std::function<std::string(const Command&)> fn) {
        device_label_ = std::move(fn);
    }

    // A command from the Assembler.  Commands must come in order of their
    // last event (the Assembler's order) for the intervals to be right.
    void add(const Command& cmd);
    // Closes the intervals that ended at or before `now_ns` (call it on idle
    // ticks so that quiet intervals still produce a snapshot).
    void advance(uint64_t now_ns);
    // Closes the current interval early, at `end_ns` (end of the recording).
    void flush_interval(uint64_t end_ns);

    // Everything added so far.  duration_ns: length of the recording, for the
    // rates; 0 uses first event to last event of the commands seen.
    Summary summary(uint64_t duration_ns = 0) const;

    uint64_t commands() const { return commands_; }

private:
    struct Key {
        Op op;
        bool size_in_blocks;
        uint64_t size;
        Side side;
        uint32_t dev;      // host
        uint16_t origin;   // host: which recording
        uint16_t cntlid;   // host: its controller
        uint32_t nsid;     // target
        SubmitPath path;   // host
        bool reap_unseen;  // host
        bool reap_ring;    // host: io_uring, taken from the mapped CQ ring (seen by its head)
        bool resent;       // host: its bios failed over on an earlier request
        bool spdk;         // its target side is SPDK's
        View view;
        EventMask missing;  // required boundaries on its path with no record
        EventMask present;  // layout_key(): the events on the command's path
        auto tie() const {
            return std::tie(op, size_in_blocks, size, side, dev, origin, cntlid, nsid, path,
                            reap_unseen, reap_ring, resent, spdk, view, missing, present);
        }
        bool operator<(const Key& o) const { return tie() < o.tie(); }
    };
    struct Group;

    Group& group_for(const Command& cmd);
    static std::optional<TailSummary> tail_of(const Group& g, double q);
    void close_interval(uint64_t end_ns);

    const DeviceTable& devices_;
    Options opts_;
    std::function<std::string(const Command&)> device_label_;
    // (present << 8 | view) -> (missing_boundaries, layout_key)
    std::unordered_map<uint64_t, std::pair<EventMask, EventMask>> paths_;
    IntervalSink sink_;
    std::map<Key, std::unique_ptr<Group>> groups_;
    Group* last_ = nullptr;  // most commands go to the group of the one before
    Key last_key_{};
    uint64_t commands_ = 0, failed_ = 0, failed_over_ = 0;
    uint64_t first_ts_ = UINT64_MAX, last_ts_ = 0;
    uint64_t origin_ = 0, interval_start_ = 0;
    bool started_ = false;
};

// "4KiB", "128KiB", "1MiB", "512B", "6000B"
std::string size_label(uint64_t bytes);

}  // namespace nvmetrace
