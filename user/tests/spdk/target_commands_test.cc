#include "spdk/target_commands.h"

#include "analysis/assembler.h"
#include "analysis/device_table.h"
#include "analysis/sampling.h"
#include "spdk/tsc_clock.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace::spdk {
namespace {

// Ids as SPDK v26.05 numbers them (nvmf_tcp is group 5, bdev 3, nvmf_rdma 4)
constexpr uint16_t kNew = 5 * 64 + 0, kCompleted = 5 * 64 + 10;         // TCP_REQ_RDY_TO_COMPLETE
constexpr uint16_t kRdmaNew = 4 * 64 + 0, kRdmaCompleted = 4 * 64 + 8;  // RDMA_REQ_RDY_TO_COMPL
constexpr uint16_t kStart = 3 * 64 + 0, kDone = 3 * 64 + 1;
constexpr uint16_t kQpair = 7, kQpair2 = 8, kBdev = 3;

TargetTpoints tpoints() {
    TargetTpoints tp;
    tp.tcp_new = kNew;
    tp.tcp_respond = kCompleted;
    tp.rdma_new = kRdmaNew;
    tp.rdma_respond = kRdmaCompleted;
    tp.bdev_start = kStart;
    tp.bdev_done = kDone;
    return tp;  // argument positions: SPDK's (type, ctx, offset; ctx)
}

struct Fixture {
    std::map<uint16_t, std::string> owners = {
        {kQpair, "10.0.0.1:50342 nqn.2024-01.io.x:a 10.0.0.2:4420 qid:3"},
        {kQpair2, "10.0.0.1:50346 nqn.2024-01.io.x:a 10.0.0.2:4420 qid:4"},
        {kBdev, "bdev_Malloc0"}};
    TargetCommands tc;
    explicit Fixture(uint32_t sample = 1, uint64_t seed = 0)
        : tc(
              tpoints(), sample, seed, [](uint64_t tsc) { return tsc * 10; },  // 1 tick: 10 ns
              [this](uint16_t id) {
                  const auto it = owners.find(id);
                  return it == owners.end() ? std::string() : it->second;
              },
              [](const std::string& bdev) { return bdev == "Malloc0" ? 1u : 0u; }) {}

    void entry(uint64_t tsc, uint16_t id, uint16_t owner, uint64_t object,
               std::vector<uint64_t> args = {}, uint32_t size = 0) {
        TraceEntry e;
        e.tsc = tsc;
        e.tpoint_id = id;
        e.owner_id = owner;
        e.object_id = object;
        e.size = size;
        e.args = std::move(args);
        tc.push(e);
    }
    // one command's entries: NEW, the bdev I/O's start and end, READY_TO_COMPLETE
    void command(uint64_t t, uint64_t req, uint64_t bdev_io, uint64_t lba, bool write = false,
                 uint16_t qpair = kQpair) {
        entry(t, kNew, qpair, req, {1});
        entry(t + 10, kStart, kBdev, bdev_io, {write ? 2u : 1u, req, lba, 1}, 8);
        entry(t + 100, kDone, kBdev, bdev_io, {req, 0});
        entry(t + 150, kCompleted, qpair, req, {0});
    }
};

TEST(SpdkTarget, QidFromTheQueuePairsOwner) {
    EXPECT_EQ(qid_of_owner("10.0.0.1:50342 nqn.2024-01.io.x:a 10.0.0.2:4420 qid:12"), 12);
    EXPECT_EQ(qid_of_owner("10.0.0.1:50342 nqn.x qid:0"), 0);
    // before the qpair joins a controller its description has no qid yet
    EXPECT_EQ(qid_of_owner("10.0.0.1:50342"), std::nullopt);
    EXPECT_EQ(qid_of_owner(""), std::nullopt);
    EXPECT_EQ(qid_of_owner("10.0.0.1:1 qid:"), std::nullopt);
    EXPECT_EQ(qid_of_owner("10.0.0.1:1 qid:7x"), std::nullopt);
    EXPECT_EQ(qid_of_owner("10.0.0.1:1 qid:70000"), std::nullopt);
    // an NQN that holds "qid:" is not the queue's
    EXPECT_EQ(qid_of_owner("10.0.0.1:1 nqn.qid:5"), std::nullopt);
}

TEST(SpdkTarget, OneCommandIsFourRecordsOfItsPlaces) {
    Fixture f;
    f.command(1000, 0xa000, 0xb000, 4096);
    const auto recs = f.tc.release_all();
    ASSERT_EQ(recs.size(), 4u);
    const uint16_t events[] = {NVMETRACE_EV_NVMET_INIT, NVMETRACE_EV_NVMET_EXEC,
                               NVMETRACE_EV_NVMET_BIO_DONE, NVMETRACE_EV_NVMET_COMPLETE};
    const uint64_t times[] = {10'000, 10'100, 11'000, 11'500};
    for (size_t i = 0; i < 4; i++) {
        const nvmetrace_rec& r = recs[i];
        EXPECT_EQ(r.event, events[i]);
        EXPECT_EQ(r.ts, times[i]);
        EXPECT_EQ(r.lba, 4096u);
        EXPECT_EQ(r.len, 8u);
        EXPECT_EQ(r.qid, 3);
        EXPECT_EQ(r.opcode, 0x02);
        EXPECT_EQ(r.cid, recs[0].cid);
        EXPECT_EQ(r.flags, NVMETRACE_REC_SPDK | NVMETRACE_REC_LEN_BLOCKS | NVMETRACE_REC_HAS_QID);
        EXPECT_EQ(r.seq, i);
    }
    EXPECT_EQ(recs[0].aux, 1u);  // the namespace its bdev serves
    EXPECT_EQ(f.tc.counts().commands, 1u);
    EXPECT_EQ(f.tc.in_flight(), 0u);
}

TEST(SpdkTarget, TheAssemblerMakesThemOneTargetCommandWithoutCommandId) {
    Fixture f;
    f.command(1000, 0xa000, 0xb000, 4096, true);
    f.command(1020, 0xa100, 0xb100, 8192);
    DeviceTable table;
    std::vector<Command> out;
    Assembler a(table, [&](const Command& c) { out.push_back(c); });
    for (const auto& r : f.tc.release_all())
        a.push(r);
    a.finish();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(a.counts().records_out_of_order, 0u);
    for (const auto& c : out) {
        EXPECT_EQ(c.side, Side::target);
        EXPECT_FALSE(c.has_cid);
        EXPECT_TRUE(c.spdk_target);
        EXPECT_EQ(c.nsid, 1u);
        EXPECT_EQ(c.qid, 3);
    }
    EXPECT_EQ(out[0].op, Op::write);
    EXPECT_EQ(out[0].lba, 4096u);
    EXPECT_EQ(out[1].op, Op::read);
    EXPECT_EQ(out[1].lba, 8192u);
}

TEST(SpdkTarget, RecordsGoOutInTimeOrderOnceNothingEarlierCanCome) {
    Fixture f;
    // a long write begins, a short read begins and ends inside it
    f.entry(1000, kNew, kQpair, 0xa000, {1});
    f.entry(1010, kStart, kBdev, 0xb000, {2, 0xa000, 100, 1}, 8);
    f.command(1100, 0xa100, 0xb100, 200);
    // the read is done, but the write began before it: nothing goes yet
    EXPECT_TRUE(f.tc.release().empty());
    f.entry(5000, kDone, kBdev, 0xb000, {0xa000, 0});
    f.entry(5100, kCompleted, kQpair, 0xa000, {0});
    // nothing in flight; the newest entry (51 us) is within kSettleNs: all held
    EXPECT_TRUE(f.tc.release().empty());
    const uint64_t later = TargetCommands::kSettleNs / 10 + 10'000;
    f.entry(later, kNew, kQpair2, 0xa200, {1});  // an admin command begins long after
    const auto recs = f.tc.release();
    ASSERT_EQ(recs.size(), 8u);
    for (size_t i = 1; i < recs.size(); i++)
        EXPECT_LE(recs[i - 1].ts, recs[i].ts);
    EXPECT_EQ(recs.front().lba, 100u);
    EXPECT_EQ(recs.back().lba, 100u);
    EXPECT_EQ(recs.back().event, NVMETRACE_EV_NVMET_COMPLETE);
}

TEST(SpdkTarget, OnlyTheSampledLbasBecomeRecords) {
    const uint32_t n = 10;
    const uint64_t seed = 42;
    Fixture f(n, seed);
    uint64_t picked = 0;
    for (uint64_t i = 0; i < 500; i++) {
        const uint64_t lba = i * 8;
        picked += sampled(lba, seed, n);
        f.command(1000 + i * 200, 0xa000 + i, 0xb000 + i, lba);
    }
    const auto recs = f.tc.release_all();
    EXPECT_GT(picked, 0u);
    EXPECT_LT(picked, 500u);
    EXPECT_EQ(recs.size(), 4 * picked);
    for (const auto& r : recs)
        EXPECT_TRUE(sampled(r.lba, seed, n));
    EXPECT_EQ(f.tc.counts().commands, picked);
    EXPECT_EQ(f.tc.counts().not_sampled, 500 - picked);
}

TEST(SpdkTarget, WhatIsNotAReadOrWriteOrNotWholeIsCountedNotRecorded) {
    Fixture f;
    // an admin command: no bdev I/O
    f.entry(1000, kNew, kQpair, 0xa000, {1});
    f.entry(1100, kCompleted, kQpair, 0xa000, {0});
    // a flush: a bdev I/O of another type
    f.entry(2000, kNew, kQpair, 0xa100, {1});
    f.entry(2010, kStart, kBdev, 0xb100, {6, 0xa100, 0, 1}, 0);
    f.entry(2100, kCompleted, kQpair, 0xa100, {0});
    // begun before the recording: no NEW
    f.entry(3000, kStart, kBdev, 0xb200, {1, 0xa200, 8, 1}, 8);
    f.entry(3100, kDone, kBdev, 0xb200, {0xa200, 0});
    f.entry(3150, kCompleted, kQpair, 0xa200, {0});
    // its bdev I/O's end lost
    f.entry(4000, kNew, kQpair, 0xa300, {1});
    f.entry(4010, kStart, kBdev, 0xb300, {1, 0xa300, 16, 1}, 8);
    f.entry(4150, kCompleted, kQpair, 0xa300, {0});
    // a bdev I/O of another user of the bdev
    f.entry(5000, kStart, kBdev, 0xb400, {1, 0xdead, 24, 1}, 8);
    f.entry(5100, kDone, kBdev, 0xb400, {0xdead, 0});
    EXPECT_TRUE(f.tc.release_all().empty());
    EXPECT_EQ(f.tc.counts().commands, 0u);
    EXPECT_EQ(f.tc.counts().no_bdev_io, 2u);
    EXPECT_EQ(f.tc.counts().unfinished, 2u);
}

TEST(SpdkTarget, RdmaRequestsHaveNoQueueId) {
    Fixture f;
    f.entry(1000, kRdmaNew, 0, 0xa000, {0xcafe, 1});
    f.entry(1010, kStart, kBdev, 0xb000, {1, 0xa000, 64, 1}, 8);
    f.entry(1100, kDone, kBdev, 0xb000, {0xa000, 0});
    f.entry(1150, kRdmaCompleted, 0, 0xa000, {0xcafe, 0});
    const auto recs = f.tc.release_all();
    ASSERT_EQ(recs.size(), 4u);
    EXPECT_EQ(recs[0].flags & NVMETRACE_REC_HAS_QID, 0);
    EXPECT_EQ(recs[0].qid, 0);
    EXPECT_EQ(f.tc.counts().no_qid, 1u);
}

TEST(SpdkTarget, StuckReadsAreAbandonedAndWaitingAdminCommandsDropped) {
    Fixture f;
    f.entry(100, kNew, kQpair, 0xa000, {1});  // an asynchronous event request: waits
    f.entry(200, kNew, kQpair, 0xa100, {1});
    f.entry(210, kStart, kBdev, 0xb100, {1, 0xa100, 8, 1}, 8);
    EXPECT_EQ(f.tc.in_flight(), 2u);
    f.tc.expire(3000 + TargetCommands::kAbandonNs);
    EXPECT_EQ(f.tc.in_flight(), 0u);
    EXPECT_EQ(f.tc.counts().abandoned, 1u);
    // its end, late: not a command any more
    f.entry(300, kDone, kBdev, 0xb100, {0xa100, 0});
    f.entry(310, kCompleted, kQpair, 0xa100, {0});
    EXPECT_EQ(f.tc.counts().unfinished, 1u);
}

TEST(SpdkTarget, InFlightAtTheEndIsCut) {
    Fixture f;
    f.command(1000, 0xa000, 0xb000, 8);
    f.entry(2000, kNew, kQpair, 0xa100, {1});
    f.entry(2010, kStart, kBdev, 0xb100, {1, 0xa100, 16, 1}, 8);
    EXPECT_EQ(f.tc.release_all().size(), 4u);
    EXPECT_EQ(f.tc.counts().cut_end, 1u);
}

TEST(TscClock, TheRateComesFromPairsASecondApart) {
    TscClock c(1'000'000'000);  // SPDK says 1 GHz
    c.add({1000, 5'000'000});
    EXPECT_EQ(c.ns(2000), 5'001'000u);  // one pair: SPDK's rate
    // a pair less than a second later: its rate would carry its read error; not taken
    c.add({1000 + 8'000'000, 9'100'000});
    EXPECT_EQ(c.ns(2000), 5'001'000u);
    // the TSC really runs at 2 GHz against CLOCK_MONOTONIC: a pair 2 s later says so
    c.add({1000 + 4'000'000'000, 2'005'000'000});
    EXPECT_EQ(c.ns(1000 + 2'000'000), 6'000'000u);
    EXPECT_EQ(c.ns(1000 + 4'000'000'000), 2'005'000'000u);
    // a later pair read 1 ms late (the reader preempted) moves a 7 ms span by 7 ms * 1 ms / 3 s
    c.add({1000 + 6'000'000'000, 3'006'000'000});
    const uint64_t span = c.ns(1000 + 14'000'000) - c.ns(1000);
    EXPECT_NEAR(static_cast<double>(span), 7'000'000.0, 7'000'000.0 * 0.001);
}

TEST(TscClock, APairsReadErrorNeverMovesADurationAcrossAPoll) {
    // The TSC runs at 2 GHz; the recorder reads a pair every 5 ms, each late or
    // early by up to 400 us (a loaded machine).  A 400 us command starts
    // before a poll and ends after it, so its ends are converted under two
    // different pairs; its duration must still be its own.
    constexpr uint64_t kT0 = 1'000'000;
    constexpr int64_t kMono0 = 7'000'000;
    const auto mono = [](uint64_t tsc) { return kMono0 + static_cast<int64_t>((tsc - kT0) / 2); };
    const auto read_error = [](uint64_t k) {
        return (static_cast<int64_t>(k * 7919 % 801) - 400) * 1000;
    };
    TscClock c(2'001'000'000);  // SPDK's own rate 0.05 % off
    c.add({kT0, kMono0});
    constexpr uint64_t kPoll = 10'000'000, kHalf = 400'000;  // 5 ms and 200 us in ticks
    double worst = 0;
    uint64_t last = 0;
    for (uint64_t k = 1; k <= 6000; k++) {  // 30 s
        const uint64_t t = kT0 + k * kPoll;
        c.add({t, mono(t) + read_error(k)});
        const uint64_t start = c.ns(t - kHalf);
        EXPECT_GE(start, last) << "poll " << k;  // never backwards
        c.add({t + kPoll, mono(t + kPoll) + read_error(k + 1)});
        const uint64_t end = c.ns(t + kHalf);
        last = end;
        worst = std::max(worst, std::fabs(static_cast<double>(end - start) - 400'000.0));
    }
    EXPECT_LT(worst, 1'000.0);  // 0.25 %; the line redrawn at every pair: 710 us
    EXPECT_EQ(c.steps(), 0u);
    // and the times meet the clock: within a pair's read error after 30 s
    const uint64_t t = kT0 + 6001 * kPoll;
    EXPECT_NEAR(static_cast<double>(c.ns(t)), static_cast<double>(mono(t)), 500'000.0);
}

TEST(TscClock, SpdksRateFarOffIsSteppedOnceAndCounted) {
    TscClock c(1'000'000'000);  // SPDK says 1 GHz; the TSC runs at 2
    c.add({0, 1'000'000'000});
    c.add({3'000'000'000, 2'500'000'000});  // 1.5 s later: the mapping says 4 s
    EXPECT_EQ(c.steps(), 1u);
    EXPECT_EQ(c.ns(3'000'000'000), 2'500'000'000u);
    EXPECT_EQ(c.ns(3'002'000'000), 2'501'000'000u);
}

}  // namespace
}  // namespace nvmetrace::spdk
