// The recorder's second stage: every record reaches the file in order, the
// live analysis gives up (and only it) when it falls too far behind, and a
// write error on the stage's thread reaches the drain thread.
#include "cmd/record_stage.h"

#include "format/recfile.h"
#include "tempdir.h"
#include "util/error.h"

#include <future>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

nvmetrace_rec rec_at(uint64_t ts) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.seq = static_cast<uint32_t>(ts);
    r.event = NVMETRACE_EV_BIO_QUEUE;
    return r;
}

RecordingWriter open_writer(const std::string& path, int zstd_level) {
    RecordingWriterOptions o;
    o.zstd_level = zstd_level;
    o.block_records = 100;
    RecordingWriter w = RecordingWriter::open(path, o);
    w.write_meta(make_recording_meta());
    return w;
}

std::vector<uint64_t> read_ts(const std::string& path) {
    std::vector<uint64_t> ts;
    RecordingReader r = RecordingReader::open(path);
    r.for_each([&](std::span<const nvmetrace_rec> recs) {
        for (const auto& x : recs)
            ts.push_back(x.ts);
    });
    return ts;
}

TEST(RecordStage, EveryRecordReachesTheFileAndTheLiveAnalysisInOrder) {
    test::TempDir dir;
    RecordingWriter w = open_writer(dir / "r.ntr", 1);
    std::vector<uint64_t> live, ticks;
    uint64_t ts = 0;
    {
        RecordStage stage({.writer = &w,
                           .live =
                               [&](std::span<const nvmetrace_rec> recs) {
                                   for (const auto& r : recs)
                                       live.push_back(r.ts);
                               },
                           .tick = [&](uint64_t now) { ticks.push_back(now); }});
        for (int drain = 0; drain < 200; drain++) {
            std::vector<nvmetrace_rec> recs;
            for (int i = 0; i < 37; i++)
                recs.push_back(rec_at(++ts));
            stage.push(std::span(recs).first(20));
            stage.push(std::span(recs).subspan(20));
            stage.submit(ts);
        }
        stage.submit(ts + 1);  // a drain that found nothing still ticks
        stage.finish();
        EXPECT_TRUE(stage.live_complete());
        EXPECT_GE(stage.peak_backlog(), 37u);
    }
    w.close();
    const std::vector<uint64_t> file = read_ts(dir / "r.ntr");
    ASSERT_EQ(file.size(), 200u * 37u);
    ASSERT_EQ(live, file);
    for (size_t i = 0; i < file.size(); i++)
        ASSERT_EQ(file[i], i + 1);
    ASSERT_EQ(ticks.size(), 201u);
    EXPECT_EQ(ticks.back(), ts + 1);
}

// A change of the devices reaches the live analysis before the records
// drained after it, and the file as a DEVICES block (written by the stage's
// thread, which owns the writer when blocks are compressed).
TEST(RecordStage, DeviceChangesComeBeforeTheNextRecords) {
    test::TempDir dir;
    RecordingWriter w = open_writer(dir / "d.ntr", 1);
    std::vector<std::string> seen;
    {
        RecordStage stage({.writer = &w,
                           .live =
                               [&](std::span<const nvmetrace_rec> recs) {
                                   seen.push_back(fmt::format("{} records", recs.size()));
                               },
                           .tick = {},
                           .devices =
                               [&](const DeviceChange& c) {
                                   seen.push_back(fmt::format("{} added", c.added.size()));
                               }});
        stage.push(std::vector<nvmetrace_rec>{rec_at(1), rec_at(2)});
        stage.submit(10);
        DeviceChange c;
        c.monotonic_ns = 3;
        c.added.push_back({{"kind", "disk"}, {"name", "nvme3n1"}, {"dev", 5}});
        stage.push_devices(c);
        stage.push(std::vector<nvmetrace_rec>{rec_at(4)});
        stage.submit(20);
        stage.finish();
    }
    EXPECT_EQ(seen, (std::vector<std::string>{"2 records", "1 added", "1 records"}));
    w.close();
    RecordingReader r = RecordingReader::open(dir / "d.ntr");
    ASSERT_EQ(r.meta().devices.size(), 1u);
    EXPECT_EQ(r.meta().devices[0]["name"], "nvme3n1");
    EXPECT_EQ(r.meta().devices[0]["appeared_ns"], 3);
    EXPECT_EQ(r.for_each([](auto) {}), 3u);
}

// The CPUs pushed with the records reach the file with them, across
// batches and the writer's blocks; records pushed without are of unknown CPU.
TEST(RecordStage, TheRecordsCpusReachTheFile) {
    test::TempDir dir;
    RecordingWriter w = open_writer(dir / "c.ntr", 0);
    std::vector<uint32_t> want;
    uint64_t ts = 0;
    {
        RecordStage stage({.writer = &w, .live = {}, .tick = {}});
        for (int drain = 0; drain < 30; drain++) {
            std::vector<nvmetrace_rec> recs;
            for (int i = 0; i < 17; i++)
                recs.push_back(rec_at(++ts));
            // as a merge hands them on: CPUs taking turns, a run each
            const auto cpu = static_cast<uint32_t>(drain % 3);
            const std::vector<CpuRun> runs = {{cpu, 5}, {cpu + 1, 7}, {cpu, 5}};
            for (const CpuRun& r : runs)
                want.insert(want.end(), r.count, r.cpu);
            stage.push(recs, runs);
            if (drain % 10 == 9) {
                stage.push(std::span(recs).first(3));
                want.insert(want.end(), 3, kCpuUnknown);
            }
            stage.submit(ts);
        }
        stage.finish();
    }
    w.close();
    RecordingReader r = RecordingReader::open(dir / "c.ntr");
    std::vector<uint32_t> got;
    std::span<const nvmetrace_rec> recs;
    while (r.next(recs)) {
        ASSERT_FALSE(r.cpu_runs().empty());
        for (const CpuRun& run : r.cpu_runs())
            got.insert(got.end(), run.count, run.cpu);
    }
    EXPECT_TRUE(r.notes().empty());
    EXPECT_EQ(got, want);
}

// The live analysis is held up while the drain thread hands on more than
// live_backlog records: it gives up, the file still gets every record.
TEST(RecordStage, TheLiveAnalysisGivesUpWhenFarBehindAndTheFileDoesNot) {
    test::TempDir dir;
    RecordingWriter w = open_writer(dir / "r.ntr", 0);
    std::promise<void> entered, go;
    std::shared_future<void> go_f = go.get_future().share();
    size_t live_seen = 0, calls = 0;
    RecordStage stage({.writer = &w,
                       .live =
                           [&](std::span<const nvmetrace_rec> recs) {
                               if (calls++ == 0) {
                                   entered.set_value();
                                   go_f.wait();
                               }
                               live_seen += recs.size();
                           },
                       .tick = {},
                       .live_backlog = 1000});
    uint64_t ts = 0;
    std::vector<nvmetrace_rec> one{rec_at(++ts)};
    stage.push(one);
    stage.submit(ts);
    entered.get_future().wait();  // the stage is inside the first batch
    for (int drain = 0; drain < 30; drain++) {
        std::vector<nvmetrace_rec> recs;
        for (int i = 0; i < 100; i++)
            recs.push_back(rec_at(++ts));
        stage.push(recs);
        stage.submit(ts);
    }
    go.set_value();
    stage.finish();
    EXPECT_FALSE(stage.live_complete());
    EXPECT_EQ(live_seen, 1u);
    EXPECT_GE(stage.peak_backlog(), 3000u);
    w.close();
    const std::vector<uint64_t> file = read_ts(dir / "r.ntr");
    ASSERT_EQ(file.size(), 3001u);
    for (size_t i = 0; i < file.size(); i++)
        ASSERT_EQ(file[i], i + 1);
}

// A failure on the stage's thread (here the live analysis throwing, as a
// write error would) is rethrown on the drain thread, by submit() or finish().
TEST(RecordStage, AnErrorOnTheStageThreadReachesTheDrainThread) {
    test::TempDir dir;
    RecordingWriter w = open_writer(dir / "r.ntr", 0);
    RecordStage stage({.writer = &w,
                       .live = [](std::span<const nvmetrace_rec>) { throw Error("disk full"); },
                       .tick = {}});
    std::vector<nvmetrace_rec> one{rec_at(1)};
    stage.push(one);
    stage.submit(1);
    bool thrown = false;
    try {
        for (int i = 0; i < 1000 && !thrown; i++) {
            stage.submit(2);
            std::this_thread::yield();
        }
        stage.finish();
    } catch (const Error& e) {
        thrown = true;
        EXPECT_STREQ(e.what(), "disk full");
    }
    EXPECT_TRUE(thrown);
}

}  // namespace
}  // namespace nvmetrace
