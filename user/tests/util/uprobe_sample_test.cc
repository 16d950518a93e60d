// Uprobe events through tracefs and their samples through perf, on a real
// program (uprobe_target): what record --spdk-host -t rdma is made of.  Needs
// root and a kernel with uprobe events; said and skipped without them.
#include "spdk/rdma_host_probes.h"
#include "tempdir.h"
#include "util/child_process.h"
#include "util/clock.h"
#include "util/elf.h"
#include "util/error.h"
#include "util/perf_samples.h"
#include "util/uprobe_events.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>

#include <fmt/core.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

std::optional<std::string> why_not() {
    if (geteuid() != 0)
        return "uprobe events need root";
    try {
        UprobeEvents probe(fmt::format("nvmetrace_check_{}", getpid()));
    } catch (const Error& e) {
        return e.what();
    }
    return std::nullopt;
}

TEST(UprobeSamples, EveryCallOfBothThreadsWithItsFieldsInTimeOrder) {
    if (const auto why = why_not())
        GTEST_SKIP() << *why;
    const std::string prog = NVMETRACE_UPROBE_TARGET;
    const auto off = elf_function_offset(prog, "nvmetrace_uprobe_target");
    ASSERT_TRUE(off.has_value());
    UprobeEvents events(fmt::format("nvmetrace_test_{}", getpid()));
    // the item's fields through its pointer, as the SPDK probes read the request's
    const auto ev = events.add("target", prog, *off,
                               "item=%di:x64 n=%si:u64 serial=+0(%di):u64 thread=+8(%di):u32 "
                               "magic=+12(%di):u32");
    constexpr uint64_t kCalls = 500;
    std::optional<TracepointSampler> sampler;
    const uint64_t t0 = monotonic_ns();
    ChildProcess child = ChildProcess::start({prog, std::to_string(kCalls)}, -1, [&](pid_t pid) {
        sampler.emplace(pid, std::vector<uint64_t>{ev.id});
    });
    EXPECT_EQ(child.wait(60'000), 0);
    const uint64_t t1 = monotonic_ns();
    std::vector<PerfSample> samples;
    sampler->read(samples);
    EXPECT_EQ(sampler->lost(), 0u);
    ASSERT_EQ(samples.size(), 2 * kCalls);
    std::map<uint32_t, uint64_t> next;  // per thread: the serial expected next
    std::map<uint32_t, uint64_t> last_time;
    std::map<uint32_t, uint32_t> tid_of;
    for (const auto& s : samples) {
        EXPECT_EQ(s.event, 0u);
        EXPECT_EQ(s.pid, static_cast<uint32_t>(child.pid()));
        EXPECT_GE(s.time, t0);
        EXPECT_LE(s.time, t1);
        EXPECT_EQ(trace_field(s.raw, ev.fields.at("n")), kCalls);
        EXPECT_EQ(trace_field(s.raw, ev.fields.at("magic")), 0x5eedu);
        const auto thread = static_cast<uint32_t>(trace_field(s.raw, ev.fields.at("thread")));
        ASSERT_LE(thread, 1u);
        // a thread's calls in order (the rings are per CPU: sorted by time first)
        (void)tid_of.try_emplace(thread, s.tid);
        EXPECT_EQ(tid_of[thread], s.tid);
    }
    std::stable_sort(samples.begin(), samples.end(),
                     [](const PerfSample& a, const PerfSample& b) { return a.time < b.time; });
    for (const auto& s : samples) {
        const auto thread = static_cast<uint32_t>(trace_field(s.raw, ev.fields.at("thread")));
        EXPECT_EQ(trace_field(s.raw, ev.fields.at("serial")), next[thread]++);
        EXPECT_GE(s.time, last_time[thread]);
        last_time[thread] = s.time;
    }
    EXPECT_EQ(next[0], kCalls);
    EXPECT_EQ(next[1], kCalls);
    EXPECT_NE(tid_of[0], tid_of[1]);
}

TEST(UprobeSamples, ARunningProcessFollowedThreadByThread) {
    if (const auto why = why_not())
        GTEST_SKIP() << *why;
    const std::string prog = NVMETRACE_UPROBE_TARGET;
    UprobeEvents events(fmt::format("nvmetrace_test_{}", getpid()));
    const auto ev =
        events.add("target", prog, *elf_function_offset(prog, "nvmetrace_uprobe_target"),
                   "serial=+0(%di):u64 thread=+8(%di):u32");
    test::TempDir dir;
    const std::string fifo = dir / "go";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    constexpr uint64_t kCalls = 300;
    ChildProcess child = ChildProcess::start({prog, std::to_string(kCalls), fifo});
    // both its threads are there (they wait on the FIFO) before the sampler attaches
    const std::string tasks = fmt::format("/proc/{}/task", child.pid());
    for (int i = 0; i < 60'000; i++) {
        if (std::distance(std::filesystem::directory_iterator(tasks),
                          std::filesystem::directory_iterator{}) == 2)
            break;
        usleep(1000);
    }
    ASSERT_EQ(std::distance(std::filesystem::directory_iterator(tasks),
                            std::filesystem::directory_iterator{}),
              2);
    TracepointSampler sampler(child.pid(), {ev.id}, 64, TracepointSampler::Mode::threads);
    std::ofstream(fifo) << "go\n";
    EXPECT_EQ(child.wait(60'000), 0);
    std::vector<PerfSample> samples;
    sampler.read(samples);
    EXPECT_EQ(samples.size(), 2 * kCalls);
    std::map<uint64_t, uint64_t> per_thread;
    for (const auto& s : samples)
        per_thread[trace_field(s.raw, ev.fields.at("thread"))]++;
    EXPECT_EQ(per_thread[0], kCalls);
    EXPECT_EQ(per_thread[1], kCalls);
}

TEST(UprobeSamples, AHitsCostIsMeasuredOnTheProgramItself) {
    if (const auto why = why_not())
        GTEST_SKIP() << *why;
    // every hit of both calibration probes counted (else it throws), with their fetch
    // arguments over memory laid out as SPDK v26.05's, and a trap costs time
    spdk::RdmaHostSites v2605;
    v2605.wr_offset = 24;
    v2605.req_offset = 152;
    v2605.qpair_offset = 160;
    v2605.qid_offset = 8;
    const auto c = spdk::measure_uprobe_cost(v2605);
    ASSERT_TRUE(c.has_value());
    EXPECT_GT(c->submit_ns, 0u);
    EXPECT_GT(c->complete_ns, 0u);
    // and its event is gone (its perf events closed first: an open one keeps it)
    const std::string dir =
        tracefs_dir() + fmt::format("/events/nvmetrace_{}/calibration", getpid());
    EXPECT_NE(access(dir.c_str(), F_OK), 0);
}

TEST(UprobeSamples, TheEventsAreGoneWithTheirOwner) {
    if (const auto why = why_not())
        GTEST_SKIP() << *why;
    const std::string prog = NVMETRACE_UPROBE_TARGET;
    const std::string group = fmt::format("nvmetrace_gone_{}", getpid());
    const std::string dir = tracefs_dir() + "/events/" + group + "/target";
    {
        UprobeEvents events(group);
        events.add("target", prog, *elf_function_offset(prog, "nvmetrace_uprobe_target"),
                   "n=%si:u64");
        EXPECT_EQ(access(dir.c_str(), F_OK), 0);
        // a fetch argument the kernel refuses: its reason said
        try {
            events.add("bad", prog, 0x10, "x=%nosuchreg:u64");
            ADD_FAILURE() << "a bad fetch argument was taken";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("cannot place a uprobe"), std::string::npos);
        }
    }
    EXPECT_NE(access(dir.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace nvmetrace
