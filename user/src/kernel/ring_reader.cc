#include "kernel/ring_reader.h"

#include "kernel/ring_barrier.h"
#include "util/error.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <utility>

#include <fmt/format.h>

namespace nvmetrace {

namespace {

// Records copied out per nvmetrace_ring_consume() call.
constexpr uint32_t kBatch = 4096;

// The oldest ring layout this reader can read is its own version.
constexpr uint32_t kReaderRingVersion = NVMETRACE_RING_VERSION;

}  // namespace

void check_ring_geometry(const RingGeometry& geo) {
    const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

    if (geo.nr_rings == 0)
        throw Error("module reports no rings");
    if (geo.rec_size != sizeof(nvmetrace_rec))
        throw Error(
            fmt::format("module records are {} bytes, this nvmetrace reads {}: "
                        "module and tool versions do not match",
                        geo.rec_size, sizeof(nvmetrace_rec)));
    if (!std::has_single_bit(geo.nr_recs))
        throw Error(
            fmt::format("module reports {} records per ring, not a power of two", geo.nr_recs));
    if (geo.map_size % page != 0)
        throw Error(
            fmt::format("module reports a ring mapping of {} bytes, not a multiple "
                        "of the page size {}",
                        geo.map_size, page));
    if (geo.map_size < NVMETRACE_RING_CTRL_SIZE + uint64_t{geo.nr_recs} * geo.rec_size)
        throw Error(
            fmt::format("module reports a ring mapping of {} bytes, too small for "
                        "{} records of {} bytes",
                        geo.map_size, geo.nr_recs, geo.rec_size));
}

void check_ring_ctrl(const nvmetrace_ring_ctrl& ctrl, uint32_t cpu, const RingGeometry& geo) {
    auto fail = [cpu](const std::string& what) {
        throw Error(fmt::format("ring {}: {}", cpu, what));
    };

    if (ctrl.magic != NVMETRACE_RING_MAGIC)
        fail(fmt::format("bad magic {:#010x} (expected {:#010x}): not an nvmetrace ring",
                         ctrl.magic, NVMETRACE_RING_MAGIC));
    if (ctrl.compat_version > kReaderRingVersion)
        fail(
            fmt::format("ring layout version {} needs a reader of version {} or later; "
                        "this nvmetrace reads version {}: update the tool",
                        ctrl.version, ctrl.compat_version, kReaderRingVersion));
    if (ctrl.size < NVMETRACE_RING_CTRL_SIZE)
        fail(fmt::format("control page size {} is smaller than {}", ctrl.size,
                         NVMETRACE_RING_CTRL_SIZE));
    if (ctrl.rec_size != sizeof(nvmetrace_rec))
        fail(fmt::format("record size {} (expected {})", ctrl.rec_size, sizeof(nvmetrace_rec)));
    if (ctrl.nr_recs != geo.nr_recs)
        fail(fmt::format("nr_recs {} (the status query said {})", ctrl.nr_recs, geo.nr_recs));
    if (ctrl.cpu != cpu)
        fail(fmt::format("belongs to cpu {}", ctrl.cpu));
    if (ctrl.map_size != geo.map_size)
        fail(fmt::format("map_size {} (the status query said {})", ctrl.map_size, geo.map_size));
    if (ctrl.data_offset < ctrl.size || ctrl.data_offset % alignof(nvmetrace_rec) != 0 ||
        ctrl.data_offset > geo.map_size ||
        geo.map_size - ctrl.data_offset < uint64_t{geo.nr_recs} * sizeof(nvmetrace_rec))
        fail(fmt::format("data_offset {} does not fit {} records in a {} byte mapping",
                         ctrl.data_offset, geo.nr_recs, geo.map_size));
}

RingReader::RingReader(int fd, const RingGeometry& geo) : geo_(geo) {
    check_ring_geometry(geo_);
    rings_.reserve(geo_.nr_rings);
    try {
        for (uint32_t cpu = 0; cpu < geo_.nr_rings; cpu++) {
            void* map = mmap(nullptr, geo_.map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                             static_cast<off_t>(cpu * geo_.map_size));
            if (map == MAP_FAILED)
                throw errno_error(fmt::format("ring {}: mmap {} bytes at offset {}", cpu,
                                              geo_.map_size, cpu * geo_.map_size),
                                  errno);
            auto* ctrl = static_cast<nvmetrace_ring_ctrl*>(map);
            rings_.push_back(Ring{map, ctrl, nullptr});
            check_ring_ctrl(*ctrl, cpu, geo_);
            rings_.back().data = reinterpret_cast<const nvmetrace_rec*>(
                static_cast<const char*>(map) + ctrl->data_offset);
        }
    } catch (...) {
        unmap_all();
        throw;
    }
    buf_.resize(std::min(geo_.nr_recs, kBatch));
}

RingReader RingReader::open(const std::string& path, const RingGeometry& geo) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == EACCES || err == EPERM)
            throw Error(fmt::format("{}: permission denied: need root", path));
        if (err == ENOENT || err == ENODEV || err == ENXIO)
            throw errno_error(fmt::format("{} (is the nvmetrace module loaded?)", path), err);
        throw errno_error(path, err);
    }
    try {
        RingReader reader(fd, geo);
        ::close(fd);
        return reader;
    } catch (...) {
        ::close(fd);
        throw;
    }
}

RingReader::RingReader(RingReader&& other) noexcept
    : geo_(other.geo_), rings_(std::move(other.rings_)), buf_(std::move(other.buf_)) {
    other.rings_.clear();
}

RingReader& RingReader::operator=(RingReader&& other) noexcept {
    if (this != &other) {
        unmap_all();
        geo_ = other.geo_;
        rings_ = std::move(other.rings_);
        buf_ = std::move(other.buf_);
        other.rings_.clear();
    }
    return *this;
}

RingReader::~RingReader() {
    unmap_all();
}

void RingReader::unmap_all() noexcept {
    for (const Ring& ring : rings_)
        munmap(ring.map, geo_.map_size);
    rings_.clear();
}

void RingReader::throw_corrupt(uint32_t cpu) const {
    const nvmetrace_ring_ctrl* ctrl = rings_[cpu].ctrl;
    uint64_t head = NVMETRACE_READ_ONCE(ctrl->head);
    uint64_t tail = NVMETRACE_READ_ONCE(ctrl->tail);
    throw Error(
        fmt::format("ring {}: corrupted control page: head {} tail {} with {} records per ring",
                    cpu, head, tail, geo_.nr_recs));
}

uint64_t RingReader::drain(const Sink& sink) {
    uint64_t total = 0;
    const auto max = static_cast<uint32_t>(buf_.size());

    for (uint32_t cpu = 0; cpu < rings_.size(); cpu++) {
        Ring& ring = rings_[cpu];
        uint64_t from_ring = 0;

        while (from_ring < geo_.nr_recs) {
            long n = nvmetrace_ring_consume(ring.ctrl, ring.data, geo_.nr_recs, buf_.data(), max);
            if (n < 0)
                throw_corrupt(cpu);
            if (n == 0)
                break;
            sink(cpu, std::span<const nvmetrace_rec>(buf_.data(), static_cast<size_t>(n)));
            from_ring += static_cast<uint64_t>(n);
            if (static_cast<uint32_t>(n) < max)
                break;
        }
        total += from_ring;
    }
    return total;
}

uint64_t RingReader::drain_into(const QueueFor& queue_for) {
    uint64_t total = 0;
    for (uint32_t cpu = 0; cpu < rings_.size(); cpu++) {
        Ring& ring = rings_[cpu];
        // nothing committed: leave the queue alone
        if (NVMETRACE_LOAD_ACQUIRE(&ring.ctrl->head) == NVMETRACE_READ_ONCE(ring.ctrl->tail))
            continue;
        RecordQueue& q = queue_for(cpu);
        uint64_t from_ring = 0;
        while (from_ring < geo_.nr_recs) {
            const uint64_t left = geo_.nr_recs - from_ring;
            std::span<nvmetrace_rec> room = q.space(std::min<uint64_t>(left, kBatch));
            const auto max = static_cast<uint32_t>(std::min<uint64_t>(room.size(), left));
            long n = nvmetrace_ring_consume(ring.ctrl, ring.data, geo_.nr_recs, room.data(), max);
            if (n < 0)
                throw_corrupt(cpu);
            q.commit(static_cast<size_t>(n));
            from_ring += static_cast<uint64_t>(n);
            if (static_cast<uint32_t>(n) < max)
                break;
        }
        total += from_ring;
    }
    return total;
}

std::vector<RingStats> RingReader::stats() const {
    std::vector<RingStats> out;
    out.reserve(rings_.size());
    for (uint32_t cpu = 0; cpu < rings_.size(); cpu++) {
        const nvmetrace_ring_ctrl* ctrl = rings_[cpu].ctrl;
        out.push_back(RingStats{
            .cpu = cpu,
            .head = NVMETRACE_LOAD_ACQUIRE(&ctrl->head),
            .tail = NVMETRACE_READ_ONCE(ctrl->tail),
            .lost = NVMETRACE_READ_ONCE(ctrl->lost),
            .gap_recs = NVMETRACE_READ_ONCE(ctrl->gap_recs),
            .gap_first = NVMETRACE_READ_ONCE(ctrl->gap_first),
            .gap_last = NVMETRACE_READ_ONCE(ctrl->gap_last),
        });
    }
    return out;
}

nvmetrace_rec open_gap_marker(const RingStats& st) {
    nvmetrace_rec m{};
    m.ts = st.gap_last;
    m.lba = st.gap_first;
    m.aux = st.gap_recs;
    m.dev = st.cpu;
    m.event = NVMETRACE_EV_GAP;
    return m;
}

uint64_t RingReader::lost() const {
    uint64_t sum = 0;
    for (const RingStats& s : stats())
        sum += s.lost;
    return sum;
}

}  // namespace nvmetrace
