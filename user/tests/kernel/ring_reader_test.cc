// RingReader over a memfd laid out like /dev/nvmetrace: ring i at offset
// i * map_size, each written by ring_core.h's producer through its own
// mapping, so the reader's real mmap path is exercised.
#include "kernel/ring_reader.h"

#include "kernel/memfd_rings.h"
#include "util/error.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using ::testing::HasSubstr;

// The rings, with one kind of record: an RQ_ISSUE whose LBA tells them apart.
class FakeDevice : public MemfdRings {
public:
    FakeDevice(uint32_t nr_rings, uint32_t nr_recs) : MemfdRings(nr_rings, nr_recs) {}

    // Tries to write one record on `cpu`; false if the ring is full.
    bool produce(uint32_t cpu, uint64_t lba) {
        nvmetrace_rec r{};
        r.ts = lba + 1000;
        r.lba = lba;
        r.event = NVMETRACE_EV_RQ_ISSUE;
        return MemfdRings::produce(cpu, r);
    }
};

// What drain() delivered, per CPU.
std::map<uint32_t, std::vector<nvmetrace_rec>> drain_all(RingReader& reader) {
    std::map<uint32_t, std::vector<nvmetrace_rec>> got;
    reader.drain([&got](uint32_t cpu, std::span<const nvmetrace_rec> recs) {
        got[cpu].insert(got[cpu].end(), recs.begin(), recs.end());
    });
    return got;
}

TEST(RingReader, DrainsEveryRingInOrderAndReportsLostPerRing) {
    FakeDevice dev(3, 8);
    // cpu 0: 5 records; cpu 1: none; cpu 2: 8 fit, 4 are dropped.
    for (uint64_t i = 0; i < 5; i++)
        ASSERT_TRUE(dev.produce(0, i));
    for (uint64_t i = 0; i < 12; i++)
        EXPECT_EQ(dev.produce(2, 100 + i), i < 8);

    RingReader reader(dev.fd(), dev.geo());
    auto got = drain_all(reader);
    ASSERT_EQ(got[0].size(), 5u);
    EXPECT_EQ(got.count(1), 0u) << "empty ring passed to the sink";
    ASSERT_EQ(got[2].size(), 8u);
    for (uint32_t i = 0; i < 5; i++) {
        EXPECT_EQ(got[0][i].seq, i);
        EXPECT_EQ(got[0][i].lba, i);
    }
    for (uint32_t i = 0; i < 8; i++)
        EXPECT_EQ(got[2][i].lba, 100 + i);

    const std::vector<RingStats> stats = reader.stats();
    ASSERT_EQ(stats.size(), 3u);
    EXPECT_EQ(stats[0].lost, 0u);
    EXPECT_EQ(stats[1].lost, 0u);
    EXPECT_EQ(stats[2].lost, 4u);
    EXPECT_EQ(stats[2].head, 8u);
    EXPECT_EQ(stats[2].tail, 8u);
    EXPECT_EQ(reader.lost(), 4u);
    // the drop run no marker covers yet, and the marker that would close it
    EXPECT_EQ(stats[0].gap_recs, 0u);
    EXPECT_EQ(stats[2].gap_recs, 4u);
    const nvmetrace_rec open = open_gap_marker(stats[2]);
    EXPECT_EQ(open.event, NVMETRACE_EV_GAP);
    EXPECT_EQ(open.aux, 4u);
    EXPECT_EQ(open.dev, 2u);
    EXPECT_EQ(open.lba, stats[2].gap_first);
    EXPECT_EQ(open.ts, stats[2].gap_last);

    // The slots are free again, and a second drain only sees new records:
    // the run's marker first, then the record.
    EXPECT_TRUE(dev.produce(2, 200));
    got = drain_all(reader);
    ASSERT_EQ(got[2].size(), 2u);
    EXPECT_EQ(got[2][0].event, NVMETRACE_EV_GAP);
    EXPECT_EQ(got[2][0].aux, 4u);
    EXPECT_EQ(got[2][0].dev, 2u);
    EXPECT_EQ(got[2][0].seq, 8u);
    EXPECT_EQ(got[2][1].lba, 200u);
    EXPECT_EQ(got[2][1].seq, 9u);
    EXPECT_EQ(reader.stats()[2].gap_recs, 0u);
    EXPECT_EQ(reader.drain([](uint32_t, std::span<const nvmetrace_rec>) {}), 0u);
}

// drain_into() puts each ring's records at the back of that ring's queue,
// across the queue's wrap and growth, at most a ring's worth per drain.
TEST(RingReader, DrainIntoAppendsEachRingToItsQueue) {
    FakeDevice dev(3, 2048);
    std::map<uint32_t, RecordQueue> queues;
    auto queue_for = [&](uint32_t cpu) -> RecordQueue& { return queues[cpu]; };
    RingReader reader(dev.fd(), dev.geo());
    uint64_t next0 = 0, next2 = 5000;
    uint64_t seen0 = 0;
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < 700; i++)
            ASSERT_TRUE(dev.produce(0, next0++));
        for (int i = 0; i < 300; i++)
            ASSERT_TRUE(dev.produce(2, next2++));
        EXPECT_EQ(reader.drain_into(queue_for), 1000u);
        // take some from the front, so later drains wrap around the buffer
        queues[0].pop_front(500);
        seen0 += 500;
    }
    EXPECT_EQ(queues.count(1), 0u) << "an empty ring's queue was asked for";
    ASSERT_EQ(queues[0].size(), next0 - seen0);
    for (size_t i = 0; i < queues[0].size(); i++)
        ASSERT_EQ(queues[0][i].lba, seen0 + i);
    ASSERT_EQ(queues[2].size(), 1800u);
    for (size_t i = 0; i < queues[2].size(); i++)
        ASSERT_EQ(queues[2][i].lba, 5000 + i);
    EXPECT_EQ(reader.stats()[0].tail, next0);

    // a full ring: exactly its records, then nothing
    for (int i = 0; i < 2048; i++)
        ASSERT_TRUE(dev.produce(2, 9000 + static_cast<uint64_t>(i)));
    EXPECT_FALSE(dev.produce(2, 1));
    EXPECT_EQ(reader.drain_into(queue_for), 2048u);
    EXPECT_EQ(queues[2].size(), 1800u + 2048u);
    EXPECT_EQ(queues[2][1800].lba, 9000u);
    EXPECT_EQ(reader.drain_into(queue_for), 0u);

    // and the same error as drain() for a control page that makes no sense
    dev.ctrl(1)->head = 100'000;
    try {
        reader.drain_into(queue_for);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("ring 1: corrupted control page: head 100000 tail 0"));
    }
}

TEST(RingReader, MovedReaderKeepsTheMappings) {
    FakeDevice dev(2, 4);
    ASSERT_TRUE(dev.produce(1, 7));
    RingReader a(dev.fd(), dev.geo());
    RingReader b(std::move(a));
    auto got = drain_all(b);
    ASSERT_EQ(got[1].size(), 1u);
    EXPECT_EQ(got[1][0].lba, 7u);
}

TEST(RingReader, DrainRejectsACorruptedHead) {
    FakeDevice dev(2, 8);
    RingReader reader(dev.fd(), dev.geo());
    dev.ctrl(1)->head = 100;  // more than a ring ahead of tail 0
    try {
        reader.drain([](uint32_t, std::span<const nvmetrace_rec>) {});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("ring 1: corrupted control page: head 100 tail 0"));
    }
    EXPECT_EQ(dev.ctrl(1)->tail, 0u);
}

// Each broken field of a control page gives an error naming the ring and it.
TEST(RingReader, RejectsControlPagesItCannotRead) {
    struct Case {
        const char* name;
        std::function<void(nvmetrace_ring_ctrl*)> corrupt;
        const char* message;
    };
    const Case cases[] = {
        {"magic", [](nvmetrace_ring_ctrl* c) { c->magic = 0; }, "ring 1: bad magic 0x00000000"},
        {"compat_version",
         [](nvmetrace_ring_ctrl* c) {
             c->version = NVMETRACE_RING_VERSION + 1;
             c->compat_version = NVMETRACE_RING_VERSION + 1;
         },
         "ring 1: ring layout version 3 needs a reader of version 3 or later"},
        {"size", [](nvmetrace_ring_ctrl* c) { c->size = 64; },
         "ring 1: control page size 64 is smaller than 4096"},
        {"rec_size", [](nvmetrace_ring_ctrl* c) { c->rec_size = 40; },
         "ring 1: record size 40 (expected 48)"},
        {"nr_recs", [](nvmetrace_ring_ctrl* c) { c->nr_recs = 16; },
         "ring 1: nr_recs 16 (the status query said 8)"},
        {"cpu", [](nvmetrace_ring_ctrl* c) { c->cpu = 0; }, "ring 1: belongs to cpu 0"},
        {"map_size", [](nvmetrace_ring_ctrl* c) { c->map_size = 1 << 20; },
         "ring 1: map_size 1048576"},
        {"data_offset", [](nvmetrace_ring_ctrl* c) { c->data_offset = 8000; },
         "ring 1: data_offset 8000 does not fit 8 records"},
    };
    for (const Case& tc : cases) {
        SCOPED_TRACE(tc.name);
        FakeDevice dev(2, 8);
        tc.corrupt(dev.ctrl(1));
        try {
            RingReader reader(dev.fd(), dev.geo());
            ADD_FAILURE() << "accepted a bad " << tc.name;
        } catch (const Error& e) {
            EXPECT_THAT(e.what(), HasSubstr(tc.message));
        }
    }
}

// A newer writer whose layout this reader can still read is accepted.
TEST(RingReader, AcceptsNewerCompatibleLayout) {
    FakeDevice dev(1, 8);
    dev.ctrl(0)->version = NVMETRACE_RING_VERSION + 1;
    dev.ctrl(0)->compat_version = NVMETRACE_RING_VERSION;
    EXPECT_NO_THROW(RingReader(dev.fd(), dev.geo()));
}

TEST(RingReader, RejectsGeometryItCannotMap) {
    FakeDevice dev(1, 8);
    auto message = [&dev](auto change) {
        RingGeometry geo = dev.geo();
        change(geo);
        try {
            RingReader reader(dev.fd(), geo);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_THAT(message([](RingGeometry& g) { g.rec_size = 64; }),
                HasSubstr("module records are 64 bytes, this nvmetrace reads 48"));
    EXPECT_THAT(message([](RingGeometry& g) { g.nr_recs = 6; }),
                HasSubstr("6 records per ring, not a power of two"));
    EXPECT_THAT(message([](RingGeometry& g) { g.map_size += 1; }),
                HasSubstr("not a multiple of the page size"));
    EXPECT_THAT(message([](RingGeometry& g) { g.nr_recs = 1024; }), HasSubstr("too small"));
    EXPECT_THAT(message([](RingGeometry& g) { g.nr_rings = 0; }), HasSubstr("no rings"));
}

TEST(RingReader, MmapErrorsNameTheRing) {
    FakeDevice dev(1, 8);
    try {
        RingReader reader(-1, dev.geo());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(),
                    HasSubstr("ring 0: mmap 8192 bytes at offset 0: Bad file descriptor"));
    }
}

TEST(RingReader, OpenNamesThePath) {
    FakeDevice dev(1, 8);
    try {
        RingReader::open("/nonexistent/nvmetrace", dev.geo());
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("/nonexistent/nvmetrace (is the nvmetrace module "
                                        "loaded?): No such file or directory"));
    }
}

}  // namespace
}  // namespace nvmetrace
