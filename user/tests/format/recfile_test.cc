// Tests of the recording file (src/format/recfile.{h,cc}): its checksum,
// schema and first bytes, and a round trip through the writer and the reader.
#include "format/recfile.h"

#include "analysis/events.h"
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

// ------------------------------------------------------------------ basics

TEST(Crc32c, KnownVectors) {
    auto crc = [](std::string_view s) { return crc32c(std::as_bytes(std::span(s))); };
    EXPECT_EQ(crc(""), 0u);
    EXPECT_EQ(crc("123456789"), 0xe3069283u);
    // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, 32 bytes of 0xff.
    EXPECT_EQ(crc(std::string(32, '\0')), 0x8a9136aau);
    EXPECT_EQ(crc(std::string(32, '\xff')), 0x62a8ab43u);
    std::string_view s = "123456789";
    uint32_t part = crc32c(std::as_bytes(std::span(s.substr(0, 4))));
    EXPECT_EQ(crc32c(std::as_bytes(std::span(s.substr(4))), part), 0xe3069283u);
    // every length around the 32- and 8-byte rounds of the SSE 4.2 loop
    // against the bytewise definition
    std::string data;
    for (int i = 0; i < 100; i++)
        data.push_back(static_cast<char>(i * 37 + 11));
    for (size_t n = 0; n <= data.size(); n++) {
        uint32_t bitwise = ~0u;
        for (size_t i = 0; i < n; i++) {
            bitwise ^= static_cast<unsigned char>(data[i]);
            for (int k = 0; k < 8; k++)
                bitwise = bitwise & 1 ? (bitwise >> 1) ^ 0x82f63b78u : bitwise >> 1;
        }
        EXPECT_EQ(crc(std::string_view(data).substr(0, n)), ~bitwise) << n << " bytes";
    }
}

TEST(RecFile, SchemaCoversTheRecord) {
    const std::vector<RecordField>& fields = record_schema();
    uint32_t next = 0;
    for (const RecordField& f : fields) {
        EXPECT_EQ(f.offset, next) << f.name;
        EXPECT_EQ(f.type, fmt::format("u{}", 8 * f.size)) << f.name;
        next = f.offset + f.size;
    }
    EXPECT_EQ(next, sizeof(nvmetrace_rec));
    EXPECT_EQ(fields.front().name, "ts");
    EXPECT_EQ(fields.back().name, "seq");
    EXPECT_EQ(default_event_names().at(NVMETRACE_EV_NVMET_EXEC), "nvmet_exec");
}

TEST(RecFile, MetaNamesEveryEventTheAnalysisKnows) {
    // a recording says what each of its events is, so a reader without our
    // headers (and nvmetrace script) can name every record
    for (const auto& e : kEvents)
        EXPECT_TRUE(default_event_names().contains(e.event)) << e.name;
    EXPECT_EQ(default_event_names().at(NVMETRACE_EV_TCPT_CMD_RECV), "tcpt_cmd_recv");
}

TEST(RecFile, FileStartsWithDocumentedBytes) {
    TempDir tmp;
    std::string path = tmp.path("a.ntr");
    write_recording(path, {});
    std::string data = slurp(path);
    ASSERT_GE(data.size(), 16u + 32u);
    EXPECT_EQ(data.substr(0, 8), "NVMTRACE");
    EXPECT_EQ(data.substr(8, 8), std::string("\x01\0\0\0\x10\0\0\0", 8));
    EXPECT_EQ(data.substr(16, 6), std::string("NTRB\x01\0", 6));
    // The META payload is plain JSON, readable with `strings`.
    EXPECT_EQ(data[48], '{');
}

// ------------------------------------------------------------------ round trip

TEST(RecFile, RoundTrip) {
    TempDir tmp;
    std::string path = tmp.path("rt.ntr");
    WriteSpec spec;
    spec.records = 200'000;
    spec.opts.block_records = 10'000;
    std::vector<nvmetrace_rec> recs = write_recording(path, spec);

    std::vector<BlockInfo> blocks = walk_blocks(slurp(path));
    ASSERT_EQ(blocks.size(), 1 + 20 + 1u);
    for (size_t i = 1; i + 1 < blocks.size(); i++) {
        EXPECT_EQ(blocks[i].count, 10'000u);
        EXPECT_EQ(blocks[i].flags, kBlockZstd) << "block " << i << " should be compressed";
    }

    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_EQ(res.problem, "");
    EXPECT_TRUE(res.notes.empty()) << res.notes.front();
    EXPECT_TRUE(same_records(res.records, recs));

    RecordingMeta want = test_meta();
    const RecordingMeta& m = res.meta;
    EXPECT_EQ(m.format_version, kRecFileVersion);
    EXPECT_EQ(m.clock, "CLOCK_MONOTONIC");
    EXPECT_EQ(m.hostname, want.hostname);
    EXPECT_FALSE(m.hostname.empty());
    EXPECT_EQ(m.kernel_release, want.kernel_release);
    EXPECT_EQ(m.module_version, "0.1.0");
    EXPECT_EQ(m.tool_version, "0.1.0-test");
    EXPECT_EQ(m.role, "host");
    EXPECT_EQ(m.transport, "tcp");
    EXPECT_EQ(m.sample, 16u);
    EXPECT_EQ(m.seed, 0x1234567890abcdefull);
    EXPECT_GT(m.start_realtime_ns, 0);
    EXPECT_GT(m.start_monotonic_ns, 0);
    EXPECT_EQ(m.command_line, want.command_line);
    EXPECT_EQ(m.devices, want.devices);
    EXPECT_EQ(m.record_size, sizeof(nvmetrace_rec));
    EXPECT_EQ(m.record_fields, record_schema());
    EXPECT_EQ(m.events, default_event_names());
    EXPECT_EQ(m.extra, nlohmann::json({{"note", "written by recfile_test"}}));

    ASSERT_TRUE(res.trailer.has_value());
    const RecordingTrailer& t = *res.trailer;
    EXPECT_EQ(t.records, recs.size());
    EXPECT_EQ(t.lost, 5u);
    EXPECT_EQ(t.lost_per_cpu, (std::vector<uint64_t>{0, 2, 3}));
    EXPECT_EQ(t.stats, nlohmann::json({{"drains", 42}, {"ring_recs", 65536}}));
    EXPECT_GT(t.end_realtime_ns, m.start_realtime_ns);
    EXPECT_GT(t.end_monotonic_ns, m.start_monotonic_ns);
    EXPECT_EQ(t.duration_ns, static_cast<uint64_t>(t.end_monotonic_ns - m.start_monotonic_ns));
}

TEST(RecFile, IncompressibleAndUncompressedBlocksAreStoredRaw) {
    TempDir tmp;
    for (int level : {0, 3, -5}) {
        std::string path = tmp.path(fmt::format("raw{}.ntr", level));
        std::vector<nvmetrace_rec> recs(5000);
        std::mt19937_64 rng(level);
        for (nvmetrace_rec& r : recs) {
            uint64_t* w = reinterpret_cast<uint64_t*>(&r);
            for (size_t i = 0; i < sizeof(r) / 8; i++) {
                w[i] = rng();
            }
        }
        RecordingWriterOptions opts;
        opts.zstd_level = level;
        opts.block_records = 1000;
        RecordingWriter w = RecordingWriter::open(path, opts);
        w.write_meta(test_meta());
        w.append(recs);
        w.close();
        for (const BlockInfo& b : walk_blocks(slurp(path))) {
            EXPECT_EQ(b.flags, 0) << "level " << level << " block at " << b.offset;
        }
        ReadResult res = read_recording(path);
        EXPECT_EQ(res.end, RecordingEnd::clean);
        EXPECT_TRUE(same_records(res.records, recs));
    }
}

// zstd's fast (negative) levels, which record uses at 1 of 1, still shrink
// ordinary records and read back the same.
TEST(RecFile, FastZstdLevelShrinksAndReadsBack) {
    TempDir tmp;
    std::string path = tmp.path("fast.ntr");
    std::vector<nvmetrace_rec> recs(5000);
    for (size_t i = 0; i < recs.size(); i++) {
        recs[i].ts = 1'000'000 + i * 700;
        recs[i].lba = (i * 2654435761u) % 65536;
        recs[i].event = static_cast<uint16_t>(1 + i % 6);
        recs[i].len = 4096;
        recs[i].seq = static_cast<uint32_t>(i);
    }
    RecordingWriterOptions opts;
    opts.zstd_level = -5;
    opts.block_records = 1000;
    RecordingWriter w = RecordingWriter::open(path, opts);
    w.write_meta(test_meta());
    w.append(recs);
    w.close();
    size_t zstd_blocks = 0;
    for (const BlockInfo& b : walk_blocks(slurp(path)))
        zstd_blocks += b.flags & 1;
    EXPECT_GE(zstd_blocks, 5u);
    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(same_records(res.records, recs));
}

// direct_records: a long enough span goes out as block(s) of its own, after
// what was buffered, in order; short ones are still buffered.
TEST(RecFile, DirectAppendsWriteLongSpansAsTheirOwnBlocks) {
    TempDir tmp;
    std::string path = tmp.path("direct.ntr");
    const std::vector<nvmetrace_rec> recs = make_records(2 + 10 + 3 + 4);
    RecordingWriterOptions opts;
    opts.zstd_level = 0;
    opts.block_records = 8;
    opts.direct_records = 4;
    RecordingWriter w = RecordingWriter::open(path, opts);
    w.write_meta(test_meta());
    std::span<const nvmetrace_rec> all(recs);
    w.append(all.first(2));  // buffered
    EXPECT_EQ(w.buffered(), 2u);
    w.append(all.subspan(2, 10));  // the 2, then 8 and 2 straight
    EXPECT_EQ(w.buffered(), 0u);
    EXPECT_EQ(w.records_written(), 12u);
    w.append(all.subspan(12, 3));  // buffered
    w.append(all.subspan(15, 4));  // the 3, then the 4
    EXPECT_EQ(w.records_written(), 19u);
    w.close();
    std::vector<uint32_t> counts;
    for (const BlockInfo& b : walk_blocks(slurp(path)))
        if (b.type == static_cast<uint16_t>(BlockType::records))
            counts.push_back(b.count);
    EXPECT_EQ(counts, (std::vector<uint32_t>{2, 8, 2, 3, 4}));
    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(same_records(res.records, recs));
}

TEST(RecFile, EmptyRecordingClosedCleanly) {
    TempDir tmp;
    std::string path = tmp.path("none.ntr");
    RecordingWriter w = RecordingWriter::open(path);
    w.write_meta(test_meta());
    w.close();
    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(res.records.empty());
    ASSERT_TRUE(res.trailer.has_value());
    EXPECT_EQ(res.trailer->records, 0u);
}

}  // namespace
}  // namespace nvmetrace
