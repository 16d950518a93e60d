// SPDK's trace file: the shared-memory ring an SPDK application writes when it
// is started with tracepoint groups enabled (-e), /dev/shm/<app>_trace.<id> or
// <app>_trace.pid<pid>.  nvmetrace reads it to time SPDK hosts and targets
// without changing SPDK: every SPDK build has these tracepoints.
//
// The layout (include/spdk/trace.h of SPDK v26.05): a header of
// section offsets; a main section (TSC rate); a mask of enabled tracepoints per
// group; the tracepoint descriptions (name, arguments) indexed by id; and per
// core a history: a tracepoint hit counter per id and a ring of 32-byte entries
// whose write index only grows.  An entry whose arguments do not fit in its
// 8 bytes continues in the entries after it (tpoint id kMaxTpoints).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nvmetrace::spdk {

inline constexpr uint16_t kMaxGroups = 20;
inline constexpr uint16_t kMaxTpoints = kMaxGroups * 64;  // also the continuation mark
inline constexpr size_t kEntryBytes = 32;                 // one ring entry

struct TraceArg {
    std::string name;
    uint8_t type = 0;  // 0 int, 1 pointer, 2 string
    uint8_t size = 0;
};

struct Tpoint {
    uint16_t id = 0;
    std::string name;
    uint8_t owner_type = 0;
    uint8_t object_type = 0;
    bool new_object = false;
    std::vector<TraceArg> args;
    uint16_t group() const { return id / 64; }
    // The position of the integer or pointer argument `name`; throws Error
    // when there is none (not the layout of SPDK v26.05).
    size_t arg(std::string_view name) const;
};

struct Lcore {
    uint32_t slot = 0;  // index in the lcore offsets section
    int32_t lcore = 0;
    std::string thread;
    uint64_t num_entries = 0;
    uint64_t next_entry = 0;  // entries written so far (the ring keeps the last num_entries)
    uint64_t offset = 0;      // of the history in the file

    // Where things are in the file: the write index, tracepoint id's hit
    // counter, and ring entry i (the write index counts every entry ever
    // written; the ring keeps the last num_entries).
    uint64_t write_index_at() const { return offset + 40; }
    uint64_t counter_at(uint16_t id) const { return offset + 48 + 8 * uint64_t{id}; }
    uint64_t entry_at(uint64_t i) const {
        return counter_at(kMaxTpoints) + (i & (num_entries - 1)) * kEntryBytes;
    }
};

struct TraceEntry {
    uint64_t tsc = 0;
    uint16_t tpoint_id = 0;
    uint16_t owner_id = 0;
    uint32_t size = 0;
    uint64_t object_id = 0;
    std::vector<uint64_t> args;  // integer and pointer arguments; 0 for a string
};

class TraceFile {
public:
    // Checks every offset and count against the bytes; throws Error naming
    // `what` (the file) and what is wrong.
    static TraceFile parse(std::span<const uint8_t> bytes, const std::string& what);
    // Reads the file whole (a snapshot of a live ring).
    static TraceFile read(const std::string& path);

    uint64_t tsc_rate = 0;
    uint64_t clear_tsc = 0;
    std::vector<uint64_t> group_mask;  // bit t of group g: tracepoint g*64+t is enabled
    std::vector<Tpoint> tpoints;       // the registered ones, by id
    std::vector<Lcore> lcores;         // the cores and threads that have a history

    // Trace owners (a target's TCP queue pairs: "host:port nqn listener qid:N"):
    // where their array is, how many, and each one's description size.
    uint64_t owners_at = 0;
    uint16_t num_owners = 0;
    uint16_t owner_description_size = 0;
    // Owner id's description read from `live` (the file as mapped now: SPDK
    // registers owners and appends to their descriptions as it runs); "" for
    // an id out of range.
    std::string owner(std::span<const uint8_t> live, uint16_t id) const;

    const Tpoint* find(std::string_view name) const;
    bool enabled(uint16_t id) const;
    // Hits of tracepoint id on every core so far (the histories' counters).
    uint64_t hits(uint16_t id) const;
    // The entries of one core still in its ring, oldest first, continuation
    // entries folded into the entry they continue.  Entries from before
    // clear_tsc are left out, as SPDK's own reader does.
    std::vector<TraceEntry> entries(const Lcore& core) const;
    // Decodes raw ring entries (32 bytes each, in write order).  With
    // more_may_come, an entry whose continuation is not there yet ends the
    // decoding and is not consumed; otherwise it is dropped.  *consumed (if
    // not null) gets the raw entries used.
    std::vector<TraceEntry> decode(std::span<const uint8_t> raw, bool more_may_come,
                                   size_t* consumed) const;

private:
    std::vector<uint8_t> bytes_;
    std::string what_;
    std::vector<std::optional<size_t>> by_id_;  // index into tpoints
};

}  // namespace nvmetrace::spdk
