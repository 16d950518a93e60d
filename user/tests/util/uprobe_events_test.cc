#include "util/uprobe_events.h"

#include "util/error.h"
#include "util/perf_samples.h"

#include <cstring>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

// a uprobe event's format file as tracefs writes it (x86-64)
constexpr const char* kFormat =
    "name: rdma_complete\n"
    "ID: 1523\n"
    "format:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n"
    "\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:u64 req;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:u16 cid;\toffset:24;\tsize:2;\tsigned:0;\n"
    "\tfield:u16 status;\toffset:26;\tsize:2;\tsigned:0;\n"
    "\n"
    "print fmt: \"(%lx) req=0x%Lx cid=%u status=%u\", REC->__probe_ip, REC->req, REC->cid, "
    "REC->status\n";

TEST(TraceFormat, FieldsByNameWithOffsetAndSize) {
    const auto f = parse_trace_format(kFormat);
    ASSERT_EQ(f.count("req"), 1u);
    EXPECT_EQ(f.at("req").offset, 16u);
    EXPECT_EQ(f.at("req").size, 8u);
    EXPECT_EQ(f.at("cid").offset, 24u);
    EXPECT_EQ(f.at("cid").size, 2u);
    EXPECT_EQ(f.at("status").offset, 26u);
    EXPECT_EQ(f.at("common_pid").size, 4u);
    EXPECT_EQ(f.at("__probe_ip").offset, 8u);
    EXPECT_THROW(parse_trace_format("name: x\nprint fmt: \"\"\n"), Error);
}

TEST(TraceFormat, AFieldIsReadLittleEndianAndAShortSampleReadsZero) {
    const auto f = parse_trace_format(kFormat);
    std::vector<uint8_t> raw(28, 0);
    const uint64_t req = 0x7f0012345678;
    std::memcpy(raw.data() + 16, &req, 8);
    raw[24] = 0x34;
    raw[25] = 0x12;
    raw[26] = 0x03;
    EXPECT_EQ(trace_field(raw, f.at("req")), req);
    EXPECT_EQ(trace_field(raw, f.at("cid")), 0x1234u);
    EXPECT_EQ(trace_field(raw, f.at("status")), 3u);
    raw.resize(25);
    EXPECT_EQ(trace_field(raw, f.at("cid")), 0u);
}

TEST(UprobeEvents, ThoseOfRecordersNoLongerRunningAreStale) {
    const std::string list =
        "p:nvmetrace_100/spdk_rdma_submit /lib/libspdk_rdma_provider.so:0x1840 qp=%di:x64\n"
        "p:nvmetrace_100/spdk_rdma_complete /lib/libspdk_nvme.so:0x52390 req=%di:x64\n"
        "p:nvmetrace_200/spdk_rdma_submit /lib/libspdk_rdma_provider.so:0x1840 qp=%di:x64\n"
        "p:nvmetrace_test_300/target /x:0x10 n=%si:u64\n"
        "p:probe_libc/malloc /lib/libc.so.6:0x99\n"
        "r:nvmetrace_400/ret /x:0x10\n";
    const auto stale = stale_uprobe_events(list, [](int pid) { return pid == 200; });
    EXPECT_EQ(stale,
              (std::vector<std::string>{"nvmetrace_100/spdk_rdma_submit",
                                        "nvmetrace_100/spdk_rdma_complete", "nvmetrace_400/ret"}));
}

TEST(PerfSamples, CpuListsAsSysfsWritesThem) {
    EXPECT_EQ(parse_cpu_list("0-1\n"), (std::vector<int>{0, 1}));
    EXPECT_EQ(parse_cpu_list("0,2-4,7"), (std::vector<int>{0, 2, 3, 4, 7}));
    EXPECT_EQ(parse_cpu_list("3"), (std::vector<int>{3}));
}

TEST(PerfSamples, ASampleRecordsBody) {
    // id, pid/tid, time, cpu/res, raw size, raw bytes (then the kernel's padding)
    std::vector<uint8_t> b(8 + 8 + 8 + 8 + 4 + 12, 0);
    const uint64_t id = 41, time = 123456789;
    const uint32_t pid = 500, tid = 501, cpu = 1, size = 12;
    std::memcpy(b.data(), &id, 8);
    std::memcpy(b.data() + 8, &pid, 4);
    std::memcpy(b.data() + 12, &tid, 4);
    std::memcpy(b.data() + 16, &time, 8);
    std::memcpy(b.data() + 24, &cpu, 4);
    std::memcpy(b.data() + 32, &size, 4);
    b[36] = 0xaa;
    b[47] = 0xbb;
    uint64_t got_id = 0;
    PerfSample s;
    ASSERT_TRUE(parse_perf_sample(b.data(), b.size(), got_id, s));
    EXPECT_EQ(got_id, 41u);
    EXPECT_EQ(s.pid, 500u);
    EXPECT_EQ(s.tid, 501u);
    EXPECT_EQ(s.time, time);
    EXPECT_EQ(s.cpu, 1u);
    ASSERT_EQ(s.raw.size(), 12u);
    EXPECT_EQ(s.raw.front(), 0xaa);
    EXPECT_EQ(s.raw.back(), 0xbb);
    // a raw size beyond the record: refused, not read past
    EXPECT_FALSE(parse_perf_sample(b.data(), b.size() - 1, got_id, s));
}

}  // namespace
}  // namespace nvmetrace
