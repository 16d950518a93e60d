// spdk/ring_follower.cc: a live ring followed through its file, as SPDK
// writes it (trace_file_synth.h writes the file's bytes in place).
#include "spdk/ring_follower.h"

#include "spdk/trace_file_synth.h"
#include "tempdir.h"
#include "util/error.h"

#include <fcntl.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace::spdk {
namespace {

using test::SynthTrace;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint16_t kNew = test::kTcpNew;
constexpr uint16_t kSubmit = test::kTcpSubmit;

struct Ring {
    nvmetrace::test::TempDir dir{"spdk-ring"};
    std::string path = dir / "nvmf_trace.pid1";
    SynthTrace s{2, 8};

    Ring() {
        s.tcp_tpoints();
        write();
    }
    // the bytes, written over the file in place (a reader's mapping sees them)
    void write() {
        const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(pwrite(fd, s.bytes().data(), s.bytes().size(), 0),
                  static_cast<ssize_t>(s.bytes().size()));
        close(fd);
    }
};

// (core, tsc) of each entry a poll returned
std::vector<std::pair<uint32_t, uint64_t>> seen(const std::vector<RingFollower::Entry>& es) {
    std::vector<std::pair<uint32_t, uint64_t>> out;
    for (const auto& e : es)
        out.emplace_back(e.core, e.entry.tsc);
    return out;
}

TEST(SpdkRingFollower, ReturnsOnlyWhatWasWrittenSinceTheLastPoll) {
    Ring r;
    r.s.record(0, 10, kNew, 1, {1});
    r.write();
    RingFollower f(r.path);  // what is there already is not new
    EXPECT_TRUE(f.poll().empty());
    r.s.record(0, 20, kNew, 2, {1});
    r.s.record(1, 21, kSubmit, 3, {7, 9, 2, 0x100, 0, 7, 1});
    r.write();
    const auto es = f.poll();
    EXPECT_THAT(seen(es), ElementsAre(std::pair{0u, 20u}, std::pair{1u, 21u}));
    EXPECT_THAT(es[1].entry.args, ElementsAre(7u, 9u, 2u, 0x100u, 0u, 7u, 1u));
    EXPECT_TRUE(f.poll().empty());
    EXPECT_EQ(f.lost(), 0u);
}

TEST(SpdkRingFollower, AnEntryStillBeingWrittenComesWhole) {
    Ring r;
    RingFollower f(r.path);
    r.s.record(0, 30, kSubmit, 1, {1, 2, 2, 0, 0, 0, 1});
    r.s.rewind(0, 1);  // its last continuation not published yet
    r.write();
    EXPECT_TRUE(f.poll().empty());
    r.s.publish(0, 1);
    r.write();
    EXPECT_THAT(seen(f.poll()), ElementsAre(std::pair{0u, 30u}));
    EXPECT_EQ(f.lost(), 0u);
}

TEST(SpdkRingFollower, EntriesOverwrittenBeforeAPollAreCounted) {
    Ring r;
    RingFollower f(r.path);
    // 12 entries of 3 into a ring of 8: the first 4 are gone, and the kept 4..5 are the
    // tail of the second submission, whose head was among them
    for (uint64_t i = 0; i < 4; i++)
        r.s.record(0, 100 + i, kSubmit, i, {i, i, 2, 0, 0, 0, 1});
    r.write();
    EXPECT_THAT(seen(f.poll()), ElementsAre(std::pair{0u, 102u}, std::pair{0u, 103u}));
    EXPECT_EQ(f.lost(), 4u);
    r.s.record(0, 200, kNew, 9, {1});
    r.write();
    EXPECT_THAT(seen(f.poll()), ElementsAre(std::pair{0u, 200u}));
    EXPECT_EQ(f.lost(), 4u);
}

TEST(SpdkRingFollower, AFileThatIsNoRingSaysSo) {
    nvmetrace::test::TempDir dir{"spdk-ring"};
    try {
        RingFollower f(dir / "missing");
        FAIL();
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("cannot open the SPDK trace file"));
    }
    const std::string empty = dir / "empty";
    close(open(empty.c_str(), O_RDWR | O_CREAT, 0600));
    try {
        RingFollower f(empty);
        FAIL();
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("empty or unreadable"));
    }
}

}  // namespace
}  // namespace nvmetrace::spdk
