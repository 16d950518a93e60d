// bench.{h,cc} and bench_io.{h,cc}: what can be checked without a device.
#include "cmd/bench.h"

#include "bench/bench_io.h"
#include "util/error.h"

#include <liburing.h>
#include <linux/nvme_ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace nvmetrace::bench {
namespace {

TEST(BenchParse, Sizes) {
    EXPECT_EQ(parse_size("512"), 512u);
    EXPECT_EQ(parse_size("4k"), 4096u);
    EXPECT_EQ(parse_size("4KiB"), 4096u);
    EXPECT_EQ(parse_size("2m"), 2u << 20);
    EXPECT_EQ(parse_size("1G"), 1u << 30);
    EXPECT_THROW(parse_size("0"), Error);
    EXPECT_THROW(parse_size("k"), Error);
    EXPECT_THROW(parse_size("4x"), Error);
}

TEST(BenchParse, CpuList) {
    EXPECT_EQ(parse_cpu_list("0"), (std::set<int>{0}));
    EXPECT_EQ(parse_cpu_list("0-2,5"), (std::set<int>{0, 1, 2, 5}));
    EXPECT_THROW(parse_cpu_list("3-1"), Error);
    EXPECT_THROW(parse_cpu_list("a"), Error);
    EXPECT_THROW(parse_cpu_list("1,,2"), Error);
    EXPECT_THROW(parse_cpu_list(""), Error);
}

TEST(BenchParse, PatternAndBuf) {
    EXPECT_EQ(parse_pattern("randwrite"), Pattern::randwrite);
    EXPECT_THROW(parse_pattern("randrw"), Error);
    EXPECT_EQ(parse_buf("pool"), BufKind::pool);
    EXPECT_THROW(parse_buf("heap"), Error);
}

// An NVMe read and write through the generic char device: the command's fields by the NVMe
// specification (opcode, starting LBA in CDW10-11, 0's based block count in CDW12).
TEST(BenchPassthru, CommandOfAnSqe128) {
    io_uring_sqe sqe[2] = {};
    char buf[8192] = {};
    prep_passthru(sqe, 7, false, 3, 512, buf, 8192, (5ULL << 32) * 512 + 1024);
    EXPECT_EQ(sqe[0].opcode, IORING_OP_URING_CMD);
    EXPECT_EQ(sqe[0].fd, 7);
    EXPECT_EQ(sqe[0].cmd_op, NVME_URING_CMD_IO);
    const auto* cmd = reinterpret_cast<const nvme_uring_cmd*>(sqe[0].cmd);
    EXPECT_EQ(cmd->opcode, 0x02);  // read
    EXPECT_EQ(cmd->nsid, 3u);
    EXPECT_EQ(cmd->addr, reinterpret_cast<uint64_t>(buf));
    EXPECT_EQ(cmd->data_len, 8192u);
    EXPECT_EQ(cmd->cdw10, 2u);  // LBA (5 << 32) + 2
    EXPECT_EQ(cmd->cdw11, 5u);
    EXPECT_EQ(cmd->cdw12, 15u);  // 16 blocks
    io_uring_sqe w[2] = {};
    prep_passthru(w, 7, true, 1, 4096, buf, 4096, 4096 * 9);
    cmd = reinterpret_cast<const nvme_uring_cmd*>(w[0].cmd);
    EXPECT_EQ(cmd->opcode, 0x01);  // write
    EXPECT_EQ(cmd->cdw10, 9u);
    EXPECT_EQ(cmd->cdw11, 0u);
    EXPECT_EQ(cmd->cdw12, 0u);
}

TEST(BenchCpu, ProcStatBusyExcludesTargetAndIdle) {
    // cpuN user nice system idle iowait irq softirq steal guest guest_nice
    const std::string a =
        "cpu  100 0 0 1000 0 0 0 0 0 0\n"
        "cpu0 10 1 2 500 7 1 1 1 0 0\n"
        "cpu1 20 0 0 500 0 0 0 0 0 0\n"
        "intr 1 2 3\n";
    const std::string b =
        "cpu  300 0 0 1000 0 0 0 0 0 0\n"
        "cpu0 110 1 2 500 7 1 1 1 0 0\n"       // +100 user
        "cpu1 20 0 50 600 100 10 40 0 0 0\n";  // +50 system +10 irq +40 softirq; idle/iowait not
    const auto before = parse_proc_stat(a), after = parse_proc_stat(b);
    ASSERT_EQ(before.size(), 2u);
    EXPECT_EQ(before.at(0).busy, 16u);  // 10+1+2+1+1+1
    EXPECT_EQ(before.at(0).total, 523u);
    // cpu0: 100 busy of 100 ticks; cpu1: 100 busy of 300 ticks
    EXPECT_DOUBLE_EQ(busy_cores(before, after, {}), 1.0 + 1.0 / 3);
    EXPECT_DOUBLE_EQ(busy_cores(before, after, {0}), 1.0 / 3);
    EXPECT_DOUBLE_EQ(busy_cores(before, after, {1}), 1.0);
    EXPECT_DOUBLE_EQ(busy_cores(before, after, {0, 1}), 0.0);
    EXPECT_DOUBLE_EQ(busy_cores(after, after, {}), 0.0);  // no tick: nothing
    EXPECT_THROW(parse_proc_stat("cpu0 x\n"), Error);
}

TEST(BenchCpu, ReadsThisMachine) {
    const auto m = read_proc_stat();
    EXPECT_GE(m.size(), 1u);
    EXPECT_LE(m.size(), static_cast<size_t>(sysconf(_SC_NPROCESSORS_CONF)));
}

TEST(BenchProfile, Aisio) {
    const auto cells = expand_profile("aisio", Pattern::read, 4096, 1, 1, {}, {}, {}, 1);
    ASSERT_EQ(cells.size(), 12u);  // 3 sizes x 4 thread counts
    EXPECT_EQ(cells.front().size, 512u);
    EXPECT_EQ(cells.front().qd, 128u);
    EXPECT_EQ(cells.front().threads, 1u);
    EXPECT_EQ(cells.back().size, 8192u);
    EXPECT_EQ(cells.back().threads, 4u);
    for (const auto& c : cells)
        EXPECT_EQ(c.pattern, Pattern::randread);
    EXPECT_EQ(cells.back().index, 12u);
}

TEST(BenchProfile, KvAndOverrides) {
    const auto kv = expand_profile("kv", Pattern::read, 4096, 1, 1, {}, {}, {}, 2);
    ASSERT_EQ(kv.size(), 2u * 10 * 4);  // 4 KiB..2 MiB, 4 QDs, 2 reps
    EXPECT_EQ(kv[0].size, 4096u);
    EXPECT_EQ(kv[0].qd, 1u);
    EXPECT_EQ(kv[39].size, 2u << 20);
    EXPECT_EQ(kv[39].qd, 128u);
    EXPECT_EQ(kv[40].rep, 2u);
    const auto small =
        expand_profile("kv", Pattern::read, 4096, 1, 1, {4096, 65536}, {1, 16}, {}, 1);
    ASSERT_EQ(small.size(), 4u);
    EXPECT_EQ(small[3].size, 65536u);
    EXPECT_EQ(small[3].qd, 16u);
    EXPECT_THROW(expand_profile("oltp", Pattern::read, 4096, 1, 1, {}, {}, {}, 1), Error);
    const auto single = expand_profile("", Pattern::write, 8192, 32, 2, {}, {}, {}, 1);
    ASSERT_EQ(single.size(), 1u);
    EXPECT_EQ(single[0].profile, "single");
    EXPECT_EQ(single[0].pattern, Pattern::write);
    EXPECT_EQ(single[0].qd, 32u);
}

TEST(BenchCsv, QuotingAndColumns) {
    EXPECT_EQ(csv_quote("plain"), "plain");
    EXPECT_EQ(csv_quote("a,b"), "\"a,b\"");
    EXPECT_EQ(csv_quote("say \"x\""), "\"say \"\"x\"\"\"");
    Device dev;
    dev.path = "/dev/nvme0n1";
    RunSpec spec;
    CellRow row;
    row.cell.index = 3;
    row.cell.profile = "kv";
    row.cell.size = 4096;
    row.status = "failed";
    row.r.ios = 10;
    row.r.failed = 10;
    row.r.elapsed_s = 1;
    row.r.first_error = "read of 4096 bytes at offset 0: EIO (Input/output error), again";
    const std::string line = csv_row(row, dev, spec);
    // as many fields as columns (the comma inside the quoted error is not one)
    int fields = 1;
    bool quoted = false;
    for (char c : line) {
        if (c == '"')
            quoted = !quoted;
        else if (c == ',' && !quoted)
            fields++;
    }
    EXPECT_EQ(fields, static_cast<int>(csv_columns().size()));
    EXPECT_EQ(line.substr(0, 5), "3,kv,");
    EXPECT_NE(line.find(",failed,"), std::string::npos);
    EXPECT_EQ(csv_header().substr(0, 12), "cell,profile");
}

TEST(BenchDevice, ClearErrors) {
    try {
        inspect_device("/dev/nvmetrace-no-such-device");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no such device"), std::string::npos) << e.what();
    }
    try {
        inspect_device("/dev/null");  // a char device, not NVMe
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("not an NVMe generic device"), std::string::npos)
            << e.what();
    }
    try {
        inspect_device("/etc/hostname");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("neither a block device"), std::string::npos)
            << e.what();
    }
}

TEST(BenchPool, AbsentModuleIsAnError) {
    // A sysfs root without the module: no silent malloc.
    const PoolParams p = read_pool_params("/nonexistent-sysfs");
    EXPECT_FALSE(p.module_loaded);
    EXPECT_FALSE(p.has_params);
    if (access("/sys/module/nvmetrace", F_OK) != 0) {
        EXPECT_THROW(Buffers::make(BufKind::pool, 4096, 4), Error);
    }
}

TEST(BenchBuffers, MallocSlotsAreAlignedAndDistinct) {
    Buffers b = Buffers::make(BufKind::malloc, 6000, 3);
    ASSERT_EQ(b.nslots(), 3u);
    ASSERT_EQ(b.regions().size(), 3u);
    for (uint32_t i = 0; i < 3; i++) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.slot(i).ptr) % 4096, 0u);
        EXPECT_EQ(b.slot(i).region, i);
        EXPECT_GE(b.regions()[i].iov_len, 6000u);
    }
    EXPECT_GE(b.slot(1).ptr - b.slot(0).ptr, 6000);
}

}  // namespace
}  // namespace nvmetrace::bench
