// bench/spdk_perf.{h,cc}: the control arm's transport ID, arguments, output
// reading, and the run through a pseudo-terminal (with stand-in programs
// that print as spdk_nvme_perf does; the real one runs in the guest
// scenario 51-spdk-control).
#include "bench/spdk_perf.h"
#include "tempdir.h"
#include "util/error.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace nvmetrace::bench {
namespace {

// What spdk_nvme_perf v26.05 printed in the guest (a 2-second randread, its
// device name shortened), with a failed command and its warm-up progress.
constexpr const char* kPerfOutput =
    "Initializing NVMe Controllers\n"
    "Attached to NVMeoF Controller at TCP (addr:127.0.0.1 subnqn:nqn.x:spdk)\n"
    "Associating TCP (addr:127.0.0.1 subnqn:nqn.x:spdk) NSID 1 with lcore 1\n"
    "Initialization complete. Launching workers.\n"
    "[warmup]      812 IOPS,     3.17 MiB/s\r[warmup]      830 IOPS,     3.24 MiB/s\r\n"
    "Read completed with error (sct=0, sc=128)\n"
    "========================================================\n"
    "                                                           Latency(us)\n"
    "Device Information                       :       IOPS      MiB/s    Average        min"
    "        max\n"
    "TCP (addr:127.0.0.1) NSID 1 from core  1:     822.46       3.21    1211.71     532.65"
    "    5645.48\n"
    "========================================================\n"
    "Total                                    :     822.46       3.21    1211.71     532.65"
    "    5645.48\n"
    "\n";

TEST(SpdkPerfControl, ReadsItsSummary) {
    const PerfOutput o = parse_perf_output(kPerfOutput);
    EXPECT_TRUE(o.launched);
    ASSERT_TRUE(o.has_total);
    EXPECT_DOUBLE_EQ(o.iops, 822.46);
    EXPECT_DOUBLE_EQ(o.mib_s, 3.21);
    EXPECT_DOUBLE_EQ(o.lat_mean_us, 1211.71);
    EXPECT_DOUBLE_EQ(o.lat_min_us, 532.65);
    EXPECT_DOUBLE_EQ(o.lat_max_us, 5645.48);
    EXPECT_EQ(o.failed, 1u);
    EXPECT_EQ(o.first_error, "Read completed with error (sct=0, sc=128)");
}

TEST(SpdkPerfControl, NoResultsAreNoFigures) {
    const PerfOutput o = parse_perf_output(
        "Initializing NVMe Controllers\n"
        "spdk_nvme_probe() failed for transport address '127.0.0.1'\n"
        "./spdk_nvme_perf: errors occurred\n");
    EXPECT_FALSE(o.launched);
    EXPECT_FALSE(o.has_total);
    EXPECT_EQ(o.last_line, "./spdk_nvme_perf: errors occurred");
    // a Total line that is not five numbers is not a result
    EXPECT_FALSE(parse_perf_output("Total : 1.0 2.0 x 4 5\n").has_total);
    EXPECT_FALSE(parse_perf_output("Total : 1.0 2.0\n").has_total);
    EXPECT_EQ(parse_perf_output("starting I/O failed: -6\nstarting I/O failed: -6\n").failed, 2u);
}

TEST(SpdkPerfControl, TransportIdFromSysfs) {
    EXPECT_EQ(trid_from_attrs("tcp", "traddr=127.0.0.1,trsvcid=4420,src_addr=127.0.0.1\n",
                              "nqn.2024-01.io.nvmetrace:t", 1),
              "trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4420 "
              "subnqn:nqn.2024-01.io.nvmetrace:t ns:1");
    EXPECT_EQ(trid_from_attrs("rdma", "traddr=fd00::2,trsvcid=4421", "nqn.a", 0),
              "trtype:RDMA adrfam:IPv6 traddr:fd00::2 trsvcid:4421 subnqn:nqn.a");
    // not a fabrics controller, or an address without its parts: said, with the way out
    try {
        (void)trid_from_attrs("pcie", "0000:01:00.0", "nqn.a", 1);
        FAIL() << "pcie accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("give --spdk-trid"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)trid_from_attrs("", "", "", 0), Error);
    EXPECT_THROW((void)trid_from_attrs("tcp", "trsvcid=4420", "nqn.a", 1), Error);
    EXPECT_THROW((void)trid_from_attrs("tcp", "traddr=1.2.3.4,trsvcid=4420", "", 1), Error);
}

TEST(SpdkPerfControl, ArgumentsSayTheCell) {
    PerfSpec p;
    p.binary = "/opt/spdk/bin/spdk_nvme_perf";
    p.trid = "trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4420 subnqn:n";
    p.extra = {"--no-huge", "-s", "256"};
    p.pattern = Pattern::randwrite;
    p.size = 8192;
    p.qd = 16;
    p.cores = {1, 3};
    p.seconds = 2;
    p.warmup_s = 1;
    EXPECT_EQ(spdk_core_list({1, 3}), "[1,3]");
    const std::vector<std::string> want = {"/opt/spdk/bin/spdk_nvme_perf",
                                           "--no-huge",
                                           "-s",
                                           "256",
                                           "-q",
                                           "16",
                                           "-o",
                                           "8192",
                                           "-w",
                                           "randwrite",
                                           "-t",
                                           "2",
                                           "-c",
                                           "[1,3]",
                                           "-Q",
                                           "1",
                                           "-r",
                                           p.trid,
                                           "-a",
                                           "1"};
    EXPECT_EQ(perf_argv(p), want);
}

// A stand-in for spdk_nvme_perf: a shell script that prints `body`.
std::string stand_in(const test::TempDir& dir, const std::string& body) {
    const std::string path = dir.path("perf.sh");
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0755);
    return path;
}

PerfSpec stand_in_spec(const std::string& binary) {
    PerfSpec p;
    p.binary = binary;
    p.trid = "trtype:TCP";
    p.cores = {0};
    p.seconds = 3;
    p.timeout_s = 30;
    return p;
}

TEST(SpdkPerfControl, RunsThroughATerminal) {
    test::TempDir dir;
    // the launch, then the results after a pause: two reads of the terminal
    const std::string bin = stand_in(
        dir,
        "echo 'Initialization complete. Launching workers.'\n"
        "sleep 0.2\n"
        "echo 'Write completed with error (sct=0, sc=2)' >&2\n"
        "echo '========'\n"
        "echo 'Total                :    1000.00      3.91     999.50     10.00   2000.00'\n"
        "test -t 1 && echo 'stdout is a terminal'\n");
    std::string log;
    const RunResult r = run_spdk_perf(stand_in_spec(bin), &log);
    EXPECT_DOUBLE_EQ(r.iops, 1000.0);
    EXPECT_DOUBLE_EQ(r.mib_s, 3.91);
    EXPECT_DOUBLE_EQ(r.lat_mean_us, 999.5);
    EXPECT_EQ(r.ios, 3000u);  // IOPS x -t
    EXPECT_EQ(r.elapsed_s, 3.0);
    EXPECT_EQ(r.failed, 1u);  // its stderr comes through too
    EXPECT_EQ(r.first_error, "Write completed with error (sct=0, sc=2)");
    EXPECT_GE(r.busy_cores, 0.0);
    EXPECT_NE(log.find("stdout is a terminal"), std::string::npos) << log;
}

TEST(SpdkPerfControl, SaysWhyThereIsNoResult) {
    test::TempDir dir;
    // it stops before its results: the last line it printed is the reason
    try {
        (void)run_spdk_perf(
            stand_in_spec(stand_in(dir,
                                   "echo \"spdk_nvme_probe() failed for transport address\"\n"
                                   "exit 1\n")),
            nullptr);
        FAIL() << "no results accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("printed no results (exit 1): last said: "
                                             "spdk_nvme_probe() failed"),
                  std::string::npos)
            << e.what();
    }
    // results without the launch: its CPU time has no window
    EXPECT_THROW(
        (void)run_spdk_perf(stand_in_spec(stand_in(dir, "echo '===='\necho 'Total : 1 2 3 4 5'\n")),
                            nullptr),
        Error);
    // a program that never ends is killed at the deadline
    PerfSpec hang = stand_in_spec(stand_in(dir, "echo starting\nexec sleep 60\n"));
    hang.seconds = 0;
    hang.timeout_s = 1;
    try {
        (void)run_spdk_perf(hang, nullptr);
        FAIL() << "a hanging program was waited for";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("did not finish in 1 s: last said: starting"),
                  std::string::npos)
            << e.what();
    }
    // a program that is not there
    EXPECT_THROW((void)run_spdk_perf(stand_in_spec(dir.path("absent")), nullptr), Error);
}

}  // namespace
}  // namespace nvmetrace::bench
