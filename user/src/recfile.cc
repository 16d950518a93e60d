#include "recfile.h"

#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace nvmetrace {

namespace {

// ------------------------------------------------------------------ CRC32C

constexpr uint32_t kCrc32cPoly = 0x82f63b78u;  // Castagnoli, bit-reversed

constexpr std::array<uint32_t, 256> make_crc32c_table() {
    std::array<uint32_t, 256> table{};
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int bit = 0; bit < 8; bit++) {
            c = (c >> 1) ^ (kCrc32cPoly & (0u - (c & 1u)));
        }
        table[i] = c;
    }
    return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// ------------------------------------------------------------------ helpers

int64_t clock_ns(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string errno_text(int err) {
    const char* desc = strerrordesc_np(err);
    return desc ? desc : fmt::format("error {}", err);
}

uint32_t header_crc(const BlockHeader& hdr) {
    return crc32c(std::as_bytes(std::span(&hdr, 1)).first(offsetof(BlockHeader, header_crc)));
}

const char* block_type_name(uint16_t type) {
    switch (static_cast<BlockType>(type)) {
        case BlockType::meta:
            return "META";
        case BlockType::records:
            return "RECORDS";
        case BlockType::trailer:
            return "TRAILER";
    }
    return "unknown";
}

// Reads up to n bytes at off, fewer only at end of file.  -errno on error.
ssize_t pread_full(int fd, void* buf, size_t n, uint64_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t r =
            ::pread(fd, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(off + done));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (r == 0) {
            break;
        }
        done += static_cast<size_t>(r);
    }
    return static_cast<ssize_t>(done);
}

template <typename T>
T json_get(const nlohmann::json& j, const char* key, T fallback) {
    auto it = j.find(key);
    return it == j.end() ? fallback : it->template get<T>();
}

}  // namespace

#if defined(__x86_64__)
namespace {
// The SSE 4.2 crc32 instruction computes this very CRC (Castagnoli,
// reflected), 8 bytes per instruction: reading a recording checks every
// block, and the table loop was a tenth of `report`'s time.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const std::byte* p, size_t n,
                                                        uint32_t crc) {
    uint64_t c = crc;
    // 32 bytes a round: fewer loop instructions (the recorder checksums
    // every record it writes)
    for (; n >= 32; n -= 32, p += 32) {
        uint64_t v[4];
        std::memcpy(v, p, 32);
        c = __builtin_ia32_crc32di(c, v[0]);
        c = __builtin_ia32_crc32di(c, v[1]);
        c = __builtin_ia32_crc32di(c, v[2]);
        c = __builtin_ia32_crc32di(c, v[3]);
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    auto c32 = static_cast<uint32_t>(c);
    for (; n; n--, p++)
        c32 = __builtin_ia32_crc32qi(c32, static_cast<unsigned char>(*p));
    return c32;
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
}  // namespace
#endif

uint32_t crc32c(std::span<const std::byte> data, uint32_t crc) {
    crc = ~crc;
#if defined(__x86_64__)
    if (kHaveSse42)
        return ~crc32c_sse42(data.data(), data.size(), crc);
#endif
    for (std::byte b : data) {
        crc = (crc >> 8) ^ kCrc32cTable[(crc ^ static_cast<uint32_t>(b)) & 0xffu];
    }
    return ~crc;
}

// ------------------------------------------------------------------ schema

const std::vector<RecordField>& record_schema() {
    // Every field of struct nvmetrace_rec, in order; the static_assert below
    // proves the list covers the struct with no hidden padding.
#define NVMETRACE_FIELD(f)                                       \
    RecordField {                                                \
#f, static_cast < uint32_t>(offsetof(nvmetrace_rec, f)), \
            static_cast < uint32_t>(sizeof(nvmetrace_rec::f)),   \
            "u" + std::to_string(8 * sizeof(nvmetrace_rec::f))   \
    }
    static const std::vector<RecordField> fields = {
        NVMETRACE_FIELD(ts),     NVMETRACE_FIELD(lba),    NVMETRACE_FIELD(aux),
        NVMETRACE_FIELD(dev),    NVMETRACE_FIELD(len),    NVMETRACE_FIELD(event),
        NVMETRACE_FIELD(qid),    NVMETRACE_FIELD(cid),    NVMETRACE_FIELD(tag),
        NVMETRACE_FIELD(cntlid), NVMETRACE_FIELD(opcode), NVMETRACE_FIELD(flags),
        NVMETRACE_FIELD(seq),
    };
#undef NVMETRACE_FIELD
    static_assert(3 * 8 + 2 * 4 + 5 * 2 + 2 * 1 + 4 == sizeof(nvmetrace_rec),
                  "record_schema() must list every field of struct nvmetrace_rec");
    return fields;
}

const std::map<uint16_t, std::string>& default_event_names() {
    static const std::map<uint16_t, std::string> names = {
        {NVMETRACE_EV_BIO_QUEUE, "bio_queue"},
        {NVMETRACE_EV_RQ_INSERT, "rq_insert"},
        {NVMETRACE_EV_RQ_ISSUE, "rq_issue"},
        {NVMETRACE_EV_NVME_SETUP, "nvme_setup"},
        {NVMETRACE_EV_NVME_COMPLETE, "nvme_complete"},
        {NVMETRACE_EV_RQ_COMPLETE, "rq_complete"},
        {NVMETRACE_EV_NVMET_INIT, "nvmet_init"},
        {NVMETRACE_EV_NVMET_EXEC, "nvmet_exec"},
        {NVMETRACE_EV_NVMET_BIO_DONE, "nvmet_bio_done"},
        {NVMETRACE_EV_NVMET_COMPLETE, "nvmet_complete"},
    };
    return names;
}

// ------------------------------------------------------------------ META JSON

RecordingMeta make_recording_meta() {
    RecordingMeta meta;
    utsname u{};
    if (uname(&u) == 0) {
        meta.hostname = u.nodename;
        meta.kernel_release = u.release;
    }
    // Bracket the realtime read with two monotonic reads and pair it with
    // their midpoint: the pair is then off by at most half the bracket.
    int64_t mono0 = clock_ns(CLOCK_MONOTONIC);
    meta.start_realtime_ns = clock_ns(CLOCK_REALTIME);
    int64_t mono1 = clock_ns(CLOCK_MONOTONIC);
    meta.start_monotonic_ns = mono0 + (mono1 - mono0) / 2;
    return meta;
}

nlohmann::json meta_to_json(const RecordingMeta& meta) {
    nlohmann::json j = meta.extra.is_object() ? meta.extra : nlohmann::json::object();
    j["format_version"] = meta.format_version;
    j["clock"] = meta.clock;
    j["hostname"] = meta.hostname;
    j["kernel_release"] = meta.kernel_release;
    j["module_version"] = meta.module_version;
    j["tool_version"] = meta.tool_version;
    j["role"] = meta.role;
    j["transport"] = meta.transport;
    j["sample"] = meta.sample;
    j["seed"] = meta.seed;
    j["start"] = {{"realtime_ns", meta.start_realtime_ns},
                  {"monotonic_ns", meta.start_monotonic_ns}};
    j["command_line"] = meta.command_line;
    j["devices"] = meta.devices;
    nlohmann::json fields = nlohmann::json::array();
    for (const RecordField& f : meta.record_fields) {
        fields.push_back(
            {{"name", f.name}, {"offset", f.offset}, {"size", f.size}, {"type", f.type}});
    }
    j["record"] = {{"size", meta.record_size}, {"byte_order", "little"}, {"fields", fields}};
    nlohmann::json events = nlohmann::json::object();
    for (const auto& [num, name] : meta.events) {
        events[std::to_string(num)] = name;
    }
    j["events"] = events;
    return j;
}

RecordingMeta meta_from_json(const nlohmann::json& j) {
    static const char* const kCore[] = {
        "format_version", "clock",        "hostname",  "kernel_release", "module_version",
        "tool_version",   "role",         "transport", "sample",         "seed",
        "start",          "command_line", "devices",   "record",         "events"};
    if (!j.is_object()) {
        throw Error("META is not a JSON object");
    }
    RecordingMeta m;
    m.format_version = json_get<uint32_t>(j, "format_version", 0);
    m.clock = json_get<std::string>(j, "clock", "");
    m.hostname = json_get<std::string>(j, "hostname", "");
    m.kernel_release = json_get<std::string>(j, "kernel_release", "");
    m.module_version = json_get<std::string>(j, "module_version", "");
    m.tool_version = json_get<std::string>(j, "tool_version", "");
    m.role = json_get<std::string>(j, "role", "");
    m.transport = json_get<std::string>(j, "transport", "unknown");
    m.sample = json_get<uint32_t>(j, "sample", 1);
    m.seed = json_get<uint64_t>(j, "seed", 0);
    if (auto it = j.find("start"); it != j.end()) {
        m.start_realtime_ns = it->at("realtime_ns").get<int64_t>();
        m.start_monotonic_ns = it->at("monotonic_ns").get<int64_t>();
    }
    m.command_line = json_get<std::vector<std::string>>(j, "command_line", {});
    m.devices = json_get<nlohmann::json>(j, "devices", nlohmann::json::array());
    // The schema is what makes the records readable: no defaults for it.
    const nlohmann::json& rec = j.at("record");
    m.record_size = rec.at("size").get<uint32_t>();
    if (json_get<std::string>(rec, "byte_order", "little") != "little") {
        throw Error("records are not little-endian");
    }
    m.record_fields.clear();
    for (const nlohmann::json& f : rec.at("fields")) {
        m.record_fields.push_back({f.at("name").get<std::string>(), f.at("offset").get<uint32_t>(),
                                   f.at("size").get<uint32_t>(), f.at("type").get<std::string>()});
    }
    m.events.clear();
    if (auto it = j.find("events"); it != j.end()) {
        for (const auto& [num, name] : it->items()) {
            unsigned long n = std::stoul(num);
            if (n > UINT16_MAX) {
                throw Error(fmt::format("event number {} out of range", num));
            }
            m.events[static_cast<uint16_t>(n)] = name.get<std::string>();
        }
    }
    m.extra = nlohmann::json::object();
    for (const auto& [key, value] : j.items()) {
        if (std::find_if(std::begin(kCore), std::end(kCore),
                         [&](const char* c) { return key == c; }) == std::end(kCore)) {
            m.extra[key] = value;
        }
    }
    return m;
}

nlohmann::json trailer_to_json(const RecordingTrailer& t) {
    return {
        {"end", {{"realtime_ns", t.end_realtime_ns}, {"monotonic_ns", t.end_monotonic_ns}}},
        {"duration_ns", t.duration_ns},
        {"records", t.records},
        {"lost", t.lost},
        {"lost_per_cpu", t.lost_per_cpu},
        {"stats", t.stats},
    };
}

RecordingTrailer trailer_from_json(const nlohmann::json& j) {
    if (!j.is_object()) {
        throw Error("TRAILER is not a JSON object");
    }
    RecordingTrailer t;
    if (auto it = j.find("end"); it != j.end()) {
        t.end_realtime_ns = json_get<int64_t>(*it, "realtime_ns", 0);
        t.end_monotonic_ns = json_get<int64_t>(*it, "monotonic_ns", 0);
    }
    t.duration_ns = json_get<uint64_t>(j, "duration_ns", 0);
    t.records = json_get<uint64_t>(j, "records", 0);
    t.lost = json_get<uint64_t>(j, "lost", 0);
    t.lost_per_cpu = json_get<std::vector<uint64_t>>(j, "lost_per_cpu", {});
    t.stats = json_get<nlohmann::json>(j, "stats", nlohmann::json::object());
    return t;
}

// ------------------------------------------------------------------ writer

RecordingWriter RecordingWriter::open(const std::string& path, const RecordingWriterOptions& opts) {
    if (opts.block_records == 0 || opts.block_records > kMaxBlockBytes / sizeof(nvmetrace_rec)) {
        throw Error(fmt::format("block size {} records out of range (1..{})", opts.block_records,
                                kMaxBlockBytes / sizeof(nvmetrace_rec)));
    }
    if (opts.zstd_level < ZSTD_minCLevel() || opts.zstd_level > ZSTD_maxCLevel()) {
        throw Error(fmt::format("zstd level {} out of range ({}..{})", opts.zstd_level,
                                ZSTD_minCLevel(), ZSTD_maxCLevel()));
    }
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        throw errno_error(path + ": cannot create recording", errno);
    }
    return RecordingWriter(path, fd, opts);
}

RecordingWriter::RecordingWriter(std::string path, int fd, const RecordingWriterOptions& opts)
    : path_(std::move(path)), fd_(fd), opts_(opts), last_flush_(std::chrono::steady_clock::now()) {
    buf_.reserve(opts_.block_records);
    if (opts_.zstd_level != 0) {
        cctx_ = ZSTD_createCCtx();
        if (!cctx_) {
            ::close(fd_);
            throw std::bad_alloc();
        }
        ZSTD_CCtx_setParameter(static_cast<ZSTD_CCtx*>(cctx_), ZSTD_c_compressionLevel,
                               opts_.zstd_level);
        zbuf_.resize(ZSTD_compressBound(size_t{opts_.block_records} * sizeof(nvmetrace_rec)));
    }
}

RecordingWriter::RecordingWriter(RecordingWriter&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      opts_(o.opts_),
      meta_written_(o.meta_written_),
      failed_(o.failed_),
      start_monotonic_ns_(o.start_monotonic_ns_),
      buf_(std::move(o.buf_)),
      zbuf_(std::move(o.zbuf_)),
      cctx_(std::exchange(o.cctx_, nullptr)),
      last_flush_(o.last_flush_),
      records_written_(o.records_written_),
      bytes_written_(o.bytes_written_),
      blocks_written_(o.blocks_written_) {}

RecordingWriter& RecordingWriter::operator=(RecordingWriter&& o) noexcept {
    if (this != &o) {
        this->~RecordingWriter();
        new (this) RecordingWriter(std::move(o));
    }
    return *this;
}

RecordingWriter::~RecordingWriter() {
    if (fd_ >= 0) {
        if (meta_written_ && !failed_) {
            try {
                flush();
            } catch (...) {
                // Nothing to report to from a destructor; the reader will
                // say the recording was cut off.
            }
        }
        ::close(fd_);
    }
    ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
}

void RecordingWriter::check_writable(const char* what) const {
    if (fd_ < 0) {
        throw std::logic_error(fmt::format("RecordingWriter::{}: {} is closed", what, path_));
    }
    if (failed_) {
        throw Error(fmt::format("{}: not writing after an earlier write error", path_));
    }
    if (!meta_written_) {
        throw std::logic_error(fmt::format("RecordingWriter::{}: write_meta() first", what));
    }
}

void RecordingWriter::fail(const std::string& what, int err) {
    failed_ = true;
    // Leave a file that ends on a block boundary, if the file system lets us.
    if (ftruncate(fd_, static_cast<off_t>(bytes_written_)) != 0) {
        // The reader will report the partial block as a cut-off.
    }
    throw errno_error(fmt::format("{}: {}", path_, what), err);
}

void RecordingWriter::write_block(BlockType type, std::span<const std::byte> raw, uint32_t count,
                                  std::span<const std::byte> prefix) {
    if (raw.size() > kMaxBlockBytes) {
        throw Error(fmt::format("{}: {} block of {} bytes exceeds the {} byte limit", path_,
                                block_type_name(static_cast<uint16_t>(type)), raw.size(),
                                kMaxBlockBytes));
    }
    BlockHeader hdr{};
    hdr.magic = kBlockMagic;
    hdr.type = static_cast<uint16_t>(type);
    hdr.raw_len = static_cast<uint32_t>(raw.size());
    hdr.count = count;
    std::span<const std::byte> payload = raw;
    // Only records are worth compressing; JSON blocks stay readable with
    // `strings` and are small.
    if (type == BlockType::records && cctx_ && !raw.empty()) {
        size_t z = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), zbuf_.data(), zbuf_.size(),
                                  raw.data(), raw.size());
        if (!ZSTD_isError(z) && z < raw.size()) {
            payload = std::span<const std::byte>(zbuf_.data(), z);
            hdr.flags |= kBlockZstd;
        }
    }
    hdr.stored_len = static_cast<uint32_t>(payload.size());
    hdr.checksum = crc32c(payload);
    hdr.header_crc = header_crc(hdr);

    // One writev(): a SIGKILL lands before or after it (or, rarely, leaves
    // one partial block at the end, which the reader reports as cut off).
    iovec iov[3];
    int iovcnt = 0;
    if (!prefix.empty()) {
        iov[iovcnt++] = {const_cast<std::byte*>(prefix.data()), prefix.size()};
    }
    iov[iovcnt++] = {&hdr, sizeof(hdr)};
    if (!payload.empty()) {
        iov[iovcnt++] = {const_cast<std::byte*>(payload.data()), payload.size()};
    }
    size_t total = prefix.size() + sizeof(hdr) + payload.size();
    iovec* cur = iov;
    while (iovcnt > 0) {
        ssize_t w = ::writev(fd_, cur, iovcnt);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            fail("write failed", errno);
        }
        auto left = static_cast<size_t>(w);
        while (iovcnt > 0 && left >= cur->iov_len) {
            left -= cur->iov_len;
            cur++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            cur->iov_base = static_cast<char*>(cur->iov_base) + left;
            cur->iov_len -= left;
        }
    }
    bytes_written_ += total;
    blocks_written_++;
}

void RecordingWriter::write_meta(const RecordingMeta& meta) {
    if (fd_ < 0 || failed_) {
        check_writable("write_meta");
    }
    if (meta_written_) {
        throw std::logic_error("RecordingWriter::write_meta: called twice");
    }
    RecordingMeta m = meta;
    // The records are this build's struct: describe exactly that.
    m.format_version = kRecFileVersion;
    m.record_size = sizeof(nvmetrace_rec);
    m.record_fields = record_schema();
    std::string json = meta_to_json(m).dump();

    RecFileHeader fh{};
    memcpy(fh.magic, kRecFileMagic, sizeof(fh.magic));
    fh.version = kRecFileVersion;
    fh.header_size = sizeof(fh);
    write_block(BlockType::meta, std::as_bytes(std::span(json)), 0,
                std::as_bytes(std::span(&fh, 1)));
    meta_written_ = true;
    start_monotonic_ns_ = meta.start_monotonic_ns;
    last_flush_ = std::chrono::steady_clock::now();
}

void RecordingWriter::append(std::span<const nvmetrace_rec> recs) {
    check_writable("append");
    const size_t block = opts_.block_records;
    if (opts_.direct_records && recs.size() >= opts_.direct_records) {
        // what is buffered goes first, then recs in blocks of their own,
        // straight from the caller's memory
        flush();
        while (!recs.empty()) {
            const size_t n = std::min(block, recs.size());
            write_block(BlockType::records, std::as_bytes(recs.first(n)), static_cast<uint32_t>(n));
            records_written_ += n;
            recs = recs.subspan(n);
        }
        last_flush_ = std::chrono::steady_clock::now();
        return;
    }
    // Whole blocks straight from the caller's memory, without a copy.
    while (buf_.empty() && recs.size() >= block) {
        write_block(BlockType::records, std::as_bytes(recs.first(block)),
                    static_cast<uint32_t>(block));
        records_written_ += block;
        last_flush_ = std::chrono::steady_clock::now();
        recs = recs.subspan(block);
    }
    while (!recs.empty()) {
        size_t n = std::min(block - buf_.size(), recs.size());
        buf_.insert(buf_.end(), recs.begin(), recs.begin() + static_cast<ptrdiff_t>(n));
        recs = recs.subspan(n);
        if (buf_.size() == block) {
            flush();
        }
    }
    flush_if_due();
}

void RecordingWriter::flush() {
    check_writable("flush");
    if (buf_.empty()) {
        return;
    }
    write_block(BlockType::records, std::as_bytes(std::span(buf_)),
                static_cast<uint32_t>(buf_.size()));
    records_written_ += buf_.size();
    buf_.clear();
    last_flush_ = std::chrono::steady_clock::now();
}

bool RecordingWriter::flush_if_due() {
    check_writable("flush_if_due");
    if (opts_.flush_interval.count() == 0 || buf_.empty() ||
        std::chrono::steady_clock::now() - last_flush_ < opts_.flush_interval) {
        return false;
    }
    flush();
    return true;
}

void RecordingWriter::sync() {
    flush();
    if (fdatasync(fd_) != 0) {
        fail("fdatasync failed", errno);
    }
}

void RecordingWriter::close(RecordingTrailer trailer) {
    flush();
    trailer.records = records_written_;
    if (trailer.end_realtime_ns == 0) {
        trailer.end_realtime_ns = clock_ns(CLOCK_REALTIME);
    }
    if (trailer.end_monotonic_ns == 0) {
        trailer.end_monotonic_ns = clock_ns(CLOCK_MONOTONIC);
    }
    if (trailer.duration_ns == 0 && start_monotonic_ns_ > 0 &&
        trailer.end_monotonic_ns > start_monotonic_ns_) {
        trailer.duration_ns = static_cast<uint64_t>(trailer.end_monotonic_ns - start_monotonic_ns_);
    }
    std::string json = trailer_to_json(trailer).dump();
    write_block(BlockType::trailer, std::as_bytes(std::span(json)), 0);
    if (fdatasync(fd_) != 0) {
        fail("fdatasync failed", errno);
    }
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) {
        throw errno_error(path_ + ": close failed", errno);
    }
}

// ------------------------------------------------------------------ reader

RecordingReader RecordingReader::open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        throw errno_error(path, errno);
    }
    RecordingReader r(path, fd);  // owns fd from here

    RecFileHeader fh{};
    ssize_t n = pread_full(fd, &fh, sizeof(fh), 0);
    if (n < 0) {
        throw errno_error(path, static_cast<int>(-n));
    }
    if (n == 0) {
        throw Error(path + ": empty file: not an nvmetrace recording");
    }
    size_t magic_seen = std::min(static_cast<size_t>(n), sizeof(fh.magic));
    if (memcmp(fh.magic, kRecFileMagic, magic_seen) != 0) {
        throw Error(path + ": not an nvmetrace recording");
    }
    if (static_cast<size_t>(n) < sizeof(fh)) {
        throw Error(fmt::format("{}: cut off inside the file header ({} of {} bytes)", path, n,
                                sizeof(fh)));
    }
    if (fh.version > kRecFileVersion) {
        throw Error(fmt::format(
            "{}: recording format version {} is newer than this nvmetrace reads (version {}): "
            "upgrade nvmetrace",
            path, fh.version, kRecFileVersion));
    }
    if (fh.version == 0) {
        throw Error(fmt::format("{}: bad recording format version 0 (this nvmetrace reads {})",
                                path, kRecFileVersion));
    }
    // A later version may grow the header; a sane one stays small.
    if (fh.header_size < sizeof(fh) || fh.header_size > 4096) {
        throw Error(fmt::format("{}: bad file header: header size {} (expected {})", path,
                                fh.header_size, sizeof(fh)));
    }
    r.offset_ = fh.header_size;
    r.read_meta();
    r.meta_.format_version = fh.version;  // the file header is authoritative
    return r;
}

RecordingReader::RecordingReader(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
    dctx_ = ZSTD_createDCtx();
    if (!dctx_) {
        ::close(fd_);
        throw std::bad_alloc();
    }
}

RecordingReader::RecordingReader(RecordingReader&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      meta_(std::move(o.meta_)),
      meta_json_(std::move(o.meta_json_)),
      trailer_(std::move(o.trailer_)),
      end_(o.end_),
      problem_(std::move(o.problem_)),
      notes_(std::move(o.notes_)),
      offset_(o.offset_),
      block_(o.block_),
      records_read_(o.records_read_),
      stored_(std::move(o.stored_)),
      json_(std::move(o.json_)),
      recs_(std::move(o.recs_)),
      dctx_(std::exchange(o.dctx_, nullptr)) {}

RecordingReader& RecordingReader::operator=(RecordingReader&& o) noexcept {
    if (this != &o) {
        this->~RecordingReader();
        new (this) RecordingReader(std::move(o));
    }
    return *this;
}

RecordingReader::~RecordingReader() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
    ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

void RecordingReader::stop_cut_off(uint64_t present_end, const std::string& what) {
    end_ = RecordingEnd::cut_off;
    problem_ = fmt::format(
        "{}: cut off at byte {} ({}); read {} records up to byte {}; no trailer: recording was "
        "cut off (killed?)",
        path_, present_end, what, records_read_, offset_);
}

void RecordingReader::stop_corrupt(const std::string& what) {
    end_ = RecordingEnd::corrupt;
    problem_ = fmt::format("{}: corrupt block {} at byte {}: {}; read {} records before it", path_,
                           block_, offset_, what, records_read_);
}

bool RecordingReader::read_block(BlockHeader& hdr) {
    ssize_t n = pread_full(fd_, &hdr, sizeof(hdr), offset_);
    if (n < 0) {
        stop_corrupt(fmt::format("read failed: {}", errno_text(static_cast<int>(-n))));
        return false;
    }
    if (n == 0) {
        end_ = RecordingEnd::cut_off;
        problem_ = fmt::format(
            "{}: no trailer: recording was cut off (killed?); read {} records up to byte {}", path_,
            records_read_, offset_);
        return false;
    }
    if (static_cast<size_t>(n) < sizeof(hdr)) {
        stop_cut_off(offset_ + static_cast<uint64_t>(n),
                     fmt::format("block {} incomplete: {} of {} header bytes present", block_, n,
                                 sizeof(hdr)));
        return false;
    }
    static constexpr BlockHeader kZero{};
    if (memcmp(&hdr, &kZero, sizeof(hdr)) == 0) {
        stop_corrupt(
            "block header is all zeros (space allocated but never written: crash or "
            "power loss?)");
        return false;
    }
    if (hdr.magic != kBlockMagic) {
        stop_corrupt(fmt::format("bad block magic 0x{:08x} (expected 0x{:08x}, \"NTRB\")",
                                 hdr.magic, kBlockMagic));
        return false;
    }
    if (uint32_t crc = header_crc(hdr); crc != hdr.header_crc) {
        stop_corrupt(
            fmt::format("block header checksum mismatch (stored 0x{:08x}, computed "
                        "0x{:08x})",
                        hdr.header_crc, crc));
        return false;
    }
    if (hdr.reserved != 0) {
        stop_corrupt(
            fmt::format("reserved header field is 0x{:08x}, not 0 (written by a newer "
                        "nvmetrace?)",
                        hdr.reserved));
        return false;
    }
    if (hdr.stored_len > kMaxBlockBytes || hdr.raw_len > kMaxBlockBytes) {
        stop_corrupt(fmt::format("block of {} bytes ({} decoded) exceeds the {} byte limit",
                                 hdr.stored_len, hdr.raw_len, kMaxBlockBytes));
        return false;
    }
    stored_.resize(hdr.stored_len);
    n = pread_full(fd_, stored_.data(), stored_.size(), offset_ + sizeof(hdr));
    if (n < 0) {
        stop_corrupt(fmt::format("read failed: {}", errno_text(static_cast<int>(-n))));
        return false;
    }
    if (static_cast<size_t>(n) < stored_.size()) {
        stop_cut_off(offset_ + sizeof(hdr) + static_cast<uint64_t>(n),
                     fmt::format("block {} incomplete: header says {} bytes, {} present", block_,
                                 hdr.stored_len, n));
        return false;
    }
    if (uint32_t crc = crc32c(stored_); crc != hdr.checksum) {
        stop_corrupt(
            fmt::format("payload checksum mismatch (header says 0x{:08x}, payload has "
                        "0x{:08x})",
                        hdr.checksum, crc));
        return false;
    }
    return true;
}

bool RecordingReader::decode(const BlockHeader& hdr, std::span<std::byte> dst) {
    if (hdr.flags & ~kBlockKnownFlags) {
        stop_corrupt(
            fmt::format("{} block has unknown flags 0x{:04x} (written by a newer "
                        "nvmetrace?)",
                        block_type_name(hdr.type), hdr.flags));
        return false;
    }
    if (!(hdr.flags & kBlockZstd)) {
        if (hdr.stored_len != hdr.raw_len) {
            stop_corrupt(fmt::format("uncompressed block with stored length {} != raw length {}",
                                     hdr.stored_len, hdr.raw_len));
            return false;
        }
        if (!dst.empty()) {
            memcpy(dst.data(), stored_.data(), dst.size());
        }
        return true;
    }
    unsigned long long frame = ZSTD_getFrameContentSize(stored_.data(), stored_.size());
    if (frame == ZSTD_CONTENTSIZE_ERROR) {
        stop_corrupt("zstd: not a zstd frame");
        return false;
    }
    if (frame != ZSTD_CONTENTSIZE_UNKNOWN && frame != hdr.raw_len) {
        stop_corrupt(fmt::format("zstd frame holds {} bytes, header says {}", frame, hdr.raw_len));
        return false;
    }
    size_t r = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), dst.data(), dst.size(),
                                   stored_.data(), stored_.size());
    if (ZSTD_isError(r)) {
        stop_corrupt(fmt::format("zstd: {}", ZSTD_getErrorName(r)));
        return false;
    }
    if (r != hdr.raw_len) {
        stop_corrupt(fmt::format("zstd: decoded {} bytes, header says {}", r, hdr.raw_len));
        return false;
    }
    return true;
}

void RecordingReader::read_meta() {
    BlockHeader hdr{};
    if (!read_block(hdr)) {
        if (end_ == RecordingEnd::cut_off && problem_.find("cut off at") == std::string::npos) {
            throw Error(
                fmt::format("{}: no META block: the file ends after its {}-byte header "
                            "(recording killed at start?)",
                            path_, offset_));
        }
        throw Error(problem_);
    }
    auto corrupt = [&](const std::string& what) {
        stop_corrupt(what);
        return Error(
            fmt::format("{}: corrupt block {} at byte {}: {}", path_, block_, offset_, what));
    };
    if (hdr.type != static_cast<uint16_t>(BlockType::meta)) {
        throw corrupt(fmt::format("first block is type {} ({}), expected META (1)", hdr.type,
                                  block_type_name(hdr.type)));
    }
    json_.resize(hdr.raw_len);
    if (!decode(hdr, json_)) {
        throw Error(problem_);
    }
    try {
        meta_json_ =
            nlohmann::json::parse(reinterpret_cast<const char*>(json_.data()),
                                  reinterpret_cast<const char*>(json_.data()) + json_.size());
        meta_ = meta_from_json(meta_json_);
    } catch (const nlohmann::json::exception& e) {
        throw corrupt(fmt::format("bad META: {}", e.what()));
    } catch (const std::logic_error& e) {  // std::stoul
        throw corrupt(fmt::format("bad META: {}", e.what()));
    } catch (const Error& e) {
        throw corrupt(fmt::format("bad META: {}", e.what()));
    }

    // This reader hands out struct nvmetrace_rec: the file's records must be
    // exactly that (other readers can use the schema to decode anything).
    const std::vector<RecordField>& ours = record_schema();
    std::string diff;
    if (meta_.record_size != sizeof(nvmetrace_rec)) {
        diff = fmt::format("record size {} (this build: {})", meta_.record_size,
                           sizeof(nvmetrace_rec));
    }
    for (const RecordField& f : ours) {
        auto it = std::find_if(meta_.record_fields.begin(), meta_.record_fields.end(),
                               [&](const RecordField& g) { return g.name == f.name; });
        if (diff.empty() && it == meta_.record_fields.end()) {
            diff = fmt::format("no field '{}'", f.name);
        } else if (diff.empty() && *it != f) {
            diff = fmt::format("field '{}' is {} at offset {} (this build: {} at offset {})",
                               f.name, it->type, it->offset, f.type, f.offset);
        }
    }
    if (diff.empty() && meta_.record_fields.size() != ours.size()) {
        diff = fmt::format("{} fields (this build: {})", meta_.record_fields.size(), ours.size());
    }
    if (!diff.empty()) {
        throw Error(
            fmt::format("{}: records have a layout this nvmetrace cannot read: {}", path_, diff));
    }
    offset_ += sizeof(hdr) + hdr.stored_len;
    block_++;
}

bool RecordingReader::next(std::span<const nvmetrace_rec>& recs) {
    while (end_ == RecordingEnd::reading) {
        BlockHeader hdr{};
        if (!read_block(hdr)) {
            return false;
        }
        switch (static_cast<BlockType>(hdr.type)) {
            case BlockType::records: {
                if (uint64_t{hdr.count} * sizeof(nvmetrace_rec) != hdr.raw_len) {
                    stop_corrupt(fmt::format("{} records of {} bytes do not make {} bytes",
                                             hdr.count, sizeof(nvmetrace_rec), hdr.raw_len));
                    return false;
                }
                recs_.resize(hdr.count);
                if (!decode(hdr, std::as_writable_bytes(std::span(recs_)))) {
                    return false;
                }
                offset_ += sizeof(hdr) + hdr.stored_len;
                block_++;
                records_read_ += hdr.count;
                if (hdr.count == 0) {
                    continue;
                }
                recs = recs_;
                return true;
            }
            case BlockType::trailer: {
                json_.resize(hdr.raw_len);
                if (!decode(hdr, json_)) {
                    return false;
                }
                try {
                    trailer_ = trailer_from_json(nlohmann::json::parse(
                        reinterpret_cast<const char*>(json_.data()),
                        reinterpret_cast<const char*>(json_.data()) + json_.size()));
                } catch (const std::exception& e) {
                    stop_corrupt(fmt::format("bad TRAILER: {}", e.what()));
                    return false;
                }
                offset_ += sizeof(hdr) + hdr.stored_len;
                block_++;
                end_ = RecordingEnd::clean;
                if (trailer_->records != records_read_) {
                    notes_.push_back(fmt::format("{}: trailer says {} records, the file holds {}",
                                                 path_, trailer_->records, records_read_));
                }
                struct stat st {};
                if (fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) > offset_) {
                    notes_.push_back(
                        fmt::format("{}: ignored {} bytes after the trailer at byte {}", path_,
                                    static_cast<uint64_t>(st.st_size) - offset_, offset_));
                }
                return false;
            }
            case BlockType::meta:
            default:
                notes_.push_back(
                    fmt::format("{}: skipped block {} at byte {}: {}", path_, block_, offset_,
                                hdr.type == static_cast<uint16_t>(BlockType::meta)
                                    ? std::string("a second META block")
                                    : fmt::format("unknown type {} (written by a newer nvmetrace?)",
                                                  hdr.type)));
                offset_ += sizeof(hdr) + hdr.stored_len;
                block_++;
                break;
        }
    }
    return false;
}

}  // namespace nvmetrace
