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

}  // namespace
}  // namespace nvmetrace
