#include "spdk/ring_follower.h"

#include "util/error.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>

namespace nvmetrace::spdk {

RingFollower::RingFollower(const std::string& path, bool from_oldest) : path_(path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw errno_error(fmt::format("cannot open the SPDK trace file {}", path), errno);
    struct stat st {};
    if (fstat(fd, &st) < 0 || st.st_size <= 0) {
        const int err = errno ? errno : EINVAL;
        close(fd);
        throw errno_error(fmt::format("{}: empty or unreadable", path), err);
    }
    size_ = static_cast<size_t>(st.st_size);
    void* m = mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    close(fd);
    if (m == MAP_FAILED)
        throw errno_error(fmt::format("cannot map the SPDK trace file {}", path), err);
    map_ = static_cast<const uint8_t*>(m);
    try {
        layout_ = TraceFile::parse({map_, size_}, path);
    } catch (...) {
        munmap(const_cast<uint8_t*>(map_), size_);
        throw;
    }
    for (uint32_t c = 0; c < layout_.lcores.size(); c++) {
        const uint64_t w = write_index(c), n = layout_.lcores[c].num_entries;
        next_.push_back(!from_oldest ? w : w > n ? w - n : 0);
    }
}

RingFollower::~RingFollower() {
    if (map_)
        munmap(const_cast<uint8_t*>(map_), size_);
}

uint64_t RingFollower::write_index(uint32_t core) const {
    // SPDK publishes an entry by advancing this index after a write barrier
    const auto* p = reinterpret_cast<const uint64_t*>(map_ + layout_.lcores[core].write_index_at());
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

std::vector<RingFollower::Entry> RingFollower::poll() {
    std::vector<Entry> out;
    for (uint32_t c = 0; c < layout_.lcores.size(); c++) {
        const Lcore& core = layout_.lcores[c];
        const uint64_t n = core.num_entries;
        uint64_t from = next_[c];
        const uint64_t to = write_index(c);
        if (to < from) {  // SPDK restarted the ring (a new app on the same file)
            from = to > n ? to - n : 0;
        } else if (to - from > n) {
            lost_ += to - n - from;
            from = to - n;
        }
        raw_.resize((to - from) * kEntryBytes);
        for (uint64_t i = from; i < to; i++)
            std::memcpy(raw_.data() + (i - from) * kEntryBytes, map_ + core.entry_at(i),
                        kEntryBytes);
        // entries SPDK wrote over while they were copied are not what was copied
        const uint64_t after = write_index(c);
        uint64_t skip = 0;
        if (after > n && after - n > from) {
            skip = std::min(after - n - from, to - from);
            lost_ += skip;
        }
        size_t consumed = 0;
        const std::span<const uint8_t> fresh(raw_.data() + skip * kEntryBytes,
                                             raw_.size() - skip * kEntryBytes);
        for (TraceEntry& e : layout_.decode(fresh, true, &consumed))
            out.push_back({c, std::move(e)});
        next_[c] = from + skip + consumed;
    }
    return out;
}

}  // namespace nvmetrace::spdk
