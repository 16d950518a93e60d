#include "spdk/trace_file.h"

#include "util/error.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/core.h>

namespace nvmetrace::spdk {

namespace {

// Offsets and sizes of SPDK v26.05's structs (all little-endian, naturally aligned).
constexpr size_t kHeaderSize = 72;  // file_size, num_sections, reserved, offsets[7]
constexpr size_t kSectionOffsets = 16;
constexpr uint16_t kNumSections = 7;
constexpr int kSectionMain = 0;
constexpr int kSectionOwner = 1;
constexpr size_t kOwnerHead = 9;  // an owner's tsc (u64) and type (u8), then its description
constexpr int kSectionTpointMask = 2;
constexpr int kSectionTpoint = 5;
constexpr int kSectionLcoreOffsets = 6;
constexpr size_t kSectionHead = 128;  // count (u16) + reserved, before each array
constexpr size_t kTpointSize = 190;   // name[24] id u16, 4 u8, args[8] of 16, rel[16] of 2
constexpr size_t kTpointArgs = 30;
constexpr size_t kArgSize = 16;  // name[14], type, size
constexpr size_t kMaxArgs = 8;
constexpr size_t kHistoryHead = 48;  // lcore, tname[16], num_entries, num_tpoint_ids, next
constexpr size_t kEntryArgs = 24;    // an entry's own argument bytes start here
constexpr size_t kBufferData = 10;   // a continuation entry's bytes start here
constexpr uint32_t kMaxLcoreSlots = 1024 + 4096;  // SPDK's lcores and user threads, with room

class Bytes {
public:
    Bytes(std::span<const uint8_t> b, const std::string& what) : b_(b), what_(what) {}

    void need(uint64_t off, uint64_t len, std::string_view of) const {
        if (off > b_.size() || len > b_.size() - off)
            throw Error(fmt::format(
                "{}: not an SPDK trace file of the layout nvmetrace reads ({} at byte {} "
                "runs past its {} bytes); is it from SPDK v26.05 or later, and whole?",
                what_, of, off, b_.size()));
    }
    template <typename T>
    T get(uint64_t off, std::string_view of) const {
        need(off, sizeof(T), of);
        T v;
        std::memcpy(&v, b_.data() + off, sizeof(T));
        return v;
    }
    std::string str(uint64_t off, size_t max, std::string_view of) const {
        need(off, max, of);
        const char* p = reinterpret_cast<const char*>(b_.data() + off);
        return std::string(p, strnlen(p, max));
    }
    size_t size() const { return b_.size(); }

private:
    std::span<const uint8_t> b_;
    const std::string& what_;
};

}  // namespace

TraceFile TraceFile::parse(std::span<const uint8_t> bytes, const std::string& what) {
    TraceFile f;
    f.what_ = what;
    Bytes b(bytes, f.what_);
    b.need(0, kHeaderSize, "the header");
    const uint64_t file_size = b.get<uint64_t>(0, "the file size");
    const uint16_t nsec = b.get<uint16_t>(8, "the section count");
    if (nsec < kNumSections)
        throw Error(fmt::format("{}: {} sections, an SPDK v26.05 trace file has {}", what, nsec,
                                kNumSections));
    if (file_size > bytes.size())
        throw Error(fmt::format(
            "{}: the header says {} bytes, the file has {}: cut off (copied while SPDK was "
            "starting, or truncated)",
            what, file_size, bytes.size()));
    auto section = [&](int s) {
        const uint64_t off = b.get<uint64_t>(kSectionOffsets + 8 * s, "a section offset");
        if (off == 0)
            throw Error(fmt::format("{}: section {} is missing", what, s));
        b.need(off, kSectionHead, "a section");
        return off;
    };

    const uint64_t main = section(kSectionMain);
    f.tsc_rate = b.get<uint64_t>(main, "the TSC rate");
    f.clear_tsc = b.get<uint64_t>(main + 8, "the clear TSC");
    if (f.tsc_rate == 0)
        throw Error(fmt::format("{}: the TSC rate is 0: SPDK did not finish setting it up", what));

    const uint64_t owners = section(kSectionOwner);
    f.owners_at = owners + kSectionHead;
    f.num_owners = b.get<uint16_t>(owners, "the owner count");
    f.owner_description_size = b.get<uint16_t>(owners + 2, "the owner description size");
    b.need(f.owners_at, uint64_t{f.num_owners} * (kOwnerHead + f.owner_description_size),
           "the owners");

    const uint64_t mask = section(kSectionTpointMask);
    const uint16_t ngroups = b.get<uint16_t>(mask, "the group count");
    b.need(mask + kSectionHead, uint64_t{ngroups} * 8, "the tracepoint masks");
    for (uint16_t g = 0; g < ngroups; g++)
        f.group_mask.push_back(b.get<uint64_t>(mask + kSectionHead + 8 * g, "a mask"));

    const uint64_t tps = section(kSectionTpoint);
    const uint16_t ntp = b.get<uint16_t>(tps, "the tracepoint count");
    if (ntp > kMaxTpoints)
        throw Error(fmt::format("{}: {} tracepoints, more than SPDK's {}", what, ntp, kMaxTpoints));
    b.need(tps + kSectionHead, uint64_t{ntp} * kTpointSize, "the tracepoints");
    f.by_id_.assign(kMaxTpoints + 1, std::nullopt);
    for (uint16_t i = 0; i < ntp; i++) {
        const uint64_t at = tps + kSectionHead + uint64_t{i} * kTpointSize;
        Tpoint t;
        t.name = b.str(at, 24, "a tracepoint name");
        if (t.name.empty())
            continue;  // not registered
        t.id = b.get<uint16_t>(at + 24, "a tracepoint id");
        if (t.id != i)
            throw Error(fmt::format("{}: tracepoint {} ({}) says it is {}", what, i, t.name, t.id));
        t.owner_type = b.get<uint8_t>(at + 26, "an owner type");
        t.object_type = b.get<uint8_t>(at + 27, "an object type");
        t.new_object = b.get<uint8_t>(at + 28, "a new-object flag") != 0;
        const uint8_t nargs = b.get<uint8_t>(at + 29, "an argument count");
        if (nargs > kMaxArgs)
            throw Error(fmt::format("{}: tracepoint {} has {} arguments, at most {}", what, t.name,
                                    nargs, kMaxArgs));
        for (uint8_t a = 0; a < nargs; a++) {
            const uint64_t aat = at + kTpointArgs + a * kArgSize;
            TraceArg arg;
            arg.name = b.str(aat, 14, "an argument name");
            arg.type = b.get<uint8_t>(aat + 14, "an argument type");
            arg.size = b.get<uint8_t>(aat + 15, "an argument size");
            if (arg.type > 2 || arg.size == 0 || (arg.type != 2 && arg.size != 4 && arg.size != 8))
                throw Error(fmt::format("{}: tracepoint {}'s argument {} has type {} size {}", what,
                                        t.name, arg.name, arg.type, arg.size));
            t.args.push_back(std::move(arg));
        }
        f.by_id_[t.id] = f.tpoints.size();
        f.tpoints.push_back(std::move(t));
    }

    const uint64_t lco = section(kSectionLcoreOffsets);
    const uint16_t nslots = b.get<uint16_t>(lco, "the lcore count");
    b.need(lco + kSectionHead, uint64_t{nslots} * 8, "the lcore offsets");
    if (nslots > kMaxLcoreSlots)
        throw Error(fmt::format("{}: {} lcore slots", what, nslots));
    for (uint32_t s = 0; s < nslots; s++) {
        const uint64_t off = b.get<uint64_t>(lco + kSectionHead + 8 * s, "an lcore offset");
        if (off == 0)
            continue;
        Lcore c;
        c.slot = s;
        c.offset = off;
        c.lcore = b.get<int32_t>(off, "an lcore number");
        c.thread = b.str(off + 4, 16, "a thread name");
        c.num_entries = b.get<uint64_t>(off + 24, "an entry count");
        const uint64_t nids = b.get<uint64_t>(off + 32, "a tracepoint id count");
        c.next_entry = b.get<uint64_t>(off + 40, "a write index");
        if (nids != kMaxTpoints)
            throw Error(fmt::format("{}: core {} counts {} tracepoint ids, SPDK has {}", what,
                                    c.lcore, nids, kMaxTpoints));
        if (c.num_entries == 0 || (c.num_entries & (c.num_entries - 1)) ||
            c.num_entries > (uint64_t{1} << 32))
            throw Error(fmt::format("{}: core {}'s ring has {} entries, not a power of two", what,
                                    c.lcore, c.num_entries));
        b.need(off + kHistoryHead, nids * 8 + c.num_entries * kEntryBytes, "a core's ring");
        f.lcores.push_back(std::move(c));
    }
    f.bytes_.assign(bytes.begin(), bytes.end());
    return f;
}

TraceFile TraceFile::read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw errno_error(fmt::format("cannot open the SPDK trace file {}", path),
                          errno ? errno : ENOENT);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    return parse(bytes, path);
}

size_t Tpoint::arg(std::string_view n) const {
    for (size_t i = 0; i < args.size(); i++)
        if (args[i].name == n && args[i].type != 2)
            return i;
    throw Error(fmt::format(
        "SPDK's tracepoint {} has no argument \"{}\": not the layout of SPDK v26.05, which "
        "nvmetrace reads",
        name, n));
}

std::string TraceFile::owner(std::span<const uint8_t> live, uint16_t id) const {
    if (id >= num_owners || owner_description_size == 0)
        return "";
    const uint64_t at = owners_at + uint64_t{id} * (kOwnerHead + owner_description_size);
    if (at + kOwnerHead + owner_description_size > live.size())
        return "";
    // SPDK appends to a description while it runs: read it byte by byte, to its NUL
    std::string d;
    for (size_t i = 0; i < owner_description_size; i++) {
        const char c =
            static_cast<char>(__atomic_load_n(live.data() + at + kOwnerHead + i, __ATOMIC_RELAXED));
        if (c == '\0')
            break;
        d.push_back(c);
    }
    return d;
}

const Tpoint* TraceFile::find(std::string_view name) const {
    for (const auto& t : tpoints)
        if (t.name == name)
            return &t;
    return nullptr;
}

bool TraceFile::enabled(uint16_t id) const {
    const uint16_t g = id / 64;
    return g < group_mask.size() && (group_mask[g] >> (id % 64)) & 1;
}

uint64_t TraceFile::hits(uint16_t id) const {
    if (id >= kMaxTpoints)
        return 0;
    Bytes b(bytes_, what_);
    uint64_t n = 0;
    for (const auto& c : lcores)
        n += b.get<uint64_t>(c.counter_at(id), "a hit counter");
    return n;
}

std::vector<TraceEntry> TraceFile::entries(const Lcore& core) const {
    Bytes b(bytes_, what_);
    const uint64_t n = core.num_entries;
    const uint64_t first = core.next_entry > n ? core.next_entry - n : 0;
    std::vector<uint8_t> raw((core.next_entry - first) * kEntryBytes);
    for (uint64_t i = first; i < core.next_entry; i++) {
        const uint64_t at = core.entry_at(i);
        b.need(at, kEntryBytes, "an entry");
        std::memcpy(raw.data() + (i - first) * kEntryBytes, bytes_.data() + at, kEntryBytes);
    }
    return decode(raw, false, nullptr);
}

std::vector<TraceEntry> TraceFile::decode(std::span<const uint8_t> raw, bool more_may_come,
                                          size_t* consumed) const {
    const size_t count = raw.size() / kEntryBytes;
    auto get16 = [&](size_t i, size_t off) {
        uint16_t v;
        std::memcpy(&v, raw.data() + i * kEntryBytes + off, 2);
        return v;
    };
    std::vector<TraceEntry> out;
    size_t i = 0, done = 0;
    // the oldest entries may be the tail of one whose head was overwritten or read before
    while (i < count && get16(i, 8) == kMaxTpoints)
        i++;
    done = i;
    while (i < count) {
        const uint8_t* e = raw.data() + i * kEntryBytes;
        TraceEntry t;
        std::memcpy(&t.tsc, e, 8);
        std::memcpy(&t.tpoint_id, e + 8, 2);
        std::memcpy(&t.owner_id, e + 10, 2);
        std::memcpy(&t.size, e + 12, 4);
        std::memcpy(&t.object_id, e + 16, 8);
        i++;
        const Tpoint* tp = t.tpoint_id < by_id_.size() && by_id_[t.tpoint_id]
                               ? &tpoints[*by_id_[t.tpoint_id]]
                               : nullptr;
        // the arguments: packed, continuing into the entries after this one
        const uint8_t* cur = e;
        size_t off = kEntryArgs;
        bool torn = false, unfinished = false;
        for (size_t a = 0; tp && a < tp->args.size() && !torn && !unfinished; a++) {
            const TraceArg& arg = tp->args[a];
            uint8_t val[256] = {};
            size_t got = 0;
            while (got < arg.size) {
                if (off == kEntryBytes) {
                    if (i >= count) {
                        unfinished = true;  // its continuation is not written yet
                        break;
                    }
                    if (get16(i, 8) != kMaxTpoints) {
                        torn = true;  // the ring wrapped under it
                        break;
                    }
                    cur = raw.data() + i++ * kEntryBytes;
                    off = kBufferData;
                }
                const size_t len = std::min(kEntryBytes - off, size_t{arg.size} - got);
                std::memcpy(val + got, cur + off, len);
                off += len;
                got += len;
            }
            uint64_t v = 0;
            if (arg.type != 2)
                std::memcpy(&v, val, arg.size == 4 ? 4 : 8);
            t.args.push_back(v);
        }
        if (unfinished && more_may_come)
            break;  // read it whole next time
        done = i;
        if (torn || unfinished || t.tsc < clear_tsc || t.tpoint_id == kMaxTpoints)
            continue;
        out.push_back(std::move(t));
    }
    if (consumed)
        *consumed = done;
    return out;
}

}  // namespace nvmetrace::spdk
