#include "spdk/rdma_host_commands.h"

#include "analysis/sampling.h"
#include "spdk/rdma_host_probes.h"

#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace::spdk {
namespace {

constexpr uint64_t kWrOffset = 24;  // SPDK v26.05: offsetof(struct spdk_nvme_rdma_req, send_wr)
constexpr uint32_t kDev = 4095u << 20 | 77;

struct Fixture {
    RdmaHostCommands hc;
    explicit Fixture(uint32_t sample = 1, uint64_t seed = 0) : hc(kWrOffset, sample, seed, kDev) {}
    // a command whose request is at `req` (its work request at req + kWrOffset) on queue `qid`
    void submit(uint64_t t, uint16_t qid, uint64_t req, uint16_t cid, uint8_t opc, uint64_t lba,
                uint32_t blocks) {
        RdmaSubmit s;
        s.ts = t;
        s.wr = req + kWrOffset;
        s.wr_opcode = 2;
        s.qid = qid;
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
    f.submit(100, 3, 0x50000, 0x11, 0x02, (uint64_t{1} << 32) + 64, 8);
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
        EXPECT_EQ(r.qid, 3u);
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
    EXPECT_EQ(f.hc.counts().other, 0u);
}

TEST(SpdkRdmaHost, TheCompletionFindsItsRequestByAddressNotByCommandId) {
    // two queue pairs use command id 5 at once: each completion finds its own request
    Fixture f;
    f.submit(100, 1, 0x10000, 5, 0x02, 800, 1);
    f.submit(110, 2, 0x20000, 5, 0x01, 1600, 2);
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

TEST(SpdkRdmaHost, AdminFabricsAndOtherCommandsAreLeftOutAndCounted) {
    Fixture f;
    f.submit(10, 0, 0x10000, 1, 0x02, 0, 1);  // Get Log Page (opcode 2 on the admin queue)
    f.complete(20, 0x10000, 1);
    f.submit(30, 1, 0x20000, 2, 0x7f, 0, 1);  // a Fabrics command on an I/O queue
    f.complete(40, 0x20000, 2);
    f.submit(60, 1, 0x30000, 3, 0x00, 0, 1);  // flush
    f.complete(70, 0x30000, 3);
    RdmaSubmit rdma_write;  // not a capsule (a work request with another opcode)
    rdma_write.wr_opcode = 0;
    rdma_write.qid = 1;
    rdma_write.opc = 0x02;
    f.hc.submit(rdma_write);
    EXPECT_TRUE(f.hc.release_all().empty());
    EXPECT_EQ(f.hc.counts().commands, 0u);
    EXPECT_EQ(f.hc.counts().other, 3u);  // Get Log Page, the Fabrics command, flush
}

TEST(SpdkRdmaHost, ACompletionWithAnotherCommandIdIsCountedNotJoined) {
    // a wrong offset of send_wr in the request would look like this: counted, no record
    Fixture f;
    f.submit(10, 1, 0x10000, 7, 0x02, 0, 1);
    f.complete(20, 0x10000, 8);
    EXPECT_TRUE(f.hc.release_all().empty());
    EXPECT_EQ(f.hc.counts().mismatched, 1u);
    EXPECT_EQ(f.hc.in_flight(), 0u);
}

TEST(SpdkRdmaHost, OneOfNByTheLbaPredicate) {
    Fixture f(4, 99);
    uint64_t picked = 0;
    for (uint64_t lba = 0; lba < 400; lba++) {
        const uint64_t req = 0x100000 + lba * 256;
        f.submit(10 + lba, 1, req, static_cast<uint16_t>(lba), 0x02, lba, 1);
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
    f.submit(10, 1, 0x10000, 1, 0x02, 0, 1);
    f.submit(20, 1, 0x10000, 1, 0x02, 8, 1);  // its completion lost
    f.complete(30, 0x10000, 1);
    f.submit(40, 1, 0x20000, 2, 0x02, 16, 1);  // in flight at the end
    f.submit(50, 1, 0x30000, 3, 0x02, 24, 1);
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
    f.submit(1000, 1, 0x10000, 1, 0x02, 0, 1);  // stays in flight
    f.submit(2000, 1, 0x20000, 2, 0x02, 8, 1);
    f.complete(3000 + RdmaHostCommands::kSettleNs, 0x20000, 2);
    EXPECT_TRUE(f.hc.release().empty());  // the command at 1000 may finish yet
    f.complete(4000 + RdmaHostCommands::kSettleNs, 0x10000, 1);
    f.submit(5000 + 2 * RdmaHostCommands::kSettleNs, 1, 0x30000, 3, 0x02, 16, 1);
    const auto recs = f.hc.release();
    ASSERT_EQ(recs.size(), 4u);
    EXPECT_EQ(recs[0].ts, 1000u);
    EXPECT_EQ(recs[1].ts, 2000u);
}

TEST(SpdkRdmaHost, TheQueueIdIsReadThroughTheRequestThatHoldsTheWorkRequest) {
    // SPDK v26.05's layout: send_wr at 24 and req at 152 of the RDMA request, qpair at 160 of
    // nvme_request, id at 8 of the queue pair
    RdmaHostSites v2605;
    v2605.wr_offset = 24;
    v2605.req_offset = 152;
    v2605.qpair_offset = 160;
    v2605.qid_offset = 8;
    const std::string args = rdma_submit_args(v2605);
    EXPECT_NE(args.find("qid=+8(+160(+128(%si))):u16"), std::string::npos) << args;
    EXPECT_NE(args.find("head=+0(+0(+16(%si))):u64"), std::string::npos) << args;
    EXPECT_NE(args.find("cdw10=+40(+0(+16(%si))):u64"), std::string::npos) << args;
    // a layout with the request's pointer before its work request
    RdmaHostSites before = v2605;
    before.req_offset = 8;
    EXPECT_NE(rdma_submit_args(before).find("qid=+8(+160(-16(%si))):u16"), std::string::npos);
}

}  // namespace
}  // namespace nvmetrace::spdk
