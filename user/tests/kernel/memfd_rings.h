// memfd_rings.h — the module's per-CPU record rings in a memfd, laid out
// like /dev/nvmetrace's mmap (ring i at offset i * map_size: a control page,
// then the records), each written through ring_core.h's own producer, so a
// RingReader on fd() takes its real mmap path.  For tests and benchmarks.
#pragma once

#include "kernel/ring_barrier.h"
#include "kernel/ring_reader.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace nvmetrace {

class MemfdRings {
public:
    MemfdRings(uint32_t nr_rings, uint32_t nr_recs, const char* name = "nvmetrace_rings") {
        const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
        geo_.nr_rings = nr_rings;
        geo_.nr_recs = nr_recs;
        geo_.rec_size = sizeof(nvmetrace_rec);
        const uint64_t bytes = NVMETRACE_RING_CTRL_SIZE + uint64_t{nr_recs} * sizeof(nvmetrace_rec);
        geo_.map_size = (bytes + page - 1) / page * page;
        fd_ = memfd_create(name, MFD_CLOEXEC);
        if (fd_ < 0)
            throw std::runtime_error(std::string("memfd_create: ") + strerror(errno));
        if (ftruncate(fd_, static_cast<off_t>(geo_.map_size * nr_rings)) != 0)
            throw std::runtime_error(std::string("ftruncate: ") + strerror(errno));
        void* map =
            mmap(nullptr, geo_.map_size * nr_rings, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        if (map == MAP_FAILED)
            throw std::runtime_error(std::string("mmap: ") + strerror(errno));
        base_ = static_cast<char*>(map);
        prods_.resize(nr_rings);
        for (uint32_t cpu = 0; cpu < nr_rings; cpu++) {
            char* ring = base_ + cpu * geo_.map_size;
            nvmetrace_ring_init(&prods_[cpu], reinterpret_cast<nvmetrace_ring_ctrl*>(ring),
                                reinterpret_cast<nvmetrace_rec*>(ring + NVMETRACE_RING_CTRL_SIZE),
                                nr_recs, cpu, geo_.map_size);
        }
    }
    ~MemfdRings() {
        munmap(base_, geo_.map_size * geo_.nr_rings);
        close(fd_);
    }
    MemfdRings(const MemfdRings&) = delete;
    MemfdRings& operator=(const MemfdRings&) = delete;

    // The module's side: commits r to CPU cpu's ring; false if it is full.
    bool produce(uint32_t cpu, const nvmetrace_rec& r) {
        nvmetrace_rec* slot = nvmetrace_ring_reserve(&prods_[cpu]);
        if (!slot)
            return false;
        *slot = r;
        nvmetrace_ring_commit(&prods_[cpu], slot);
        return true;
    }
    nvmetrace_ring_ctrl* ctrl(uint32_t cpu) {
        return reinterpret_cast<nvmetrace_ring_ctrl*>(base_ + cpu * geo_.map_size);
    }
    int fd() const { return fd_; }
    const RingGeometry& geo() const { return geo_; }

private:
    RingGeometry geo_;
    int fd_ = -1;
    char* base_ = nullptr;
    std::vector<nvmetrace_ring_prod> prods_;
};

}  // namespace nvmetrace
