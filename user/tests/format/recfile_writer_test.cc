// Tests of the recording's writer (src/format/recfile_writer.cc): what a
// killed or dropped writer leaves, its flush interval, its errors and its
// throughput.
#include "format/recfile.h"
#include "format/recfile_helpers.h"
#include "tempdir.h"
#include "util/error.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using namespace rectest;

// ------------------------------------------------------------------ crashes

TEST(RecFile, KilledWriterLeavesEveryFlushedBlock) {
    TempDir tmp;
    std::string path = tmp.path("killed.ntr");
    const size_t kBlock = 1000;
    std::vector<nvmetrace_rec> recs = make_records(3 * kBlock + 10);
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // Child: three full blocks, ten records left in the buffer, then wait
        // to be killed.  No gtest assertions here: exit codes only.
        ::close(pipefd[0]);
        try {
            RecordingWriterOptions opts;
            opts.block_records = kBlock;
            RecordingWriter w = RecordingWriter::open(path, opts);
            w.write_meta(test_meta());
            w.append(recs);
            char c = 'k';
            if (write(pipefd[1], &c, 1) != 1) {
                _exit(2);
            }
            for (;;) {
                pause();
            }
        } catch (...) {
            _exit(3);
        }
    }
    ::close(pipefd[1]);
    char c = 0;
    ASSERT_EQ(read(pipefd[0], &c, 1), 1) << "child failed before writing";
    ::close(pipefd[0]);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status));

    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::cut_off);
    EXPECT_TRUE(same_records(res.records, std::span(recs).first(3 * kBlock)));
    EXPECT_EQ(res.problem,
              fmt::format("{}: no trailer: recording was cut off (killed?); read 3000 records up "
                          "to byte {}",
                          path, fs::file_size(path)));
}

TEST(RecFile, WriterDroppedWithoutCloseFlushesButWritesNoTrailer) {
    TempDir tmp;
    std::string path = tmp.path("dropped.ntr");
    WriteSpec spec;
    spec.records = 1234;
    spec.opts.block_records = 1000;
    spec.close = false;
    std::vector<nvmetrace_rec> recs = write_recording(path, spec);
    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::cut_off);
    EXPECT_TRUE(same_records(res.records, recs));
    EXPECT_THAT(res.problem, HasSubstr("no trailer"));
}

TEST(RecFile, FlushInterval) {
    TempDir tmp;
    std::string path = tmp.path("interval.ntr");
    RecordingWriterOptions opts;
    opts.flush_interval = std::chrono::milliseconds(20);
    RecordingWriter w = RecordingWriter::open(path, opts);
    w.write_meta(test_meta());
    std::vector<nvmetrace_rec> recs = make_records(10);
    w.append(recs);
    EXPECT_EQ(w.buffered(), 10u);
    EXPECT_FALSE(w.flush_if_due());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    w.append({});
    EXPECT_EQ(w.buffered(), 0u);
    EXPECT_EQ(w.records_written(), 10u);
    ReadResult res = read_recording(path);
    EXPECT_TRUE(same_records(res.records, recs));
    EXPECT_EQ(res.end, RecordingEnd::cut_off);
}

// ------------------------------------------------------------------ misuse

TEST(RecFile, WriterErrors) {
    TempDir tmp;
    std::string nodir = tmp.path("no/such/dir.ntr");
    try {
        RecordingWriter::open(nodir);
        FAIL() << "open succeeded";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  nodir + ": cannot create recording: No such file or directory");
    }
    RecordingWriterOptions opts;
    opts.block_records = 0;
    EXPECT_THROW(RecordingWriter::open(tmp.path("x"), opts), Error);

    RecordingWriter w = RecordingWriter::open(tmp.path("order.ntr"));
    nvmetrace_rec r{};
    EXPECT_THROW(w.append(std::span(&r, 1)), std::logic_error);
    w.write_meta(test_meta());
    EXPECT_THROW(w.write_meta(test_meta()), std::logic_error);
    w.close();
    EXPECT_THROW(w.append(std::span(&r, 1)), std::logic_error);

    if (access("/dev/full", W_OK) == 0) {
        RecordingWriter full = RecordingWriter::open("/dev/full");
        try {
            full.write_meta(test_meta());
            FAIL() << "write to /dev/full succeeded";
        } catch (const Error& e) {
            EXPECT_EQ(std::string(e.what()), "/dev/full: write failed: No space left on device");
        }
        EXPECT_THROW(full.flush(), Error);
    }
}

// ------------------------------------------------------------------ throughput

// Not a pass/fail benchmark (sanitizer builds are slow): prints what one core
// sustains, which must stay well above 1 M records/s in a release build.
TEST(RecFile, Throughput) {
    TempDir tmp;
    std::string path = tmp.path("big.ntr");
    const size_t n = 4'000'000;
    std::vector<nvmetrace_rec> recs = make_records(n);
    using clock = std::chrono::steady_clock;

    auto t0 = clock::now();
    {
        RecordingWriter w = RecordingWriter::open(path);
        w.write_meta(test_meta());
        // 512-record spans, like a drain of a busy ring.
        for (size_t i = 0; i < n; i += 512) {
            w.append(std::span(recs).subspan(i, std::min<size_t>(512, n - i)));
        }
        w.close();
    }
    double wsec = std::chrono::duration<double>(clock::now() - t0).count();

    auto t1 = clock::now();
    RecordingReader r = RecordingReader::open(path);
    uint64_t sum = 0;
    uint64_t got = r.for_each([&](std::span<const nvmetrace_rec> b) { sum += b.back().seq; });
    double rsec = std::chrono::duration<double>(clock::now() - t1).count();
    EXPECT_EQ(got, n);
    EXPECT_EQ(r.end(), RecordingEnd::clean);

    uint64_t size = fs::file_size(path);
    std::printf("[ recfile  ] %zu records, %.1f MB raw -> %.1f MB file (%.2fx, %.1f B/record)\n", n,
                n * 48 / 1e6, size / 1e6, n * 48.0 / size, double(size) / n);
    std::printf("[ recfile  ] writer %.2f M records/s (%.0f MB/s raw), reader %.2f M records/s\n",
                n / wsec / 1e6, n * 48 / wsec / 1e6, n / rsec / 1e6);
    RecordProperty("writer_records_per_s", static_cast<int>(n / wsec));
    RecordProperty("reader_records_per_s", static_cast<int>(n / rsec));
}

// ------------------------------------------------------------------ CPUs

// The CPUS block before every RECORDS block of a file: (runs of each, in
// file order), checking that each is right before a RECORDS block.
std::vector<uint32_t> cpus_block_runs(const std::string& path) {
    const std::string data = slurp(path);
    const std::vector<BlockInfo> blocks = walk_blocks(data);
    std::vector<uint32_t> runs;
    for (size_t k = 0; k < blocks.size(); k++) {
        if (blocks[k].type != static_cast<uint16_t>(BlockType::cpus))
            continue;
        if (k + 1 < blocks.size()) {
            EXPECT_EQ(blocks[k + 1].type, static_cast<uint16_t>(BlockType::records));
        } else {
            ADD_FAILURE() << "a CPUS block at the end";
        }
        runs.push_back(blocks[k].count);
    }
    return runs;
}

TEST(RecFileCpus, RunsRoundTripThroughTheBuffer) {
    TempDir tmp;
    const std::string path = tmp.path("cpus.ntr");
    RecordingWriterOptions o;
    o.block_records = 100;
    const std::vector<nvmetrace_rec> recs = make_records(430);
    std::vector<uint32_t> want;
    RecordingWriter w = RecordingWriter::open(path, o);
    w.write_meta(test_meta());
    std::span<const nvmetrace_rec> left(recs);
    auto put = [&](uint32_t cpu, size_t n) {
        w.append(cpu, left.first(n));
        want.insert(want.end(), n, cpu);
        left = left.subspan(n);
    };
    put(3, 30);
    put(3, 20);   // the same CPU again: the same run
    put(0, 70);   // fills the first block (100) and starts the second
    w.flush();    // a block of 20
    put(7, 250);  // two whole blocks straight from recs, then 50 buffered
    // several CPUs in one call, as the recorder's merge hands them on
    const std::vector<CpuRun> runs = {{1, 10}, {2, 5}, {1, 15}, {kCpuUnknown, 10}, {2, 20}};
    for (const CpuRun& r : runs)
        want.insert(want.end(), r.count, r.cpu);
    w.append(left.first(60), runs);
    left = left.subspan(60);
    ASSERT_TRUE(left.empty());
    w.close({});

    const CpuReadResult res = read_cpus(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(res.notes.empty()) << res.notes.front();
    EXPECT_EQ(res.cpus, want);
    EXPECT_EQ(res.blocks, (std::vector<size_t>{100, 20, 100, 100, 100, 10}));
    // block 1: 3 x50 then 0 x50; block 2: 0 x20; blocks 3, 4: 7 only; block 5:
    // 7 x50, then 1 x10, 2 x5, 1 x15, unknown x10, 2 x10; block 6: 2 x10
    EXPECT_EQ(res.runs, (std::vector<size_t>{2, 1, 1, 1, 6, 1}));
    EXPECT_EQ(cpus_block_runs(path), (std::vector<uint32_t>{2, 1, 1, 1, 6, 1}));
    const ReadResult all = read_recording(path);
    EXPECT_TRUE(same_records(all.records, recs));
    EXPECT_EQ(all.trailer->records, recs.size());
}

TEST(RecFileCpus, DirectRecordsSplitTheirRunsAcrossBlocks) {
    TempDir tmp;
    const std::string path = tmp.path("direct.ntr");
    RecordingWriterOptions o;
    o.block_records = 100;
    o.direct_records = 64;
    o.zstd_level = 0;  // as record -s 1
    const std::vector<nvmetrace_rec> recs = make_records(280);
    RecordingWriter w = RecordingWriter::open(path, o);
    w.write_meta(test_meta());
    std::span<const nvmetrace_rec> all(recs);
    w.append(5, all.first(30));  // buffered: written first by the direct append
    const std::vector<CpuRun> runs = {{1, 10}, {2, 200}, {1, 40}};
    w.append(all.subspan(30), runs);
    w.close({});

    RecordingReader r = RecordingReader::open(path);
    std::vector<std::vector<CpuRun>> got;
    std::span<const nvmetrace_rec> block;
    size_t n = 0;
    while (r.next(block)) {
        EXPECT_TRUE(same_records(block, all.subspan(n, block.size())));
        n += block.size();
        got.emplace_back(r.cpu_runs().begin(), r.cpu_runs().end());
    }
    EXPECT_EQ(n, recs.size());
    EXPECT_TRUE(r.notes().empty());
    EXPECT_EQ(got, (std::vector<std::vector<CpuRun>>{
                       {{5, 30}},
                       {{1, 10}, {2, 90}},
                       {{2, 100}},
                       {{2, 10}, {1, 40}},
                   }));
}

TEST(RecFileCpus, UnknownCpusWriteNoCpusBlock) {
    TempDir tmp;
    const std::string path = tmp.path("unknown.ntr");
    RecordingWriterOptions o;
    o.block_records = 100;
    const std::vector<nvmetrace_rec> recs = make_records(250);
    RecordingWriter w = RecordingWriter::open(path, o);
    w.write_meta(test_meta());
    std::span<const nvmetrace_rec> all(recs);
    w.append(all.first(100));                      // no CPU said
    w.append(kCpuUnknown, all.subspan(100, 100));  // the same, said so
    w.append(all.subspan(200, 20));                // unknown, then
    w.append(4, all.subspan(220, 30));             // known in the same block
    w.close({});
    EXPECT_EQ(w.blocks_written(), 6u);  // META, 2 RECORDS, CPUS + RECORDS, TRAILER

    EXPECT_EQ(cpus_block_runs(path), (std::vector<uint32_t>{2}));
    const CpuReadResult res = read_cpus(path);
    EXPECT_TRUE(res.notes.empty());
    EXPECT_EQ(res.runs, (std::vector<size_t>{0, 0, 2}));
    std::vector<uint32_t> want(220, kCpuUnknown);
    want.insert(want.end(), 30, 4);
    EXPECT_EQ(res.cpus, want);
}

TEST(RecFileCpus, ManyShortRunsAreCompressedWithTheRecords) {
    TempDir tmp;
    const std::string path = tmp.path("turns.ntr");
    RecordingWriterOptions o;
    o.block_records = 1000;
    o.zstd_level = 1;
    const std::vector<nvmetrace_rec> recs = make_records(1000);
    // two CPUs taking turns record by record: a run a record
    std::vector<CpuRun> runs;
    for (uint32_t i = 0; i < 1000; i++)
        runs.push_back({i % 2, 1});
    RecordingWriter w = RecordingWriter::open(path, o);
    w.write_meta(test_meta());
    w.append(recs, runs);
    w.close({});

    const std::vector<BlockInfo> blocks = walk_blocks(slurp(path));
    ASSERT_EQ(blocks.size(), 4u);
    EXPECT_EQ(blocks[1].type, static_cast<uint16_t>(BlockType::cpus));
    EXPECT_EQ(blocks[1].count, 1000u);
    EXPECT_TRUE(blocks[1].flags & kBlockZstd);
    EXPECT_LT(blocks[1].end - blocks[1].offset, 32u + 1000u * 8 / 4);
    const CpuReadResult res = read_cpus(path);
    EXPECT_TRUE(res.notes.empty());
    ASSERT_EQ(res.cpus.size(), 1000u);
    for (uint32_t i = 0; i < 1000; i++)
        ASSERT_EQ(res.cpus[i], i % 2) << i;
}

TEST(RecFileCpus, RunsThatDoNotCoverTheRecordsAreRefused) {
    TempDir tmp;
    RecordingWriter w = RecordingWriter::open(tmp.path("bad.ntr"), {});
    w.write_meta(test_meta());
    const std::vector<nvmetrace_rec> recs = make_records(10);
    const std::vector<CpuRun> runs = {{0, 4}, {1, 5}};
    EXPECT_THROW(w.append(recs, runs), std::invalid_argument);
    EXPECT_EQ(w.buffered(), 0u);
}

// The one walker of CPU runs (writer, script): a CPU per record, runs split
// where a block ends, unknown past the runs' end; add_cpu_run merges.
TEST(CpuRuns, CursorAndMerge) {
    const std::vector<CpuRun> runs{{3, 2}, {5, 0}, {1, 3}};
    CpuRunCursor one(runs);
    std::vector<uint32_t> cpus;
    for (int i = 0; i < 6; i++)
        cpus.push_back(one.next());
    EXPECT_EQ(cpus, (std::vector<uint32_t>{3, 3, 1, 1, 1, kCpuUnknown}));

    CpuRunCursor pieces(runs);
    std::vector<CpuRun> first, second;
    pieces.take(3, [&](CpuRun r) { add_cpu_run(first, r); });
    pieces.take(4, [&](CpuRun r) { add_cpu_run(second, r); });
    EXPECT_EQ(first, (std::vector<CpuRun>{{3, 2}, {1, 1}}));
    EXPECT_EQ(second, (std::vector<CpuRun>{{1, 2}, {kCpuUnknown, 2}}));

    std::vector<CpuRun> merged;
    for (CpuRun r : {CpuRun{7, 1}, CpuRun{7, 2}, CpuRun{8, 0}, CpuRun{7, 1}, CpuRun{2, 1}})
        add_cpu_run(merged, r);
    EXPECT_EQ(merged, (std::vector<CpuRun>{{7, 4}, {2, 1}}));
}

}  // namespace
}  // namespace nvmetrace
