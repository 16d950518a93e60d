#include "analysis.h"

#include "report.h"
#include "stats.h"

#include <algorithm>
#include <deque>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

constexpr uint32_t kNvme0n1 = 259u << 20 | 0;
constexpr uint32_t kNvme1n1 = 259u << 20 | 1;    // multipath head
constexpr uint32_t kNvme1c1n1 = 259u << 20 | 2;  // its path

nvmetrace_rec host(uint16_t ev, uint64_t ts, uint16_t tag, uint64_t lba, bool write = false,
                   uint32_t dev = kNvme0n1, uint16_t qid = 1, uint32_t len = 4096,
                   uint64_t aux = 0) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.lba = lba;
    r.aux = aux;
    r.dev = dev;
    r.len = len;
    r.event = ev;
    r.qid = ev == NVMETRACE_EV_BIO_QUEUE ? 0 : qid;
    r.tag = ev == NVMETRACE_EV_BIO_QUEUE ? 0 : tag;
    r.opcode = write ? 0x01 : 0x02;
    r.flags = (write ? NVMETRACE_REC_WRITE : 0) |
              (ev == NVMETRACE_EV_BIO_QUEUE ? 0 : NVMETRACE_REC_HAS_QID);
    return r;
}

nvmetrace_rec bio(uint64_t ts, uint64_t lba, uint32_t dev = kNvme0n1, bool write = false) {
    return host(NVMETRACE_EV_BIO_QUEUE, ts, 0, lba, write, dev);
}

nvmetrace_rec target(uint16_t ev, uint64_t ts, uint16_t cid, uint64_t lba, uint32_t blocks = 8,
                     uint64_t aux = 0) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.lba = lba;
    r.aux = aux;
    r.len = blocks;
    r.event = ev;
    r.qid = 3;
    r.cid = cid;
    r.cntlid = 1;
    r.opcode = 0x02;
    r.flags = NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID | kRecLenBlocks;
    return r;
}

// All host records of one command, bio at t0, then +1000, +2000, +50000, +500 ns.
std::vector<nvmetrace_rec> host_command(uint64_t t0, uint16_t tag, uint64_t lba) {
    return {bio(t0, lba), host(NVMETRACE_EV_NVME_SETUP, t0 + 1000, tag, lba),
            host(NVMETRACE_EV_RQ_ISSUE, t0 + 3000, tag, lba),
            host(NVMETRACE_EV_NVME_COMPLETE, t0 + 53000, tag, lba),
            host(NVMETRACE_EV_RQ_COMPLETE, t0 + 53500, tag, lba)};
}

int slot(uint16_t ev) {
    return event_slot(ev);
}

struct Fixture : ::testing::Test {
    DeviceTable devices;
    std::vector<Command> out;
    Assembler assembler{devices, [this](const Command& c) { out.push_back(c); }};

    Fixture() {
        devices.add_disk(kNvme0n1, "nvme0n1", 512);
        devices.add_disk(kNvme1n1, "nvme1n1", 512);
        devices.add_path(kNvme1c1n1, kNvme1n1, "nvme1c1n1");
        devices.add_target_namespace(1, "nvmet nsid 1", 512);
    }
    void feed(const std::vector<nvmetrace_rec>& recs) {
        for (const auto& r : recs)
            assembler.push(r);
    }
};

using AssemblerTest = Fixture;

// SmallFifo against std::deque: the same order through every mix of
// pushes and pops (inline element, the vector behind it, its compaction).
TEST(SmallFifo, BehavesLikeADeque) {
    std::mt19937_64 rng(5);
    SmallFifo<uint64_t> q;
    std::deque<uint64_t> ref;
    uint64_t next = 0;
    for (int step = 0; step < 20000; step++) {
        // phases: mostly one element, then bursts of many
        const bool burst = (step / 1000) % 2 == 1;
        if (ref.empty() || rng() % (burst ? 3 : 2) != 0) {
            q.push_back(next);
            ref.push_back(next++);
        } else {
            ASSERT_EQ(q.front(), ref.front());
            q.pop_front();
            ref.pop_front();
        }
        ASSERT_EQ(q.size(), ref.size());
        ASSERT_EQ(q.empty(), ref.empty());
        if (!ref.empty()) {
            ASSERT_EQ(q.front(), ref.front());
        }
    }
    EXPECT_GT(next, 10000u);
}

// A passthrough command (an NVMe generic char device, io_uring_cmd): no bio, so it starts at
// nvme_setup_cmd, on the multipath path disk; it is a whole command of the namespace's head,
// timed from the driver's setup to the block layer's completion.
TEST_F(AssemblerTest, PassthroughCommandStartsAtTheSetup) {
    std::vector<nvmetrace_rec> recs = host_command(1'000'000, 9, 777);
    recs.erase(recs.begin());  // the bio
    for (auto& r : recs) {
        r.dev = kNvme1c1n1;
        r.flags |= NVMETRACE_REC_PASSTHRU;
    }
    feed(recs);
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(c.dev, kNvme1n1);
    EXPECT_EQ(c.lba, 777u);
    EXPECT_TRUE(c.passthru);
    EXPECT_FALSE(c.has(slot(NVMETRACE_EV_BIO_QUEUE)));
    EXPECT_EQ(missing_boundaries(c, kComponents), 0u);
    Layout l = layout_for(View::host_only, c.present, kComponents);
    EXPECT_TRUE(l.complete());
    EXPECT_EQ(l.first_slot, slot(NVMETRACE_EV_NVME_SETUP));
    EXPECT_EQ(l.last_slot, slot(NVMETRACE_EV_RQ_COMPLETE));
    EXPECT_EQ(assembler.in_flight(), 0u);
    EXPECT_EQ(assembler.counts().lost_end, 0u);
    // without the flag, the same records are a block command cut at the start
    out.clear();
    for (auto& r : recs) {
        r.flags &= static_cast<uint8_t>(~NVMETRACE_REC_PASSTHRU);
        r.ts += 1'000'000;
    }
    feed(recs);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(assembler.counts().cut_start, 1u);
}

TEST_F(AssemblerTest, OneHostCommand) {
    feed(host_command(1'000'000, 7, 4242));
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(c.side, Side::host);
    EXPECT_EQ(c.op, Op::read);
    EXPECT_EQ(c.size, 4096u);
    EXPECT_EQ(c.dev, kNvme0n1);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_BIO_QUEUE)), 1'000'000u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_NVME_SETUP)), 1'001'000u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_RQ_COMPLETE)), 1'053'500u);
    EXPECT_FALSE(c.has(slot(NVMETRACE_EV_RQ_INSERT)));
    EXPECT_EQ(view_of(c), View::host_only);
    EXPECT_EQ(missing_boundaries(c, kComponents), 0u);
    EXPECT_EQ(assembler.in_flight(), 0u);
    EXPECT_EQ(assembler.waiting(), 0u);
    EXPECT_EQ(assembler.counts().records_host, 5u);
}

// libaio above the block layer: io_submit entry (carried by the file
// submission), the file submission before the bio, then the aio completion
// and the reap after block_rq_complete.
std::vector<nvmetrace_rec> user_command(uint64_t t0, uint16_t tag, uint64_t lba, uint32_t pid) {
    std::vector<nvmetrace_rec> v;
    v.push_back(host(NVMETRACE_EV_FILE_SUBMIT, t0, 0, lba, false, kNvme0n1, 0, 4096,
                     uint64_t{pid} | uint64_t{700} << 32));  // io_submit entered 700 ns before
    for (const auto& r : host_command(t0 + 2000, tag, lba))
        v.push_back(r);
    v.push_back(
        host(NVMETRACE_EV_AIO_COMPLETE, t0 + 56000, 0, lba, false, kNvme0n1, 0, 4096, 4096));
    v.push_back(host(NVMETRACE_EV_AIO_REAP, t0 + 60000, 0, lba, false, kNvme0n1, 0, 0,
                     uint64_t{pid} | uint64_t{1} << 32));
    return v;
}

TEST_F(AssemblerTest, CommandAboveTheBlockLayer) {
    feed(user_command(1'000'000, 7, 4242, 99));
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(c.pid, 99u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_SYSCALL_SUBMIT)), 999'300u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_FILE_SUBMIT)), 1'000'000u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_AIO_COMPLETE)), 1'056'000u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_AIO_REAP)), 1'060'000u);
    EXPECT_EQ(missing_boundaries(c, kComponents), 0u);
    // end to end is the span user space sees: io_submit entry to the reap
    Layout l = layout_for(View::host_only, c.present, kComponents);
    EXPECT_EQ(l.first_slot, slot(NVMETRACE_EV_SYSCALL_SUBMIT));
    EXPECT_EQ(l.last_slot, slot(NVMETRACE_EV_AIO_REAP));
    EXPECT_EQ(l.segments.front().name, "syscall: io_submit entry to the file");
    EXPECT_EQ(l.segments.back().name, "wake-up and reap (io_getevents)");
    EXPECT_EQ(l.stages.front().name, "syscall and file submission (before the block layer)");
    EXPECT_EQ(l.stages.back().name, "completion to user space (wake-up, reap)");
    EXPECT_EQ(assembler.in_flight(), 0u);
    EXPECT_EQ(assembler.counts().user_unmatched, 0u);
}

TEST_F(AssemblerTest, ReapsAttachByTheirCommandNotByOrder) {
    // two commands complete; the second one's event is reaped first
    auto a = user_command(1'000'000, 1, 100, 5);
    auto b = user_command(1'000'100, 2, 200, 5);
    std::vector<nvmetrace_rec> all;
    for (size_t i = 0; i + 1 < a.size(); i++) {
        all.push_back(a[i]);
        all.push_back(b[i]);
    }
    all.push_back(b.back());
    a.back().ts = b.back().ts + 5000;
    all.push_back(a.back());
    feed(all);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].lba, 200u);
    EXPECT_EQ(out[1].lba, 100u);
    EXPECT_EQ(out[1].at(slot(NVMETRACE_EV_AIO_REAP)), b.back().ts + 5000);
}

TEST_F(AssemblerTest, WithoutUserEventsTheCommandEndsAtTheBlockLayer) {
    // no file submission: handed on at block_rq_complete; without a reap
    // (records lost): handed on at the end of the recording
    feed(host_command(1'000'000, 7, 4242));
    ASSERT_EQ(out.size(), 1u);
    auto u = user_command(2'000'000, 8, 777, 1);
    u.pop_back();
    feed(u);
    EXPECT_EQ(out.size(), 1u);
    EXPECT_EQ(assembler.in_flight(), 1u);
    assembler.finish();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(out[1].has(slot(NVMETRACE_EV_AIO_COMPLETE)));
    EXPECT_FALSE(out[1].has(slot(NVMETRACE_EV_AIO_REAP)));
    Layout l = layout_for(View::host_only, out[1].present, kComponents);
    EXPECT_EQ(l.last_slot, slot(NVMETRACE_EV_AIO_COMPLETE));
    EXPECT_EQ(out[1].at(l.first_slot), 2'000'000u - 700u);
}

TEST_F(AssemblerTest, InterleavedCommandsAndTagReuse) {
    // A (tag 1, lba 100) and B (tag 2, lba 200) in flight together; then C
    // reuses tag 1 with another LBA while B is still running.
    feed({bio(100, 100), bio(110, 200), host(NVMETRACE_EV_NVME_SETUP, 120, 1, 100),
          host(NVMETRACE_EV_NVME_SETUP, 130, 2, 200), host(NVMETRACE_EV_RQ_ISSUE, 140, 1, 100),
          host(NVMETRACE_EV_RQ_ISSUE, 150, 2, 200), host(NVMETRACE_EV_NVME_COMPLETE, 1000, 1, 100),
          host(NVMETRACE_EV_RQ_COMPLETE, 1100, 1, 100), bio(1200, 300),
          host(NVMETRACE_EV_NVME_SETUP, 1210, 1, 300), host(NVMETRACE_EV_RQ_ISSUE, 1220, 1, 300),
          host(NVMETRACE_EV_NVME_COMPLETE, 1500, 2, 200),
          host(NVMETRACE_EV_RQ_COMPLETE, 1600, 2, 200),
          host(NVMETRACE_EV_NVME_COMPLETE, 2000, 1, 300),
          host(NVMETRACE_EV_RQ_COMPLETE, 2100, 1, 300)});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].lba, 100u);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_BIO_QUEUE)), 100u);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_RQ_COMPLETE)), 1100u);
    EXPECT_EQ(out[1].lba, 200u);
    EXPECT_EQ(out[1].at(slot(NVMETRACE_EV_BIO_QUEUE)), 110u);
    EXPECT_EQ(out[1].at(slot(NVMETRACE_EV_RQ_ISSUE)), 150u);
    EXPECT_EQ(out[2].lba, 300u);
    EXPECT_EQ(out[2].at(slot(NVMETRACE_EV_BIO_QUEUE)), 1200u);
    EXPECT_EQ(out[2].at(slot(NVMETRACE_EV_NVME_SETUP)), 1210u);
    EXPECT_EQ(assembler.counts().incomplete(), 0u);
}

TEST_F(AssemblerTest, SameLbaTwiceAttachesBiosInOrder) {
    auto a = host_command(1000, 1, 64);
    auto b = host_command(100'000, 1, 64);
    feed(a);
    feed(b);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_BIO_QUEUE)), 1000u);
    EXPECT_EQ(out[1].at(slot(NVMETRACE_EV_BIO_QUEUE)), 100'000u);
}

TEST_F(AssemblerTest, MultipathKeepsTheHeadsBioQueue) {
    feed({bio(100, 8, kNvme1n1), bio(130, 8, kNvme1c1n1),
          host(NVMETRACE_EV_NVME_SETUP, 200, 5, 8, false, kNvme1c1n1),
          host(NVMETRACE_EV_RQ_ISSUE, 210, 5, 8, false, kNvme1c1n1),
          host(NVMETRACE_EV_NVME_COMPLETE, 900, 5, 8, false, kNvme1c1n1),
          host(NVMETRACE_EV_RQ_COMPLETE, 950, 5, 8, false, kNvme1c1n1)});
    assembler.finish();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dev, kNvme1n1);  // grouped under the head
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_BIO_QUEUE)), 100u);
    EXPECT_EQ(assembler.counts().multipath_duplicates, 1u);
    EXPECT_EQ(assembler.counts().bios_unmatched, 0u);
    EXPECT_EQ(devices.disk_name(out[0].dev), "nvme1n1");
}

TEST_F(AssemblerTest, MultipathPathBioAloneIsKept) {
    // The head's record was lost: the path disk's is the only one.
    feed({bio(130, 8, kNvme1c1n1), host(NVMETRACE_EV_NVME_SETUP, 200, 5, 8, false, kNvme1c1n1),
          host(NVMETRACE_EV_RQ_ISSUE, 210, 5, 8, false, kNvme1c1n1),
          host(NVMETRACE_EV_NVME_COMPLETE, 900, 5, 8, false, kNvme1c1n1),
          host(NVMETRACE_EV_RQ_COMPLETE, 950, 5, 8, false, kNvme1c1n1)});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_BIO_QUEUE)), 130u);
}

TEST_F(AssemblerTest, SchedulerInsertWithoutTagIsAttached) {
    feed({bio(100, 16), host(NVMETRACE_EV_RQ_INSERT, 150, 0xffff, 16),
          host(NVMETRACE_EV_NVME_SETUP, 400, 3, 16), host(NVMETRACE_EV_RQ_ISSUE, 410, 3, 16),
          host(NVMETRACE_EV_NVME_COMPLETE, 800, 3, 16),
          host(NVMETRACE_EV_RQ_COMPLETE, 820, 3, 16)});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_RQ_INSERT)), 150u);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_BIO_QUEUE)), 100u);
    EXPECT_EQ(assembler.waiting(), 0u);
}

TEST_F(AssemblerTest, CutCommandsAreCountedNotEmitted) {
    // Starts before the recording: no bio, first record is the issue.
    feed({host(NVMETRACE_EV_RQ_ISSUE, 100, 1, 10), host(NVMETRACE_EV_NVME_COMPLETE, 300, 1, 10),
          host(NVMETRACE_EV_RQ_COMPLETE, 310, 1, 10)});
    // Its RQ_COMPLETE is lost, then tag 2 is reused by another command.
    feed({bio(400, 20), host(NVMETRACE_EV_NVME_SETUP, 410, 2, 20),
          host(NVMETRACE_EV_RQ_ISSUE, 420, 2, 20), host(NVMETRACE_EV_NVME_COMPLETE, 600, 2, 20)});
    feed(host_command(1000, 2, 30));
    // Still running when the recording stops.
    feed({bio(5000, 40), host(NVMETRACE_EV_NVME_SETUP, 5010, 3, 40)});
    assembler.finish();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].lba, 30u);
    const auto& c = assembler.counts();
    EXPECT_EQ(c.cut_start, 1u);
    EXPECT_EQ(c.lost_end, 1u);
    EXPECT_EQ(c.cut_end, 1u);
    EXPECT_EQ(c.incomplete(), 3u);
    EXPECT_EQ(c.complete, 1u);
    EXPECT_EQ(assembler.in_flight(), 0u);
}

TEST_F(AssemblerTest, SameLbaRepeatedEventMeansReuse) {
    // Same tag and LBA, but a second nvme_setup_cmd: the first command lost
    // its completion records.
    feed({bio(100, 50), host(NVMETRACE_EV_NVME_SETUP, 110, 4, 50),
          host(NVMETRACE_EV_RQ_ISSUE, 120, 4, 50)});
    feed(host_command(1000, 4, 50));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_BIO_QUEUE)), 1000u);
    EXPECT_EQ(assembler.counts().lost_end, 1u);
}

TEST_F(AssemblerTest, UnmatchedBiosExpire) {
    // A bio merged into a request that started at another LBA never gets
    // its own request: it is dropped after the horizon, and counted.
    Assembler a(
        devices, [](const Command&) {}, 1'000'000);
    a.push(bio(100, 77));
    EXPECT_EQ(a.waiting(), 1u);
    a.push(bio(900'000, 78));
    EXPECT_EQ(a.waiting(), 2u);
    a.push(host(NVMETRACE_EV_NVME_SETUP, 1'500'000, 1, 999));
    EXPECT_EQ(a.waiting(), 1u);
    EXPECT_EQ(a.counts().bios_unmatched, 1u);
    a.finish();
    EXPECT_EQ(a.counts().bios_unmatched, 2u);
    EXPECT_EQ(a.counts().cut_end, 1u);
}

TEST_F(AssemblerTest, TargetCommandInBlocks) {
    feed({target(NVMETRACE_EV_NVMET_INIT, 100, 9, 1000, 8, /*nsid*/ 1),
          target(NVMETRACE_EV_NVMET_EXEC, 200, 9, 1000),
          target(NVMETRACE_EV_NVMET_BIO_DONE, 60'200, 9, 1000),
          target(NVMETRACE_EV_NVMET_COMPLETE, 60'500, 9, 1000),
          target(NVMETRACE_EV_NVMET_INIT, 70'000, 9, 2000, 8, /*nsid*/ 2),
          target(NVMETRACE_EV_NVMET_EXEC, 70'100, 9, 2000),
          target(NVMETRACE_EV_NVMET_BIO_DONE, 80'000, 9, 2000),
          target(NVMETRACE_EV_NVMET_COMPLETE, 80'100, 9, 2000)});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].side, Side::target);
    EXPECT_EQ(view_of(out[0]), View::target_only);
    EXPECT_EQ(out[0].nsid, 1u);
    EXPECT_EQ(out[0].size, 4096u);  // 8 blocks of 512 bytes
    EXPECT_FALSE(out[0].size_in_blocks);
    EXPECT_EQ(out[1].size, 8u);  // nsid 2: block size unknown
    EXPECT_TRUE(out[1].size_in_blocks);
    EXPECT_EQ(assembler.counts().records_target, 8u);
}

TEST_F(AssemblerTest, UnknownEventsAreCountedAndIgnored) {
    nvmetrace_rec r = host(NVMETRACE_EV_RQ_ISSUE, 5, 1, 1);
    r.event = 250;  // an event this build does not know
    assembler.push(r);
    EXPECT_EQ(assembler.counts().records_unknown, 1u);
    EXPECT_EQ(assembler.in_flight(), 0u);
}

TEST_F(AssemblerTest, MemoryIsBoundedByCommandsInFlight) {
    // 200k commands, 32 in flight at a time over 32 tags.
    std::mt19937_64 rng(1);
    std::vector<nvmetrace_rec> recs;
    size_t max_in_flight = 0, max_waiting = 0, emitted = 0;
    Assembler a(devices, [&](const Command&) { emitted++; });
    uint64_t t = 0;
    for (uint64_t i = 0; i < 200'000; i += 32) {
        recs.clear();
        for (uint16_t tag = 0; tag < 32; tag++) {
            auto c = host_command(t + tag * 10, tag, rng());
            recs.insert(recs.end(), c.begin(), c.end());
        }
        std::stable_sort(recs.begin(), recs.end(),
                         [](const auto& x, const auto& y) { return x.ts < y.ts; });
        for (const auto& r : recs) {
            a.push(r);
            max_in_flight = std::max(max_in_flight, a.in_flight());
            max_waiting = std::max(max_waiting, a.waiting());
        }
        t += 100'000;
    }
    EXPECT_EQ(emitted, 200'000u);
    EXPECT_LE(max_in_flight, 32u);
    EXPECT_LE(max_waiting, 32u);
}

TEST(MergeByTs, MergesPerCpuStreams) {
    std::vector<nvmetrace_rec> a(3), b(2);
    a[0].ts = 1, a[1].ts = 4, a[2].ts = 9;
    b[0].ts = 2, b[1].ts = 4;
    a[1].seq = 1, b[1].seq = 2;
    std::vector<std::span<const nvmetrace_rec>> streams{a, b};
    std::vector<nvmetrace_rec> out;
    merge_by_ts(streams, [&](const nvmetrace_rec& r) { out.push_back(r); });
    ASSERT_EQ(out.size(), 5u);
    for (size_t i = 1; i < out.size(); i++)
        EXPECT_LE(out[i - 1].ts, out[i].ts);
    EXPECT_EQ(out[2].seq, 1u);  // ties: lower stream first
    EXPECT_EQ(out[3].seq, 2u);
}

// ----------------------------------------------------------------- layouts

TEST(Layout, EveryViewOfTheTableIsAChain) {
    for (View v : {View::host_only, View::target_only, View::joined}) {
        Layout l = make_layout(v, 0, kComponents);
        EXPECT_TRUE(l.complete());
        for (size_t i = 1; i < l.segments.size(); i++)
            EXPECT_EQ(l.segments[i - 1].to_slot, l.segments[i].from_slot);
        EXPECT_EQ(l.segments.front().from_slot, l.first_slot);
        EXPECT_EQ(l.segments.back().to_slot, l.last_slot);
    }
}

TEST(Layout, HostOnlyComponentsAndStages) {
    Layout l = make_layout(View::host_only, 0, kComponents);
    ASSERT_EQ(l.segments.size(), 4u);
    EXPECT_EQ(l.segments[0].name, "host block layer, submission");
    EXPECT_EQ(l.segments[1].name, "host driver, submission");
    EXPECT_EQ(l.segments[2].name, "network and target (not recorded)");
    EXPECT_EQ(l.segments[3].name, "host block layer, completion");
    ASSERT_EQ(l.stages.size(), 3u);
    EXPECT_EQ(l.stages[0].name, "host block layer");
    EXPECT_EQ(l.stages[1].name, "host driver");
    EXPECT_EQ(l.stages[2].name, "network and target (not recorded)");
    EXPECT_TRUE(l.stages[2].not_recorded);
    EXPECT_EQ(l.segments[3].stage, 0u);  // completion counts in the block layer
}

TEST(Layout, TargetOnlyStages) {
    Layout l = make_layout(View::target_only, 0, kComponents);
    ASSERT_EQ(l.stages.size(), 2u);
    EXPECT_EQ(l.stages[0].name, "target driver");
    EXPECT_EQ(l.stages[1].name, "storage");
    ASSERT_EQ(l.segments.size(), 3u);
    EXPECT_EQ(l.segments[1].name, "storage: target block layer and drive");
}

TEST(Layout, MissingBoundaryMergesNeighbours) {
    uint32_t missing = 1u << event_slot(NVMETRACE_EV_NVME_SETUP);
    Layout l = make_layout(View::host_only, missing, kComponents);
    ASSERT_EQ(l.segments.size(), 3u);
    EXPECT_EQ(l.segments[0].name, "host block layer, submission + host driver, submission");
    EXPECT_TRUE(l.segments[0].merged);
    // The block layer and the driver become one stage, completion included.
    ASSERT_EQ(l.stages.size(), 2u);
    EXPECT_EQ(l.stages[0].name, "host block layer + host driver");
    EXPECT_TRUE(l.stages[0].merged);
    EXPECT_EQ(l.segments[2].stage, 0u);
    ASSERT_EQ(l.missing.size(), 1u);
    EXPECT_EQ(l.missing[0], "nvme_setup_cmd");
}

TEST(Layout, BrokenTableIsRefused) {
    static constexpr ComponentDef broken[] = {
        {"a", NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_NVME_SETUP, "host driver", kHost, 0},
        {"b", NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_RQ_COMPLETE, "host driver", kHost, 0},
    };
    EXPECT_THROW(make_layout(View::host_only, 0, broken), std::logic_error);
    static constexpr ComponentDef bad_stage[] = {
        {"a", NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_RQ_COMPLETE, "no such stage", kHost, 0},
    };
    EXPECT_THROW(make_layout(View::host_only, 0, bad_stage), std::logic_error);
}

// For random commands with random gaps and random lost inner records, the
// components and the stages of each command add up to its end to end.
TEST(Layout, ComponentsAndStagesSumToEndToEndForEveryCommand) {
    std::mt19937_64 rng(42);
    const int order[] = {
        event_slot(NVMETRACE_EV_BIO_QUEUE),     event_slot(NVMETRACE_EV_RQ_INSERT),
        event_slot(NVMETRACE_EV_NVME_SETUP),    event_slot(NVMETRACE_EV_RQ_ISSUE),
        event_slot(NVMETRACE_EV_NVME_COMPLETE), event_slot(NVMETRACE_EV_RQ_COMPLETE)};
    for (int i = 0; i < 20'000; i++) {
        Command c;
        uint64_t t = rng() % 1'000'000'000;
        for (size_t k = 0; k < std::size(order); k++) {
            t += rng() % 100'000;
            bool inner = k > 0 && k + 1 < std::size(order);
            if (inner && rng() % 4 == 0)
                continue;  // lost
            c.ts[order[k]] = t;
            c.present |= 1u << order[k];
        }
        Layout l = make_layout(view_of(c), missing_boundaries(c, kComponents), kComponents);
        int64_t e2e = static_cast<int64_t>(c.at(l.last_slot) - c.at(l.first_slot));
        int64_t seg_sum = 0;
        std::vector<int64_t> stage_sum(l.stages.size());
        for (const auto& s : l.segments) {
            ASSERT_TRUE(c.has(s.from_slot) && c.has(s.to_slot));
            int64_t d = static_cast<int64_t>(c.at(s.to_slot) - c.at(s.from_slot));
            seg_sum += d;
            stage_sum[s.stage] += d;
        }
        int64_t st = 0;
        for (auto v : stage_sum)
            st += v;
        ASSERT_EQ(seg_sum, e2e);
        ASSERT_EQ(st, e2e);
    }
}

// ----------------------------------------------------------------- nvme-tcp

// The host records of one nvme-tcp command: bio, setup, issue, the
// transport events given as (event, ts offset), completion, block completion.
std::vector<nvmetrace_rec> tcp_command(uint64_t t0, uint16_t tag, uint64_t lba, bool write,
                                       std::vector<std::pair<uint16_t, uint64_t>> transport,
                                       uint64_t complete_at) {
    std::vector<nvmetrace_rec> r{bio(t0, lba, kNvme0n1, write),
                                 host(NVMETRACE_EV_NVME_SETUP, t0 + 1000, tag, lba, write),
                                 host(NVMETRACE_EV_RQ_ISSUE, t0 + 2000, tag, lba, write)};
    for (auto [ev, dt] : transport)
        r.push_back(host(ev, t0 + dt, tag, lba, write));
    r.push_back(host(NVMETRACE_EV_NVME_COMPLETE, t0 + complete_at, tag, lba, write));
    r.push_back(host(NVMETRACE_EV_RQ_COMPLETE, t0 + complete_at + 500, tag, lba, write));
    return r;
}

std::vector<std::string> names(const Layout& l) {
    std::vector<std::string> n;
    for (const auto& s : l.segments)
        n.push_back(s.name);
    return n;
}

// Sum of a command's segments: must be its end to end.
int64_t segment_sum(const Command& c, const Layout& l) {
    int64_t sum = 0;
    for (const auto& s : l.segments) {
        EXPECT_TRUE(c.has(s.from_slot) && c.has(s.to_slot)) << s.name;
        sum += static_cast<int64_t>(c.at(s.to_slot) - c.at(s.from_slot));
    }
    return sum;
}

TEST_F(AssemblerTest, TcpReadPath) {
    feed(tcp_command(0, 3, 100, false,
                     {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                      {NVMETRACE_EV_TCP_C2H_RECV, 40'000},
                      {NVMETRACE_EV_TCP_RSP_RECV, 41'000}},
                     42'000));
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    Layout l = layout_for(view_of(c), layout_key(view_of(c), c.present, kComponents), kComponents);
    EXPECT_TRUE(l.complete());
    EXPECT_EQ(names(l), (std::vector<std::string>{
                            "host block layer, submission", "host driver, submission",
                            "net+target, to the data (not recorded)", "network: host receive path",
                            "host driver, completion", "host block layer, completion"}));
    EXPECT_EQ(segment_sum(c, l), 42'500);
}

// Several R2Ts (and H2C PDUs) for one write: the first of each is kept, the
// command is neither cut nor taken for a reused tag.
TEST_F(AssemblerTest, TcpWriteWithSeveralR2Ts) {
    feed(tcp_command(0, 5, 200, true,
                     {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                      {NVMETRACE_EV_TCP_R2T_RECV, 10'000},
                      {NVMETRACE_EV_TCP_H2C_SEND, 11'000},
                      {NVMETRACE_EV_TCP_R2T_RECV, 20'000},
                      {NVMETRACE_EV_TCP_H2C_SEND, 21'000},
                      {NVMETRACE_EV_TCP_R2T_RECV, 30'000},
                      {NVMETRACE_EV_TCP_H2C_SEND, 31'000},
                      {NVMETRACE_EV_TCP_RSP_RECV, 60'000}},
                     61'000));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(assembler.counts().lost_end, 0u);
    EXPECT_EQ(assembler.counts().repeats, 4u);
    const Command& c = out[0];
    EXPECT_EQ(c.op, Op::write);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_TCP_R2T_RECV)), 10'000u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_TCP_H2C_SEND)), 11'000u);
    Layout l = layout_for(view_of(c), layout_key(view_of(c), c.present, kComponents), kComponents);
    EXPECT_TRUE(l.complete());
    EXPECT_EQ(names(l), (std::vector<std::string>{
                            "host block layer, submission", "host driver, submission",
                            "net+target, to the R2T (not recorded)", "host driver, R2T to H2C data",
                            "net+target, after the H2C (not recorded)", "host driver, completion",
                            "host block layer, completion"}));
    EXPECT_EQ(segment_sum(c, l), 61'500);
}

// A read that completes on the C2H SUCCESS flag has no response capsule: its
// own component, and nothing reported missing.
TEST_F(AssemblerTest, TcpReadCompletingOnC2hSuccess) {
    feed(tcp_command(0, 9, 300, false,
                     {{NVMETRACE_EV_TCP_CMD_SEND, 3000}, {NVMETRACE_EV_TCP_C2H_RECV, 40'000}},
                     45'000));
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(missing_boundaries(c, kComponents), 0u);
    Layout l = layout_for(view_of(c), layout_key(view_of(c), c.present, kComponents), kComponents);
    EXPECT_TRUE(l.complete());
    EXPECT_TRUE(l.missing.empty());
    ASSERT_EQ(l.segments.size(), 5u);
    EXPECT_EQ(l.segments[3].name, "network: host receive path");
    EXPECT_EQ(segment_sum(c, l), 45'500);
}

// Transport events that are absent (another transport, or a hook that could
// not attach) pick the coarser components; a missing required one still
// merges its neighbours.
TEST(Layout, OptionalEventsNeverMissing) {
    uint32_t base = 0;
    for (uint16_t ev : {NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_RQ_ISSUE,
                        NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE})
        base |= 1u << event_slot(ev);
    Layout plain = layout_for(View::host_only, base, kComponents);
    EXPECT_TRUE(plain.complete());
    EXPECT_EQ(plain.segments.size(), 4u);
    uint32_t send = base | 1u << event_slot(NVMETRACE_EV_TCP_CMD_SEND);
    uint32_t no_complete = send & ~(1u << event_slot(NVMETRACE_EV_NVME_COMPLETE));
    Layout merged = layout_for(View::host_only, no_complete, kComponents);
    ASSERT_EQ(merged.missing.size(), 1u);
    EXPECT_EQ(merged.missing[0], "nvme_complete_rq");
}

// Every combination of transport events has a path, and its components tile
// the command.
TEST(Layout, EveryTransportShapeHasAPath) {
    const uint16_t optional[] = {NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_TCP_R2T_RECV,
                                 NVMETRACE_EV_TCP_H2C_SEND, NVMETRACE_EV_TCP_C2H_RECV,
                                 NVMETRACE_EV_TCP_RSP_RECV};
    uint32_t base = 0;
    for (uint16_t ev : {NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_RQ_ISSUE,
                        NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE})
        base |= 1u << event_slot(ev);
    for (uint32_t m = 0; m < 1u << std::size(optional); m++) {
        uint32_t present = base;
        for (size_t i = 0; i < std::size(optional); i++)
            if (m >> i & 1u)
                present |= 1u << event_slot(optional[i]);
        Layout l = layout_for(View::host_only, present, kComponents);
        EXPECT_TRUE(l.complete()) << m;
        for (size_t i = 1; i < l.segments.size(); i++)
            EXPECT_EQ(l.segments[i - 1].to_slot, l.segments[i].from_slot);
    }
}

// ----------------------------------------------------------------- joining

// A host command (one nvme-tcp read) on the host's clock: sent at t0 + 3000,
// data back at t0 + 3000 + span.
Command host_cmd(uint64_t t0, uint16_t qid, uint16_t cid, uint64_t lba, uint64_t span,
                 bool write = false) {
    Command c;
    c.side = Side::host;
    c.op = write ? Op::write : Op::read;
    c.lba = lba;
    c.size = 4096;
    c.dev = kNvme0n1;
    c.nsid = 1;
    c.qid = qid;
    c.cid = cid;
    c.has_cid = true;
    auto set = [&](uint16_t ev, uint64_t t) {
        c.ts[event_slot(ev)] = t;
        c.present |= 1u << event_slot(ev);
    };
    set(NVMETRACE_EV_BIO_QUEUE, t0);
    set(NVMETRACE_EV_NVME_SETUP, t0 + 1000);
    set(NVMETRACE_EV_RQ_ISSUE, t0 + 2000);
    set(NVMETRACE_EV_TCP_CMD_SEND, t0 + 3000);
    set(write ? NVMETRACE_EV_TCP_RSP_RECV : NVMETRACE_EV_TCP_C2H_RECV, t0 + 3000 + span);
    set(NVMETRACE_EV_NVME_COMPLETE, t0 + 3500 + span);
    set(NVMETRACE_EV_RQ_COMPLETE, t0 + 4000 + span);
    return c;
}

// A target command on the target's clock: init at t0, residence `res`.
Command target_cmd(uint64_t t0, uint16_t qid, uint16_t cid, uint64_t lba, uint64_t res,
                   bool write = false) {
    Command c;
    c.side = Side::target;
    c.op = write ? Op::write : Op::read;
    c.lba = lba;
    c.size = 4096;
    c.nsid = 1;
    c.qid = qid;
    c.cid = cid;
    c.cntlid = 1;
    c.has_cid = true;
    auto set = [&](uint16_t ev, uint64_t t) {
        c.ts[event_slot(ev)] = t;
        c.present |= 1u << event_slot(ev);
    };
    set(NVMETRACE_EV_NVMET_INIT, t0);
    set(NVMETRACE_EV_NVMET_EXEC, t0 + 1000);
    set(NVMETRACE_EV_NVMET_BIO_DONE, t0 + res - 1000);
    set(NVMETRACE_EV_NVMET_COMPLETE, t0 + res);
    return c;
}

struct JoinRun {
    std::vector<Command> out;
    JoinCounts counts;
};

TEST(Join, ComputedNetworkIsHostSpanMinusTargetResidence) {
    // the target's clock is 7 s behind the host's: never compared
    Command h = host_cmd(10'000'000'000, 1, 0x1005, 800, 60'000);
    Command t = target_cmd(3'000'000'000, 1, 0x1005, 800, 45'000);
    int64_t net = 0;
    Command j = join_commands(h, t, &net);
    EXPECT_EQ(net, 15'000);
    EXPECT_EQ(view_of(j), View::joined);
    Layout l =
        layout_for(View::joined, layout_key(View::joined, j.present, kComponents), kComponents);
    std::vector<std::string> shown;
    int64_t sum = 0;
    for (const auto& s : l.segments) {
        sum += static_cast<int64_t>(j.at(s.to_slot) - j.at(s.from_slot));
        if (!s.seam)
            shown.push_back(s.name);
        else
            EXPECT_EQ(j.at(s.to_slot), j.at(s.from_slot));
    }
    EXPECT_EQ(sum, static_cast<int64_t>(h.at(event_slot(NVMETRACE_EV_RQ_COMPLETE)) -
                                        h.at(event_slot(NVMETRACE_EV_BIO_QUEUE))));
    EXPECT_EQ(shown, (std::vector<std::string>{
                         "host block layer, submission", "host driver, submission",
                         "network: wire and NICs (computed)", "target driver, submission",
                         "storage: target block layer and drive", "target driver, completion",
                         "network: host receive path", "host block layer, completion"}));
    EXPECT_EQ(static_cast<int64_t>(j.at(event_slot(NVMETRACE_EV_NVMET_INIT)) -
                                   j.at(event_slot(NVMETRACE_EV_TCP_CMD_SEND))),
              15'000);
}

// ----------------------------------------------------------------- nvme-tcp joined

// One nvme-tcp command recorded by host and target, each side's records
// through its own Assembler (the target's clock 5 s off: never compared),
// then joined.  Offsets are ns from the host's bio and from the target's
// clock base; the target's command arrival is written after nvmet_req_init
// with the arrival time in aux, as kmod/hooks.c does.
struct TcpJoined {
    Command cmd;
    Layout layout;
    AssemblyCounts target_counts;
    std::vector<std::pair<std::string, int64_t>> shown;  // name, duration (seams left out)
    std::vector<std::pair<std::string, int64_t>> details;
};

TcpJoined tcp_joined(bool write, std::vector<std::pair<uint16_t, uint64_t>> host_transport,
                     uint64_t complete_at,
                     std::vector<std::tuple<uint16_t, uint64_t, uint64_t>> target_events) {
    const uint64_t base = 5'000'000'000;
    const uint16_t tag = 3, cid = 0x2003;
    const uint64_t lba = 100;
    DeviceTable devices;
    devices.add_disk(kNvme0n1, "nvme0n1", 512);
    devices.add_target_namespace(1, "nvmet nsid 1", 512);
    std::vector<Command> hosts, targets;
    Assembler ha(devices, [&](const Command& c) { hosts.push_back(c); });
    Assembler ta(devices, [&](const Command& c) { targets.push_back(c); });
    for (auto r : tcp_command(0, tag, lba, write, host_transport, complete_at)) {
        if (r.event == NVMETRACE_EV_NVME_SETUP) {
            r.cid = cid;
            r.flags |= NVMETRACE_REC_HAS_CID;
            r.aux = 1;
        }
        r.qid = 3;
        ha.push(r);
    }
    for (auto [ev, ts, aux] : target_events) {
        auto r =
            target(ev, base + ts, cid, lba, 8, ev == NVMETRACE_EV_TCPT_CMD_RECV ? base + aux : aux);
        if (ev == NVMETRACE_EV_NVMET_INIT)
            r.aux = 1;
        if (write) {
            r.opcode = 0x01;
            r.flags |= NVMETRACE_REC_WRITE;
        }
        ta.push(r);
    }
    ha.finish();
    ta.finish();
    EXPECT_EQ(hosts.size(), 1u);
    EXPECT_EQ(targets.size(), 1u);
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    for (const auto& c : hosts)
        jn.add(hs, c);
    for (const auto& c : targets)
        jn.add(ts, c);
    TcpJoined out;
    std::vector<Command> joined;
    JoinCounts jc = jn.join([&](const Command& c) { joined.push_back(c); });
    EXPECT_EQ(jc.matched, 1u);
    EXPECT_EQ(joined.size(), 1u);
    if (joined.empty())
        return out;
    out.cmd = joined[0];
    out.target_counts = ta.counts();
    const Command& c = out.cmd;
    EXPECT_EQ(view_of(c), View::joined);
    out.layout =
        layout_for(View::joined, layout_key(View::joined, c.present, kComponents), kComponents);
    EXPECT_TRUE(out.layout.complete());
    int64_t sum = 0;
    for (const auto& sg : out.layout.segments) {
        const int64_t d = static_cast<int64_t>(c.at(sg.to_slot) - c.at(sg.from_slot));
        EXPECT_GE(d, 0) << sg.name;
        sum += d;
        if (!sg.seam)
            out.shown.emplace_back(sg.name, d);
        else
            EXPECT_EQ(d, 0);
    }
    EXPECT_EQ(sum, static_cast<int64_t>(c.at(slot(NVMETRACE_EV_RQ_COMPLETE)) -
                                        c.at(slot(NVMETRACE_EV_BIO_QUEUE))));
    for (const auto& d : out.layout.details)
        if (c.has(d.from_slot) && c.has(d.to_slot))
            out.details.emplace_back(d.name,
                                     static_cast<int64_t>(c.at(d.to_slot) - c.at(d.from_slot)));
    return out;
}

using Rows = std::vector<std::pair<std::string, int64_t>>;

// A read: the seed's table, in path order, with known figures.
TEST(TcpJoin, ReadHasTheSeedsComponents) {
    TcpJoined j = tcp_joined(false,
                             {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                              {NVMETRACE_EV_TCP_C2H_RECV, 40'000},
                              {NVMETRACE_EV_TCP_RSP_RECV, 41'000}},
                             42'000,
                             {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
                              {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
                              {NVMETRACE_EV_NVMET_EXEC, 11'000, 0},
                              {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
                              {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}});
    EXPECT_EQ(j.shown, (Rows{{"host block layer, submission", 1000},
                             {"host driver, submission", 2000},
                             {"network: wire and NICs (computed)", 15'000},
                             {"network: target receive path", 1000},
                             {"target driver, submission", 1000},
                             {"storage: target block layer and drive", 19'000},
                             {"target driver, completion", 1000},
                             {"network: host receive path", 1000},
                             {"host driver, completion", 1000},
                             {"host block layer, completion", 500}}));
    EXPECT_EQ(j.details, (Rows{{"handoff to nvme_complete_rq", 1000}}));
}

// A read completing on the C2H SUCCESS flag: no response capsule anywhere.
TEST(TcpJoin, ReadCompletingOnC2hSuccess) {
    TcpJoined j = tcp_joined(
        false, {{NVMETRACE_EV_TCP_CMD_SEND, 3000}, {NVMETRACE_EV_TCP_C2H_RECV, 40'000}}, 45'000,
        {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
         {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
         {NVMETRACE_EV_NVMET_EXEC, 11'000, 0},
         {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
         {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}});
    EXPECT_EQ(j.shown, (Rows{{"host block layer, submission", 1000},
                             {"host driver, submission", 2000},
                             {"network: wire and NICs (computed)", 15'000},
                             {"network: target receive path", 1000},
                             {"target driver, submission", 1000},
                             {"storage: target block layer and drive", 19'000},
                             {"target driver, completion", 1000},
                             {"network: host receive path", 5000},
                             {"host block layer, completion", 500}}));
    EXPECT_EQ(j.details, (Rows{{"handoff to nvme_complete_rq", 5000}}));
}

// With libaio's rows after the block layer, the hop into nvme_complete_rq is still listed
// under the block layer's completion row (as in the seed), not under the reap.
TEST(TcpLayout, HandoffStaysUnderTheBlockLayersCompletion) {
    uint32_t present = 0;
    for (uint16_t ev :
         {NVMETRACE_EV_SYSCALL_SUBMIT, NVMETRACE_EV_FILE_SUBMIT, NVMETRACE_EV_BIO_QUEUE,
          NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_TCP_CMD_SEND,
          NVMETRACE_EV_TCP_C2H_RECV, NVMETRACE_EV_TCP_RSP_RECV, NVMETRACE_EV_NVME_COMPLETE,
          NVMETRACE_EV_RQ_COMPLETE, NVMETRACE_EV_AIO_COMPLETE, NVMETRACE_EV_AIO_REAP})
        present |= 1u << slot(ev);
    for (View v : {View::host_only, View::joined}) {
        Layout l = layout_for(v, present, kComponents);
        auto d = std::find_if(l.details.begin(), l.details.end(), [](const Layout::Detail& x) {
            return x.name == "handoff to nvme_complete_rq";
        });
        ASSERT_NE(d, l.details.end());
        EXPECT_EQ(d->from_slot, slot(NVMETRACE_EV_TCP_RSP_RECV));
        EXPECT_EQ(l.segments.at(d->segment).name, "host block layer, completion");
        EXPECT_EQ(l.segments.back().name, "wake-up and reap (io_getevents)");
    }
}

// A write whose data is in the command capsule: no R2T, no H2C PDU.
TEST(TcpJoin, InCapsuleWrite) {
    TcpJoined j = tcp_joined(
        true, {{NVMETRACE_EV_TCP_CMD_SEND, 3000}, {NVMETRACE_EV_TCP_RSP_RECV, 50'000}}, 51'000,
        {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
         {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
         {NVMETRACE_EV_TCPT_DATA_RECV, 10'200, 4096},
         {NVMETRACE_EV_NVMET_EXEC, 14'000, 0},
         {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
         {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}});
    EXPECT_EQ(j.shown, (Rows{{"host block layer, submission", 1000},
                             {"host driver, submission", 2000},
                             {"network: wire and NICs (computed)", 25'000},
                             {"network: target receive path", 1000},
                             {"target driver, submission", 200},
                             {"network: target receive path, in-capsule data", 3800},
                             {"storage: target block layer and drive", 16'000},
                             {"target driver, completion", 1000},
                             {"host driver, completion", 1000},
                             {"host block layer, completion", 500}}));
}

// A write solicited by one R2T and sent in three H2C data PDUs (what the
// Linux target does when the write is larger than the host's MAXH2CDATA):
// the first of each repeated record counts.
TEST(TcpJoin, R2tWriteWithSeveralH2cPdus) {
    TcpJoined j = tcp_joined(true,
                             {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                              {NVMETRACE_EV_TCP_R2T_RECV, 15'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 16'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 17'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 18'000},
                              {NVMETRACE_EV_TCP_RSP_RECV, 60'000}},
                             61'000,
                             {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
                              {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
                              {NVMETRACE_EV_TCPT_R2T_SEND, 10'300, 0},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 20'000, 0},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 21'000, 131072},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 22'000, 262144},
                              {NVMETRACE_EV_NVMET_EXEC, 25'000, 0},
                              {NVMETRACE_EV_NVMET_BIO_DONE, 40'000, 0},
                              {NVMETRACE_EV_NVMET_COMPLETE, 41'000, 0}});
    EXPECT_EQ(j.target_counts.repeats, 2u);
    EXPECT_EQ(j.target_counts.lost_end, 0u);
    EXPECT_EQ(j.shown, (Rows{{"host block layer, submission", 1000},
                             {"host driver, submission", 2000},
                             {"network: wire and NICs (computed)", 25'000},
                             {"network: target receive path", 1000},
                             {"target driver, submission", 300},
                             {"network: R2T to H2C data (wire and host)", 9700},
                             {"network: target receive path, H2C data", 5000},
                             {"storage: target block layer and drive", 15'000},
                             {"target driver, completion", 1000},
                             {"host driver, completion", 1000},
                             {"host block layer, completion", 500}}));
}

// Several R2Ts for one write (a target other than Linux's may send them):
// the first R2T and the first H2C bound the components, the rest are counted.
TEST(TcpJoin, SeveralR2tsPerWrite) {
    TcpJoined j = tcp_joined(true,
                             {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                              {NVMETRACE_EV_TCP_R2T_RECV, 15'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 16'000},
                              {NVMETRACE_EV_TCP_R2T_RECV, 25'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 26'000},
                              {NVMETRACE_EV_TCP_RSP_RECV, 60'000}},
                             61'000,
                             {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
                              {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
                              {NVMETRACE_EV_TCPT_R2T_SEND, 10'300, 0},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 20'000, 0},
                              {NVMETRACE_EV_TCPT_R2T_SEND, 20'500, 65536},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 30'000, 65536},
                              {NVMETRACE_EV_NVMET_EXEC, 35'000, 0},
                              {NVMETRACE_EV_NVMET_BIO_DONE, 40'000, 0},
                              {NVMETRACE_EV_NVMET_COMPLETE, 41'000, 0}});
    EXPECT_EQ(j.target_counts.repeats, 2u);
    EXPECT_EQ(j.target_counts.lost_end, 0u);
    ASSERT_GE(j.shown.size(), 7u);
    EXPECT_EQ(j.shown[5],
              (std::pair<std::string, int64_t>{"network: R2T to H2C data (wire and host)", 9700}));
    EXPECT_EQ(j.shown[6],
              (std::pair<std::string, int64_t>{"network: target receive path, H2C data", 15'000}));
}

// An arrival noted after nvmet_req_init belongs to a later PDU: dropped, and
// the computed network runs to nvmet_req_init.
TEST(TcpJoin, ArrivalAfterInitIsDropped) {
    TcpJoined j = tcp_joined(false,
                             {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                              {NVMETRACE_EV_TCP_C2H_RECV, 40'000},
                              {NVMETRACE_EV_TCP_RSP_RECV, 41'000}},
                             42'000,
                             {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
                              {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 10'050},
                              {NVMETRACE_EV_NVMET_EXEC, 11'000, 0},
                              {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
                              {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}});
    EXPECT_EQ(j.target_counts.late_times, 1u);
    EXPECT_FALSE(j.cmd.has(slot(NVMETRACE_EV_TCPT_CMD_RECV)));
    ASSERT_GE(j.shown.size(), 4u);
    EXPECT_EQ(j.shown[2],
              (std::pair<std::string, int64_t>{"network: wire and NICs (computed)", 16'000}));
    EXPECT_EQ(j.shown[3].first, "target driver, submission");
}

// A target-only nvmet-tcp write (no host recording): its path starts at the
// command's arrival on the socket and tiles arrival to nvmet_req_complete,
// through the R2T and the H2C data.
TEST(TcpTarget, TargetOnlyWriteStartsAtTheArrival) {
    DeviceTable devices;
    devices.add_target_namespace(1, "nvmet nsid 1", 512);
    std::vector<Command> out;
    Assembler ta(devices, [&](const Command& c) { out.push_back(c); });
    const uint16_t cid = 0x2003;
    const uint64_t lba = 100;
    const std::tuple<uint16_t, uint64_t, uint64_t> evs[] = {
        {NVMETRACE_EV_NVMET_INIT, 10'000, 1},    {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
        {NVMETRACE_EV_TCPT_R2T_SEND, 10'500, 0}, {NVMETRACE_EV_TCPT_H2C_RECV, 20'000, 0},
        {NVMETRACE_EV_NVMET_EXEC, 21'000, 0},    {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
        {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}};
    for (auto [ev, ts, aux] : evs) {
        auto r = target(ev, ts, cid, lba, 8, aux);
        r.opcode = 0x01;
        r.flags |= NVMETRACE_REC_WRITE;
        ta.push(r);
    }
    ta.finish();
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(view_of(c), View::target_only);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_TCPT_CMD_RECV)), 9'000u);
    const Layout l = layout_for(View::target_only,
                                layout_key(View::target_only, c.present, kComponents), kComponents);
    EXPECT_TRUE(l.complete());
    Rows got;
    for (const auto& sg : l.segments)
        got.emplace_back(sg.name, static_cast<int64_t>(c.at(sg.to_slot) - c.at(sg.from_slot)));
    EXPECT_EQ(got, (Rows{{"network: target receive path", 1000},
                         {"target driver, submission", 500},
                         {"network: R2T to H2C data (wire and host)", 9500},
                         {"network: target receive path, H2C data", 1000},
                         {"storage: target block layer and drive", 9000},
                         {"target driver, completion", 1000}}));
}

TEST(Join, CommandIdReuseIsResolvedByOrderWithinTheQueue) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    // the same (qid, cid, lba) three times, and another queue with the same cid
    const uint64_t spans[] = {50'000, 70'000, 90'000};
    for (int i = 0; i < 3; i++) {
        jn.add(hs, host_cmd(1'000'000 + i * 200'000ull, 2, 0x2007, 64, spans[i]));
        jn.add(ts, target_cmd(5'000'000 + i * 200'000ull, 2, 0x2007, 64, spans[i] - 10'000));
    }
    jn.add(hs, host_cmd(1'100'000, 3, 0x2007, 64, 40'000));
    jn.add(ts, target_cmd(5'100'000, 3, 0x2007, 64, 38'000));
    std::vector<int64_t> nets;
    JoinCounts jc = jn.join([&](const Command& c) {
        ASSERT_EQ(view_of(c), View::joined);
        nets.push_back(static_cast<int64_t>(c.at(event_slot(NVMETRACE_EV_NVMET_INIT)) -
                                            c.at(event_slot(NVMETRACE_EV_TCP_CMD_SEND))));
    });
    EXPECT_TRUE(jc.active);
    EXPECT_EQ(jc.matched, 4u);
    EXPECT_EQ(jc.negative_network, 0u);
    // handed over as they complete; each paired with its own
    std::sort(nets.begin(), nets.end());
    EXPECT_EQ(nets, (std::vector<int64_t>{2'000, 10'000, 10'000, 10'000}));
}

TEST(Join, UnmatchedBothWaysWithReasons) {
    Joiner jn;
    // the target recording covers [5.0 ms, 5.6 ms] of its clock
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 5'000'000, 5'600'000, 0, {}});
    for (int i = 0; i < 3; i++) {  // matched: offset +4 ms
        jn.add(hs,
               host_cmd(1'000'000 + i * 100'000ull, 1, static_cast<uint16_t>(i), 8 * i, 50'000));
        jn.add(ts,
               target_cmd(5'003'000 + i * 100'000ull, 1, static_cast<uint16_t>(i), 8 * i, 40'000));
    }
    Command nocid = host_cmd(1'050'000, 1, 9, 999, 50'000);
    nocid.has_cid = false;
    jn.add(hs, nocid);
    jn.add(hs, host_cmd(3'000'000, 1, 10, 1000, 50'000));    // 7 ms on the target: after its end
    jn.add(hs, host_cmd(1'250'000, 1, 11, 1008, 50'000));    // inside, but not there
    jn.add(ts, target_cmd(5'150'000, 1, 12, 2000, 40'000));  // no host command
    size_t host_only = 0, target_only = 0, joined = 0;
    JoinCounts jc = jn.join([&](const Command& c) {
        View v = view_of(c);
        (v == View::joined ? joined : v == View::host_only ? host_only : target_only)++;
    });
    EXPECT_EQ(joined, 3u);
    EXPECT_EQ(host_only, 3u);
    EXPECT_EQ(target_only, 1u);
    EXPECT_EQ(jc.host, 6u);
    EXPECT_EQ(jc.matched, 3u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::no_command_id)], 1u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::outside_window)], 1u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::not_found)], 1u);
    EXPECT_EQ(jc.target_unmatched[static_cast<size_t>(Unmatched::not_found)], 1u);
}

TEST(Join, NotSampledOnTheOtherSide) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1'000'000, 77, 0, UINT64_MAX, 0, {}});
    jn.add(hs, host_cmd(1'000'000, 1, 1, 8, 50'000));
    (void)ts;
    JoinCounts jc = jn.join([](const Command&) {});
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::not_sampled)], 1u);
}

TEST(Join, NegativeNetworkIsCountedAndReported) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    jn.add(hs, host_cmd(1'000'000, 1, 1, 8, 50'000));
    jn.add(ts, target_cmd(9'000'000, 1, 1, 8, 52'000));  // longer than the host waited
    jn.add(hs, host_cmd(2'000'000, 1, 2, 16, 50'000));
    jn.add(ts, target_cmd(10'000'000, 1, 2, 16, 40'000));
    DeviceTable devices;
    devices.add_disk(kNvme0n1, "nvme0n1", 512);
    Stats stats(devices, {});
    ReportOptions ro;
    ro.detail = true;
    ro.join = jn.join([&](const Command& c) { stats.add(c); });
    EXPECT_EQ(ro.join.negative_network, 1u);
    Summary s = stats.summary();
    ASSERT_EQ(s.groups.size(), 1u);
    const auto& g = s.groups[0];
    EXPECT_EQ(g.view, View::joined);
    auto net = std::find_if(g.components.begin(), g.components.end(), [](const auto& c) {
        return c.name == "network: wire and NICs (computed)";
    });
    ASSERT_NE(net, g.components.end());
    EXPECT_EQ(net->negative, 1u);
    EXPECT_DOUBLE_EQ(net->mean_us, (-2.0 + 10.0) / 2);
    AssemblyCounts counts;
    counts.records_host = 14;
    counts.records_target = 8;
    std::string text = summary_text(s, counts, ro);
    EXPECT_NE(text.find("records: 14 host, 8 target; 2 matched (100 % of the host's)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("negative network: 1 joined commands"), std::string::npos) << text;
    EXPECT_EQ(text.find("seam"), std::string::npos) << text;
    EXPECT_NE(text.find("all with the target's side"), std::string::npos) << text;
}

// Two recordings, each through its own Assembler, on clocks 1 h apart: the
// host's records (nvme_setup_cmd carries the command id) and the target's.
TEST(Join, TwoRecordingsThroughTheAssembler) {
    DeviceTable devices;
    devices.add_disk(kNvme0n1, "nvme0n1", 512);
    devices.add_target_namespace(1, "nvmet nsid 1", 512);
    std::vector<Command> hosts, targets;
    Assembler ha(devices, [&](const Command& c) { hosts.push_back(c); });
    Assembler ta(devices, [&](const Command& c) { targets.push_back(c); });
    const uint64_t hour = 3'600'000'000'000ull;
    for (uint16_t i = 0; i < 20; i++) {
        uint64_t t0 = 1'000'000 + i * 100'000ull;
        uint16_t tag = i % 2;  // cids reused: (genctr << 12) | tag, genctr wraps at 16
        uint16_t cid = static_cast<uint16_t>(((i / 2) & 0xf) << 12 | tag);
        uint64_t lba = 8u * (i % 3);  // and LBAs repeat
        auto setup = host(NVMETRACE_EV_NVME_SETUP, t0 + 1000, tag, lba);
        setup.cid = cid;
        setup.flags |= NVMETRACE_REC_HAS_CID;
        setup.aux = 1;
        for (const auto& r : {bio(t0, lba), setup, host(NVMETRACE_EV_RQ_ISSUE, t0 + 2000, tag, lba),
                              host(NVMETRACE_EV_NVME_COMPLETE, t0 + 60'000, tag, lba),
                              host(NVMETRACE_EV_RQ_COMPLETE, t0 + 61'000, tag, lba)})
            ha.push(r);
        uint64_t u = hour + t0 + 10'000;
        for (auto r : {target(NVMETRACE_EV_NVMET_INIT, u, cid, lba, 8, 1),
                       target(NVMETRACE_EV_NVMET_EXEC, u + 1000, cid, lba),
                       target(NVMETRACE_EV_NVMET_BIO_DONE, u + 40'000 + i, cid, lba),
                       target(NVMETRACE_EV_NVMET_COMPLETE, u + 41'000 + i, cid, lba)}) {
            r.qid = 1;
            ta.push(r);
        }
    }
    ha.finish();
    ta.finish();
    ASSERT_EQ(hosts.size(), 20u);
    ASSERT_EQ(targets.size(), 20u);
    EXPECT_TRUE(hosts[0].has_cid);
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, ha.counts().first_ts, ha.counts().last_ts, 0, {}});
    size_t ts =
        jn.add_source({Side::target, 1, 0, ta.counts().first_ts, ta.counts().last_ts, 0, {}});
    for (const auto& c : hosts)
        jn.add(hs, c);
    for (const auto& c : targets)
        jn.add(ts, c);
    int i = 0;
    JoinCounts jc = jn.join([&](const Command& c) {
        ASSERT_EQ(view_of(c), View::joined);
        // host span 58 us, target residence 41 us + i: the network tells them apart
        EXPECT_EQ(static_cast<int64_t>(c.at(event_slot(NVMETRACE_EV_NVMET_INIT)) -
                                       c.at(event_slot(NVMETRACE_EV_RQ_ISSUE))),
                  58'000 - 41'000 - i);
        i++;
    });
    EXPECT_EQ(jc.matched, 20u);
}

}  // namespace
}  // namespace nvmetrace
