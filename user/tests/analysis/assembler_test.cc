#include "analysis/assembler.h"

#include "analysis/components.h"
#include "analysis/records.h"

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

using namespace test;

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

// A record whose time no clock reaches (a damaged or hostile file) is counted
// and left out before it can take part in a span; the command it would have
// ended stays in flight, the report's "ignored" line says why.
TEST_F(AssemblerTest, ImpossibleTimestampIsCountedAndLeftOut) {
    std::vector<nvmetrace_rec> v = host_command(1'000'000, 7, 4242);
    v.back().ts = kMaxRecordTs;
    feed(v);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(assembler.counts().records_bad_ts, 1u);
    EXPECT_EQ(assembler.counts().records_host, 4u);
    EXPECT_EQ(assembler.in_flight(), 1u);
    v.back().ts = kMaxRecordTs - 1;  // the last time that is allowed
    feed({v.back()});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_RQ_COMPLETE)), kMaxRecordTs - 1);
}

TEST(TsSpan, SaturatesInsteadOfOverflowing) {
    EXPECT_EQ(ts_span(10, 25), 15);
    EXPECT_EQ(ts_span(25, 10), -15);
    EXPECT_EQ(ts_span(0, UINT64_MAX), INT64_MAX);
    EXPECT_EQ(ts_span(UINT64_MAX, 0), INT64_MIN);
    EXPECT_EQ(ts_span(0, uint64_t{INT64_MAX}), INT64_MAX);
    EXPECT_EQ(ts_span(uint64_t{INT64_MAX}, 0), -INT64_MAX);
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

// A bio with no system call of its own: the thread that queued it is the
// command's; a kernel thread's (the page cache's write-back) makes the command
// a kernel thread's, grouped apart and saying no system call starts it.
TEST_F(AssemblerTest, BioQueuedByAKernelThreadIsWriteBack) {
    auto wb = host_command(1'000'000, 7, 4242);
    ASSERT_EQ(wb.front().event, NVMETRACE_EV_BIO_QUEUE);
    wb.front().aux = 321 | NVMETRACE_BIO_KTHREAD;
    auto task = host_command(2'000'000, 8, 777);
    task.front().aux = 654;  // an fsync() of the task's own: not a kernel thread's
    feed(wb);
    feed(task);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].submit_path, SubmitPath::kernel);
    EXPECT_EQ(out[0].pid, 321u);
    EXPECT_EQ(out[1].submit_path, SubmitPath::none);
    EXPECT_EQ(out[1].pid, 654u);
    Layout l = layout_for(View::host_only, out[0].present, kComponents);
    Span sp = span_of(l, out[0].submit_path, false);
    EXPECT_FALSE(sp.user_space);
    EXPECT_EQ(sp.interface, "kernel thread");
    EXPECT_NE(sp.note.find("write-back"), std::string::npos) << sp.note;
    Span st = span_of(l, out[1].submit_path, false);
    EXPECT_NE(st.note.find("not recorded"), std::string::npos) << st.note;
}

// io_uring above the block layer: the SQE taken (io_uring_enter() entry, in
// the file submission's aux), the file submission, the CQE and the return of
// the io_uring_enter() call that waited for it.
nvmetrace_rec uring_file(uint64_t ts, uint64_t lba, uint16_t path, uint64_t since) {
    nvmetrace_rec r = host(NVMETRACE_EV_FILE_SUBMIT, ts, 0, lba, false, kNvme0n1, 0, 4096,
                           uint64_t{42} | since << 32);
    r.cid = NVMETRACE_IFACE_URING;
    r.tag = path;
    return r;
}

std::vector<nvmetrace_rec> uring_tail(uint64_t t0, uint64_t lba, uint64_t reap_aux = 42) {
    return {host(NVMETRACE_EV_URING_CQE, t0 + 56000, 0, lba, false, kNvme0n1, 0, 4096, 4096),
            host(NVMETRACE_EV_URING_REAP, t0 + 60000, 0, lba, false, kNvme0n1, 0, 0, reap_aux)};
}

// io_uring's passthrough (IORING_OP_URING_CMD on /dev/ngXnY): the module
// records the submission at the driver's setup, with the SQE's time in its
// aux, and keeps the command for its CQE: the command runs from the SQE to
// the reap like a read through the block device file.
TEST_F(AssemblerTest, IoUringPassthroughFromTheSqeToTheReap) {
    std::vector<nvmetrace_rec> recs = host_command(1'002'000, 9, 777);
    recs.erase(recs.begin());  // the bio
    for (auto& r : recs)
        r.flags |= NVMETRACE_REC_PASSTHRU;
    nvmetrace_rec file = uring_file(recs.front().ts - 100, 777, NVMETRACE_URING_CMD, 1'500);
    file.flags |= NVMETRACE_REC_PASSTHRU;
    recs.insert(recs.begin(), file);
    for (const auto& r : uring_tail(1'000'000, 777))
        recs.push_back(r);
    feed(recs);
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_TRUE(c.passthru);
    EXPECT_EQ(c.submit_path, SubmitPath::uring_cmd);
    EXPECT_EQ(c.pid, 42u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_URING_SUBMIT)), file.ts - 1'500);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_URING_REAP)), 1'060'000u);
    Layout l = layout_for(View::host_only, c.present, kComponents);
    EXPECT_TRUE(l.complete());
    EXPECT_EQ(l.first_slot, slot(NVMETRACE_EV_URING_SUBMIT));
    EXPECT_EQ(l.last_slot, slot(NVMETRACE_EV_URING_REAP));
    Span sp = span_of(l, c.submit_path, c.reap_unseen);
    EXPECT_TRUE(sp.user_space);
    EXPECT_EQ(sp.from, "io_uring_enter() entry");
    EXPECT_EQ(sp.interface, "io_uring_cmd");
    EXPECT_EQ(assembler.counts().user_unmatched, 0u);
    EXPECT_EQ(assembler.in_flight(), 0u);
    // taken by the SQPOLL thread: it starts there, not at an io_uring_enter() entry
    out.clear();
    for (auto& r : recs) {
        r.ts += 1'000'000;
        if (r.event == NVMETRACE_EV_FILE_SUBMIT)
            r.tag |= NVMETRACE_URING_SQPOLL;
    }
    feed(recs);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].submit_path, SubmitPath::uring_sqpoll);
    EXPECT_EQ(
        span_of(layout_for(View::host_only, out[0].present, kComponents), out[0].submit_path, false)
            .from,
        "the SQE taken by the SQPOLL thread");
}

TEST_F(AssemblerTest, IoUringCommandFromTheSqeToTheReap) {
    std::vector<nvmetrace_rec> v{uring_file(1'000'000, 4242, 0, 900)};
    for (const auto& r : host_command(1'002'000, 7, 4242))
        v.push_back(r);
    for (const auto& r : uring_tail(1'000'000, 4242))
        v.push_back(r);
    feed(v);
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(c.submit_path, SubmitPath::uring);
    EXPECT_FALSE(c.reap_unseen);
    // a block device file's submission is its read_iter
    EXPECT_FALSE(c.file_bio);
    EXPECT_EQ(event_name(c, slot(NVMETRACE_EV_FILE_SUBMIT)), "blkdev_read_iter/blkdev_write_iter");
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_URING_SUBMIT)), 999'100u);
    EXPECT_FALSE(c.has(slot(NVMETRACE_EV_SYSCALL_SUBMIT)));
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_URING_CQE)), 1'056'000u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_URING_REAP)), 1'060'000u);
    Layout l = layout_for(View::host_only, c.present, kComponents);
    EXPECT_TRUE(l.complete());
    EXPECT_EQ(l.first_slot, slot(NVMETRACE_EV_URING_SUBMIT));
    EXPECT_EQ(l.last_slot, slot(NVMETRACE_EV_URING_REAP));
    EXPECT_EQ(l.segments.front().name, "io_uring: SQE taken to the file");
    EXPECT_EQ(l.segments.back().name, "wake-up and reap (io_uring_enter)");
    Span sp = span_of(l, c.submit_path, c.reap_unseen);
    EXPECT_TRUE(sp.user_space);
    EXPECT_EQ(sp.from, "io_uring_enter() entry");
    EXPECT_EQ(sp.to, "io_uring_enter() return");
    EXPECT_EQ(sp.interface, "io_uring");
    EXPECT_EQ(assembler.counts().user_unmatched, 0u);
    EXPECT_EQ(assembler.in_flight(), 0u);
}

// The nonblocking issue in io_uring_enter() could not go on (its bio came back
// EAGAIN): io-wq issues the request again.  The command is timed from its SQE,
// through io-wq, from its last bio; the first try's bio and file submission
// are superseded, not left unmatched.
TEST_F(AssemblerTest, IoUringThroughIoWqIsTimedFromItsLastTry) {
    const uint64_t t0 = 1'000'000;
    nvmetrace_rec wq = host(NVMETRACE_EV_URING_WQ, t0 + 4200, 0, 4242, false, kNvme0n1, 0, 0,
                            t0 + 1500);  // queued to io-wq at t0 + 1500
    std::vector<nvmetrace_rec> v{uring_file(t0, 4242, 0, 900), bio(t0 + 500, 4242),
                                 uring_file(t0 + 4100, 4242, NVMETRACE_URING_IOWQ, 5000), wq};
    for (const auto& r : host_command(t0 + 6000, 7, 4242))
        v.push_back(r);
    for (const auto& r : uring_tail(t0 + 6000, 4242))
        v.push_back(r);
    feed(v);
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(c.submit_path, SubmitPath::uring_iowq);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_URING_SUBMIT)), t0 - 900);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_URING_WQ)), t0 + 1500);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_FILE_SUBMIT)), t0 + 4100);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_BIO_QUEUE)), t0 + 6000);
    EXPECT_EQ(assembler.counts().superseded, 2u);
    EXPECT_EQ(assembler.counts().bios_unmatched + assembler.counts().user_unmatched, 0u);
    Layout l = layout_for(View::host_only, c.present, kComponents);
    EXPECT_TRUE(l.complete());
    ASSERT_GE(l.segments.size(), 3u);
    EXPECT_EQ(l.segments[0].name, "io_uring: SQE taken to io-wq");
    EXPECT_EQ(l.segments[1].name, "queued in io-wq");
    EXPECT_EQ(l.stages[l.segments[1].stage].name, "queued in io-wq");
}

// The first SQE of an io_uring_enter() call punted at once: the file
// submission's "since" was read a moment before the record's clock, so the
// SQE's time found from it is 300 ns after the punt.  The punt keeps its
// stage, and the SQE is taken at the punt; a punt 50 us before the SQE is
// another request's and is not used.
TEST_F(AssemblerTest, IoUringPuntJustBeforeTheFoundSqeIsTheSqe) {
    const uint64_t t0 = 1'000'000;
    nvmetrace_rec wq =
        host(NVMETRACE_EV_URING_WQ, t0 + 4101, 0, 4242, false, kNvme0n1, 0, 0, t0 - 300);
    std::vector<nvmetrace_rec> v{uring_file(t0 + 4100, 4242, NVMETRACE_URING_IOWQ, 4100), wq};
    for (const auto& r : host_command(t0 + 6000, 7, 4242))
        v.push_back(r);
    for (const auto& r : uring_tail(t0 + 6000, 4242))
        v.push_back(r);
    nvmetrace_rec far =
        host(NVMETRACE_EV_URING_WQ, t0 + 100'101, 0, 777, false, kNvme0n1, 0, 0, t0 + 50'000);
    v.push_back(uring_file(t0 + 100'100, 777, NVMETRACE_URING_IOWQ, 100));
    v.push_back(far);
    for (const auto& r : host_command(t0 + 102'000, 8, 777))
        v.push_back(r);
    for (const auto& r : uring_tail(t0 + 102'000, 777))
        v.push_back(r);
    feed(v);
    ASSERT_EQ(out.size(), 2u);
    const Command& c = out[0].lba == 4242 ? out[0] : out[1];
    const Command& d = out[0].lba == 4242 ? out[1] : out[0];
    EXPECT_EQ(c.submit_path, SubmitPath::uring_iowq);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_URING_SUBMIT)), t0 - 300);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_URING_WQ)), t0 - 300);
    Layout l = layout_for(View::host_only, c.present, kComponents);
    EXPECT_TRUE(l.complete());
    ASSERT_GE(l.segments.size(), 2u);
    EXPECT_EQ(l.segments[1].name, "queued in io-wq");
    EXPECT_EQ(d.at(slot(NVMETRACE_EV_URING_SUBMIT)), t0 + 100'000);
    EXPECT_FALSE(d.has(slot(NVMETRACE_EV_URING_WQ)));
}

// A reap the kernel cannot see: the CQE was posted before the io_uring_enter()
// call that returned (user space may have taken it from the mapped ring), or
// by an io thread (SQPOLL), or returned by a call that did not wait for
// completions.  The command ends at its CQE and says so.
TEST_F(AssemblerTest, IoUringReapNotSeenEndsAtTheCqe) {
    std::vector<nvmetrace_rec> v{uring_file(1'000'000, 100, 0, 900)};
    for (const auto& r : host_command(1'002'000, 7, 100))
        v.push_back(r);
    for (const auto& r : uring_tail(1'000'000, 100, 42 | NVMETRACE_URING_REAP_LATE))
        v.push_back(r);
    std::vector<nvmetrace_rec> w{uring_file(2'000'000, 200, NVMETRACE_URING_SQPOLL, 900)};
    for (const auto& r : host_command(2'002'000, 8, 200))
        w.push_back(r);
    w.push_back(uring_tail(2'000'000, 200)[0]);
    w.back().tag = NVMETRACE_URING_CQE_NO_REAP;
    // returned by a call that only submitted (min_complete 0): fio's commit at
    // QD 16 posts earlier commands' CQEs, which fio takes from the ring later
    std::vector<nvmetrace_rec> n{uring_file(3'000'000, 300, 0, 900)};
    for (const auto& r : host_command(3'002'000, 9, 300))
        n.push_back(r);
    for (const auto& r : uring_tail(3'000'000, 300, 43 | NVMETRACE_URING_REAP_NOWAIT))
        n.push_back(r);
    feed(v);
    ASSERT_EQ(out.size(), 1u);
    feed(w);
    ASSERT_EQ(out.size(), 2u);  // without waiting for a reap
    feed(n);
    ASSERT_EQ(out.size(), 3u);
    for (const Command& c : out) {
        EXPECT_TRUE(c.reap_unseen);
        EXPECT_TRUE(c.has(slot(NVMETRACE_EV_URING_CQE)));
        EXPECT_FALSE(c.has(slot(NVMETRACE_EV_URING_REAP)));
        Layout l = layout_for(View::host_only, c.present, kComponents);
        EXPECT_EQ(l.last_slot, slot(NVMETRACE_EV_URING_CQE));
        Span sp = span_of(l, c.submit_path, c.reap_unseen);
        EXPECT_FALSE(sp.user_space);
        EXPECT_NE(sp.note.find("not seen"), std::string::npos) << sp.note;
    }
    EXPECT_EQ(out[1].submit_path, SubmitPath::uring_sqpoll);
    EXPECT_EQ(
        span_of(layout_for(View::host_only, out[1].present, kComponents), out[1].submit_path, true)
            .from,
        "the SQE taken by the SQPOLL thread");
    EXPECT_EQ(assembler.in_flight(), 0u);
}

// User space took the CQE from the mapped ring with no system call: the
// module saw the ring's head past it at the task's next io_uring_enter()
// entry, and len says since when it was known still in the ring.  The reap
// is where the kernel saw it taken; the window is kept, never reaching back
// before the CQE.
// pread64() and its kin on an O_DIRECT block device: the call's entry (FILE_SUBMIT's aux) to
// its return, the file submission's interface naming the path; a read whose return was not
// recorded (the kretprobe had no instance left) ends at block_rq_complete and says so.
TEST_F(AssemblerTest, SynchronousReadFromTheCallToItsReturn) {
    auto file = [](uint64_t ts, uint64_t lba, uint64_t since) {
        nvmetrace_rec r = host(NVMETRACE_EV_FILE_SUBMIT, ts, 0, lba, false, kNvme0n1, 0, 4096,
                               uint64_t{42} | since << 32);
        r.cid = NVMETRACE_IFACE_SYNC;
        return r;
    };
    std::vector<nvmetrace_rec> v{file(1'000'000, 100, 1500)};
    for (const auto& r : host_command(1'002'000, 7, 100))
        v.push_back(r);
    v.push_back(host(NVMETRACE_EV_SYNC_RETURN, 1'058'000, 0, 100, false, kNvme0n1, 0, 4096, 42));
    std::vector<nvmetrace_rec> w{file(2'000'000, 200, 1500)};
    for (const auto& r : host_command(2'002'000, 8, 200))
        w.push_back(r);
    feed(v);
    feed(w);
    assembler.finish();
    ASSERT_EQ(out.size(), 2u);
    const Command& c = out[0];
    EXPECT_EQ(c.submit_path, SubmitPath::sync);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_SYNC_SUBMIT)), 998'500u);
    EXPECT_FALSE(c.has(slot(NVMETRACE_EV_SYSCALL_SUBMIT)));
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_SYNC_RETURN)), 1'058'000u);
    Layout l = layout_for(View::host_only, c.present, kComponents);
    EXPECT_TRUE(l.complete());
    EXPECT_EQ(l.first_slot, slot(NVMETRACE_EV_SYNC_SUBMIT));
    EXPECT_EQ(l.last_slot, slot(NVMETRACE_EV_SYNC_RETURN));
    EXPECT_EQ(l.segments.front().name, "syscall: pread/pwrite entry to the file");
    EXPECT_EQ(l.segments.back().name, "wake-up and return (pread/pwrite)");
    Span sp = span_of(l, c.submit_path, c.reap_unseen);
    EXPECT_TRUE(sp.user_space);
    EXPECT_EQ(sp.to, "its return");
    EXPECT_NE(sp.from.find("pread64"), std::string::npos) << sp.from;
    EXPECT_EQ(sp.interface, "pread/pwrite");

    const Command& d = out[1];
    EXPECT_FALSE(d.has(slot(NVMETRACE_EV_SYNC_RETURN)));
    Layout ld = layout_for(View::host_only, d.present, kComponents);
    Span sd = span_of(ld, d.submit_path, d.reap_unseen);
    EXPECT_FALSE(sd.user_space);
    EXPECT_NE(sd.note.find("not recorded"), std::string::npos) << sd.note;
    EXPECT_EQ(assembler.counts().user_unmatched, 0u);
    EXPECT_EQ(assembler.in_flight(), 0u);
}

// A file's FILE_SUBMIT as the module writes it at the command's bio (LBA 100, 100 ns before
// the bio at 1'002'000): a synchronous call's, its entry 3 us before, len the ns since the file
// system or the page cache took the I/O.
nvmetrace_rec file_submit_at_bio(uint32_t len, uint8_t flags) {
    nvmetrace_rec file = host(NVMETRACE_EV_FILE_SUBMIT, 1'001'900, 0, 100, false, kNvme0n1, 0, len,
                              uint64_t{42} | uint64_t{3'000} << 32);
    file.cid = NVMETRACE_IFACE_SYNC;
    file.flags |= flags;
    return file;
}

// file, the block-layer command of its bio and the call's return
std::vector<nvmetrace_rec> sync_file_command(const nvmetrace_rec& file) {
    std::vector<nvmetrace_rec> v{file};
    for (const auto& r : host_command(1'002'000, 7, 100))
        v.push_back(r);
    v.push_back(host(NVMETRACE_EV_SYNC_RETURN, 1'058'000, 0, 100, false, kNvme0n1, 0, 4096, 42));
    return v;
}

// A file on a file system (O_DIRECT through iomap): the file submission is recorded at the
// command's bio with NVMETRACE_REC_FS, its len the time since the file system took the I/O.
// The command goes from the call's entry to the file system (FS_SUBMIT) and from there to the
// bio; the record's own time (a moment before the bio) is no boundary of its own.
TEST_F(AssemblerTest, FileOnAFileSystemFromTheCallThroughTheFileSystem) {
    nvmetrace_rec file = file_submit_at_bio(1'200, NVMETRACE_REC_FS);
    feed(sync_file_command(file));
    assembler.finish();
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(c.submit_path, SubmitPath::sync);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_SYNC_SUBMIT)), 998'900u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_FS_SUBMIT)), 1'000'700u);
    Layout l = layout_for(View::host_only, c.present, kComponents);
    EXPECT_TRUE(l.complete());
    EXPECT_EQ(l.first_slot, slot(NVMETRACE_EV_SYNC_SUBMIT));
    ASSERT_GE(l.segments.size(), 3u);
    EXPECT_EQ(l.segments[0].name, "syscall: pread/pwrite entry to the file system");
    EXPECT_EQ(l.segments[1].name, "file system: direct I/O to the block layer");
    EXPECT_EQ(l.segments[2].name, "host block layer, submission");
    // the file system is a stage of its own, between the system call and the block layer
    EXPECT_EQ(l.stages[l.segments[0].stage].name,
              "syscall and file submission (before the block layer)");
    EXPECT_EQ(l.stages[l.segments[1].stage].name,
              "file system: direct I/O (before the block layer)");
    Span sp = span_of(l, c.submit_path, c.reap_unseen);
    EXPECT_TRUE(sp.user_space);
    EXPECT_EQ(sp.interface, "pread/pwrite");

    // a block device's file submission has no file system stage, whatever its len
    out.clear();
    nvmetrace_rec blk = file;
    blk.flags &= static_cast<uint8_t>(~NVMETRACE_REC_FS);
    blk.ts = 2'001'900;
    blk.lba = 200;
    std::vector<nvmetrace_rec> w{blk};
    for (const auto& r : host_command(2'002'000, 8, 200))
        w.push_back(r);
    feed(w);
    assembler.finish();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_FALSE(out[0].has(slot(NVMETRACE_EV_FS_SUBMIT)));
    Layout lb = layout_for(View::host_only, out[0].present, kComponents);
    EXPECT_EQ(lb.segments.front().name, "syscall: pread/pwrite entry to the file");
}

// A buffered read that missed the page cache: the file submission is recorded at the bio that
// fills the pages the call asked for, flagged NVMETRACE_REC_FS | NVMETRACE_REC_PAGECACHE, its len
// the time since the page cache took the read.  The command goes from the call's entry to the
// page cache and from there to the bio, a stage of its own, and on to the call's return.
TEST_F(AssemblerTest, ABufferedReadThatMissedThePageCacheFromTheCallToItsReturn) {
    nvmetrace_rec file = file_submit_at_bio(2'400, NVMETRACE_REC_FS | NVMETRACE_REC_PAGECACHE);
    feed(sync_file_command(file));
    assembler.finish();
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(c.submit_path, SubmitPath::sync);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_SYNC_SUBMIT)), 998'900u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_PAGECACHE_READ)), 999'500u);
    EXPECT_FALSE(c.has(slot(NVMETRACE_EV_FS_SUBMIT)));
    // its file submission is the bio, not the block device file's read
    EXPECT_TRUE(c.file_bio);
    EXPECT_EQ(event_name(c, slot(NVMETRACE_EV_FILE_SUBMIT)), kFileBioEventName);
    EXPECT_EQ(event_name(c, slot(NVMETRACE_EV_BIO_QUEUE)), "block_bio_queue");
    Layout l = layout_for(View::host_only, c.present, kComponents);
    EXPECT_TRUE(l.complete());
    EXPECT_EQ(l.first_slot, slot(NVMETRACE_EV_SYNC_SUBMIT));
    EXPECT_EQ(l.last_slot, slot(NVMETRACE_EV_SYNC_RETURN));
    ASSERT_GE(l.segments.size(), 3u);
    EXPECT_EQ(l.segments[0].name, "syscall: pread entry to the page cache");
    EXPECT_EQ(l.segments[1].name, "page cache: read miss to the block layer");
    EXPECT_EQ(l.segments[2].name, "host block layer, submission");
    EXPECT_EQ(l.stages[l.segments[1].stage].name,
              "page cache: a read that missed (before the block layer)");
    EXPECT_EQ(component_id(l.segments[1].name), "host.pagecache.submit");
    Span sp = span_of(l, c.submit_path, c.reap_unseen);
    EXPECT_TRUE(sp.user_space);
    EXPECT_EQ(sp.interface, "pread/pwrite");

    // the page cache's time not seen (len 0): from the call to the bio, no page cache stage
    out.clear();
    nvmetrace_rec blind = file;
    blind.len = 0;
    blind.ts = 2'001'900;
    blind.lba = 200;
    std::vector<nvmetrace_rec> w{blind};
    for (const auto& r : host_command(2'002'000, 8, 200))
        w.push_back(r);
    feed(w);
    assembler.finish();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_FALSE(out[0].has(slot(NVMETRACE_EV_PAGECACHE_READ)));
    EXPECT_EQ(event_name(out[0], slot(NVMETRACE_EV_FILE_SUBMIT)), kFileBioEventName);

    // an io_uring read's miss: from the SQE taken to the page cache
    out.clear();
    nvmetrace_rec uring = file;
    uring.cid = NVMETRACE_IFACE_URING;
    uring.ts = 3'001'900;
    uring.lba = 300;
    std::vector<nvmetrace_rec> u{uring};
    for (const auto& r : host_command(3'002'000, 9, 300))
        u.push_back(r);
    feed(u);
    assembler.finish();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].submit_path, SubmitPath::uring);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_URING_SUBMIT)), 2'998'900u);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_PAGECACHE_READ)), 2'999'500u);
    Layout lu = layout_for(View::host_only, out[0].present, kComponents);
    ASSERT_GE(lu.segments.size(), 2u);
    EXPECT_EQ(lu.segments[0].name, "io_uring: SQE taken to the page cache");
    EXPECT_EQ(lu.segments[1].name, "page cache: read miss to the block layer");
}

TEST_F(AssemblerTest, IoUringReapFromTheRingIsWhereTheKernelSawIt) {
    std::vector<nvmetrace_rec> v{uring_file(1'000'000, 100, 0, 900)};
    for (const auto& r : host_command(1'002'000, 7, 100))
        v.push_back(r);
    for (const auto& r : uring_tail(1'000'000, 100, 42 | NVMETRACE_URING_REAP_RING))
        v.push_back(r);
    v.back().len = 3000;  // seen taken at 1'060'000, still in the ring at 1'057'000
    // a window reaching back before the CQE: the reap is not before the CQE
    std::vector<nvmetrace_rec> w{uring_file(2'000'000, 200, 0, 900)};
    for (const auto& r : host_command(2'002'000, 8, 200))
        w.push_back(r);
    for (const auto& r : uring_tail(2'000'000, 200, 42 | NVMETRACE_URING_REAP_RING))
        w.push_back(r);
    w.back().len = 10'000;
    feed(v);
    feed(w);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(out[0].reap_ring);
    EXPECT_FALSE(out[0].reap_unseen);
    EXPECT_EQ(out[0].at(slot(NVMETRACE_EV_URING_REAP)), 1'060'000u);
    EXPECT_EQ(out[0].reap_window_ns, 3000u);
    EXPECT_EQ(out[1].at(slot(NVMETRACE_EV_URING_REAP)), 2'060'000u);
    EXPECT_EQ(out[1].reap_window_ns, 4000u);
    Layout l = layout_for(View::host_only, out[0].present, kComponents);
    EXPECT_EQ(l.last_slot, slot(NVMETRACE_EV_URING_REAP));
    Span sp = span_of(l, out[0].submit_path, out[0].reap_unseen, out[0].reap_ring);
    EXPECT_TRUE(sp.user_space);
    EXPECT_TRUE(sp.reap_ring);
    EXPECT_NE(sp.to.find("next io_uring_enter() entry"), std::string::npos) << sp.to;
    EXPECT_EQ(assembler.in_flight(), 0u);
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

// nvme multipath fails a request over (a controller reset cancels it): its
// bios are taken back (block_rq_complete with no bytes left), queued on the
// head again and sent on a later request, with no block_bio_queue of their
// own.  The first request is handed on as failed over; the later one is the
// I/O, timed from the first one's bio and file submission, up to the reap.
TEST_F(AssemblerTest, FailedOverRequestHandsItsBiosToTheNextRequest) {
    auto on_path = [](uint16_t ev, uint64_t ts, uint16_t tag, uint32_t len = 4096) {
        return host(ev, ts, tag, 8, false, kNvme1c1n1, 1, len);
    };
    feed({host(NVMETRACE_EV_FILE_SUBMIT, 50, 0, 8, false, kNvme1n1, 0, 4096,
               uint64_t{77} | uint64_t{20} << 32),
          bio(100, 8, kNvme1n1), on_path(NVMETRACE_EV_NVME_SETUP, 200, 5),
          on_path(NVMETRACE_EV_RQ_ISSUE, 210, 5), on_path(NVMETRACE_EV_NVME_COMPLETE, 900, 5),
          on_path(NVMETRACE_EV_RQ_COMPLETE, 950, 5, 0)});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].failed_over);
    EXPECT_EQ(out[0].attempts_before, 0u);
    EXPECT_EQ(out[0].cid, 0u);
    // sent again on the new controller's queue, another tag; then the aio completion and reap
    feed({on_path(NVMETRACE_EV_NVME_SETUP, 40'000, 9), on_path(NVMETRACE_EV_RQ_ISSUE, 40'010, 9),
          on_path(NVMETRACE_EV_NVME_COMPLETE, 41'000, 9),
          on_path(NVMETRACE_EV_RQ_COMPLETE, 41'050, 9),
          host(NVMETRACE_EV_AIO_COMPLETE, 41'100, 0, 8, false, kNvme1n1, 0, 4096, 4096),
          host(NVMETRACE_EV_AIO_REAP, 41'300, 0, 8, false, kNvme1n1, 0, 0,
               uint64_t{77} | uint64_t{1} << 32)});
    ASSERT_EQ(out.size(), 2u);
    const Command& c = out[1];
    EXPECT_FALSE(c.failed_over);
    EXPECT_EQ(c.attempts_before, 1u);
    EXPECT_EQ(c.dev, kNvme1n1);
    EXPECT_EQ(c.pid, 77u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_SYSCALL_SUBMIT)), 30u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_BIO_QUEUE)), 100u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_NVME_SETUP)), 40'000u);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_AIO_REAP)), 41'300u);
    assembler.finish();
    const AssemblyCounts& n = assembler.counts();
    EXPECT_EQ(n.cut_start, 0u);
    EXPECT_EQ(n.bios_unmatched, 0u);
    EXPECT_EQ(n.user_unmatched, 0u);
    EXPECT_EQ(n.failovers_unsent, 0u);
}

// A request whose bios failed over and never came again (the path never came
// back within the hold, or the recording ended): counted, not invented.
TEST_F(AssemblerTest, FailoverNeverSentAgainIsCounted) {
    constexpr uint64_t kLater = Assembler::kRetryHoldNs + 10'000;
    feed({bio(100, 8, kNvme1n1), host(NVMETRACE_EV_NVME_SETUP, 200, 5, 8, false, kNvme1c1n1),
          host(NVMETRACE_EV_RQ_COMPLETE, 950, 5, 8, false, kNvme1c1n1, 1, 0)});
    // another sector's command long after: the failed-over bios expired
    feed(host_command(kLater, 3, 64));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(out[0].failed_over);
    EXPECT_FALSE(out[1].failed_over);
    EXPECT_EQ(out[1].attempts_before, 0u);
    EXPECT_EQ(assembler.counts().failovers_unsent, 1u);
    // one still waiting at the end is counted at finish()
    feed({bio(kLater + 90'000, 16, kNvme1n1),
          host(NVMETRACE_EV_NVME_SETUP, kLater + 90'100, 6, 16, false, kNvme1c1n1),
          host(NVMETRACE_EV_RQ_COMPLETE, kLater + 90'500, 6, 16, false, kNvme1c1n1, 1, 0)});
    assembler.finish();
    EXPECT_EQ(assembler.counts().failovers_unsent, 2u);
}

// The link was down for longer than a bio waits for its request: the bios
// go again after the reconnect, seconds later, and are still the same I/O.
// Bios of the sector queued on the head while no path was live go after
// them; one queued before the request failed goes before them.
TEST_F(AssemblerTest, FailedOverBiosWaitForTheReconnectInTheirOrder) {
    constexpr uint64_t kDown = 3 * Assembler::kDefaultBioHorizonNs;
    auto on_path = [](uint16_t ev, uint64_t ts, uint16_t tag, uint32_t len = 4096) {
        return host(ev, ts, tag, 8, false, kNvme1c1n1, 1, len);
    };
    feed({bio(100, 8, kNvme1n1), on_path(NVMETRACE_EV_NVME_SETUP, 200, 5),
          on_path(NVMETRACE_EV_RQ_COMPLETE, 950, 5, 0)});
    // other I/O goes on meanwhile (another head): the bios wait
    feed(host_command(kDown / 2, 3, 64));
    // a new bio of the sector while no path is live, then the path is back
    feed({bio(kDown - 1'000, 8, kNvme1n1), on_path(NVMETRACE_EV_NVME_SETUP, kDown, 9),
          on_path(NVMETRACE_EV_RQ_COMPLETE, kDown + 50, 9),
          on_path(NVMETRACE_EV_NVME_SETUP, kDown + 100, 10),
          on_path(NVMETRACE_EV_RQ_COMPLETE, kDown + 150, 10)});
    ASSERT_EQ(out.size(), 4u);
    EXPECT_TRUE(out[0].failed_over);
    EXPECT_EQ(out[2].attempts_before, 1u);
    EXPECT_EQ(out[2].at(slot(NVMETRACE_EV_BIO_QUEUE)), 100u);
    EXPECT_EQ(out[3].attempts_before, 0u);
    EXPECT_EQ(out[3].at(slot(NVMETRACE_EV_BIO_QUEUE)), kDown - 1'000);
    assembler.finish();
    EXPECT_EQ(assembler.counts().failovers_unsent, 0u);
    EXPECT_EQ(assembler.counts().bios_unmatched, 0u);
}

// A bio of the sector queued before the request failed goes before its bios.
TEST_F(AssemblerTest, BioQueuedBeforeTheFailoverGoesFirst) {
    constexpr uint64_t kDown = 1'000'000;
    feed({bio(kDown + 1'000, 16, kNvme1n1),
          host(NVMETRACE_EV_NVME_SETUP, kDown + 1'100, 11, 16, false, kNvme1c1n1),
          bio(kDown + 1'200, 16, kNvme1n1)});
    feed({host(NVMETRACE_EV_RQ_COMPLETE, kDown + 1'500, 11, 16, false, kNvme1c1n1, 1, 0),
          host(NVMETRACE_EV_NVME_SETUP, kDown + 2'000, 12, 16, false, kNvme1c1n1),
          host(NVMETRACE_EV_RQ_COMPLETE, kDown + 2'050, 12, 16, false, kNvme1c1n1),
          host(NVMETRACE_EV_NVME_SETUP, kDown + 2'100, 13, 16, false, kNvme1c1n1),
          host(NVMETRACE_EV_RQ_COMPLETE, kDown + 2'150, 13, 16, false, kNvme1c1n1)});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(out[0].failed_over);
    EXPECT_EQ(out[1].attempts_before, 0u);
    EXPECT_EQ(out[1].at(slot(NVMETRACE_EV_BIO_QUEUE)), kDown + 1'200);
    EXPECT_EQ(out[2].attempts_before, 1u);
    EXPECT_EQ(out[2].at(slot(NVMETRACE_EV_BIO_QUEUE)), kDown + 1'000);
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

// A command in flight when its disk went away (a DEVICES block says when)
// is incomplete for that reason, not because the recording ended first; one
// whose disk went before it began, and came back, still runs at the end.
TEST_F(AssemblerTest, CommandsOfADiskThatWentAwayAreIncompleteForThatReason) {
    devices.set_gone(kNvme1n1, 2000);
    devices.set_gone(kNvme0n1, 500);
    feed({bio(1000, 20, kNvme1n1), host(NVMETRACE_EV_NVME_SETUP, 1010, 3, 20, false, kNvme1c1n1)});
    feed({bio(1000, 40), host(NVMETRACE_EV_NVME_SETUP, 1010, 4, 40)});
    assembler.finish();
    const auto& c = assembler.counts();
    EXPECT_EQ(c.device_gone, 1u);
    EXPECT_EQ(c.cut_end, 1u);
    EXPECT_EQ(c.incomplete(), 2u);
    EXPECT_TRUE(out.empty());
}

// A reconnect gave the path's controller another id; the recorder saw it
// 2.6 s later (a loaded debug kernel).  A command in between carries the
// old id and the new one; one long before, only the old.
TEST_F(AssemblerTest, CommandsBeforeAControllerChangeWasSeenCarryTheNextId) {
    constexpr uint64_t kSeen = 10'000'000'000;
    devices.add_path(kNvme1c1n1, kNvme1n1, "nvme1c1n1", 1);
    devices.add_path(kNvme1c1n1, kNvme1n1, "nvme1c1n1", 2, kSeen);
    auto command = [](uint64_t t0, uint16_t tag, uint64_t lba) {
        return std::vector<nvmetrace_rec>{
            bio(t0, lba, kNvme1n1),
            host(NVMETRACE_EV_NVME_SETUP, t0 + 100, tag, lba, false, kNvme1c1n1),
            host(NVMETRACE_EV_RQ_COMPLETE, t0 + 900, tag, lba, false, kNvme1c1n1)};
    };
    feed(command(kSeen - 6'000'000'000, 1, 8));
    feed(command(kSeen - 2'600'000'000, 2, 16));
    feed(command(kSeen + 1'000, 3, 24));
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].cntlid, 1u);
    EXPECT_EQ(out[0].cntlid_next, 0u);
    EXPECT_EQ(out[1].cntlid, 1u);
    EXPECT_EQ(out[1].cntlid_next, 2u);
    EXPECT_EQ(out[2].cntlid, 2u);
    EXPECT_EQ(out[2].cntlid_next, 0u);
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

nvmetrace_rec gap_marker(uint32_t cpu, uint64_t first, uint64_t last, uint64_t n) {
    nvmetrace_rec g{};
    g.event = NVMETRACE_EV_GAP;
    g.ts = last;
    g.lba = first;
    g.aux = n;
    g.dev = cpu;
    return g;
}

std::vector<nvmetrace_rec> by_ts(std::vector<nvmetrace_rec> recs) {
    std::stable_sort(recs.begin(), recs.end(),
                     [](const nvmetrace_rec& a, const nvmetrace_rec& b) { return a.ts < b.ts; });
    return recs;
}

std::vector<nvmetrace_rec> without(std::vector<nvmetrace_rec> recs, uint16_t event) {
    std::erase_if(recs, [event](const nvmetrace_rec& r) { return r.event == event; });
    return recs;
}

// A ring overflow: the command that lacks a record of its path while a drop
// run overlaps it is counted and left out; one that has all of them is kept;
// outside a drop run a command that lacks one is merged as before.
TEST_F(AssemblerTest, CommandMissingARecordInADropRunIsLeftOut) {
    feed(host_command(1'000'000, 7, 100));  // whole: its kind's path
    const nvmetrace_rec g = gap_marker(1, 2'002'500, 2'003'500, 12);
    std::vector<nvmetrace_rec> recs =
        without(host_command(2'000'000, 8, 200), NVMETRACE_EV_RQ_ISSUE);
    for (const auto& r : host_command(2'000'100, 9, 300))  // whole, in the same window
        recs.push_back(r);
    recs.push_back(g);
    feed(by_ts(recs));
    // no drop run near it: merged as before
    feed(without(host_command(9'000'000, 10, 400), NVMETRACE_EV_RQ_ISSUE));
    assembler.finish();

    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].lba, 100u);
    EXPECT_EQ(out[1].lba, 300u);
    EXPECT_EQ(out[2].lba, 400u);
    EXPECT_FALSE(out[2].has(slot(NVMETRACE_EV_RQ_ISSUE)));
    const AssemblyCounts& c = assembler.counts();
    EXPECT_EQ(c.lost_in_gap, 1u);
    EXPECT_EQ(c.complete, 3u);
    EXPECT_EQ(c.records_unknown, 0u) << "the marker is not an unknown event";
    ASSERT_EQ(c.gaps.size(), 1u);
    EXPECT_EQ(c.gaps[0],
              (GapRun{.cpu = 1, .first_ts = 2'002'500, .last_ts = 2'003'500, .records = 12}));
}

// A marker comes after the records it stands beside (its ts is the last
// dropped one's): a command that ended inside the run, before the marker,
// is judged by the runs given ahead (set_gaps), and the marker is not
// counted twice.
TEST_F(AssemblerTest, DropRunsGivenAheadJudgeCommandsBeforeTheirMarker) {
    const nvmetrace_rec g = gap_marker(0, 2'001'500, 2'900'000, 40);
    assembler.set_gaps(
        {GapRun{.cpu = 0, .first_ts = 2'001'500, .last_ts = 2'900'000, .records = 40}});
    feed(host_command(1'000'000, 7, 100));
    // lost its nvme_setup_cmd; ends at 2'053'500, long before the marker
    feed(without(host_command(2'000'000, 8, 200), NVMETRACE_EV_NVME_SETUP));
    feed({g});
    assembler.finish();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(assembler.counts().lost_in_gap, 1u);
    EXPECT_EQ(assembler.counts().gaps.size(), 1u);
}

// A path is what most commands of the kind had: one that lawfully lacks an
// event outside the runs does not take it off the path.
TEST_F(AssemblerTest, ThePathIsWhatMostCommandsOfTheKindHad) {
    assembler.set_gaps(
        {GapRun{.cpu = 0, .first_ts = 9'001'500, .last_ts = 9'002'500, .records = 2}});
    for (uint64_t i = 0; i < 3; i++)
        feed(host_command(1'000'000 * (i + 1), 7, 100 + i));
    feed(without(host_command(5'000'000, 7, 200), NVMETRACE_EV_RQ_ISSUE));
    feed(without(host_command(9'000'000, 7, 300), NVMETRACE_EV_RQ_ISSUE));
    assembler.finish();
    ASSERT_EQ(out.size(), 4u);
    EXPECT_EQ(out.back().lba, 200u);
    EXPECT_EQ(assembler.counts().lost_in_gap, 1u);
}

// Before any whole command of its kind nothing says what its path is: a
// command overlapping a run is left out rather than trusted.
TEST_F(AssemblerTest, NoWholeCommandYetMeansLeftOutInADropRun) {
    assembler.set_gaps({GapRun{.cpu = 2, .first_ts = 990'000, .last_ts = 1'010'000, .records = 3}});
    feed(host_command(1'000'000, 7, 100));
    feed(host_command(3'000'000, 7, 200));  // after the run: kept, and a path now
    assembler.finish();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].lba, 200u);
    EXPECT_EQ(assembler.counts().lost_in_gap, 1u);
    EXPECT_TRUE(assembler.counts().gaps.empty()) << "no marker was pushed";
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

// ----------------------------------------------------------------- nvme-tcp

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

}  // namespace
}  // namespace nvmetrace
