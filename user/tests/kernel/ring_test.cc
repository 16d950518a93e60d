// kmod/ring_core.h in user space: one producer thread and one consumer thread
// over a heap copy of the kernel's layout (control page, then the records).
//
// The kernel's producer never waits.  The tests have two producer modes:
// "wait for room" (spin until the consumer frees a slot, then reserve, which
// must then succeed) to check that nothing is lost or torn while there is
// room, and "free running" (like the kernel) to check that every failed
// reserve is counted in ctrl->lost and records + lost == attempts.
#include <stdint.h>

// The producer's clock: each dropped record reads the next tick.
static uint64_t g_ring_clock = 0;
#define NVMETRACE_RING_NOW() (g_ring_clock++)
#include "kernel/ring_barrier.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

// A ring laid out as the kernel's mapping: control page, then nr_recs records.
class TestRing {
public:
    explicit TestRing(uint32_t nr_recs)
        : nr_recs_(nr_recs),
          bytes_(NVMETRACE_RING_CTRL_SIZE + size_t{nr_recs} * sizeof(nvmetrace_rec)),
          mem_(static_cast<char*>(aligned_alloc(NVMETRACE_RING_CTRL_SIZE,
                                                round_up(bytes_, NVMETRACE_RING_CTRL_SIZE))),
               free) {
        memset(mem_.get(), 0, bytes_);
        nvmetrace_ring_init(&prod_, ctrl(), data(), nr_recs, 0, bytes_);
    }

    nvmetrace_ring_ctrl* ctrl() { return reinterpret_cast<nvmetrace_ring_ctrl*>(mem_.get()); }
    nvmetrace_rec* data() {
        return reinterpret_cast<nvmetrace_rec*>(mem_.get() + NVMETRACE_RING_CTRL_SIZE);
    }
    nvmetrace_ring_prod* prod() { return &prod_; }
    uint32_t nr_recs() const { return nr_recs_; }

    long consume(nvmetrace_rec* out, uint32_t max) {
        return nvmetrace_ring_consume(ctrl(), data(), nr_recs_, out, max);
    }

private:
    static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

    uint32_t nr_recs_;
    size_t bytes_;
    std::unique_ptr<char, decltype(&free)> mem_;
    nvmetrace_ring_prod prod_{};
};

// Every field of record k is derived from k, so a record mixing two writes
// (torn) fails check().  seq is set by commit, not here.
void fill(nvmetrace_rec* r, uint64_t k) {
    r->ts = k * 3 + 1;
    r->lba = k ^ 0x5a5a5a5a5a5a5a5aull;
    r->aux = ~k;
    r->dev = static_cast<uint32_t>(k * 7);
    r->len = static_cast<uint32_t>(k >> 3);
    r->event = static_cast<uint16_t>(k % 191 + 1);  // below NVMETRACE_EV_GAP
    r->qid = static_cast<uint16_t>(k >> 16);
    r->cid = static_cast<uint16_t>(k);
    r->tag = static_cast<uint16_t>(~k);
    r->cntlid = static_cast<uint16_t>(k >> 32);
    r->opcode = static_cast<uint8_t>(k);
    r->flags = static_cast<uint8_t>(k >> 8);
}

// The k that fill() used, or a failed expectation if the record is torn.
uint64_t check(const nvmetrace_rec& r) {
    const uint64_t k = (r.ts - 1) / 3;
    nvmetrace_rec want{};
    fill(&want, k);
    want.seq = r.seq;
    EXPECT_EQ(memcmp(&want, &r, sizeof(r)), 0) << "torn record, k=" << k << " seq=" << r.seq;
    return k;
}

// Producer: `attempts` records; returns how many reserve() refused.  With
// wait_for_room it spins until the consumer frees a slot, unless the consumer
// has quit (`consumer_gone`, set when it fails an assertion).
uint64_t produce(TestRing& ring, uint64_t attempts, bool wait_for_room,
                 const std::atomic<bool>* consumer_gone = nullptr) {
    nvmetrace_ring_prod* p = ring.prod();
    uint64_t drops = 0;
    for (uint64_t k = 0; k < attempts; k++) {
        if (wait_for_room) {
            while (p->head - NVMETRACE_LOAD_ACQUIRE(&ring.ctrl()->tail) > p->mask) {
                if (consumer_gone && consumer_gone->load(std::memory_order_relaxed))
                    return drops;
                std::this_thread::yield();
            }
        }
        nvmetrace_rec* r = nvmetrace_ring_reserve(p);
        if (!r) {
            drops++;
            continue;
        }
        fill(r, k);
        nvmetrace_ring_commit(p, r);
    }
    return drops;
}

struct Consumed {
    uint64_t records = 0;
    uint64_t markers = 0;       // GAP records
    uint64_t marked_drops = 0;  // the sum of their counts
    uint64_t next_seq = 0;      // seq of the next record expected
    int64_t last_k = -1;        // payload of the last record
    uint64_t calls = 0;
};

// Consume until `done` is set and the ring is empty; checks order and content.
void consume_until(TestRing& ring, const std::atomic<bool>& done, Consumed& c, uint32_t batch) {
    std::vector<nvmetrace_rec> buf(batch);
    for (;;) {
        // Read `done` before draining so a final drain follows the last commit.
        const bool last = done.load(std::memory_order_acquire);
        long n = ring.consume(buf.data(), batch);
        ASSERT_GE(n, 0) << "consume() rejected a ring that the producer wrote";
        c.calls++;
        for (long i = 0; i < n; i++) {
            const nvmetrace_rec& r = buf[static_cast<size_t>(i)];
            ASSERT_EQ(r.seq, static_cast<uint32_t>(c.next_seq)) << "out of order or duplicate";
            c.next_seq++;
            if (r.event == NVMETRACE_EV_GAP) {
                ASSERT_GT(r.aux, 0u) << "a marker of nothing";
                c.markers++;
                c.marked_drops += r.aux;
                continue;
            }
            const uint64_t k = check(r);
            ASSERT_GT(static_cast<int64_t>(k), c.last_k) << "payload went backwards";
            c.last_k = static_cast<int64_t>(k);
            c.records++;
        }
        if (n == 0) {
            if (last)
                return;
            std::this_thread::yield();
        }
    }
}

struct Shape {
    uint32_t nr_recs;
    uint32_t batch;
};

class RingThreads : public ::testing::TestWithParam<Shape> {};

// While there is room nothing is lost, duplicated, reordered or torn, across
// many wraps of the ring.
TEST_P(RingThreads, EveryRecordOnceInOrderWhileThereIsRoom) {
    const Shape shape = GetParam();
    TestRing ring(shape.nr_recs);
    // 20 000 wraps at most: on a tiny ring every wrap is a hand-over between
    // the threads (a yield each), which a loaded machine makes slow.
    const uint64_t attempts = std::min<uint64_t>(200000, 20000ull * shape.nr_recs);
    std::atomic<bool> done{false};
    std::atomic<bool> consumer_gone{false};
    Consumed c;
    uint64_t drops = ~0ull;

    std::thread consumer([&] {
        consume_until(ring, done, c, shape.batch);
        consumer_gone.store(true, std::memory_order_relaxed);
    });
    std::thread producer([&] {
        drops = produce(ring, attempts, /*wait_for_room=*/true, &consumer_gone);
        done.store(true, std::memory_order_release);
    });
    producer.join();
    consumer.join();

    EXPECT_EQ(drops, 0u);
    EXPECT_EQ(c.records, attempts);
    EXPECT_EQ(c.last_k, static_cast<int64_t>(attempts - 1));
    EXPECT_EQ(NVMETRACE_READ_ONCE(ring.ctrl()->lost), 0u);
    EXPECT_EQ(NVMETRACE_READ_ONCE(ring.ctrl()->head), attempts);
    EXPECT_EQ(NVMETRACE_READ_ONCE(ring.ctrl()->tail), attempts);
}

// A producer that never waits, as in the kernel: each refused reserve() is
// counted once in ctrl->lost, and what arrives is in order and untorn.
TEST_P(RingThreads, FreeRunningProducerCountsEveryDrop) {
    const Shape shape = GetParam();
    TestRing ring(shape.nr_recs);
    const uint64_t attempts = 200000;
    std::atomic<bool> done{false};
    Consumed c;
    uint64_t drops = 0;

    std::thread consumer([&] { consume_until(ring, done, c, shape.batch); });
    std::thread producer([&] {
        drops = produce(ring, attempts, /*wait_for_room=*/false);
        done.store(true, std::memory_order_release);
    });
    producer.join();
    consumer.join();

    EXPECT_EQ(NVMETRACE_READ_ONCE(ring.ctrl()->lost), drops);
    EXPECT_EQ(ring.prod()->lost, drops);
    EXPECT_EQ(c.records + drops, attempts);
    EXPECT_EQ(NVMETRACE_READ_ONCE(ring.ctrl()->head), c.records + c.markers);
    // Every drop is in exactly one marker, or in the run still open.
    EXPECT_EQ(c.marked_drops + NVMETRACE_READ_ONCE(ring.ctrl()->gap_recs), drops);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RingThreads,
                         ::testing::Values(Shape{2, 1}, Shape{2, 2}, Shape{8, 3}, Shape{64, 64},
                                           Shape{1024, 100}, Shape{4096, 4096}),
                         [](const ::testing::TestParamInfo<Shape>& param) {
                             return "recs" + std::to_string(param.param.nr_recs) + "_batch" +
                                    std::to_string(param.param.batch);
                         });

// The consumer stalls: the ring fills, exactly attempts - capacity records
// are dropped and counted, and the first `capacity` records are intact.
TEST(Ring, StalledConsumerDropsExactlyTheOverflow) {
    for (uint32_t nr_recs : {2u, 4u, 256u}) {
        for (uint32_t round = 0; round < 3; round++) {
            SCOPED_TRACE(testing::Message() << "nr_recs " << nr_recs << " round " << round);
            TestRing ring(nr_recs);
            const uint64_t attempts = nr_recs + 1000u * (round + 1);

            // Run the producer on its own thread, with no consumer at all.
            uint64_t drops = 0;
            std::thread([&] { drops = produce(ring, attempts, false); }).join();

            EXPECT_EQ(drops, attempts - nr_recs);
            EXPECT_EQ(NVMETRACE_READ_ONCE(ring.ctrl()->lost), attempts - nr_recs);
            std::vector<nvmetrace_rec> out(nr_recs + 1);
            ASSERT_EQ(ring.consume(out.data(), nr_recs + 1), static_cast<long>(nr_recs));
            for (uint32_t i = 0; i < nr_recs; i++) {
                EXPECT_EQ(out[i].seq, i);
                EXPECT_EQ(check(out[i]), i);
            }
            EXPECT_EQ(ring.consume(out.data(), nr_recs), 0);

            // Room again: the run's marker, then the next record, continuing seq.
            const uint64_t t0 = g_ring_clock;
            nvmetrace_rec* r = nvmetrace_ring_reserve(ring.prod());
            ASSERT_NE(r, nullptr);
            EXPECT_EQ(g_ring_clock, t0) << "the clock is read only for a drop";
            fill(r, attempts);
            nvmetrace_ring_commit(ring.prod(), r);
            ASSERT_EQ(ring.consume(out.data(), 2), 2);
            EXPECT_EQ(out[0].event, NVMETRACE_EV_GAP);
            EXPECT_EQ(out[0].aux, attempts - nr_recs);
            EXPECT_EQ(out[0].ts - out[0].lba, attempts - nr_recs - 1) << "last - first drop";
            EXPECT_EQ(out[0].ts, t0 - 1);
            EXPECT_EQ(out[0].seq, nr_recs);
            EXPECT_EQ(out[1].seq, nr_recs + 1);
            EXPECT_EQ(check(out[1]), attempts);
            EXPECT_EQ(ring.ctrl()->gap_recs, 0u);
        }
    }
}

TEST(Ring, InitDescribesTheLayout) {
    TestRing ring(16);
    const nvmetrace_ring_ctrl* c = ring.ctrl();
    EXPECT_EQ(c->magic, NVMETRACE_RING_MAGIC);
    EXPECT_EQ(c->version, NVMETRACE_RING_VERSION);
    EXPECT_EQ(c->compat_version, NVMETRACE_RING_COMPAT_VERSION);
    EXPECT_EQ(c->size, NVMETRACE_RING_CTRL_SIZE);
    EXPECT_EQ(c->rec_size, sizeof(nvmetrace_rec));
    EXPECT_EQ(c->nr_recs, 16u);
    EXPECT_EQ(c->data_offset, NVMETRACE_RING_CTRL_SIZE);
    EXPECT_EQ(c->head, 0u);
    EXPECT_EQ(c->tail, 0u);
    EXPECT_EQ(c->lost, 0u);
}

// consume() refuses a head it cannot make sense of and touches nothing.
TEST(Ring, ConsumeRejectsCorruptedHead) {
    TestRing ring(8);
    for (uint64_t k = 0; k < 5; k++) {
        nvmetrace_rec* r = nvmetrace_ring_reserve(ring.prod());
        ASSERT_NE(r, nullptr);
        fill(r, k);
        nvmetrace_ring_commit(ring.prod(), r);
    }
    std::vector<nvmetrace_rec> out(16);
    ASSERT_EQ(ring.consume(out.data(), 2), 2);  // tail = 2, head = 5

    nvmetrace_ring_ctrl* c = ring.ctrl();
    struct {
        uint64_t head;
        const char* what;
    } const bad[] = {
        {1, "head behind tail"},
        {2 + 8 + 1, "head more than a ring ahead"},
        {~0ull, "head far ahead"},
    };
    for (const auto& b : bad) {
        SCOPED_TRACE(b.what);
        c->head = b.head;
        memset(out.data(), 0xa5, out.size() * sizeof(out[0]));
        EXPECT_EQ(ring.consume(out.data(), 16), -1);
        EXPECT_EQ(c->tail, 2u) << "tail moved";
        EXPECT_EQ(out[0].ts, 0xa5a5a5a5a5a5a5a5ull) << "out[] written";
    }

    // Exactly a full ring ahead is fine.
    c->head = 2 + 8;
    EXPECT_EQ(ring.consume(out.data(), 16), 8);
    EXPECT_EQ(c->tail, 10u);
}

// A tail that user space corrupts only makes the ring look full: the
// producer drops and counts instead of writing anywhere.
TEST(Ring, CorruptedTailOnlyMakesTheRingLookFull) {
    TestRing ring(8);
    nvmetrace_ring_ctrl* c = ring.ctrl();
    // head is 0: a tail ahead of it, or more than a ring behind it.
    for (uint64_t tail : {uint64_t{1}, uint64_t{5}, uint64_t{1} << 40, ~uint64_t{0} - 8}) {
        c->tail = tail;
        EXPECT_EQ(nvmetrace_ring_reserve(ring.prod()), nullptr) << "tail " << tail;
    }
    EXPECT_EQ(c->lost, 4u);
    EXPECT_EQ(c->head, 0u);
    EXPECT_EQ(c->gap_recs, 4u);
    c->tail = 0;
    EXPECT_NE(nvmetrace_ring_reserve(ring.prod()), nullptr);
    EXPECT_EQ(c->head, 1u) << "the marker";
    EXPECT_EQ(ring.data()[0].event, NVMETRACE_EV_GAP);
    EXPECT_EQ(ring.data()[0].aux, 4u);
}

// A marker is written once per run and is never dropped itself: with one
// free slot the run goes on; the run's marker sits right before the first
// record after it, and lost equals the sum of the markers.
TEST(Ring, OneMarkerPerDropRunNeverDropped) {
    TestRing ring(8);
    nvmetrace_ring_init(ring.prod(), ring.ctrl(), ring.data(), 8, 5, 4096);
    std::vector<nvmetrace_rec> out(8);
    auto put = [&](uint64_t k) {
        nvmetrace_rec* r = nvmetrace_ring_reserve(ring.prod());
        if (!r)
            return false;
        fill(r, k);
        nvmetrace_ring_commit(ring.prod(), r);
        return true;
    };
    uint64_t k = 0;
    uint64_t markers = 0, marked = 0;
    auto take = [&](uint32_t max) {
        const long n = ring.consume(out.data(), max);
        for (long i = 0; i < n; i++)
            if (out[static_cast<size_t>(i)].event == NVMETRACE_EV_GAP) {
                markers++;
                marked += out[static_cast<size_t>(i)].aux;
            }
        return n;
    };
    for (uint64_t lap = 0; lap < 3; lap++) {
        SCOPED_TRACE(lap);
        g_ring_clock = 1000 * (lap + 1);
        while (put(k))  // fills the ring; the failed put is the run's first drop
            k++;
        const uint64_t run = 3 + lap;
        for (uint64_t i = 1; i < run; i++)
            EXPECT_FALSE(put(k++));
        EXPECT_EQ(ring.ctrl()->gap_recs, run);
        ASSERT_EQ(take(1), 1);
        EXPECT_FALSE(put(k++)) << "one free slot is not enough for marker + record";
        ASSERT_EQ(take(8), 7);
        EXPECT_EQ(markers, lap) << "no marker before the run ends";
        EXPECT_TRUE(put(k));  // marker + record
        const nvmetrace_rec& m = ring.data()[(ring.prod()->head - 2) & 7];
        EXPECT_EQ(m.event, NVMETRACE_EV_GAP);
        EXPECT_EQ(m.dev, 5u);
        EXPECT_EQ(m.aux, run + 1);
        EXPECT_EQ(m.lba, 1000 * (lap + 1));
        EXPECT_EQ(m.ts, 1000 * (lap + 1) + run);
        EXPECT_EQ(m.len, 0u);
        EXPECT_EQ(m.qid, 0u);
        EXPECT_EQ(m.flags, 0u);
        EXPECT_TRUE(put(++k)) << "no second marker";
        EXPECT_EQ(ring.ctrl()->gap_recs, 0u);
        k++;
    }
    ASSERT_EQ(take(8), 3);
    EXPECT_EQ(markers, 3u);
    EXPECT_EQ(marked, ring.ctrl()->lost);
}

}  // namespace
}  // namespace nvmetrace
