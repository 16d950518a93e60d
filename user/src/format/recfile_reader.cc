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

namespace {
// META and TRAILER nest four levels in what the tool writes; a file that nests
// deeper is not one of ours, and deep values cost stack to destroy and print.
constexpr int kMaxJsonDepth = 64;
}  // namespace

using namespace recfile_internal;

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
    r.scan_devices();
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
      pending_runs_(std::move(o.pending_runs_)),
      pending_at_(o.pending_at_),
      pending_block_(o.pending_block_),
      cur_runs_(std::move(o.cur_runs_)),
      skipped_(std::move(o.skipped_)),
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
        check_json_depth({reinterpret_cast<const char*>(json_.data()), json_.size()}, kMaxJsonDepth,
                         "META");
        meta_json_ =
            nlohmann::json::parse(reinterpret_cast<const char*>(json_.data()),
                                  reinterpret_cast<const char*>(json_.data()) + json_.size());
        meta_ = meta_from_json(meta_json_);
        for (const std::string& d : meta_.dropped_devices) {
            notes_.push_back(fmt::format("{}: {}", path_, d));
        }
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

void RecordingReader::scan_devices() {
    // One pass over the block headers (payloads read only for DEVICES), so
    // that every consumer knows every device before the first record.
    const uint64_t start = offset_;
    const uint64_t start_block = block_;
    DeviceIndex index;
    while (end_ == RecordingEnd::reading) {
        BlockHeader hdr{};
        if (pread_full(fd_, &hdr, sizeof(hdr), offset_) != static_cast<ssize_t>(sizeof(hdr)) ||
            hdr.magic != kBlockMagic || header_crc(hdr) != hdr.header_crc ||
            hdr.stored_len > kMaxBlockBytes || hdr.raw_len > kMaxBlockBytes)
            break;  // the end, or a problem next() reports where it is
        if (hdr.type == static_cast<uint16_t>(BlockType::trailer))
            break;
        if (hdr.type == static_cast<uint16_t>(BlockType::devices)) {
            const std::string where = fmt::format("DEVICES block {} at byte {}", block_, offset_);
            if (!read_block(hdr))
                break;
            json_.resize(hdr.raw_len);
            if (!decode(hdr, json_))
                break;
            try {
                check_json_depth({reinterpret_cast<const char*>(json_.data()), json_.size()},
                                 kMaxJsonDepth, "DEVICES");
                const DeviceChange c = device_change_from_json(nlohmann::json::parse(
                    reinterpret_cast<const char*>(json_.data()),
                    reinterpret_cast<const char*>(json_.data()) + json_.size()));
                const size_t dropped = meta_.dropped_devices.size();
                apply_device_change(meta_, c, where, &index);
                for (size_t i = dropped; i < meta_.dropped_devices.size(); i++)
                    notes_.push_back(fmt::format("{}: {}", path_, meta_.dropped_devices[i]));
            } catch (const std::exception& e) {
                notes_.push_back(
                    fmt::format("{}: skipped {}: {}; the devices it names are not known", path_,
                                where, e.what()));
            }
        }
        offset_ += sizeof(hdr) + hdr.stored_len;
        block_++;
    }
    // next() reads the blocks again from the first after META, and finds
    // any problem there itself
    end_ = RecordingEnd::reading;
    problem_.clear();
    offset_ = start;
    block_ = start_block;
}

void RecordingReader::read_cpus(const BlockHeader& hdr) {
    drop_pending_cpus("followed by another CPUS block");
    // The CPUs are an aid to reading the records, not part of them: a CPUS
    // block that cannot be used is a note, and its records' CPUs unknown.
    auto skip = [&](const std::string& why) {
        notes_.push_back(fmt::format("{}: skipped CPUS block {} at byte {}: {}; CPUs not known",
                                     path_, block_, offset_, why));
    };
    if (hdr.flags & ~kBlockKnownFlags) {
        skip(fmt::format("unknown flags 0x{:04x} (written by a newer nvmetrace?)", hdr.flags));
        return;
    }
    if (uint64_t{hdr.count} * sizeof(CpuRun) != hdr.raw_len) {
        skip(fmt::format("{} runs of {} bytes do not make {} bytes", hdr.count, sizeof(CpuRun),
                         hdr.raw_len));
        return;
    }
    pending_runs_.resize(hdr.count);
    if (!decode(hdr, std::as_writable_bytes(std::span(pending_runs_))))
        return;  // a payload that passed its checksum and does not decode: corrupt
    pending_at_ = offset_;
    pending_block_ = block_;
}

void RecordingReader::drop_pending_cpus(const char* why) {
    if (!pending_at_)
        return;
    notes_.push_back(fmt::format(
        "{}: ignored CPUS block {} at byte {}: not followed by a RECORDS block ({}); CPUs not "
        "known",
        path_, pending_block_, *pending_at_, why));
    pending_at_.reset();
    pending_runs_.clear();
}

bool RecordingReader::next(std::span<const nvmetrace_rec>& recs) {
    cur_runs_.clear();
    while (end_ == RecordingEnd::reading) {
        BlockHeader hdr{};
        if (!read_block(hdr)) {
            drop_pending_cpus(end_ == RecordingEnd::corrupt ? "but by a corrupt block"
                                                            : "but by the end of the file");
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
                if (pending_at_) {
                    uint64_t covered = 0;
                    for (const CpuRun& r : pending_runs_)
                        covered += r.count;
                    if (covered == hdr.count) {
                        cur_runs_.swap(pending_runs_);
                    } else {
                        notes_.push_back(fmt::format(
                            "{}: ignored CPUS block {} at byte {}: its runs cover {} records, "
                            "the RECORDS block after it holds {}; CPUs not known",
                            path_, pending_block_, *pending_at_, covered, hdr.count));
                    }
                    pending_at_.reset();
                    pending_runs_.clear();
                }
                offset_ += sizeof(hdr) + hdr.stored_len;
                block_++;
                records_read_ += hdr.count;
                if (hdr.count == 0) {
                    cur_runs_.clear();
                    continue;
                }
                recs = recs_;
                return true;
            }
            case BlockType::cpus:
                read_cpus(hdr);
                if (end_ != RecordingEnd::reading)
                    return false;
                offset_ += sizeof(hdr) + hdr.stored_len;
                block_++;
                break;
            case BlockType::trailer: {
                drop_pending_cpus("but by the TRAILER");
                json_.resize(hdr.raw_len);
                if (!decode(hdr, json_)) {
                    return false;
                }
                try {
                    check_json_depth({reinterpret_cast<const char*>(json_.data()), json_.size()},
                                     kMaxJsonDepth, "TRAILER");
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
            case BlockType::devices:  // applied to meta_ by open() (scan_devices)
                drop_pending_cpus("but by a DEVICES block");
                offset_ += sizeof(hdr) + hdr.stored_len;
                block_++;
                break;
            case BlockType::meta:
            default:
                drop_pending_cpus("but by a block of another type");
                if (hdr.type == static_cast<uint16_t>(BlockType::meta)) {
                    notes_.push_back(
                        fmt::format("{}: skipped block {} at byte {}: a second META "
                                    "block",
                                    path_, block_, offset_));
                } else {
                    // A newer writer may add a block of a new type to every
                    // RECORDS block: one note per type, not one per block.
                    auto [it, first] =
                        skipped_.try_emplace(hdr.type, Skipped{notes_.size(), 0, block_, offset_});
                    Skipped& sk = it->second;
                    sk.blocks++;
                    if (first)
                        notes_.emplace_back();
                    notes_[sk.note] =
                        sk.blocks == 1
                            ? fmt::format(
                                  "{}: skipped block {} at byte {}: unknown type {} "
                                  "(written by a newer nvmetrace?)",
                                  path_, block_, offset_, hdr.type)
                            : fmt::format(
                                  "{}: skipped {} blocks of unknown type {} (written by "
                                  "a newer nvmetrace?), the first block {} at byte {}",
                                  path_, sk.blocks, hdr.type, sk.first_block, sk.first_offset);
                }
                offset_ += sizeof(hdr) + hdr.stored_len;
                block_++;
                break;
        }
    }
    return false;
}

}  // namespace nvmetrace
