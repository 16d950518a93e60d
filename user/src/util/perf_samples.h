// Tracepoint samples of one program through perf_event_open: each event
// opened on the task and the threads it starts (inherit), once per online
// CPU, enabled when the task execs, its samples (time on CLOCK_MONOTONIC,
// raw fields) read from one mmap ring a CPU.  What `record --spdk-host -t
// rdma` reads its uprobes' hits with.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nvmetrace {

struct PerfSample {
    size_t event = 0;  // index into the ids the sampler was made with
    uint32_t pid = 0, tid = 0, cpu = 0;
    uint64_t time = 0;  // CLOCK_MONOTONIC ns
    std::vector<uint8_t> raw;
};

// The online CPUs from a sysfs list ("0-3,8,10-11").
std::vector<int> parse_cpu_list(std::string_view list);

// One sample record's body (after its perf_event_header) with sample_type
// IDENTIFIER | TID | TIME | CPU | RAW; false when it is too short.
bool parse_perf_sample(const uint8_t* p, size_t n, uint64_t& id, PerfSample& out);

class TracepointSampler {
public:
    enum class Mode {
        from_exec,  // a child that has not exec'd yet: per CPU, its threads to come, from its exec
        now,        // the task and the threads it starts, per CPU, at once
        threads,    // each thread a running process has now (not those it starts), at once
    };
    // Opens tracepoints `ids` for `pid`.  Throws Error with perf_event_open's
    // reason.
    TracepointSampler(pid_t pid, const std::vector<uint64_t>& ids, size_t pages = 256,
                      Mode mode = Mode::from_exec);
    ~TracepointSampler();
    TracepointSampler(const TracepointSampler&) = delete;
    TracepointSampler& operator=(const TracepointSampler&) = delete;

    // The samples written since the last call, appended to `out` (each
    // CPU's in its order; not merged across CPUs).
    void read(std::vector<PerfSample>& out);
    // Samples the kernel dropped because a ring was full.
    uint64_t lost() const { return lost_; }

private:
    struct Ring {
        int fd = -1;
        void* base = nullptr;
    };
    void drain(Ring& r, std::vector<PerfSample>& out);
    void close_all();

    std::vector<int> fds_;
    std::vector<Ring> rings_;
    std::unordered_map<uint64_t, size_t> event_of_;  // perf's sample id -> index into ids
    size_t page_ = 0, pages_ = 0;
    uint64_t lost_ = 0;
    std::vector<uint8_t> scratch_;
};

}  // namespace nvmetrace
