// spdk/trace_file.cc: SPDK's trace file read from bytes laid out as SPDK
// v26.05 lays them out (trace_file_synth.h beside this writes them).
#include "spdk/trace_file.h"

#include "spdk/trace_file_synth.h"
#include "util/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace::spdk {
namespace {

using test::SynthTrace;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using test::kTcpNew;
using test::kTcpSubmit;

SynthTrace two_tpoints() {
    SynthTrace s(/*cores=*/2, /*entries=*/8);
    s.tcp_tpoints();
    s.enable(kTcpNew);
    return s;
}

TEST(SpdkTraceFile, ReadsTheTracepointsMasksAndCores) {
    SynthTrace s = two_tpoints();
    s.hit(0, kTcpNew, 3);
    s.hit(1, kTcpNew, 4);
    const TraceFile f = TraceFile::parse(s.bytes(), "t");
    EXPECT_EQ(f.tsc_rate, 2'000'000'000u);
    ASSERT_EQ(f.tpoints.size(), 2u);
    const Tpoint* t = f.find("NVME_TCP_SUBMIT");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->id, kTcpSubmit);
    EXPECT_EQ(t->group(), 13);
    ASSERT_EQ(t->args.size(), 7u);
    EXPECT_EQ(t->args[1].name, "cid");
    EXPECT_TRUE(f.enabled(kTcpNew));
    EXPECT_FALSE(f.enabled(kTcpSubmit));
    EXPECT_EQ(f.hits(kTcpNew), 7u);
    EXPECT_EQ(f.hits(kTcpSubmit), 0u);
    ASSERT_EQ(f.lcores.size(), 2u);
    EXPECT_EQ(f.lcores[1].lcore, 1);
    EXPECT_EQ(f.lcores[1].thread, "reactor_1");
    EXPECT_EQ(f.find("BDEV_IO_START"), nullptr);
}

TEST(SpdkTraceFile, EntriesFoldTheirContinuations) {
    SynthTrace s = two_tpoints();
    s.record(0, 100, kTcpNew, 7, {5});
    s.record(0, 200, kTcpSubmit, 9, {0xabcdef, 42, 2, 0x1000, 0, 7, 1});
    s.record(0, 300, kTcpNew, 7, {6});
    const TraceFile f = TraceFile::parse(s.bytes(), "t");
    const std::vector<TraceEntry> es = f.entries(f.lcores[0]);
    ASSERT_EQ(es.size(), 3u);
    EXPECT_EQ(es[0].tsc, 100u);
    EXPECT_THAT(es[0].args, ElementsAre(5u));
    EXPECT_EQ(es[1].tpoint_id, kTcpSubmit);
    EXPECT_EQ(es[1].object_id, 9u);
    EXPECT_THAT(es[1].args, ElementsAre(0xabcdefu, 42u, 2u, 0x1000u, 0u, 7u, 1u));
    EXPECT_THAT(es[2].args, ElementsAre(6u));
    EXPECT_TRUE(f.entries(f.lcores[1]).empty());
}

TEST(SpdkTraceFile, AWrappedRingStartsAtItsOldestWholeEntry) {
    SynthTrace s = two_tpoints();  // 8 entries a core
    // 3 entries each, 4 times: 12 written, the last 8 kept; entry 4 (the first kept) is
    // the middle of the second submission, whose head was overwritten
    for (uint64_t i = 0; i < 4; i++)
        s.record(0, 1000 + i, kTcpSubmit, i, {i, i, 2, 0, 0, 0, 1});
    const TraceFile f = TraceFile::parse(s.bytes(), "t");
    const std::vector<TraceEntry> es = f.entries(f.lcores[0]);
    ASSERT_EQ(es.size(), 2u);
    EXPECT_EQ(es[0].tsc, 1002u);
    EXPECT_EQ(es[1].args[1], 3u);
}

// The TSCs of core 0's entries as the reader returns them.
std::vector<uint64_t> tscs(const SynthTrace& s) {
    const TraceFile f = TraceFile::parse(s.bytes(), "t");
    std::vector<uint64_t> out;
    for (const TraceEntry& e : f.entries(f.lcores[0]))
        out.push_back(e.tsc);
    return out;
}

TEST(SpdkTraceFile, EntriesBeforeAClearAreLeftOut) {
    SynthTrace s = two_tpoints();
    s.record(0, 100, kTcpNew, 1, {1});
    s.record(0, 300, kTcpNew, 2, {2});
    s.clear_tsc(200);
    EXPECT_THAT(tscs(s), ElementsAre(300u));
}

TEST(SpdkTraceFile, AnEntryBeingWrittenIsNotReadHalf) {
    SynthTrace s = two_tpoints();
    s.record(0, 100, kTcpNew, 1, {1});
    s.record(0, 200, kTcpSubmit, 2, {1, 2, 2, 0, 0, 0, 1});
    EXPECT_THAT(tscs(s), ElementsAre(100u, 200u));
    s.rewind(0, 1);  // the submission's last continuation not published yet
    EXPECT_THAT(tscs(s), ElementsAre(100u));
}

TEST(SpdkTraceFile, ACutOffFileSaysSo) {
    SynthTrace s = two_tpoints();
    std::vector<uint8_t> b = s.bytes();
    b.resize(b.size() / 2);
    try {
        TraceFile::parse(b, "/dev/shm/nvmf_trace.0");
        FAIL() << "a half file was read";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("/dev/shm/nvmf_trace.0: the header says"));
        EXPECT_THAT(e.what(), HasSubstr("cut off"));
    }
}

TEST(SpdkTraceFile, DamagedLayoutsAreRefusedWithTheReason) {
    auto refuse = [](std::vector<uint8_t> b, const char* why) {
        try {
            TraceFile::parse(b, "f");
            ADD_FAILURE() << "read a file with " << why;
        } catch (const Error& e) {
            EXPECT_THAT(e.what(), HasSubstr(why));
        }
    };
    refuse({1, 2, 3}, "runs past its 3 bytes");
    {
        SynthTrace s = two_tpoints();
        s.poke64(SynthTrace::kHeaderSize - 8, 1u << 30);  // the lcore section far away
        refuse(s.bytes(), "runs past");
    }
    {
        SynthTrace s = two_tpoints();
        s.tsc_rate(0);
        refuse(s.bytes(), "the TSC rate is 0");
    }
    {
        SynthTrace s = two_tpoints();
        s.ring_size(0, 6);
        refuse(s.bytes(), "not a power of two");
    }
    {
        SynthTrace s = two_tpoints();
        s.arg_size(kTcpNew, 0, 3);
        refuse(s.bytes(), "TCP_REQ_NEW's argument qd has type 0 size 3");
    }
}

}  // namespace
}  // namespace nvmetrace::spdk
