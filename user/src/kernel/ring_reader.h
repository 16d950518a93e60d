// Consumer side of the per-CPU record rings mapped from /dev/nvmetrace.
//
// The protocol is kmod/ring_core.h's (see Documentation/ring.md); this class
// only maps the rings, checks that each control page describes a ring this
// build understands, and drains them with nvmetrace_ring_consume().
#pragma once

#include "kernel/record_queue.h"

#include <linux/nvmetrace.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace nvmetrace {

// What the module says about its rings (NVMETRACE_CMD_GET_STATUS).
struct RingGeometry {
    uint32_t nr_rings = 0;  // possible CPUs (nr_cpu_ids); ring i is CPU i's
    uint32_t nr_recs = 0;   // records per ring, a power of two
    uint64_t map_size = 0;  // bytes per ring mapping; ring i is at offset i * map_size
    uint32_t rec_size = 0;  // sizeof(struct nvmetrace_rec) in the module
};

// Throws Error naming the first field of `geo` this reader cannot work with.
void check_ring_geometry(const RingGeometry& geo);

// Throws Error("ring <cpu>: <field> ...") when the control page of ring `cpu`
// is not a ring this reader understands, or disagrees with `geo`.  Reads only
// line 0, which the module writes once before the ring can be mapped.
void check_ring_ctrl(const nvmetrace_ring_ctrl& ctrl, uint32_t cpu, const RingGeometry& geo);

// Counters of one ring, as last seen by the reader.
struct RingStats {
    uint32_t cpu = 0;
    uint64_t head = 0;  // records committed by the module
    uint64_t tail = 0;  // records consumed by this reader
    uint64_t lost = 0;  // records dropped because the ring was full
    // The drop run no GAP marker covers yet (gap_recs 0: none); stable only
    // once nothing records (after STOP).
    uint64_t gap_recs = 0;
    uint64_t gap_first = 0;
    uint64_t gap_last = 0;
};

// The GAP marker the module would have written for the open run of `st`
// (st.gap_recs != 0), to close a recording whose last run has none.
[[nodiscard]] nvmetrace_rec open_gap_marker(const RingStats& st);

// Owns one shared read-write mapping per ring (the reader writes tail).
// Not thread-safe: one RingReader is the single consumer of its rings, and
// there must be only one per module at a time.
class RingReader {
public:
    // Records of one ring, in order; valid until the sink returns.
    using Sink = std::function<void(uint32_t cpu, std::span<const nvmetrace_rec> recs)>;

    // Maps every ring of `fd` (normally /dev/nvmetrace, O_RDWR) and checks
    // each control page.  The mappings outlive fd; the caller keeps ownership.
    RingReader(int fd, const RingGeometry& geo);
    // Opens `path` and maps it as above; errors name the path.
    static RingReader open(const std::string& path, const RingGeometry& geo);

    RingReader(RingReader&& other) noexcept;
    RingReader& operator=(RingReader&& other) noexcept;
    RingReader(const RingReader&) = delete;
    RingReader& operator=(const RingReader&) = delete;
    ~RingReader();

    // Copies out what each ring holds now (at most one ring's worth per ring,
    // so a busy CPU cannot starve the others), passes it to `sink` in batches
    // and frees the slots.  Returns the number of records drained.  Throws
    // Error if a control page no longer makes sense (head behind tail or more
    // than a ring ahead of it); that ring's tail is left untouched.
    uint64_t drain(const Sink& sink);
    // The same, but each ring's records are copied straight to the back of
    // the queue `queue_for(cpu)` returns (no copy in between): the
    // recorder's path.
    using QueueFor = std::function<RecordQueue&(uint32_t cpu)>;
    uint64_t drain_into(const QueueFor& queue_for);

    [[nodiscard]] std::vector<RingStats> stats() const;
    [[nodiscard]] uint64_t lost() const;  // sum over all rings
    [[nodiscard]] const RingGeometry& geometry() const { return geo_; }

private:
    struct Ring {
        void* map = nullptr;
        nvmetrace_ring_ctrl* ctrl = nullptr;
        const nvmetrace_rec* data = nullptr;
    };

    void unmap_all() noexcept;
    [[noreturn]] void throw_corrupt(uint32_t cpu) const;

    RingGeometry geo_;
    std::vector<Ring> rings_;
    std::vector<nvmetrace_rec> buf_;
};

}  // namespace nvmetrace
