// Recordings written and read back by the tests of format/: records shaped
// like a host recording, a writer of uneven spans, a reader that keeps what
// it yields, and a walk over a file's blocks.
#pragma once

#include "format/recfile.h"
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

namespace nvmetrace::rectest {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct TempDir : test::TempDir {
    TempDir() : test::TempDir("recfile_test") {}
};

// Records shaped like a host recording: commands of six events sharing
// dev/qid/tag/cid/lba, timestamps a few microseconds apart.
inline std::vector<nvmetrace_rec> make_records(size_t n, uint64_t seed = 1) {
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

inline RecordingMeta test_meta() {
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

inline std::vector<nvmetrace_rec> write_recording(const std::string& path, const WriteSpec& spec) {
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

inline ReadResult read_recording(const std::string& path) {
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

// One CPU per record from the runs of a block (kCpuUnknown for every record
// when there are none), to compare with what was written.
inline std::vector<uint32_t> cpus_of(std::span<const CpuRun> runs, size_t records) {
    std::vector<uint32_t> cpus;
    for (const CpuRun& r : runs)
        cpus.insert(cpus.end(), r.count, r.cpu);
    if (runs.empty())
        cpus.assign(records, kCpuUnknown);
    return cpus;
}

// Every record's CPU as the reader gives them, block after block.
struct CpuReadResult {
    std::vector<uint32_t> cpus;
    std::vector<size_t> blocks;  // records per RECORDS block
    std::vector<size_t> runs;    // runs per RECORDS block (0: CPUs not known)
    std::vector<std::string> notes;
    RecordingEnd end = RecordingEnd::reading;
};

inline CpuReadResult read_cpus(const std::string& path) {
    RecordingReader r = RecordingReader::open(path);
    CpuReadResult res;
    std::span<const nvmetrace_rec> recs;
    while (r.next(recs)) {
        const std::vector<uint32_t> c = cpus_of(r.cpu_runs(), recs.size());
        EXPECT_EQ(c.size(), recs.size()) << "runs of block " << res.blocks.size();
        res.cpus.insert(res.cpus.end(), c.begin(), c.end());
        res.blocks.push_back(recs.size());
        res.runs.push_back(r.cpu_runs().size());
    }
    EXPECT_TRUE(r.cpu_runs().empty()) << "runs left after the end";
    res.notes = r.notes();
    res.end = r.end();
    return res;
}

inline bool same_records(std::span<const nvmetrace_rec> a, std::span<const nvmetrace_rec> b) {
    return a.size() == b.size() && (a.empty() || memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

inline std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Replaces the file rather than truncating it: ext4 (auto_da_alloc) flushes a
// file truncated to 0 on close, which makes thousands of rewrites crawl.
inline void spit(const std::string& path, std::string_view data) {
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

inline std::vector<BlockInfo> walk_blocks(const std::string& data) {
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
inline std::string make_block(uint16_t type, uint16_t flags, std::string_view payload,
                              uint32_t raw_len, uint32_t count) {
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
inline size_t records_before(const std::vector<BlockInfo>& blocks, uint64_t cut) {
    size_t n = 0;
    for (const BlockInfo& b : blocks) {
        if (b.end <= cut && b.type == static_cast<uint16_t>(BlockType::records)) {
            n += b.count;
        }
    }
    return n;
}

inline std::string error_of(const std::string& path) {
    try {
        RecordingReader::open(path);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace nvmetrace::rectest
