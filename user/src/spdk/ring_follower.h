// Following a live SPDK trace ring: the entries written since the last look,
// read from the shared-memory file as SPDK writes it, with the entries SPDK
// overwrote before they were read counted.  What a recorder of an SPDK side
// reads every few milliseconds.
#pragma once

#include "spdk/trace_file.h"

#include <cstdint>
#include <string>
#include <vector>

namespace nvmetrace::spdk {

class RingFollower {
public:
    // Maps `path` read-only and reads its layout (TraceFile::parse); throws
    // Error.  From now on: entries already in the ring are not returned,
    // unless from_oldest (an app started by the recorder: its first entries
    // may have come before the file could be opened).
    explicit RingFollower(const std::string& path, bool from_oldest = false);
    ~RingFollower();
    RingFollower(const RingFollower&) = delete;
    RingFollower& operator=(const RingFollower&) = delete;

    struct Entry {
        uint32_t core;  // index in layout().lcores
        TraceEntry entry;
    };
    // The whole entries written since the last poll, each core's oldest first.
    // An entry whose continuation is still being written is left for the
    // next poll.
    std::vector<Entry> poll();
    // Ring entries SPDK overwrote before a poll read them (an entry and its
    // continuations count one each): the ring is too small for the poll
    // interval.
    uint64_t lost() const { return lost_; }
    const TraceFile& layout() const { return layout_; }
    const std::string& path() const { return path_; }
    // A trace owner's description as it is now (TraceFile::owner).
    std::string owner(uint16_t id) const { return layout_.owner({map_, size_}, id); }

private:
    uint64_t write_index(uint32_t core) const;

    std::string path_;
    const uint8_t* map_ = nullptr;
    size_t size_ = 0;
    TraceFile layout_;
    std::vector<uint64_t> next_;  // per core: the first entry not read yet
    std::vector<uint8_t> raw_;
    uint64_t lost_ = 0;
};

}  // namespace nvmetrace::spdk
