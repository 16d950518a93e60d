#include "format/recfile.h"
#include "format/recfile_internal.h"
#include "util/error.h"
#include "util/json_num.h"

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

using namespace recfile_internal;

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
      runs_(std::move(o.runs_)),
      block_runs_(std::move(o.block_runs_)),
      cpus_(std::move(o.cpus_)),
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

BlockHeader RecordingWriter::seal(BlockType type, std::span<const std::byte> raw, uint32_t count,
                                  bool compress, std::span<const std::byte>& stored) {
    BlockHeader hdr{};
    hdr.magic = kBlockMagic;
    hdr.type = static_cast<uint16_t>(type);
    hdr.raw_len = static_cast<uint32_t>(raw.size());
    hdr.count = count;
    stored = raw;
    if (compress && cctx_) {
        size_t z = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), zbuf_.data(), zbuf_.size(),
                                  raw.data(), raw.size());
        if (!ZSTD_isError(z) && z < raw.size()) {
            stored = std::span<const std::byte>(zbuf_.data(), z);
            hdr.flags |= kBlockZstd;
        }
    }
    hdr.stored_len = static_cast<uint32_t>(stored.size());
    hdr.checksum = crc32c(stored);
    hdr.header_crc = header_crc(hdr);
    return hdr;
}

void RecordingWriter::write_block(BlockType type, std::span<const std::byte> raw, uint32_t count,
                                  std::span<const std::byte> prefix) {
    if (raw.size() > kMaxBlockBytes) {
        throw Error(fmt::format("{}: {} block of {} bytes exceeds the {} byte limit", path_,
                                block_type_name(static_cast<uint16_t>(type)), raw.size(),
                                kMaxBlockBytes));
    }
    // Only records are worth compressing; JSON blocks stay readable with
    // `strings` and are small.
    std::span<const std::byte> payload;
    BlockHeader hdr = seal(type, raw, count, type == BlockType::records && !raw.empty(), payload);

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
    std::string json = json_text(meta_to_json(m));

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

void RecordingWriter::write_records(std::span<const nvmetrace_rec> recs,
                                    std::span<const CpuRun> runs) {
    const bool known =
        std::any_of(runs.begin(), runs.end(), [](const CpuRun& r) { return r.cpu != kCpuUnknown; });
    if (!known) {
        write_block(BlockType::records, std::as_bytes(recs), static_cast<uint32_t>(recs.size()));
        return;
    }
    // The CPUS block goes in the same writev() as its RECORDS block: a
    // recorder killed between the two cannot leave one without the other.
    // A few runs (one busy CPU) are not worth a zstd frame; many short ones
    // (CPUs taking turns) shrink as the records do.  Sealed in zbuf_ (which
    // holds a whole block's records, so its runs too) and copied out before
    // the records use it.
    constexpr size_t kCpusZstdMin = 256;
    const std::span<const std::byte> raw = std::as_bytes(runs);
    std::span<const std::byte> stored;
    const BlockHeader hdr = seal(BlockType::cpus, raw, static_cast<uint32_t>(runs.size()),
                                 raw.size() >= kCpusZstdMin, stored);
    cpus_.resize(sizeof(hdr) + stored.size());
    memcpy(cpus_.data(), &hdr, sizeof(hdr));
    memcpy(cpus_.data() + sizeof(hdr), stored.data(), stored.size());
    write_block(BlockType::records, std::as_bytes(recs), static_cast<uint32_t>(recs.size()), cpus_);
    blocks_written_++;  // the CPUS block
}

void RecordingWriter::append(std::span<const nvmetrace_rec> recs, std::span<const CpuRun> runs) {
    check_writable("append");
    uint64_t covered = 0;
    for (const CpuRun& r : runs)
        covered += r.count;
    if (covered != recs.size())
        throw std::invalid_argument(fmt::format(
            "RecordingWriter::append: CPU runs cover {} records, not {}", covered, recs.size()));
    CpuRunCursor cursor(runs);
    const size_t block = opts_.block_records;
    if (opts_.direct_records && recs.size() >= opts_.direct_records) {
        // what is buffered goes first, then recs in blocks of their own,
        // straight from the caller's memory
        flush();
        while (!recs.empty()) {
            const size_t n = std::min(block, recs.size());
            block_runs_.clear();
            cursor.take(n, [this](CpuRun r) { add_cpu_run(block_runs_, r); });
            write_records(recs.first(n), block_runs_);
            records_written_ += n;
            recs = recs.subspan(n);
        }
        last_flush_ = std::chrono::steady_clock::now();
        return;
    }
    // Whole blocks straight from the caller's memory, without a copy.
    while (buf_.empty() && recs.size() >= block) {
        block_runs_.clear();
        cursor.take(block, [this](CpuRun r) { add_cpu_run(block_runs_, r); });
        write_records(recs.first(block), block_runs_);
        records_written_ += block;
        last_flush_ = std::chrono::steady_clock::now();
        recs = recs.subspan(block);
    }
    while (!recs.empty()) {
        size_t n = std::min(block - buf_.size(), recs.size());
        buf_.insert(buf_.end(), recs.begin(), recs.begin() + static_cast<ptrdiff_t>(n));
        cursor.take(n, [this](CpuRun r) { add_cpu_run(runs_, r); });
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
    write_records(buf_, runs_);
    records_written_ += buf_.size();
    buf_.clear();
    runs_.clear();
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

void RecordingWriter::write_devices(const DeviceChange& change) {
    check_writable("write_devices");
    std::string json = json_text(device_change_to_json(change));
    write_block(BlockType::devices, std::as_bytes(std::span(json)), 0);
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
    std::string json = json_text(trailer_to_json(trailer));
    write_block(BlockType::trailer, std::as_bytes(std::span(json)), 0);
    if (fdatasync(fd_) != 0) {
        fail("fdatasync failed", errno);
    }
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) {
        throw errno_error(path_ + ": close failed", errno);
    }
}

}  // namespace nvmetrace
