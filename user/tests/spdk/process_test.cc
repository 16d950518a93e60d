// spdk/process.cc: an SPDK app found by its binary, pid or trace file, in a
// /proc and /dev/shm of the test's own.
#include "spdk/process.h"

#include "tempdir.h"
#include "util/error.h"

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace::spdk {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct FakeSystem {
    test::TempDir dir{"spdk-process"};
    std::string proc = dir / "proc";
    std::string shm = dir / "shm";
    std::string bin = dir / "nvmf_tgt";

    FakeSystem() {
        fs::create_directories(proc);
        fs::create_directories(shm);
        std::ofstream(bin) << "elf";
    }
    // a process of `exe` mapping `maps` lines
    void process(int pid, const std::string& exe, const std::vector<std::string>& maps) {
        const fs::path p = fs::path(proc) / std::to_string(pid);
        fs::create_directories(p);
        fs::create_symlink(exe, p / "exe");
        std::ofstream m(p / "maps");
        for (const auto& l : maps)
            m << l << "\n";
    }
};

TEST(SpdkProcess, ABinaryNamesItsRunningProcessesAndTheirRings) {
    FakeSystem s;
    s.process(100, s.bin,
              {"7f00-7f10 rw-s 00000000 00:1a 5 /dev/shm/spdk_iova_map",
               "7f10-7f20 rw-s 00000000 00:1a 6 /dev/shm/nvmf_trace.pid100"});
    s.process(200, s.bin, {"7f00-7f10 r-xp 00000000 08:01 7 /usr/lib/libc.so.6"});
    s.process(300, s.dir / "other", {"7f00-7f10 rw-s 0 00:1a 6 /dev/shm/nvmf_trace.pid300"});
    std::ofstream(s.dir / "other") << "elf";
    const Source src = find_source(s.bin, s.proc, s.shm);
    EXPECT_EQ(src.binary, fs::canonical(s.bin).string());
    ASSERT_EQ(src.processes.size(), 2u);
    std::map<int, std::string> got;
    for (const auto& p : src.processes)
        got[p.pid] = p.trace;
    EXPECT_EQ(got[100], "/dev/shm/nvmf_trace.pid100");
    EXPECT_EQ(got[200], "");  // runs without -e
}

TEST(SpdkProcess, ARemovedRingIsNoRing) {
    FakeSystem s;
    s.process(100, s.bin, {"7f10-7f20 rw-s 0 00:1a 6 /dev/shm/nvmf_trace.pid100 (deleted)"});
    EXPECT_EQ(trace_of(100, s.proc), "");
}

TEST(SpdkProcess, APidOrATraceFileNamesItself) {
    FakeSystem s;
    s.process(100, s.bin, {"7f10-7f20 rw-s 0 00:1a 6 /dev/shm/nvmf_trace.7"});
    Source by_pid = find_source("100", s.proc, s.shm);
    ASSERT_EQ(by_pid.processes.size(), 1u);
    EXPECT_EQ(by_pid.processes[0].trace, "/dev/shm/nvmf_trace.7");
    std::ofstream(s.shm + "/nvmf_trace.7") << "";
    Source by_name = find_source("nvmf_trace.7", s.proc, s.shm);
    ASSERT_EQ(by_name.processes.size(), 1u);
    EXPECT_EQ(by_name.processes[0].trace, s.shm + "/nvmf_trace.7");
    EXPECT_EQ(by_name.processes[0].pid, 0);
}

TEST(SpdkProcess, NothingThereIsAnErrorThatSaysWhatToName) {
    FakeSystem s;
    try {
        find_source(s.dir / "nope", s.proc, s.shm);
        FAIL();
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("no such file; name the SPDK app's binary"));
    }
    try {
        find_source("4242", s.proc, s.shm);
        FAIL();
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("no process 4242 is running"));
    }
    try {
        find_source("perf_trace.pid9", s.proc, s.shm);
        FAIL();
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("perf_trace.pid9: no such trace file"));
    }
}

TEST(SpdkProcess, EachRoleNeedsItsTracepoints) {
    EXPECT_EQ(needs(true, "tcp").front().tpoint, "TCP_REQ_NEW");
    EXPECT_EQ(needs(true, "rdma").front().tpoint, "RDMA_REQ_NEW");
    EXPECT_EQ(needs(false, "tcp").back().tpoint, "NVME_TCP_COMPLETE");
    EXPECT_TRUE(needs(false, "rdma").empty());  // SPDK's RDMA initiator has none
}

}  // namespace
}  // namespace nvmetrace::spdk
