#include "spdk/host_commands.h"

#include "analysis/assembler.h"
#include "analysis/components.h"
#include "analysis/device_table.h"
#include "analysis/sampling.h"

#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace::spdk {
namespace {

constexpr uint16_t kSubmit = 13 * 64 + 0, kComplete = 13 * 64 + 1;  // SPDK v26.05's nvme_tcp
constexpr uint32_t kDev = 4095u << 20 | 1234;

HostTpoints tpoints() {
    HostTpoints tp;
    tp.submit = kSubmit;
    tp.complete = kComplete;
    return tp;  // argument positions: SPDK's
}

struct Fixture {
    HostCommands hc;
    explicit Fixture(uint32_t sample = 1, uint64_t seed = 0)
        : hc(tpoints(), sample, seed, kDev, [](uint64_t tsc) { return tsc * 10; }) {}
    void entry(uint64_t tsc, uint16_t id, uint16_t qid, uint64_t pdu, std::vector<uint64_t> args) {
        TraceEntry e;
        e.tsc = tsc;
        e.tpoint_id = id;
        e.owner_id = qid;
        e.object_id = pdu;
        e.args = std::move(args);
        hc.push(e);
    }
    // NVME_TCP_SUBMIT: ctx, cid, opc, dw10 (LBA low), dw11 (LBA high), dw12 (blocks - 1), qd
    void submit(uint64_t t, uint16_t qid, uint64_t pdu, uint16_t cid, uint8_t opc, uint64_t lba,
                uint32_t blocks) {
        entry(t, kSubmit, qid, pdu,
              {0xc0ffee, cid, opc, lba & 0xffffffffu, lba >> 32, blocks - 1, 1});
    }
    // NVME_TCP_COMPLETE: ctx, cid, cpl (the status half-word, phase in bit 0), qd
    void complete(uint64_t t, uint16_t qid, uint64_t pdu, uint16_t cid, uint32_t cpl = 1) {
        entry(t, kComplete, qid, pdu, {0xc0ffee, cid, cpl, 0});
    }
};

TEST(SpdkHost, ACommandIsItsSubmissionAndCompletion) {
    Fixture f;
    f.submit(100, 2, 0x5000, 0x21, 0x02, (uint64_t{1} << 32) + 64, 8);
    f.complete(900, 2, 0x5000, 0x21);
    const auto recs = f.hc.release_all();
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[0].event, NVMETRACE_EV_SPDK_SUBMIT);
    EXPECT_EQ(recs[0].ts, 1000u);
    EXPECT_EQ(recs[1].event, NVMETRACE_EV_SPDK_COMPLETE);
    EXPECT_EQ(recs[1].ts, 9000u);
    EXPECT_EQ(recs[1].aux, 0u);  // success, whatever the phase tag
    for (const auto& r : recs) {
        EXPECT_EQ(r.lba, (uint64_t{1} << 32) + 64);
        EXPECT_EQ(r.len, 8u);
        EXPECT_EQ(r.qid, 2);
        EXPECT_EQ(r.cid, 0x21);
        EXPECT_EQ(r.dev, kDev);
        EXPECT_EQ(r.opcode, 0x02);
        EXPECT_EQ(r.flags, NVMETRACE_REC_SPDK | NVMETRACE_REC_LEN_BLOCKS | NVMETRACE_REC_HAS_CID |
                               NVMETRACE_REC_HAS_QID);
    }
}

TEST(SpdkHost, TheStatusLeavesThePhaseTagOut) {
    Fixture f;
    f.submit(100, 1, 0x5000, 3, 0x01, 8, 1);
    // SCT 0, SC 0x80 (LBA out of range), phase 1: the half-word 0x101
    f.complete(200, 1, 0x5000, 3, 0x80u << 1 | 1);
    const auto recs = f.hc.release_all();
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[1].aux, 0x80u);
    EXPECT_TRUE(recs[0].flags & NVMETRACE_REC_WRITE);
}

TEST(SpdkHost, AssembledAsAHostCommandWithoutABlockLayer) {
    Fixture f;
    f.submit(100, 1, 0x5000, 7, 0x02, 800, 8);
    f.submit(150, 1, 0x5100, 8, 0x01, 1600, 8);
    f.complete(900, 1, 0x5000, 7);
    f.complete(950, 1, 0x5100, 8);
    DeviceTable table;
    std::vector<Command> out;
    Assembler a(table, [&](const Command& c) { out.push_back(c); });
    for (const auto& r : f.hc.release_all())
        a.push(r);
    a.finish();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(a.counts().cut_start, 0u);
    for (const auto& c : out) {
        EXPECT_EQ(c.side, Side::host);
        EXPECT_TRUE(c.spdk_host);
        EXPECT_TRUE(c.has_cid);
        EXPECT_EQ(c.qid, 1);
        EXPECT_EQ(view_of(c), View::host_only);
        const Layout l = layout_for(View::host_only, c.present, kComponents);
        EXPECT_TRUE(l.missing.empty());  // no block layer: nothing is missing
        ASSERT_EQ(l.segments.size(), 1u);
        EXPECT_EQ(l.segments[0].name, "network and target (not recorded)");
        const Span s = span_of(l, c.submit_path, false);
        EXPECT_NE(s.from.find("NVME_TCP_SUBMIT"), std::string::npos) << s.from;
        EXPECT_NE(s.to.find("NVME_TCP_COMPLETE"), std::string::npos) << s.to;
    }
    EXPECT_EQ(out[0].cid, 7);
    EXPECT_EQ(out[0].op, Op::read);
    EXPECT_EQ(out[1].cid, 8);
    EXPECT_EQ(out[1].op, Op::write);
}

TEST(SpdkHost, AdminAndOtherCommandsAreLeftOut) {
    Fixture f;
    f.submit(100, 0, 0x5000, 1, 0x02, 0, 1);  // the admin queue: Get Log Page, not a read
    f.submit(110, 1, 0x5100, 2, 0x00, 0, 1);  // flush
    f.submit(120, 1, 0x5200, 3, 0x09, 0, 1);  // dataset management
    f.complete(200, 0, 0x5000, 1);
    f.complete(210, 1, 0x5100, 2);
    f.complete(220, 1, 0x5200, 3);
    EXPECT_TRUE(f.hc.release_all().empty());
    EXPECT_EQ(f.hc.counts().other, 3u);
    EXPECT_EQ(f.hc.counts().commands, 0u);
}

TEST(SpdkHost, OnlySampledLbas) {
    const uint32_t n = 8;
    const uint64_t seed = 7;
    Fixture f(n, seed);
    uint64_t picked = 0;
    for (uint64_t i = 0; i < 400; i++) {
        picked += sampled(i * 8, seed, n);
        f.submit(100 + i * 10, 1, 0x5000 + i, static_cast<uint16_t>(i), 0x02, i * 8, 8);
        f.complete(105 + i * 10, 1, 0x5000 + i, static_cast<uint16_t>(i));
    }
    EXPECT_EQ(f.hc.release_all().size(), 2 * picked);
    EXPECT_EQ(f.hc.counts().not_sampled, 400 - picked);
}

TEST(SpdkHost, ALostCompletionIsNotAnothersOnTheSamePdu) {
    Fixture f;
    f.submit(100, 1, 0x5000, 7, 0x02, 8, 8);
    // its completion overwritten in the ring, and the next command's submission on its PDU too:
    // the completion seen is another command's (another cid)
    f.complete(300, 1, 0x5000, 9);
    EXPECT_TRUE(f.hc.release_all().empty());
    EXPECT_EQ(f.hc.counts().unfinished, 1u);
    // a submission on a PDU still in flight: the one before lost its completion
    Fixture g;
    g.submit(100, 1, 0x5000, 7, 0x02, 8, 8);
    g.submit(200, 1, 0x5000, 8, 0x02, 16, 8);
    g.complete(300, 1, 0x5000, 8);
    const auto recs = g.hc.release_all();
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[0].lba, 16u);
    EXPECT_EQ(g.hc.counts().unfinished, 1u);
}

TEST(SpdkHost, InTimeOrderAndCutAtTheEnd) {
    Fixture f;
    f.submit(100, 1, 0x5000, 1, 0x02, 8, 8);   // long
    f.submit(200, 1, 0x5100, 2, 0x02, 16, 8);  // short, inside it
    f.complete(300, 1, 0x5100, 2);
    EXPECT_TRUE(f.hc.release().empty());  // the long one began first
    f.complete(5000, 1, 0x5000, 1);
    f.submit(HostCommands::kSettleNs / 10 + 10'000, 1, 0x5200, 3, 0x02, 24, 8);
    const auto recs = f.hc.release();
    ASSERT_EQ(recs.size(), 4u);
    for (size_t i = 1; i < recs.size(); i++)
        EXPECT_LE(recs[i - 1].ts, recs[i].ts);
    EXPECT_TRUE(f.hc.release_all().empty());
    EXPECT_EQ(f.hc.counts().cut_end, 1u);
}

}  // namespace
}  // namespace nvmetrace::spdk
