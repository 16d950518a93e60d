// The recording file: what `nvmetrace record` writes and `nvmetrace report`
// reads.  The format is described byte by byte in
// Documentation/recording-format.md; keep the two in step.
//
// A file header, then self-contained blocks: one META (JSON), any number of
// RECORDS (raw struct nvmetrace_rec arrays, zstd-compressed), each preceded
// by a CPUS block when the CPUs its records were recorded on are known, and
// a TRAILER (JSON) written only at a clean close.  Each block is written with one
// writev() straight to the fd, so a recorder killed at any moment leaves a
// file whose complete blocks are all readable; the reader reports where and
// why it stopped instead of guessing.
#pragma once

#include <linux/nvmetrace.h>
#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvmetrace {

// Records are stored in host byte order and the format says little-endian.
static_assert(std::endian::native == std::endian::little,
              "recfile stores records raw: a big-endian host needs byte swapping here");

// ------------------------------------------------------------------ layout

inline constexpr char kRecFileMagic[8] = {'N', 'V', 'M', 'T', 'R', 'A', 'C', 'E'};
inline constexpr uint32_t kRecFileVersion = 1;  // the version this build writes and reads

// The first 16 bytes of the file.  A reader skips header_size - 16 bytes it
// does not know (a later version may append fields).
struct RecFileHeader {
    char magic[8];         // kRecFileMagic, not NUL-terminated
    uint32_t version;      // kRecFileVersion
    uint32_t header_size;  // sizeof(RecFileHeader) = 16
};
static_assert(sizeof(RecFileHeader) == 16);

// "NTRB" as it appears in the file, read as a little-endian u32.
inline constexpr uint32_t kBlockMagic = 0x4252544eu;

enum class BlockType : uint16_t {
    meta = 1,     // JSON, always the first block
    records = 2,  // struct nvmetrace_rec[count]
    trailer = 3,  // JSON, the last block of a cleanly closed recording
    cpus = 4,     // CpuRun[count]: the CPUs of the next RECORDS block's records
    devices = 5,  // JSON: devices that appeared or went while recording
};

inline constexpr uint16_t kBlockZstd = 1u << 0;  // payload is one zstd frame
inline constexpr uint16_t kBlockKnownFlags = kBlockZstd;

// Upper bound on stored_len and raw_len: a reader never allocates more than
// this for one block, whatever a damaged header says.
inline constexpr uint32_t kMaxBlockBytes = 64u << 20;

// Precedes every block's payload.  header_crc lets the reader trust
// stored_len before it reads the payload, so a damaged length is reported as
// corruption, not as a file that was cut off.
struct BlockHeader {
    uint32_t magic;       // kBlockMagic
    uint16_t type;        // BlockType
    uint16_t flags;       // kBlockZstd
    uint32_t stored_len;  // payload bytes in the file
    uint32_t raw_len;     // payload bytes after decompression (= stored_len if not compressed)
    uint32_t count;       // RECORDS: number of records (raw_len = count * record_size);
                          // CPUS: number of runs (raw_len = count * 8)
    uint32_t checksum;    // CRC32C of the stored_len payload bytes
    uint32_t reserved;    // 0
    uint32_t header_crc;  // CRC32C of bytes 0..27 of this header (all fields above)
};
static_assert(sizeof(BlockHeader) == 32);
static_assert(offsetof(BlockHeader, header_crc) == 28);

// A CPUS block's payload is an array of these, covering the records of the
// RECORDS block that follows it, in order: the first `count` records were
// recorded on `cpu`, the next run's on its cpu, and so on.  The counts add up
// to the RECORDS block's count.  Records carry no CPU of their own (struct
// nvmetrace_rec is the module's ABI); the recorder knows which per-CPU ring
// it drained each from.  Runs, not one CPU per record: a busy CPU's records
// come in long stretches even after merging the rings in time order.
struct CpuRun {
    uint32_t cpu;    // kCpuUnknown: records of no known CPU
    uint32_t count;  // records in the run

    bool operator==(const CpuRun&) const = default;
};
static_assert(sizeof(CpuRun) == 8);

// The CPU of records whose CPU is not known: RecordingWriter::append()
// without one, and (in a CPUS block) such records among known ones.
inline constexpr uint32_t kCpuUnknown = 0xffffffffu;

// Adds r to runs, merged into the last run when it is of the same CPU; a run
// of no records adds nothing.
inline void add_cpu_run(std::vector<CpuRun>& runs, CpuRun r) {
    if (r.count == 0)
        return;
    if (!runs.empty() && runs.back().cpu == r.cpu)
        runs.back().count += r.count;
    else
        runs.push_back(r);
}

// Walks runs alongside the records they cover: next() is the CPU of the
// next record (kCpuUnknown past the runs' end, or with no runs), take(n, fn)
// hands fn the next n records' runs, split where n ends.
class CpuRunCursor {
public:
    explicit CpuRunCursor(std::span<const CpuRun> runs) : runs_(runs) {}
    uint32_t next() {
        skip_spent();
        if (i_ == runs_.size())
            return kCpuUnknown;
        used_++;
        return runs_[i_].cpu;
    }
    template <class Fn>
    void take(size_t n, Fn&& fn) {
        while (n > 0) {
            skip_spent();
            if (i_ == runs_.size()) {
                fn(CpuRun{kCpuUnknown, static_cast<uint32_t>(n)});
                return;
            }
            const auto k = static_cast<uint32_t>(std::min<size_t>(n, runs_[i_].count - used_));
            fn(CpuRun{runs_[i_].cpu, k});
            used_ += k;
            n -= k;
        }
    }

private:
    void skip_spent() {
        while (i_ < runs_.size() && used_ == runs_[i_].count) {
            i_++;
            used_ = 0;
        }
    }
    std::span<const CpuRun> runs_;
    size_t i_ = 0;
    uint32_t used_ = 0;
};

// CRC32C (Castagnoli, reflected polynomial 0x82f63b78), as in iSCSI, ext4
// and NVMe/TCP data digests.  Pass the previous result as `crc` to continue.
[[nodiscard]] uint32_t crc32c(std::span<const std::byte> data, uint32_t crc = 0);

// ------------------------------------------------------------------ META

// One field of struct nvmetrace_rec, so a reader without our headers can
// decode the records.  type: "u8", "u16", "u32" or "u64" (little-endian).
struct RecordField {
    std::string name;
    uint32_t offset = 0;
    uint32_t size = 0;
    std::string type;

    bool operator==(const RecordField&) const = default;
};

// The layout of struct nvmetrace_rec in this build.
[[nodiscard]] const std::vector<RecordField>& record_schema();

// enum nvmetrace_event as numbers and names ("bio_queue", "nvmet_exec", ...).
[[nodiscard]] const std::map<uint16_t, std::string>& default_event_names();

struct RecordingMeta {
    uint32_t format_version = kRecFileVersion;  // the reader sets it from the file
    std::string clock = "CLOCK_MONOTONIC";      // what nvmetrace_rec.ts counts
    std::string hostname;
    std::string kernel_release;  // uname -r
    std::string module_version;
    std::string tool_version;
    std::string role;       // "host" or "target"
    std::string transport;  // "tcp", "rdma" or "unknown"
    uint32_t sample = 1;    // 1-of-N command sampling
    uint64_t seed = 0;      // sampling hash seed
    // The same instant on both clocks, to turn ts into wall-clock time.
    int64_t start_realtime_ns = 0;
    int64_t start_monotonic_ns = 0;
    std::vector<std::string> command_line;
    // Stored as given: one object per traced device (dev, name, lbs, head_dev,
    // ctrl, cntlid, transport, address, subsysnqn, nsid, ...).
    nlohmann::json devices = nlohmann::json::array();
    // DEVICES blocks add to it in the reader: an entry that appeared while
    // recording has "appeared_ns" (CLOCK_MONOTONIC, the records' clock: from
    // then on its commands are recorded), one that went away "gone_ns".
    // Device entries the reader left out, each with why (a null entry, a
    // field out of range): the rest of the recording is still read.
    std::vector<std::string> dropped_devices;
    uint32_t record_size = sizeof(nvmetrace_rec);
    std::vector<RecordField> record_fields = record_schema();
    std::map<uint16_t, std::string> events = default_event_names();
    // Any other top-level keys; the typed fields above win on a name clash.
    nlohmann::json extra = nlohmann::json::object();
};

// One META device entry checked as devices_from_json() reads it (where: its
// place, for the message); throws Error saying what is wrong.
void check_device_entry(const nlohmann::json& d, const std::string& where);

// ------------------------------------------------------------------ DEVICES

// A DEVICES block: what changed at one instant while recording.  added:
// device entries as in META's devices; gone: entries (kind, name, dev, or
// for a target namespace subsysnqn and nsid) of devices no longer there.
struct DeviceChange {
    int64_t monotonic_ns = 0;
    nlohmann::json added = nlohmann::json::array();
    nlohmann::json gone = nlohmann::json::array();
};

[[nodiscard]] nlohmann::json device_change_to_json(const DeviceChange& c);
// Throws nlohmann::json::exception or Error on a malformed document.
[[nodiscard]] DeviceChange device_change_from_json(const nlohmann::json& j);
// The gone entry (a DEVICES block's) that names device entry d: kind, name
// and dev, or for a target namespace kind, subsysnqn and nsid.
[[nodiscard]] nlohmann::json device_gone_entry(const nlohmann::json& d);
// The device entries of a meta that have not gone, by what a gone entry
// names, so that applying the changes of a file is linear in its size.
struct DeviceIndex {
    std::unordered_map<std::string, std::vector<size_t>> open;
    size_t indexed = 0;  // entries of the devices array looked at so far
    void catch_up(const nlohmann::json& devices);
};
// Most device entries a reader keeps (a machine has a few hundred at most).
inline constexpr size_t kMaxDevices = 65536;
// Applies c to meta's devices: the latest entry without "gone_ns" matching
// each gone one gets it, then added entries are appended with "appeared_ns".
// Entries that fail check_device_entry(), or past kMaxDevices, go to
// dropped_devices (where: the block, for the message).  index: kept by the
// caller across the changes of one meta (null: built for this change).
void apply_device_change(RecordingMeta& meta, const DeviceChange& c, const std::string& where,
                         DeviceIndex* index = nullptr);

// A meta with this host's hostname and kernel release and the start time
// pair taken now; the caller fills the rest.
[[nodiscard]] RecordingMeta make_recording_meta();

[[nodiscard]] nlohmann::json meta_to_json(const RecordingMeta& meta);
// Throws nlohmann::json::exception or Error on a malformed document.
[[nodiscard]] RecordingMeta meta_from_json(const nlohmann::json& j);

// ------------------------------------------------------------------ TRAILER

struct RecordingTrailer {
    int64_t end_realtime_ns = 0;                      // RecordingWriter::close() fills 0 with now
    int64_t end_monotonic_ns = 0;                     // likewise
    uint64_t duration_ns = 0;                         // close() fills 0 from the meta's start
    uint64_t records = 0;                             // close() sets it to the records written
    uint64_t lost = 0;                                // records the module dropped (rings full)
    std::vector<uint64_t> lost_per_cpu;               // index = CPU
    nlohmann::json stats = nlohmann::json::object();  // free-form
};

[[nodiscard]] nlohmann::json trailer_to_json(const RecordingTrailer& trailer);
[[nodiscard]] RecordingTrailer trailer_from_json(const nlohmann::json& j);

// ------------------------------------------------------------------ writer

struct RecordingWriterOptions {
    // Records per RECORDS block: append() flushes when this many are buffered.
    // At most kMaxBlockBytes / sizeof(nvmetrace_rec).
    uint32_t block_records = 64 * 1024;
    // If non-zero, append() writes a span of at least this many records as
    // block(s) of its own straight from the caller's memory (after what is
    // buffered), instead of copying it into the buffer: the recorder's
    // drains at high rates.  Blocks are then smaller than block_records.
    uint32_t direct_records = 0;
    // zstd level: 1..19, or negative for zstd's fast levels (less CPU, less
    // shrinking); 0 stores blocks uncompressed.  A block that does not
    // shrink is stored uncompressed whatever the level.
    int zstd_level = 1;
    // If non-zero, append() and flush_if_due() also flush a non-empty buffer
    // this long after the previous flush, bounding what a SIGKILL can lose.
    std::chrono::nanoseconds flush_interval{0};
};

// Writes one recording.  Not thread-safe: one thread owns a writer.
// Every method throws Error (naming the path) on an I/O failure; after one,
// the file is cut back to its last complete block and the writer refuses
// further calls.  Calling methods out of order throws std::logic_error.
class RecordingWriter {
public:
    // Creates or truncates `path` (mode 0644).  Nothing is written until
    // write_meta().
    static RecordingWriter open(const std::string& path, const RecordingWriterOptions& opts = {});

    RecordingWriter(RecordingWriter&& other) noexcept;
    RecordingWriter& operator=(RecordingWriter&& other) noexcept;
    RecordingWriter(const RecordingWriter&) = delete;
    RecordingWriter& operator=(const RecordingWriter&) = delete;
    // Without close(): flushes what is buffered (errors ignored) and leaves
    // the file without a trailer, which readers report as cut off.
    ~RecordingWriter();

    // Writes the file header and the META block (one write).  Once, first.
    void write_meta(const RecordingMeta& meta);
    // Buffers records; writes a block whenever block_records are buffered
    // (or flush_interval has passed).  Their CPU is not known.
    void append(std::span<const nvmetrace_rec> recs) { append(kCpuUnknown, recs); }
    // The same, for records all recorded on `cpu` (kCpuUnknown: not known).
    void append(uint32_t cpu, std::span<const nvmetrace_rec> recs) {
        const CpuRun run{cpu, static_cast<uint32_t>(recs.size())};
        append(recs, recs.empty() ? std::span<const CpuRun>() : std::span(&run, 1));
    }
    // The same, with the CPU of each record as runs (CpuRun) in record
    // order, their counts adding up to recs.size() (std::invalid_argument
    // if not).  A RECORDS block with any record of a known CPU is preceded
    // by a CPUS block; one with none known is not.
    void append(std::span<const nvmetrace_rec> recs, std::span<const CpuRun> runs);
    // Writes a DEVICES block (devices that appeared or went), now: it may
    // come before or after the records of the devices it names, readers
    // apply every DEVICES block before the first record (RecordingReader).
    void write_devices(const DeviceChange& change);
    // Writes the buffered records as one block, if there are any.
    void flush();
    // flush() if flush_interval is set and has passed; returns whether it did.
    bool flush_if_due();
    // flush() then fdatasync(): what is written survives a power loss.
    void sync();
    // flush(), TRAILER block, fdatasync(), close.  records, end times and
    // duration left at 0 are filled in.
    void close(RecordingTrailer trailer = {});

    [[nodiscard]] const std::string& path() const { return path_; }
    [[nodiscard]] uint64_t records_written() const { return records_written_; }  // flushed
    [[nodiscard]] uint64_t bytes_written() const { return bytes_written_; }
    [[nodiscard]] uint64_t blocks_written() const { return blocks_written_; }
    [[nodiscard]] size_t buffered() const { return buf_.size(); }

private:
    RecordingWriter(std::string path, int fd, const RecordingWriterOptions& opts);
    void check_writable(const char* what) const;
    // The header of a block of raw, and in stored the bytes to write: raw
    // itself, or its zstd frame in zbuf_ when compress is asked, the writer
    // compresses, and the frame is smaller.
    BlockHeader seal(BlockType type, std::span<const std::byte> raw, uint32_t count, bool compress,
                     std::span<const std::byte>& stored);
    void write_block(BlockType type, std::span<const std::byte> raw, uint32_t count,
                     std::span<const std::byte> prefix = {});
    // One RECORDS block of recs, after a CPUS block (in the same write) when
    // some of runs' CPUs are known.
    void write_records(std::span<const nvmetrace_rec> recs, std::span<const CpuRun> runs);
    void fail(const std::string& what, int err);

    std::string path_;
    int fd_ = -1;
    RecordingWriterOptions opts_;
    bool meta_written_ = false;
    bool failed_ = false;
    int64_t start_monotonic_ns_ = 0;
    std::vector<nvmetrace_rec> buf_;
    std::vector<CpuRun> runs_;        // the CPUs of buf_'s records
    std::vector<CpuRun> block_runs_;  // scratch: one block's share of the runs
    std::vector<std::byte> cpus_;     // scratch: a CPUS block, header and payload
    std::vector<std::byte> zbuf_;
    void* cctx_ = nullptr;  // ZSTD_CCtx, reused for every block
    std::chrono::steady_clock::time_point last_flush_;
    uint64_t records_written_ = 0;
    uint64_t bytes_written_ = 0;
    uint64_t blocks_written_ = 0;
};

// ------------------------------------------------------------------ reader

// How a recording ended, known once RecordingReader::next() returned false.
enum class RecordingEnd {
    reading,  // next() has not reached the end yet
    clean,    // a trailer: the recorder closed the file
    cut_off,  // no trailer: the file ends at or inside a block
    corrupt,  // a damaged block; nothing after it was read
};

// Reads a recording block by block, never holding more than one block.
// Uses read(), not mmap(), so a file that shrinks under it cannot SIGBUS.
// A file that cannot be a usable recording (unreadable, not a recording, a
// newer format, no readable META) makes open() throw Error.  Past the META,
// problems do not throw: next() yields every good block before them, then
// returns false, and end()/problem() say what happened.
class RecordingReader {
public:
    static RecordingReader open(const std::string& path);

    RecordingReader(RecordingReader&& other) noexcept;
    RecordingReader& operator=(RecordingReader&& other) noexcept;
    RecordingReader(const RecordingReader&) = delete;
    RecordingReader& operator=(const RecordingReader&) = delete;
    ~RecordingReader();

    [[nodiscard]] const std::string& path() const { return path_; }
    [[nodiscard]] const RecordingMeta& meta() const { return meta_; }
    [[nodiscard]] const nlohmann::json& meta_json() const { return meta_json_; }

    // The records of the next RECORDS block, valid until the next call.
    // Returns false at the end of the recording, whatever the reason.
    bool next(std::span<const nvmetrace_rec>& recs);
    // The CPUs of the records next() returned last, as runs covering them in
    // order (counts adding up to their number); empty when not known (a
    // file from before CPUS blocks, or a CPUS block that did not fit, which
    // is a note).  Valid until the next call to next().
    [[nodiscard]] std::span<const CpuRun> cpu_runs() const { return cur_runs_; }

    // Calls fn for every remaining block; returns the records passed.
    template <typename Fn>
    uint64_t for_each(Fn&& fn) {
        uint64_t n = 0;
        std::span<const nvmetrace_rec> recs;
        while (next(recs)) {
            n += recs.size();
            fn(recs);
        }
        return n;
    }

    [[nodiscard]] RecordingEnd end() const { return end_; }
    // One line for the user when end() is cut_off or corrupt, else empty:
    //   <path>: cut off at byte N (block K incomplete: header says X bytes,
    //     Y present); read R records up to byte M; no trailer: ...
    //   <path>: no trailer: recording was cut off (killed?); read R records
    //     up to byte M
    //   <path>: corrupt block K at byte N: <what>; read R records before it
    [[nodiscard]] const std::string& problem() const { return problem_; }
    // Things worth a note that did not stop the reader ("<path>: skipped
    // block K at byte N: unknown type T ...", trailer/record count mismatch,
    // a CPUS block that does not fit its RECORDS block).
    [[nodiscard]] const std::vector<std::string>& notes() const { return notes_; }
    // Set once next() has read the TRAILER block.
    [[nodiscard]] const std::optional<RecordingTrailer>& trailer() const { return trailer_; }

    [[nodiscard]] uint64_t records_read() const { return records_read_; }
    // Offset just past the last complete block read.
    [[nodiscard]] uint64_t good_bytes() const { return offset_; }
    // Blocks read so far, META included (block K is the K-th, from 0).
    [[nodiscard]] uint64_t blocks_read() const { return block_; }

private:
    RecordingReader(std::string path, int fd);

    // Reads the next block's header and stored payload (checked) into hdr and
    // stored_.  false: end of file, cut off or corrupt (end_ says which).
    bool read_block(BlockHeader& hdr);
    // Decompresses or copies stored_ into dst (exactly hdr.raw_len bytes).
    bool decode(const BlockHeader& hdr, std::span<std::byte> dst);
    void stop_cut_off(uint64_t present_end, const std::string& what);
    void stop_corrupt(const std::string& what);
    void read_meta();
    // Applies every DEVICES block of the file to meta_ (headers only for the
    // other blocks); stops quietly where the file does, next() says why.
    void scan_devices();
    // A CPUS block read into pending_runs_, or a note why not.
    void read_cpus(const BlockHeader& hdr);
    // A note that the pending CPUS block was followed by something other
    // than RECORDS (why), and forgets it.
    void drop_pending_cpus(const char* why);

    std::string path_;
    int fd_ = -1;
    RecordingMeta meta_;
    nlohmann::json meta_json_;
    std::optional<RecordingTrailer> trailer_;
    RecordingEnd end_ = RecordingEnd::reading;
    std::string problem_;
    std::vector<std::string> notes_;
    uint64_t offset_ = 0;  // file offset of the next block header
    uint64_t block_ = 0;   // index of the next block
    uint64_t records_read_ = 0;
    std::vector<std::byte> stored_;       // payload as stored
    std::vector<std::byte> json_;         // decoded META/TRAILER payload
    std::vector<nvmetrace_rec> recs_;     // decoded RECORDS payload
    std::vector<CpuRun> pending_runs_;    // a CPUS block's, for the next block
    std::optional<uint64_t> pending_at_;  // where that CPUS block is (a note's offset)
    uint64_t pending_block_ = 0;          // its index
    std::vector<CpuRun> cur_runs_;        // recs_' CPUs; empty: not known
    // Blocks of a type this build does not know, per type: one note each
    // (its index in notes_), however many there are.
    struct Skipped {
        size_t note = 0;
        uint64_t blocks = 0;
        uint64_t first_block = 0;
        uint64_t first_offset = 0;
    };
    std::map<uint16_t, Skipped> skipped_;
    void* dctx_ = nullptr;  // ZSTD_DCtx
};

}  // namespace nvmetrace
