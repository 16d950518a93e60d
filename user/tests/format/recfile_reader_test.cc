// Tests of the recording's reader (src/format/recfile_reader.cc): a reader
// facing a cut-off, damaged, foreign or future file says exactly what
// happened and yields exactly the records it can vouch for.
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

// Devices that appeared or went while recording (DEVICES blocks, written
// anywhere among the records, even after the records of the devices they
// name) are known from open() on: every consumer builds its device table
// before the first record.
TEST(RecFileDevices, ChangesAreAppliedBeforeTheFirstRecord) {
    TempDir tmp;
    std::string path = tmp.path("devices.ntr");
    std::vector<nvmetrace_rec> recs = make_records(300);
    RecordingWriter w = RecordingWriter::open(path, {.block_records = 100});
    RecordingMeta meta = test_meta();
    meta.devices = nlohmann::json::array();
    meta.devices.push_back({{"kind", "disk"}, {"name", "nvme1n1"}, {"dev", 271581184}});
    w.write_meta(meta);
    w.append(std::span(recs).first(150));
    DeviceChange c1;
    c1.monotonic_ns = 5000;
    c1.added.push_back({{"kind", "disk"}, {"name", "nvme2n1"}, {"dev", 271581185}, {"cntlid", 2}});
    c1.added.push_back({{"kind", "target_ns"},
                        {"subsysnqn", "nqn.a"},
                        {"nsid", 2},
                        {"device_path", "/dev/nullb1"}});
    w.write_devices(c1);
    w.append(std::span(recs).subspan(150));
    DeviceChange c2;
    c2.monotonic_ns = 9000;
    c2.gone.push_back({{"kind", "disk"}, {"name", "nvme1n1"}, {"dev", 271581184}});
    c2.gone.push_back({{"kind", "target_ns"}, {"subsysnqn", "nqn.a"}, {"nsid", 2}});
    c2.added.push_back({{"kind", "disk"}, {"name", 7}});  // a bad entry: left out, noted
    w.write_devices(c2);
    w.close();

    RecordingReader r = RecordingReader::open(path);
    const nlohmann::json& d = r.meta().devices;
    ASSERT_EQ(d.size(), 3u);
    EXPECT_FALSE(d[0].contains("appeared_ns"));
    EXPECT_EQ(d[0]["gone_ns"], 9000);
    EXPECT_EQ(d[1]["name"], "nvme2n1");
    EXPECT_EQ(d[1]["appeared_ns"], 5000);
    EXPECT_FALSE(d[1].contains("gone_ns"));
    EXPECT_EQ(d[2]["appeared_ns"], 5000);
    EXPECT_EQ(d[2]["gone_ns"], 9000);
    ASSERT_EQ(r.notes().size(), 1u);
    EXPECT_THAT(r.notes()[0], HasSubstr("DEVICES block"));
    EXPECT_THAT(r.notes()[0], HasSubstr(".added[0].name: 7 is not a string"));
    std::vector<nvmetrace_rec> got;
    r.for_each(
        [&](std::span<const nvmetrace_rec> b) { got.insert(got.end(), b.begin(), b.end()); });
    EXPECT_EQ(r.end(), RecordingEnd::clean);
    EXPECT_TRUE(same_records(got, recs));
    EXPECT_EQ(r.notes().size(), 1u);  // reading the records adds nothing
}

// Many devices (a hostile file, or a very busy machine): each gone entry
// finds its device through an index, not by a scan of every entry, and the
// reader keeps at most kMaxDevices, saying what it left out.
TEST(RecFileDevices, ManyDevicesAreBoundedAndEachGoneFindsItsOwn) {
    RecordingMeta meta;
    meta.devices = nlohmann::json::array();
    DeviceIndex index;
    DeviceChange add{100, nlohmann::json::array(), nlohmann::json::array()};
    for (size_t i = 0; i < kMaxDevices + 2; i++)
        add.added.push_back({{"kind", "path"}, {"name", "p"}, {"dev", i}});
    apply_device_change(meta, add, "block 1", &index);
    ASSERT_EQ(meta.devices.size(), kMaxDevices);
    ASSERT_EQ(meta.dropped_devices.size(), 2u);
    EXPECT_THAT(meta.dropped_devices[0], HasSubstr("the most a reader keeps"));
    DeviceChange gone{200, nlohmann::json::array(), nlohmann::json::array()};
    for (size_t i = 0; i < kMaxDevices; i += 2)
        gone.gone.push_back({{"kind", "path"}, {"name", "p"}, {"dev", i}});
    apply_device_change(meta, gone, "block 2", &index);
    for (size_t i = 0; i < kMaxDevices; i++)
        ASSERT_EQ(meta.devices[i].contains("gone_ns"), i % 2 == 0) << i;
}

// A DEVICES block that is not JSON of the right shape is passed over with a
// note; one whose checksum fails stops the reader there, as any block does.
TEST(RecFileDevices, BadBlocksAreNotedOrStopTheReader) {
    TempDir tmp;
    std::string path = tmp.path("full.ntr");
    WriteSpec spec;
    spec.records = 200;
    spec.opts.block_records = 50;
    std::vector<nvmetrace_rec> recs = write_recording(path, spec);
    const std::string data = slurp(path);
    const std::vector<BlockInfo> blocks = walk_blocks(data);
    const uint64_t at = blocks[3].offset;
    const std::string not_json = "{\"monotonic_ns\": 1, \"added\": 5}";
    spit(path,
         data.substr(0, at) + make_block(5, 0, not_json, not_json.size(), 0) + data.substr(at));
    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(same_records(res.records, recs));
    ASSERT_EQ(res.notes.size(), 1u);
    EXPECT_THAT(res.notes[0], HasSubstr(fmt::format("skipped DEVICES block 3 at byte {}", at)));
    EXPECT_THAT(res.notes[0], HasSubstr("added: 5 is not an array"));

    std::string bad = make_block(5, 0, "{}", 2, 0);
    bad[sizeof(BlockHeader)] = '[';  // the payload no longer has its checksum
    spit(path, data.substr(0, at) + bad + data.substr(at));
    res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::corrupt);
    EXPECT_EQ(res.records.size(), 100u);
    EXPECT_THAT(res.problem, HasSubstr("payload checksum mismatch"));
}

// A newer writer may put a block of a new type beside every RECORDS block:
// the reader says so once per type, with how many and where the first was,
// not once per block.
TEST(RecFile, ManyUnknownBlocksOfATypeAreOneNote) {
    TempDir tmp;
    std::string path = tmp.path("many.ntr");
    WriteSpec spec;
    spec.records = 200;
    spec.opts.block_records = 50;
    std::vector<nvmetrace_rec> recs = write_recording(path, spec);
    const std::string data = slurp(path);
    const std::vector<BlockInfo> blocks = walk_blocks(data);
    // type 99 before each of the 4 RECORDS blocks (1..4), type 98 once
    const std::string b99 = make_block(99, 0, "new", 3, 0);
    std::string out = data.substr(0, blocks[1].offset);
    for (size_t i = 1; i < 5; i++) {
        out += b99;
        if (i == 2)
            out += make_block(98, 0, "other", 5, 0);
        out += data.substr(blocks[i].offset, blocks[i + 1].offset - blocks[i].offset);
    }
    out += data.substr(blocks[5].offset);
    spit(path, out);

    ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(same_records(res.records, recs));
    ASSERT_EQ(res.notes.size(), 2u);
    EXPECT_EQ(res.notes[0],
              fmt::format("{}: skipped 4 blocks of unknown type 99 (written by a newer "
                          "nvmetrace?), the first block 1 at byte {}",
                          path, blocks[1].offset));
    EXPECT_THAT(res.notes[1], HasSubstr("skipped block 4 at byte"));
    EXPECT_THAT(res.notes[1], HasSubstr("unknown type 98"));
}

// ------------------------------------------------------------------ CPUs

// A file of 150 records in blocks of 50, each with a CPUS block of two runs
// (CPU 1 then CPU 2, 25 each): blocks META, then CPUS + RECORDS three times
// (1..6), TRAILER (7).
std::vector<nvmetrace_rec> write_with_cpus(const std::string& path) {
    const std::vector<nvmetrace_rec> recs = make_records(150);
    RecordingWriterOptions o;
    o.block_records = 50;
    RecordingWriter w = RecordingWriter::open(path, o);
    w.write_meta(test_meta());
    for (size_t i = 0; i < recs.size(); i += 25)
        w.append(static_cast<uint32_t>(1 + (i / 25) % 2), std::span(recs).subspan(i, 25));
    w.close({});
    return recs;
}

std::string cpus_payload(const std::vector<CpuRun>& runs) {
    return {reinterpret_cast<const char*>(runs.data()), runs.size() * sizeof(CpuRun)};
}

std::string cpus_block(const std::vector<CpuRun>& runs) {
    const std::string p = cpus_payload(runs);
    return make_block(static_cast<uint16_t>(BlockType::cpus), 0, p, static_cast<uint32_t>(p.size()),
                      static_cast<uint32_t>(runs.size()));
}

std::vector<uint32_t> cpus_1_2(size_t blocks) {
    std::vector<uint32_t> c;
    for (size_t b = 0; b < blocks; b++) {
        c.insert(c.end(), 25, 1);
        c.insert(c.end(), 25, 2);
    }
    return c;
}

TEST(RecFileCpus, FileWithoutCpusBlocksReadsAsUnknown) {
    TempDir tmp;
    const std::string path = tmp.path("old.ntr");
    WriteSpec spec;
    spec.records = 300;
    spec.opts.block_records = 100;
    write_recording(path, spec);  // append() without CPUs, as before CPUS blocks
    for (const BlockInfo& b : walk_blocks(slurp(path)))
        EXPECT_NE(b.type, static_cast<uint16_t>(BlockType::cpus));
    const CpuReadResult res = read_cpus(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(res.notes.empty());
    EXPECT_EQ(res.runs, (std::vector<size_t>{0, 0, 0}));
    EXPECT_EQ(res.cpus, std::vector<uint32_t>(300, kCpuUnknown));
}

TEST(RecFileCpus, CpusBlocksAreReadWithTheirRecords) {
    TempDir tmp;
    const std::string path = tmp.path("cpus.ntr");
    const std::vector<nvmetrace_rec> recs = write_with_cpus(path);
    const std::vector<BlockInfo> blocks = walk_blocks(slurp(path));
    ASSERT_EQ(blocks.size(), 8u);
    for (size_t k : {1, 3, 5}) {
        EXPECT_EQ(blocks[k].type, static_cast<uint16_t>(BlockType::cpus));
        EXPECT_EQ(blocks[k].count, 2u);
        EXPECT_EQ(blocks[k].flags, 0) << "two runs are stored raw";
    }
    const CpuReadResult res = read_cpus(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(res.notes.empty());
    EXPECT_EQ(res.cpus, cpus_1_2(3));
    const ReadResult all = read_recording(path);
    EXPECT_TRUE(same_records(all.records, recs));
}

// What a reader that does not know type 4 (every nvmetrace before CPUS
// blocks) does with the file: the CPUS blocks retyped to a type this reader
// does not know either are skipped, each with a note, and every record is read.
TEST(RecFileCpus, ReaderNotKnowingCpusBlocksReadsEveryRecord) {
    TempDir tmp;
    const std::string path = tmp.path("cpus.ntr");
    const std::vector<nvmetrace_rec> recs = write_with_cpus(path);
    std::string data = slurp(path);
    std::vector<uint64_t> at;
    for (const BlockInfo& b : walk_blocks(data)) {
        if (b.type != static_cast<uint16_t>(BlockType::cpus))
            continue;
        BlockHeader h;
        memcpy(&h, data.data() + b.offset, sizeof(h));
        h.type = 99;
        h.header_crc = crc32c(std::as_bytes(std::span(&h, 1)).first(28));
        memcpy(data.data() + b.offset, &h, sizeof(h));
        at.push_back(b.offset);
    }
    ASSERT_EQ(at.size(), 3u);
    spit(path, data);
    const ReadResult res = read_recording(path);
    EXPECT_EQ(res.end, RecordingEnd::clean);
    EXPECT_TRUE(same_records(res.records, recs));
    // one note for the three
    ASSERT_EQ(res.notes.size(), 1u);
    EXPECT_EQ(res.notes[0],
              fmt::format("{}: skipped 3 blocks of unknown type 99 (written by a newer "
                          "nvmetrace?), the first block 1 at byte {}",
                          path, at[0]));
    EXPECT_EQ(read_cpus(path).cpus, std::vector<uint32_t>(150, kCpuUnknown));
}

TEST(RecFileCpus, RunsNotCoveringTheBlockAreANote) {
    TempDir tmp;
    const std::string path = tmp.path("cpus.ntr");
    const std::vector<nvmetrace_rec> recs = write_with_cpus(path);
    const std::string data = slurp(path);
    const std::vector<BlockInfo> blocks = walk_blocks(data);
    // block 3 (the second CPUS block): 49 records where the block holds 50;
    // then one whose counts wrap around to 50 in 32 bits (summed as 64)
    for (const std::vector<CpuRun>& runs :
         {std::vector<CpuRun>{{1, 25}, {2, 24}}, std::vector<CpuRun>{{1, 0xffffffffu}, {2, 51}}}) {
        spit(path,
             data.substr(0, blocks[3].offset) + cpus_block(runs) + data.substr(blocks[3].end));
        const CpuReadResult res = read_cpus(path);
        EXPECT_EQ(res.end, RecordingEnd::clean);
        ASSERT_EQ(res.notes.size(), 1u);
        const uint64_t covered = uint64_t{runs[0].count} + runs[1].count;
        EXPECT_EQ(res.notes[0],
                  fmt::format("{}: ignored CPUS block 3 at byte {}: its runs cover {} records, "
                              "the RECORDS block after it holds 50; CPUs not known",
                              path, blocks[3].offset, covered));
        std::vector<uint32_t> want = cpus_1_2(1);
        want.insert(want.end(), 50, kCpuUnknown);
        const std::vector<uint32_t> last = cpus_1_2(1);
        want.insert(want.end(), last.begin(), last.end());
        EXPECT_EQ(res.cpus, want);
        EXPECT_EQ(res.runs, (std::vector<size_t>{2, 0, 2}));
        EXPECT_TRUE(same_records(read_recording(path).records, recs));
    }
}

TEST(RecFileCpus, CpusBlockNotBeforeRecordsIsANote) {
    TempDir tmp;
    const std::string path = tmp.path("cpus.ntr");
    const std::vector<nvmetrace_rec> recs = write_with_cpus(path);
    const std::string data = slurp(path);
    const std::vector<BlockInfo> blocks = walk_blocks(data);
    const std::string extra = cpus_block({{9, 50}});
    struct Case {
        std::string file;
        std::string note;
        RecordingEnd end;
        std::vector<uint32_t> cpus;
    };
    const std::vector<Case> cases = {
        // before the trailer
        {data.substr(0, blocks[7].offset) + extra + data.substr(blocks[7].offset),
         fmt::format("{}: ignored CPUS block 7 at byte {}: not followed by a RECORDS block (but "
                     "by the TRAILER); CPUs not known",
                     path, blocks[7].offset),
         RecordingEnd::clean, cpus_1_2(3)},
        // at the end of a file without a trailer
        {data.substr(0, blocks[7].offset) + extra,
         fmt::format("{}: ignored CPUS block 7 at byte {}: not followed by a RECORDS block (but "
                     "by the end of the file); CPUs not known",
                     path, blocks[7].offset),
         RecordingEnd::cut_off, cpus_1_2(3)},
        // two in a row: the first is the one noted, the second is used
        {data.substr(0, blocks[5].offset) + extra + data.substr(blocks[5].offset),
         fmt::format("{}: ignored CPUS block 5 at byte {}: not followed by a RECORDS block "
                     "(followed by another CPUS block); CPUs not known",
                     path, blocks[5].offset),
         RecordingEnd::clean, cpus_1_2(3)},
        // a payload of the wrong size: skipped, the block after it unknown
        {data.substr(0, blocks[5].offset) +
             make_block(static_cast<uint16_t>(BlockType::cpus), 0, cpus_payload({{1, 50}}), 8, 2) +
             data.substr(blocks[5].end),
         fmt::format("{}: skipped CPUS block 5 at byte {}: 2 runs of 8 bytes do not make 8 "
                     "bytes; CPUs not known",
                     path, blocks[5].offset),
         RecordingEnd::clean,
         {}},
        // a flag this reader does not know
        {data.substr(0, blocks[5].offset) +
             make_block(static_cast<uint16_t>(BlockType::cpus), 0x8000, cpus_payload({{1, 50}}), 8,
                        1) +
             data.substr(blocks[5].end),
         fmt::format("{}: skipped CPUS block 5 at byte {}: unknown flags 0x8000 (written by a "
                     "newer nvmetrace?); CPUs not known",
                     path, blocks[5].offset),
         RecordingEnd::clean,
         {}},
    };
    for (size_t i = 0; i < cases.size(); i++) {
        SCOPED_TRACE(i);
        spit(path, cases[i].file);
        const CpuReadResult res = read_cpus(path);
        EXPECT_EQ(res.end, cases[i].end);
        ASSERT_EQ(res.notes.size(), 1u);
        EXPECT_EQ(res.notes[0], cases[i].note);
        std::vector<uint32_t> want = cases[i].cpus;
        if (want.empty()) {  // the third RECORDS block's CPUs unknown
            want = cpus_1_2(2);
            want.insert(want.end(), 50, kCpuUnknown);
        }
        EXPECT_EQ(res.cpus, want);
        EXPECT_TRUE(same_records(read_recording(path).records, recs));
    }
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

}  // namespace
}  // namespace nvmetrace
