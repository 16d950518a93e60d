// The structure-aware mutator of recording_fuzz: a recording is taken apart
// into its file header and blocks (payloads decoded), one to three edits are
// made where a reader trusts what it reads, and the file is put together again
// with every length and checksum recomputed as the writer would, so the
// mutants reach the code behind the CRCs. The edits:
//   - a record's field set to an edge value (0, all ones, the sign bit, a
//     neighbour's value nudged, another event number), or records duplicated,
//     dropped or swapped (timestamps out of order, events twice);
//   - a CPUS block's runs edited (a CPU set to an edge value or unknown, a
//     count nudged so the runs no longer cover their RECORDS block, runs
//     split, dropped or added), or a CPUS block made for a RECORDS block
//     that has none (seeds from before CPUS blocks reach that code too);
//   - a JSON value of META or TRAILER replaced (null, wrong type, huge,
//     negative, fractional, 1e300, deep nesting), a key dropped;
//   - a payload's bytes through libFuzzer's own mutator;
//   - the block list: a block duplicated, dropped, moved, retyped, its count
//     or flags changed, the file cut off inside a block.
// An input that is no recording at all gets libFuzzer's byte mutator.
#include "format/recfile.h"
#include "util/error.h"
#include "util/json_num.h"

#include <linux/nvmetrace.h>
#include <zstd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using nvmetrace::BlockHeader;
using nvmetrace::BlockType;

struct Block {
    BlockHeader h{};
    std::vector<uint8_t> payload;  // decoded
    bool compress = false;         // store as a zstd frame
    bool keep_header = false;      // write h's count, flags and reserved as they are
    bool bad_crc = false;          // leave the payload checksum wrong
};

struct Recording {
    std::vector<uint8_t> header;
    std::vector<Block> blocks;
    size_t cut = SIZE_MAX;  // write only this many bytes
};

using Rng = std::minstd_rand;

size_t pick(Rng& rng, size_t n) {
    return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng) : 0;
}

bool parse(const uint8_t* data, size_t size, Recording& rec) {
    if (size < sizeof(nvmetrace::RecFileHeader) || memcmp(data, nvmetrace::kRecFileMagic, 8) != 0)
        return false;
    uint32_t hs;
    memcpy(&hs, data + 12, sizeof(hs));
    if (hs < sizeof(nvmetrace::RecFileHeader) || hs > size)
        return false;
    rec.header.assign(data, data + hs);
    size_t off = hs;
    while (size - off >= sizeof(BlockHeader)) {
        Block b;
        memcpy(&b.h, data + off, sizeof(b.h));
        if (b.h.magic != nvmetrace::kBlockMagic || b.h.stored_len > size - off - sizeof(b.h))
            break;
        const uint8_t* p = data + off + sizeof(b.h);
        b.payload.assign(p, p + b.h.stored_len);
        if (b.h.flags & nvmetrace::kBlockZstd) {
            std::vector<uint8_t> raw(std::min<uint32_t>(b.h.raw_len, 8u << 20));
            const size_t n = ZSTD_decompress(raw.data(), raw.size(), p, b.h.stored_len);
            if (!ZSTD_isError(n) && n == raw.size()) {
                b.payload = std::move(raw);
                b.compress = true;
            }
        }
        off += sizeof(b.h) + b.h.stored_len;
        rec.blocks.push_back(std::move(b));
    }
    return !rec.blocks.empty();
}

std::vector<uint8_t> serialize(const Recording& rec) {
    std::vector<uint8_t> out(rec.header);
    for (const Block& b : rec.blocks) {
        BlockHeader h = b.h;
        std::vector<uint8_t> stored;
        if (b.compress) {
            stored.resize(ZSTD_compressBound(b.payload.size()));
            const size_t n =
                ZSTD_compress(stored.data(), stored.size(), b.payload.data(), b.payload.size(), 1);
            stored.resize(ZSTD_isError(n) ? 0 : n);
        } else {
            stored = b.payload;
        }
        h.magic = nvmetrace::kBlockMagic;
        h.stored_len = static_cast<uint32_t>(stored.size());
        h.raw_len = static_cast<uint32_t>(b.payload.size());
        if (!b.keep_header) {
            h.flags = b.compress ? nvmetrace::kBlockZstd : 0;
            h.reserved = 0;
            h.count = h.type == static_cast<uint16_t>(BlockType::records)
                          ? static_cast<uint32_t>(b.payload.size() / sizeof(nvmetrace_rec))
                      : h.type == static_cast<uint16_t>(BlockType::cpus)
                          ? static_cast<uint32_t>(b.payload.size() / sizeof(nvmetrace::CpuRun))
                          : 0;
        }
        h.checksum = nvmetrace::crc32c(std::as_bytes(std::span(stored)));
        if (b.bad_crc)
            h.checksum ^= 1;
        h.header_crc = nvmetrace::crc32c(std::as_bytes(std::span(&h, 1)).first(28));
        const auto* hp = reinterpret_cast<const uint8_t*>(&h);
        out.insert(out.end(), hp, hp + sizeof(h));
        out.insert(out.end(), stored.begin(), stored.end());
    }
    if (rec.cut < out.size())
        out.resize(rec.cut);
    return out;
}

uint64_t edge_value(Rng& rng, uint64_t current, uint64_t neighbour, unsigned bytes) {
    const uint64_t ones = bytes >= 8 ? ~0ull : (1ull << (8 * bytes)) - 1;
    const uint64_t sign = 1ull << (8 * bytes - 1);
    switch (pick(rng, 10)) {
        case 0:
            return 0;
        case 1:
            return ones;
        case 2:
            return sign;
        case 3:
            return sign - 1;
        case 4:
            return neighbour;
        case 5:
            return neighbour + pick(rng, 2000) - 1000;
        case 6:
            return current + pick(rng, 2000) - 1000;
        case 7:
            return current ^ (1ull << pick(rng, 8 * bytes));
        case 8:
            return pick(rng, 64);  // a small number: an event, a slot, a length
        default:
            return rng() | (static_cast<uint64_t>(rng()) << 31) |
                   (static_cast<uint64_t>(rng()) << 62);
    }
}

// A field of one record set to an edge value; records moved about.
bool mutate_records(Rng& rng, Block& b) {
    const size_t n = b.payload.size() / sizeof(nvmetrace_rec);
    if (!n)
        return false;
    auto rec_at = [&](size_t i) { return b.payload.data() + i * sizeof(nvmetrace_rec); };
    const size_t i = pick(rng, n), j = pick(rng, n);
    switch (pick(rng, 6)) {
        case 0:
        case 1:
        case 2: {
            const auto& fields = nvmetrace::record_schema();
            const auto& f = fields[pick(rng, fields.size())];
            uint64_t cur = 0, nb = 0;
            memcpy(&cur, rec_at(i) + f.offset, f.size);
            memcpy(&nb, rec_at(j) + f.offset, f.size);
            const uint64_t v = edge_value(rng, cur, nb, f.size);
            memcpy(rec_at(i) + f.offset, &v, f.size);
            return true;
        }
        case 3: {  // a record twice
            std::vector<uint8_t> r(rec_at(i), rec_at(i) + sizeof(nvmetrace_rec));
            b.payload.insert(b.payload.begin() + static_cast<ptrdiff_t>(j * sizeof(nvmetrace_rec)),
                             r.begin(), r.end());
            return true;
        }
        case 4:  // a record gone
            b.payload.erase(
                b.payload.begin() + static_cast<ptrdiff_t>(i * sizeof(nvmetrace_rec)),
                b.payload.begin() + static_cast<ptrdiff_t>((i + 1) * sizeof(nvmetrace_rec)));
            return true;
        default:  // two records swapped
            std::swap_ranges(rec_at(i), rec_at(i) + sizeof(nvmetrace_rec), rec_at(j));
            return true;
    }
}

// A CPUS block's runs: mostly edits that keep them covering their RECORDS
// block (a CPU changed, a run split), sometimes ones that do not.
bool mutate_cpus(Rng& rng, Block& b) {
    using nvmetrace::CpuRun;
    std::vector<CpuRun> runs(b.payload.size() / sizeof(CpuRun));
    if (!runs.empty())
        memcpy(runs.data(), b.payload.data(), runs.size() * sizeof(CpuRun));
    const size_t i = pick(rng, runs.size());
    switch (pick(rng, 6)) {
        case 0:
        case 1:  // another CPU, or none
            if (runs.empty())
                return false;
            runs[i].cpu = pick(rng, 4) == 0
                              ? nvmetrace::kCpuUnknown
                              : static_cast<uint32_t>(edge_value(
                                    rng, runs[i].cpu, runs[pick(rng, runs.size())].cpu, 4));
            break;
        case 2: {  // one run as two: the same records, the same total
            if (runs.empty() || runs[i].count < 2)
                return false;
            const auto k = static_cast<uint32_t>(1 + pick(rng, runs[i].count - 1));
            CpuRun second{static_cast<uint32_t>(pick(rng, 64)), runs[i].count - k};
            runs[i].count = k;
            runs.insert(runs.begin() + static_cast<ptrdiff_t>(i) + 1, second);
            break;
        }
        case 3:  // a count the RECORDS block does not bear out (wrapping too)
            if (runs.empty())
                return false;
            runs[i].count = static_cast<uint32_t>(edge_value(rng, runs[i].count, 0, 4));
            break;
        case 4:  // a run gone
            if (runs.empty())
                return false;
            runs.erase(runs.begin() + static_cast<ptrdiff_t>(i));
            break;
        default:  // a run more
            runs.insert(
                runs.begin() + static_cast<ptrdiff_t>(i),
                CpuRun{static_cast<uint32_t>(pick(rng, 8)), static_cast<uint32_t>(pick(rng, 3))});
            break;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(runs.data());
    b.payload.assign(p, p + runs.size() * sizeof(CpuRun));
    return true;
}

// A CPUS block for a RECORDS block without one, its runs covering it as the
// writer's would: from a few CPUs, stretches of random length.
bool add_cpus(Rng& rng, Recording& rec) {
    const auto records = static_cast<uint16_t>(BlockType::records);
    const auto cpus = static_cast<uint16_t>(BlockType::cpus);
    std::vector<size_t> bare;
    for (size_t k = 0; k < rec.blocks.size(); k++)
        if (rec.blocks[k].h.type == records && (k == 0 || rec.blocks[k - 1].h.type != cpus))
            bare.push_back(k);
    if (bare.empty())
        return false;
    const size_t at = bare[pick(rng, bare.size())];
    size_t left = rec.blocks[at].payload.size() / sizeof(nvmetrace_rec);
    std::vector<nvmetrace::CpuRun> runs;
    while (left > 0) {
        const size_t n = 1 + pick(rng, std::min<size_t>(left, 1 + pick(rng, 64)));
        runs.push_back({static_cast<uint32_t>(pick(rng, 4)), static_cast<uint32_t>(n)});
        left -= n;
    }
    Block b;
    b.h.type = cpus;
    b.compress = pick(rng, 2) == 0;
    const auto* p = reinterpret_cast<const uint8_t*>(runs.data());
    b.payload.assign(p, p + runs.size() * sizeof(nvmetrace::CpuRun));
    rec.blocks.insert(rec.blocks.begin() + static_cast<ptrdiff_t>(at), std::move(b));
    return true;
}

void json_paths(const nlohmann::json& j, const nlohmann::json::json_pointer& at,
                std::vector<nlohmann::json::json_pointer>& out) {
    out.push_back(at);
    if (out.size() > 4096)
        return;
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it)
            json_paths(it.value(), at / it.key(), out);
    } else if (j.is_array()) {
        for (size_t k = 0; k < j.size(); k++)
            json_paths(j[k], at / k, out);
    }
}

constexpr const char* kDeep = "\x01nested\x01";

nlohmann::json odd_json(Rng& rng, const nlohmann::json& current) {
    switch (pick(rng, 18)) {
        case 0:
            return nullptr;
        case 1:
            return true;
        case 2:
            return "";
        case 3:
            return "x";
        case 4:
            return 0;
        case 5:
            return -1;
        case 6:
            return 1e300;
        case 7:
            return -1e300;
        case 8:
            return 0.5;
        case 9:
            return UINT64_MAX;
        case 10:
            return INT64_MIN;
        case 11:
            return INT64_MAX;
        case 12:
            return nlohmann::json::array();
        case 13:
            return nlohmann::json::object();
        case 14:
            return kDeep;
        case 15:
            if (current.is_number_integer())
                return static_cast<int64_t>(static_cast<uint64_t>(current.get<int64_t>()) +
                                            pick(rng, 2000) - 1000);  // wraps
            return 4096;
        case 16:
            return nlohmann::json::array({current, current});
        default:
            return 1ull << pick(rng, 64);
    }
}

// META or TRAILER: one value replaced or one key dropped; deep nesting spliced
// in as text (nlohmann would refuse to build it).
bool mutate_json(Rng& rng, Block& b) {
    // a payload an earlier edit nested deeply is left to the byte mutator:
    // nlohmann's copies and destructors recurse as deep as the value does
    try {
        nvmetrace::check_json_depth(
            std::string_view(reinterpret_cast<const char*>(b.payload.data()), b.payload.size()), 32,
            "payload");
    } catch (const nvmetrace::Error&) {
        return false;
    }
    nlohmann::json j = nlohmann::json::parse(b.payload.begin(), b.payload.end(), nullptr, false);
    if (j.is_discarded())
        return false;
    std::vector<nlohmann::json::json_pointer> paths;
    json_paths(j, nlohmann::json::json_pointer(), paths);
    const auto& at = paths[pick(rng, paths.size())];
    if (!at.empty() && pick(rng, 5) == 0) {
        nlohmann::json& parent = j[at.parent_pointer()];
        if (parent.is_object())
            parent.erase(at.back());
    } else if (at.empty()) {
        j = odd_json(rng, j);
    } else {
        j[at] = odd_json(rng, j[at]);
    }
    std::string text = j.dump();
    const std::string marker = nlohmann::json(kDeep).dump();
    if (const size_t p = text.find(marker); p != std::string::npos) {
        const size_t depth = 64 + pick(rng, 8000);  // the old reader's stack gave out at 10000
        text.replace(p, marker.size(), std::string(depth, '[') + std::string(depth, ']'));
    }
    b.payload.assign(text.begin(), text.end());
    return true;
}

bool mutate_bytes(Rng& rng, Block& b, size_t room) {
    const size_t size = b.payload.size();
    b.payload.resize(size + std::min<size_t>(room, 256) + 1);
    const size_t n = LLVMFuzzerMutate(b.payload.data(), size, b.payload.size());
    b.payload.resize(n);
    (void)rng;
    return true;
}

bool mutate_blocks(Rng& rng, Recording& rec, size_t total) {
    auto& v = rec.blocks;
    const size_t i = pick(rng, v.size()), j = pick(rng, v.size());
    switch (pick(rng, 9)) {
        case 0:
            v.insert(v.begin() + static_cast<ptrdiff_t>(j), v[i]);
            return true;
        case 1:
            if (v.size() < 2)
                return false;
            v.erase(v.begin() + static_cast<ptrdiff_t>(i));
            return true;
        case 2:
            std::swap(v[i], v[j]);
            return true;
        case 3:
            v[i].h.type = static_cast<uint16_t>(pick(rng, 5));
            return true;
        case 4:  // a count or flags the payload does not bear out
            v[i].keep_header = true;
            v[i].h.count = static_cast<uint32_t>(edge_value(rng, v[i].h.count, 0, 4));
            v[i].h.flags = static_cast<uint16_t>(v[i].compress ? nvmetrace::kBlockZstd : 0);
            if (pick(rng, 3) == 0)
                v[i].h.flags |= static_cast<uint16_t>(1u << pick(rng, 16));
            return true;
        case 5:
            v[i].bad_crc = true;
            return true;
        case 6:
            v[i].compress = !v[i].compress;
            return true;
        case 7:
            return add_cpus(rng, rec);
        default:  // killed mid-write
            rec.cut = pick(rng, total + 1);
            return true;
    }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
    Recording rec;
    Rng rng(seed);
    if (!parse(data, size, rec))
        return LLVMFuzzerMutate(data, size, max_size);
    const size_t edits = 1 + pick(rng, 3);
    for (size_t e = 0; e < edits; e++) {
        Block& b = rec.blocks[pick(rng, rec.blocks.size())];
        const bool is_json = b.h.type == static_cast<uint16_t>(BlockType::meta) ||
                             b.h.type == static_cast<uint16_t>(BlockType::trailer);
        const bool is_cpus = b.h.type == static_cast<uint16_t>(BlockType::cpus);
        bool done = false;
        switch (pick(rng, 10)) {
            case 0:
            case 1:
            case 2:
            case 3:
                done = is_json   ? mutate_json(rng, b)
                       : is_cpus ? mutate_cpus(rng, b)
                                 : mutate_records(rng, b);
                break;
            case 4:
            case 5:
                done = mutate_bytes(rng, b, max_size > size ? max_size - size : 0);
                break;
            default:
                done = mutate_blocks(rng, rec, size);
                break;
        }
        if (!done)
            mutate_blocks(rng, rec, size);
    }
    const std::vector<uint8_t> out = serialize(rec);
    if (out.size() > max_size || out.empty())
        return LLVMFuzzerMutate(data, size, max_size);
    memcpy(data, out.data(), out.size());
    return out.size();
}
