#include "spdk/rdma_host_commands.h"

#include "analysis/sampling.h"

#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace::spdk {
namespace {

constexpr uint64_t kWrOffset = 24;  // SPDK v26.05: offsetof(struct spdk_nvme_rdma_req, send_wr)
constexpr uint32_t kDev = 4095u << 20 | 77;
constexpr uint64_t kAdminQp = 0x1000, kIoQp = 0x2000, kIoQp2 = 0x3000;

struct Fixture {
    RdmaHostCommands hc;
    explicit Fixture(uint32_t sample = 1, uint64_t seed = 0) : hc(kWrOffset, sample, seed, kDev) {}
    // a Fabrics Connect capsule naming `qid` on queue pair `qp`
    void connect(uint64_t t, uint64_t qp, uint16_t qid) {
        RdmaSubmit s;
        s.ts = t;
        s.qp = qp;
        s.wr = 0x9000;
        s.wr_opcode = 2;
        s.opc = 0x7f;
        s.nsid = 0x01;  // fctype Connect
        s.cdw10 = uint64_t{qid} << 16;
        hc.submit(s);
    }
    // a read or write whose request is at `req` (its work request at req + kWrOffset)
    void submit(uint64_t t, uint64_t qp, uint64_t req, uint16_t cid, uint8_t opc, uint64_t lba,
                uint32_t blocks) {
        RdmaSubmit s;
        s.ts = t;
        s.qp = qp;
        s.wr = req + kWrOffset;
        s.wr_opcode = 2;
        s.opc = opc;
        s.cid = cid;
        s.nsid = 1;
        s.cdw10 = lba;
        s.cdw12 = blocks - 1;
        hc.submit(s);
    }
    void complete(uint64_t t, uint64_t req, uint16_t cid, uint16_t status = 1) {
        hc.complete({.ts = t, .rdma_req = req, .cid = cid, .status = status});
    }
};

TEST(SpdkRdmaHost, ACommandIsItsCapsuleAndItsCompletion) {
    Fixture f;
    f.connect(10, kAdminQp, 0);
    f.connect(20, kIoQp, 3);
    f.submit(100, kIoQp, 0x50000, 0x11, 0x02, (uint64_t{1} << 32) + 64, 8);
    f.complete(900, 0x50000, 0x11);
    const auto recs = f.hc.release_all();
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[0].event, NVMETRACE_EV_SPDK_SUBMIT);
    EXPECT_EQ(recs[0].ts, 100u);
    EXPECT_EQ(recs[1].event, NVMETRACE_EV_SPDK_COMPLETE);
    EXPECT_EQ(recs[1].ts, 900u);
    EXPECT_EQ(recs[1].aux, 0u);  // success, whatever the phase tag
    for (const auto& r : recs) {
        EXPECT_EQ(r.dev, kDev);
        EXPECT_EQ(r.qid, 3u);  // the queue pair's Connect
        EXPECT_EQ(r.cid, 0x11u);
        EXPECT_EQ(r.lba, (uint64_t{1} << 32) + 64);
        EXPECT_EQ(r.len, 8u);
        EXPECT_EQ(r.opcode, 0x02u);
        EXPECT_EQ(r.flags & NVMETRACE_REC_WRITE, 0u);
        EXPECT_NE(r.flags & NVMETRACE_REC_SPDK, 0u);
        EXPECT_NE(r.flags & NVMETRACE_REC_LEN_BLOCKS, 0u);
        EXPECT_NE(r.flags & NVMETRACE_REC_HAS_QID, 0u);
    }
    EXPECT_EQ(f.hc.counts().commands, 1u);
    EXPECT_EQ(f.hc.counts().other, 2u);  // the two Connects
}

TEST(SpdkRdmaHost, TheCompletionFindsItsRequestByAddressNotByCommandId) {
    // two queue pairs use command id 5 at once: each completion finds its own request
    Fixture f;
    f.connect(1, kIoQp, 1);
    f.connect(2, kIoQp2, 2);
    f.submit(100, kIoQp, 0x10000, 5, 0x02, 800, 1);
    f.submit(110, kIoQp2, 0x20000, 5, 0x01, 1600, 2);
    f.complete(300, 0x20000, 5, 0x0003);  // the write first, with status 1
    f.complete(400, 0x10000, 5);
    const auto recs = f.hc.release_all();
    ASSERT_EQ(recs.size(), 4u);
    // time order: read submitted, write submitted, write done, read done
    EXPECT_EQ(recs[0].qid, 1u);
    EXPECT_EQ(recs[1].qid, 2u);
    EXPECT_EQ(recs[2].event, NVMETRACE_EV_SPDK_COMPLETE);
    EXPECT_EQ(recs[2].qid, 2u);
    EXPECT_EQ(recs[2].lba, 1600u);
    EXPECT_NE(recs[2].flags & NVMETRACE_REC_WRITE, 0u);
    EXPECT_EQ(recs[2].aux, 1u);
    EXPECT_EQ(recs[3].qid, 1u);
    EXPECT_EQ(recs[3].ts, 400u);
}

TEST(SpdkRdmaHost, AdminFabricsAndUnknownQueuesAreLeftOutAndCounted) {
    Fixture f;
    f.connect(1, kAdminQp, 0);
    f.submit(10, kAdminQp, 0x10000, 1, 0x02, 0, 1);  // Get Log Page (opcode 2 on the admin queue)
    f.complete(20, 0x10000, 1);
    f.submit(30, kIoQp, 0x20000, 2, 0x02, 0, 1);  // its queue's Connect was not seen
    f.complete(40, 0x20000, 2);
    f.connect(50, kIoQp2, 1);
    f.submit(60, kIoQp2, 0x30000, 3, 0x00, 0, 1);  // flush
    f.complete(70, 0x30000, 3);
    RdmaSubmit rdma_write;  // not a capsule (a send with another work request opcode)
    rdma_write.wr_opcode = 0;
    rdma_write.qp = kIoQp2;
    rdma_write.opc = 0x02;
    f.hc.submit(rdma_write);
    EXPECT_TRUE(f.hc.release_all().empty());
    EXPECT_EQ(f.hc.counts().commands, 0u);
    EXPECT_EQ(f.hc.counts().unknown_queue, 1u);
    EXPECT_EQ(f.hc.counts().other, 4u);  // two Connects, Get Log Page, flush
}

TEST(SpdkRdmaHost, ACompletionWithAnotherCommandIdIsCountedNotJoined) {
    // a wrong offset of send_wr in the request would look like this: counted, no record
    Fixture f;
    f.connect(1, kIoQp, 1);
    f.submit(10, kIoQp, 0x10000, 7, 0x02, 0, 1);
    f.complete(20, 0x10000, 8);
    EXPECT_TRUE(f.hc.release_all().empty());
    EXPECT_EQ(f.hc.counts().mismatched, 1u);
    EXPECT_EQ(f.hc.in_flight(), 0u);
}

TEST(SpdkRdmaHost, OneOfNByTheLbaPredicate) {
    Fixture f(4, 99);
    f.connect(1, kIoQp, 1);
    uint64_t picked = 0;
    for (uint64_t lba = 0; lba < 400; lba++) {
        const uint64_t req = 0x100000 + lba * 256;
        f.submit(10 + lba, kIoQp, req, static_cast<uint16_t>(lba), 0x02, lba, 1);
        f.complete(20 + lba, req, static_cast<uint16_t>(lba));
        picked += sampled(lba, 99, 4) ? 1 : 0;
    }
    ASSERT_GT(picked, 0u);
    EXPECT_EQ(f.hc.counts().commands, picked);
    EXPECT_EQ(f.hc.counts().not_sampled, 400 - picked);
    for (const auto& r : f.hc.release_all())
        EXPECT_TRUE(sampled(r.lba, 99, 4));
}

TEST(SpdkRdmaHost, ARequestReusedBeforeItsCompletionAndTheEndAreCounted) {
    Fixture f;
    f.connect(1, kIoQp, 1);
    f.submit(10, kIoQp, 0x10000, 1, 0x02, 0, 1);
    f.submit(20, kIoQp, 0x10000, 1, 0x02, 8, 1);  // its completion lost
    f.complete(30, 0x10000, 1);
    f.submit(40, kIoQp, 0x20000, 2, 0x02, 16, 1);  // in flight at the end
    f.submit(50, kIoQp, 0x30000, 3, 0x02, 24, 1);
    f.hc.expire(40 + RdmaHostCommands::kAbandonNs);  // not yet
    EXPECT_EQ(f.hc.in_flight(), 2u);
    f.hc.expire(45 + RdmaHostCommands::kAbandonNs);  // the one at 40 is abandoned
    EXPECT_EQ(f.hc.counts().abandoned, 1u);
    const auto recs = f.hc.release_all();
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[0].lba, 8u);
    EXPECT_EQ(f.hc.counts().unfinished, 1u);
    EXPECT_EQ(f.hc.counts().cut_end, 1u);
}

TEST(SpdkRdmaHost, ReleaseHoldsRecordsAnInFlightCommandCouldPrecede) {
    Fixture f;
    f.connect(1, kIoQp, 1);
    f.submit(1000, kIoQp, 0x10000, 1, 0x02, 0, 1);  // stays in flight
    f.submit(2000, kIoQp, 0x20000, 2, 0x02, 8, 1);
    f.complete(3000 + RdmaHostCommands::kSettleNs, 0x20000, 2);
    EXPECT_TRUE(f.hc.release().empty());  // the command at 1000 may finish yet
    f.complete(4000 + RdmaHostCommands::kSettleNs, 0x10000, 1);
    f.submit(5000 + 2 * RdmaHostCommands::kSettleNs, kIoQp, 0x30000, 3, 0x02, 16, 1);
    const auto recs = f.hc.release();
    ASSERT_EQ(recs.size(), 4u);
    EXPECT_EQ(recs[0].ts, 1000u);
    EXPECT_EQ(recs[1].ts, 2000u);
}

}  // namespace
}  // namespace nvmetrace::spdk
