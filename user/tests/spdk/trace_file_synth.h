// An SPDK trace file written in memory, laid out as SPDK v26.05 lays out its
// shared-memory ring (include/spdk/trace.h): for the reader's tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace nvmetrace::spdk::test {

// Two of SPDK's tracepoints, as v26.05 registers them: the ids and arguments the
// tests write entries of.
inline constexpr uint16_t kTcpNew = 5 * 64 + 0;      // nvmf_tcp's first tracepoint
inline constexpr uint16_t kTcpSubmit = 13 * 64 + 0;  // nvme_tcp's

class SynthTrace {
public:
    static constexpr size_t kHeaderSize = 72;
    static constexpr uint16_t kGroups = 20;
    static constexpr uint16_t kTpoints = kGroups * 64;
    static constexpr size_t kSectionHead = 128;
    static constexpr size_t kTpointSize = 190;
    static constexpr size_t kHistoryHead = 48;
    static constexpr size_t kEntry = 32;

    struct Arg {
        std::string name;
        uint8_t type;
        uint8_t size;
    };

    SynthTrace(uint16_t cores, uint64_t entries) : entries_(entries) {
        // header, then the sections in SPDK's order: main, owner, mask, owner types, objects,
        // tracepoints, lcore offsets, then each core's history
        size_t off = kHeaderSize;
        auto place = [&](int section, size_t size) {
            offsets_[section] = off;
            off += size;
        };
        place(0, 512);
        place(1, kSectionHead);
        place(2, kSectionHead + kGroups * 8);
        place(3, kSectionHead);
        place(4, kSectionHead);
        place(5, kSectionHead + kTpoints * kTpointSize);
        place(6, kSectionHead + cores * 8);
        for (uint16_t c = 0; c < cores; c++) {
            hist_.push_back(off);
            off += kHistoryHead + kTpoints * 8 + entries * kEntry;
        }
        b_.assign(off, 0);
        put<uint64_t>(0, off);
        put<uint16_t>(8, 7);
        for (int s = 0; s < 7; s++)
            put<uint64_t>(16 + 8 * s, offsets_[s]);
        put<uint64_t>(offsets_[0], 2'000'000'000);
        put<uint16_t>(offsets_[2], kGroups);
        put<uint16_t>(offsets_[5], kTpoints);
        put<uint16_t>(offsets_[6], cores);
        for (uint16_t c = 0; c < cores; c++) {
            const size_t h = hist_[c];
            put<uint64_t>(offsets_[6] + kSectionHead + 8 * c, h);
            put<int32_t>(h, c);
            const std::string name = "reactor_" + std::to_string(c);
            std::memcpy(&b_[h + 4], name.data(), name.size());
            put<uint64_t>(h + 24, entries);
            put<uint64_t>(h + 32, kTpoints);
        }
    }

    void tpoint(uint16_t id, const std::string& name, const std::vector<Arg>& args) {
        const size_t at = tp(id);
        std::memcpy(&b_[at], name.data(), name.size());
        put<uint16_t>(at + 24, id);
        put<uint8_t>(at + 29, static_cast<uint8_t>(args.size()));
        for (size_t a = 0; a < args.size(); a++) {
            std::memcpy(&b_[at + 30 + 16 * a], args[a].name.data(), args[a].name.size());
            put<uint8_t>(at + 30 + 16 * a + 14, args[a].type);
            put<uint8_t>(at + 30 + 16 * a + 15, args[a].size);
        }
        args_[id] = args;
    }
    // TCP_REQ_NEW (one argument) and NVME_TCP_SUBMIT: 8 + 6 * 4 argument bytes, the
    // entry's own 8, then 22 in the next entry and 2 in a third
    void tcp_tpoints() {
        tpoint(kTcpNew, "TCP_REQ_NEW", {{"qd", 0, 4}});
        tpoint(kTcpSubmit, "NVME_TCP_SUBMIT",
               {{"ctx", 1, 8},
                {"cid", 0, 4},
                {"opc", 0, 4},
                {"dw10", 1, 4},
                {"dw11", 1, 4},
                {"dw12", 1, 4},
                {"qd", 0, 4}});
    }
    void enable(uint16_t id) {
        const size_t at = offsets_[2] + kSectionHead + 8 * (id / 64);
        put<uint64_t>(at, get<uint64_t>(at) | (uint64_t{1} << (id % 64)));
    }
    void hit(uint16_t core, uint16_t id, uint64_t n) {
        put<uint64_t>(hist_[core] + kHistoryHead + 8 * id, n);
    }

    // An entry as SPDK writes it: arguments packed after the entry's fields, continuing
    // in entries marked kTpoints, each with 22 bytes after its TSC and mark.
    void record(uint16_t core, uint64_t tsc, uint16_t id, uint64_t object,
                const std::vector<uint64_t>& vals) {
        const size_t h = hist_[core];
        uint64_t next = get<uint64_t>(h + 40);
        auto at = [&](uint64_t i) {
            return h + kHistoryHead + kTpoints * 8 + (i % entries_) * kEntry;
        };
        size_t e = at(next), off = 24;
        std::memset(&b_[e], 0, kEntry);
        put<uint64_t>(e, tsc);
        put<uint16_t>(e + 8, id);
        put<uint64_t>(e + 16, object);
        uint64_t n = 1;
        const std::vector<Arg>& args = args_.at(id);
        for (size_t a = 0; a < args.size(); a++) {
            uint8_t val[8] = {};
            std::memcpy(val, &vals[a], 8);
            for (size_t got = 0; got < args[a].size;) {
                if (off == kEntry) {
                    e = at(next + n++);
                    std::memset(&b_[e], 0, kEntry);
                    put<uint64_t>(e, tsc);
                    put<uint16_t>(e + 8, kTpoints);
                    off = 10;
                }
                const size_t len = std::min(kEntry - off, args[a].size - got);
                std::memcpy(&b_[e + off], val + got, len);
                off += len;
                got += len;
            }
        }
        put<uint64_t>(h + 40, next + n);
    }
    void rewind(uint16_t core, uint64_t n) {
        put<uint64_t>(hist_[core] + 40, get<uint64_t>(hist_[core] + 40) - n);
    }
    void publish(uint16_t core, uint64_t n) {
        put<uint64_t>(hist_[core] + 40, get<uint64_t>(hist_[core] + 40) + n);
    }
    void clear_tsc(uint64_t tsc) { put<uint64_t>(offsets_[0] + 8, tsc); }
    void tsc_rate(uint64_t r) { put<uint64_t>(offsets_[0], r); }
    void ring_size(uint16_t core, uint64_t n) { put<uint64_t>(hist_[core] + 24, n); }
    void arg_size(uint16_t id, size_t arg, uint8_t size) {
        put<uint8_t>(tp(id) + 30 + 16 * arg + 15, size);
    }
    void poke64(size_t off, uint64_t v) { put<uint64_t>(off, v); }

    const std::vector<uint8_t>& bytes() const { return b_; }

private:
    size_t tp(uint16_t id) const { return offsets_[5] + kSectionHead + size_t{id} * kTpointSize; }
    template <typename T>
    void put(size_t off, T v) {
        std::memcpy(&b_[off], &v, sizeof v);
    }
    template <typename T>
    T get(size_t off) const {
        T v;
        std::memcpy(&v, &b_[off], sizeof v);
        return v;
    }

    uint64_t entries_;
    size_t offsets_[7] = {};
    std::vector<size_t> hist_;
    std::vector<uint8_t> b_;
    std::map<uint16_t, std::vector<Arg>> args_;
};

}  // namespace nvmetrace::spdk::test
