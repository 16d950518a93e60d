// Tests of the recording file (src/recfile.{h,cc}): round trip, and that a
// reader facing a cut-off, damaged, foreign or future file says exactly what
// happened and yields exactly the records it can vouch for.
#include "recfile.h"

#include "error.h"
#include "tempdir.h"

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

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct TempDir : test::TempDir {
    TempDir() : test::TempDir("recfile_test") {}
};

// Records shaped like a host recording: commands of six events sharing
// dev/qid/tag/cid/lba, timestamps a few microseconds apart.
std::vector<nvmetrace_rec> make_records(size_t n, uint64_t seed = 1) {
    static const uint16_t kEvents[] = {NVMETRACE_EV_BIO_QUEUE,     NVMETRACE_EV_RQ_INSERT,
                                       NVMETRACE_EV_RQ_ISSUE,      NVMETRACE_EV_NVME_SETUP,
                                       NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE};
    std::mt19937_64 rng(seed);
    std::vector<nvmetrace_rec> recs(n);
    uint64_t ts = 1'000'000'000'000;
    nvmetrace_rec cmd{};
    for (size_t i = 0; i < n; i++) {
        size_t step = i % 6;
        if (step == 0) {
            cmd = {};
            cmd.lba = (rng() % 1'000'000'000) & ~uint64_t{7};
            cmd.dev = (259u << 20) | static_cast<uint32_t>(rng() % 2);
            cmd.len = (rng() % 4 == 0) ? 131072 : 4096;
            cmd.qid = static_cast<uint16_t>(1 + rng() % 8);
            cmd.cid = static_cast<uint16_t>(rng());
            cmd.tag = static_cast<uint16_t>(rng() % 1024);
            cmd.opcode = (rng() % 2) ? 0x02 : 0x01;
            cmd.flags = static_cast<uint8_t>((cmd.opcode == 0x01 ? NVMETRACE_REC_WRITE : 0) |
                                             NVMETRACE_REC_HAS_QID);
        }
        nvmetrace_rec& r = recs[i];
        r = cmd;
        ts += rng() % 3000;
        r.ts = ts;
        r.event = kEvents[step];
        r.aux = step == 4 ? rng() % 2 : 0;
        if (step >= 3) {
            r.flags |= NVMETRACE_REC_HAS_CID;
        }
        r.seq = static_cast<uint32_t>(i);
    }
    return recs;
}

RecordingMeta test_meta() {
    RecordingMeta meta = make_recording_meta();
    meta.module_version = "0.1.0";
    meta.tool_version = "0.1.0-test";
    meta.role = "host";
    meta.transport = "tcp";
    meta.sample = 16;
    meta.seed = 0x1234567890abcdefull;
    meta.command_line = {"nvmetrace", "record", "-o", "x.ntr", "--sample", "16"};
    meta.devices = nlohmann::json::array({
        {{"dev", (259u << 20) | 0},
         {"name", "nvme0n1"},
         {"lbs", 512},
         {"head_dev", "nvme0n1"},
         {"ctrl", "nvme0"},
         {"cntlid", 1},
         {"transport", "tcp"},
         {"address", "traddr=10.0.0.2,trsvcid=4420"},
         {"subsysnqn", "nqn.2014-08.org.example:sub"},
         {"nsid", 1}},
    });
    meta.extra = {{"note", "written by recfile_test"}, {"hostname", "must not win"}};
    return meta;
}

struct WriteSpec {
    size_t records = 1000;
    RecordingWriterOptions opts{};
    bool close = true;
};

std::vector<nvmetrace_rec> write_recording(const std::string& path, const WriteSpec& spec) {
    std::vector<nvmetrace_rec> recs = make_records(spec.records);
    RecordingWriter w = RecordingWriter::open(path, spec.opts);
    w.write_meta(test_meta());
    // Uneven spans, as a ring drain would produce.
    std::mt19937 rng(7);
    std::span<const nvmetrace_rec> left(recs);
    while (!left.empty()) {
        size_t n = std::min<size_t>(left.size(), 1 + rng() % 3000);
        w.append(left.first(n));
        left = left.subspan(n);
    }
    if (spec.close) {
        RecordingTrailer t;
        t.lost = 5;
        t.lost_per_cpu = {0, 2, 3};
        t.stats = {{"drains", 42}, {"ring_recs", 65536}};
        w.close(t);
    }
    return recs;
}

struct ReadResult {
    RecordingMeta meta;
    std::vector<nvmetrace_rec> records;
    RecordingEnd end = RecordingEnd::reading;
    std::string problem;
    std::vector<std::string> notes;
    std::optional<RecordingTrailer> trailer;
    uint64_t good_bytes = 0;
};

ReadResult read_recording(const std::string& path) {
    RecordingReader r = RecordingReader::open(path);
    ReadResult res;
    res.meta = r.meta();
    r.for_each([&](std::span<const nvmetrace_rec> recs) {
        res.records.insert(res.records.end(), recs.begin(), recs.end());
    });
    res.end = r.end();
    res.problem = r.problem();
    res.notes = r.notes();
    res.trailer = r.trailer();
    res.good_bytes = r.good_bytes();
    EXPECT_EQ(r.records_read(), res.records.size());
    return res;
}

bool same_records(std::span<const nvmetrace_rec> a, std::span<const nvmetrace_rec> b) {
    return a.size() == b.size() && (a.empty() || memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Replaces the file rather than truncating it: ext4 (auto_da_alloc) flushes a
// file truncated to 0 on close, which makes thousands of rewrites crawl.
void spit(const std::string& path, std::string_view data) {
    fs::remove(path);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// The blocks of a file, found by walking it as Documentation/recording-format.md
// describes (independently of RecordingReader).
struct BlockInfo {
    uint64_t offset;  // of the block header
    uint64_t end;     // just past the payload
    uint16_t type;
    uint16_t flags;
    uint32_t count;
};

std::vector<BlockInfo> walk_blocks(const std::string& data) {
    std::vector<BlockInfo> blocks;
    uint32_t header_size;
    memcpy(&header_size, data.data() + 12, 4);
    uint64_t off = header_size;
    while (off + sizeof(BlockHeader) <= data.size()) {
        BlockHeader h;
        memcpy(&h, data.data() + off, sizeof(h));
        uint64_t end = off + sizeof(h) + h.stored_len;
        if (end > data.size()) {
            break;
        }
        blocks.push_back({off, end, h.type, h.flags, h.count});
        off = end;
    }
    return blocks;
}

// A block with correct checksums around whatever the test wants.
std::string make_block(uint16_t type, uint16_t flags, std::string_view payload, uint32_t raw_len,
                       uint32_t count) {
    BlockHeader h{};
    h.magic = kBlockMagic;
    h.type = type;
    h.flags = flags;
    h.stored_len = static_cast<uint32_t>(payload.size());
    h.raw_len = raw_len;
    h.count = count;
    h.checksum = crc32c(std::as_bytes(std::span(payload)));
    h.header_crc = crc32c(std::as_bytes(std::span(&h, 1)).first(28));
    return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + std::string(payload);
}

// Records of the complete RECORDS blocks that end at or before `cut`.
size_t records_before(const std::vector<BlockInfo>& blocks, uint64_t cut) {
    size_t n = 0;
    for (const BlockInfo& b : blocks) {
        if (b.end <= cut && b.type == static_cast<uint16_t>(BlockType::records)) {
            n += b.count;
        }
    }
    return n;
}

std::string error_of(const std::string& path) {
    try {
        RecordingReader::open(path);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

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
        EXPECT_EQ(f.type, "u" + std::to_string(8 * f.size)) << f.name;
        next = f.offset + f.size;
    }
    EXPECT_EQ(next, sizeof(nvmetrace_rec));
    EXPECT_EQ(fields.front().name, "ts");
    EXPECT_EQ(fields.back().name, "seq");
    EXPECT_EQ(default_event_names().at(NVMETRACE_EV_NVMET_EXEC), "nvmet_exec");
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

// ------------------------------------------------------------------ truncation

TEST(RecFile, TruncatedAtEveryOffset) {
    TempDir tmp;
    std::string path = tmp.path("full.ntr");
    WriteSpec spec;
    spec.records = 400;
    spec.opts.block_records = 50;
    std::vector<nvmetrace_rec> recs = write_recording(path, spec);
    const std::string data = slurp(path);
    const std::vector<BlockInfo> blocks = walk_blocks(data);
    ASSERT_EQ(blocks.size(), 1 + 8 + 1u);
    ASSERT_EQ(blocks.back().end, data.size());
    const uint64_t meta_end = blocks[0].end;

    std::string cut_path = tmp.path("cut.ntr");
    for (uint64_t cut = 0; cut <= data.size(); cut++) {
        SCOPED_TRACE(fmt::format("cut at {} of {}", cut, data.size()));
        spit(cut_path, std::string_view(data).substr(0, cut));
        if (cut < meta_end) {
            std::string err = error_of(cut_path);
            EXPECT_THAT(err, HasSubstr(cut_path + ": "));
            if (cut == 0) {
                EXPECT_THAT(err, HasSubstr("empty file"));
            } else if (cut < 16) {
                EXPECT_THAT(
                    err, HasSubstr(fmt::format("cut off inside the file header ({} of 16", cut)));
            } else if (cut == 16) {
                EXPECT_THAT(err, HasSubstr("no META block"));
            } else {
                EXPECT_THAT(err,
                            HasSubstr(fmt::format("cut off at byte {} (block 0 incomplete", cut)));
            }
            continue;
        }
        ReadResult res = read_recording(cut_path);
        size_t want = records_before(blocks, cut);
        ASSERT_EQ(res.records.size(), want);
        ASSERT_TRUE(same_records(res.records, std::span(recs).first(want)));
        if (cut == data.size()) {
            EXPECT_EQ(res.end, RecordingEnd::clean);
            EXPECT_EQ(res.problem, "");
            continue;
        }
        EXPECT_EQ(res.end, RecordingEnd::cut_off);
        EXPECT_FALSE(res.trailer.has_value());
        // The last block boundary at or before the cut, and the block cut.
        size_t k = 0;
        while (k < blocks.size() && blocks[k].end <= cut) {
            k++;
        }
        uint64_t good = blocks[k - 1].end;
        EXPECT_EQ(res.good_bytes, good);
        if (cut == good) {
            EXPECT_EQ(res.problem,
                      fmt::format("{}: no trailer: recording was cut off (killed?); read {} "
                                  "records up to byte {}",
                                  cut_path, want, good));
        } else if (cut - good < sizeof(BlockHeader)) {
            EXPECT_EQ(res.problem,
                      fmt::format("{}: cut off at byte {} (block {} incomplete: {} of 32 header "
                                  "bytes present); read {} records up to byte {}; no trailer: "
                                  "recording was cut off (killed?)",
                                  cut_path, cut, k, cut - good, want, good));
        } else {
            EXPECT_EQ(res.problem,
                      fmt::format("{}: cut off at byte {} (block {} incomplete: header says {} "
                                  "bytes, {} present); read {} records up to byte {}; no "
                                  "trailer: recording was cut off (killed?)",
                                  cut_path, cut, k, blocks[k].end - blocks[k].offset - 32,
                                  cut - good - 32, want, good));
        }
    }
}

// ------------------------------------------------------------------ corruption

TEST(RecFile, FlippedByteIsACorruptBlock) {
    TempDir tmp;
    std::string path = tmp.path("full.ntr");
    WriteSpec spec;
    spec.records = 300;
    spec.opts.block_records = 50;
    std::vector<nvmetrace_rec> recs = write_recording(path, spec);
    const std::string data = slurp(path);
    const std::vector<BlockInfo> blocks = walk_blocks(data);
    ASSERT_EQ(blocks.size(), 1 + 6 + 1u);

    std::string bad_path = tmp.path("bad.ntr");
    for (uint64_t at = 0; at < data.size(); at++) {
        SCOPED_TRACE(fmt::format("byte {} of {} flipped", at, data.size()));
        std::string bad = data;
        bad[at] = static_cast<char>(bad[at] ^ 0xff);
        spit(bad_path, bad);
        if (at < blocks[0].end) {
            // File header or META: nothing to report from, open() refuses.
            EXPECT_THAT(error_of(bad_path), HasSubstr(bad_path + ": "));
            continue;
        }
        size_t k = 0;
        while (blocks[k].end <= at) {
            k++;
        }
        ReadResult res = read_recording(bad_path);
        EXPECT_EQ(res.end, RecordingEnd::corrupt);
        size_t want = records_before(blocks, blocks[k].offset);
        ASSERT_TRUE(same_records(res.records, std::span(recs).first(want)));
        EXPECT_EQ(res.good_bytes, blocks[k].offset);
        EXPECT_THAT(res.problem, HasSubstr(fmt::format("{}: corrupt block {} at byte {}: ",
                                                       bad_path, k, blocks[k].offset)));
        EXPECT_THAT(res.problem, HasSubstr(fmt::format("; read {} records before it", want)));
        uint64_t rel = at - blocks[k].offset;
        if (rel < 4) {
            EXPECT_THAT(res.problem, HasSubstr("bad block magic"));
        } else if (rel < 32) {
            EXPECT_THAT(res.problem, HasSubstr("block header checksum mismatch"));
        } else {
            EXPECT_THAT(res.problem, HasSubstr("payload checksum mismatch"));
        }
    }
}

// Damage the checksums cannot see: a writer bug, or a hostile file.
TEST(RecFile, InconsistentBlocksWithGoodChecksums) {
    TempDir tmp;
    std::string path = tmp.path("full.ntr");
    WriteSpec spec;
    spec.records = 200;
    spec.opts.block_records = 50;
    std::vector<nvmetrace_rec> recs = write_recording(path, spec);
    const std::string data = slurp(path);
    const std::vector<BlockInfo> blocks = walk_blocks(data);
    const BlockInfo& trailer = blocks.back();
    const std::string head = data.substr(0, trailer.offset);
    const std::string tail = data.substr(trailer.offset);
    std::string raw(reinterpret_cast<const char*>(recs.data()), 3 * sizeof(nvmetrace_rec));

    struct Case {
        std::string block;
        std::string what;
    };
    const uint16_t rec = static_cast<uint16_t>(BlockType::records);
    const Case cases[] = {
        {make_block(rec, 0, raw, static_cast<uint32_t>(raw.size()), 2), "2 records of 48 bytes"},
        {make_block(rec, 0, raw, static_cast<uint32_t>(raw.size()) + 48, 4),
         "uncompressed block with stored length 144 != raw length 192"},
        {make_block(rec, kBlockZstd, raw, static_cast<uint32_t>(raw.size()), 3), "zstd"},
        {make_block(rec, 0x8000, raw, static_cast<uint32_t>(raw.size()), 3), "unknown flags"},
        {make_block(static_cast<uint16_t>(BlockType::trailer), 0, "{not json", 9, 0),
         "bad TRAILER"},
        {std::string(32, '\0'), "all zeros"},
    };
    std::string bad_path = tmp.path("bad.ntr");
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        spit(bad_path, head + c.block + tail);
        ReadResult res = read_recording(bad_path);
        EXPECT_EQ(res.end, RecordingEnd::corrupt);
        EXPECT_TRUE(same_records(res.records, recs));
        EXPECT_THAT(res.problem, HasSubstr(fmt::format("corrupt block {} at byte {}: ",
                                                       blocks.size() - 1, trailer.offset)));
        EXPECT_THAT(res.problem, HasSubstr(c.what));
    }

    // A zstd frame that decodes to a different size than the header says.
    std::vector<char> z(ZSTD_compressBound(raw.size()));
    size_t zn = ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 1);
    ASSERT_FALSE(ZSTD_isError(zn));
    spit(bad_path,
         head + make_block(rec, kBlockZstd, std::string_view(z.data(), zn), 96, 2) + tail);
    EXPECT_THAT(read_recording(bad_path).problem, HasSubstr("zstd frame holds 144 bytes"));
}

TEST(RecFile, UnknownBlockTypeIsSkippedWithANote) {
    TempDir tmp;
    std::string path = tmp.path("full.ntr");
    WriteSpec spec;
    spec.records = 200;
    spec.opts.block_records = 50;
    std::vector<nvmetrace_rec> recs = write_recording(path, spec);
    const std::string data = slurp(path);
    const std::vector<BlockInfo> blocks = walk_blocks(data);
    // Between the second and third RECORDS blocks, compressed or not.
    uint64_t at = blocks[3].offset;
    std::string future = make_block(99, 0x4001, "from the future", 1000, 7);
    spit(path, data.substr(0, at) + future + data.substr(at));

    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(same_records(res.records, recs));
    ASSERT_EQ(res.notes.size(), 1u);
    EXPECT_EQ(res.notes[0],
              fmt::format("{}: skipped block 3 at byte {}: unknown type 99 (written by a newer "
                          "nvmetrace?)",
                          path, at));
}

TEST(RecFile, TrailerDisagreeingWithRecordsAndDataAfterTrailerAreNoted) {
    TempDir tmp;
    std::string path = tmp.path("full.ntr");
    WriteSpec spec;
    spec.records = 100;
    spec.opts.block_records = 50;
    write_recording(path, spec);
    std::string data = slurp(path);
    std::vector<BlockInfo> blocks = walk_blocks(data);
    // Drop the second RECORDS block, append junk after the trailer.
    std::string cut = data.substr(0, blocks[2].offset) + data.substr(blocks[2].end) + "junk";
    spit(path, cut);
    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_EQ(res.records.size(), 50u);
    ASSERT_EQ(res.notes.size(), 2u);
    EXPECT_THAT(res.notes[0], HasSubstr("trailer says 100 records, the file holds 50"));
    EXPECT_THAT(res.notes[1], HasSubstr("ignored 4 bytes after the trailer"));
}

// ------------------------------------------------------------------ not a recording

TEST(RecFile, EmptyFile) {
    TempDir tmp;
    std::string path = tmp.path("empty.ntr");
    spit(path, "");
    EXPECT_EQ(error_of(path), path + ": empty file: not an nvmetrace recording");
}

TEST(RecFile, OnlyTheFileHeader) {
    TempDir tmp;
    std::string path = tmp.path("hdr.ntr");
    write_recording(path, {});
    spit(path, slurp(path).substr(0, 16));
    EXPECT_EQ(error_of(path), path +
                                  ": no META block: the file ends after its 16-byte header "
                                  "(recording killed at start?)");
}

TEST(RecFile, NotARecording) {
    TempDir tmp;
    std::string path = tmp.path("text");
    spit(path, "#!/bin/sh\necho this is not a recording\n");
    EXPECT_EQ(error_of(path), path + ": not an nvmetrace recording");
    spit(path, "NVM");  // too short to tell, but not our magic either way
    EXPECT_THAT(error_of(path), HasSubstr("cut off inside the file header (3 of 16 bytes)"));
    spit(path, "ZZZ");
    EXPECT_EQ(error_of(path), path + ": not an nvmetrace recording");
    EXPECT_EQ(error_of(tmp.path("missing")), tmp.path("missing") + ": No such file or directory");
    EXPECT_EQ(error_of(tmp.path("")), tmp.path("") + ": Is a directory");
}

TEST(RecFile, NewerOrBadFormatVersion) {
    TempDir tmp;
    std::string path = tmp.path("v.ntr");
    write_recording(path, {});
    std::string data = slurp(path);
    data[8] = 2;
    spit(path, data);
    EXPECT_EQ(error_of(path), path +
                                  ": recording format version 2 is newer than this nvmetrace "
                                  "reads (version 1): upgrade nvmetrace");
    data[8] = 0;
    spit(path, data);
    EXPECT_THAT(error_of(path), HasSubstr("bad recording format version 0"));
}

TEST(RecFile, LargerFileHeaderFromALaterVersionIsSkipped) {
    TempDir tmp;
    std::string path = tmp.path("h.ntr");
    std::vector<nvmetrace_rec> recs = write_recording(path, {});
    std::string data = slurp(path);
    data[12] = 24;
    spit(path, data.substr(0, 16) + std::string(8, 'x') + data.substr(16));
    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(same_records(res.records, recs));
}

TEST(RecFile, ForeignRecordLayoutIsRefused) {
    TempDir tmp;
    std::string path = tmp.path("layout.ntr");
    write_recording(path, {});
    std::string data = slurp(path);
    std::vector<BlockInfo> blocks = walk_blocks(data);
    nlohmann::json meta = nlohmann::json::parse(data.substr(48, blocks[0].end - 48));
    meta["record"]["fields"][1]["offset"] = 9;
    std::string json = meta.dump();
    spit(path, data.substr(0, 16) + make_block(1, 0, json, static_cast<uint32_t>(json.size()), 0) +
                   data.substr(blocks[0].end));
    EXPECT_EQ(error_of(path), path +
                                  ": records have a layout this nvmetrace cannot read: field "
                                  "'lba' is u64 at offset 9 (this build: u64 at offset 8)");
}

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
