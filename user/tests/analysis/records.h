// Records and fixtures shared by the tests of analysis/: host and target
// records as the module writes them, the records of whole commands, and an
// Assembler fed by a test.
#pragma once

#include "analysis/assembler.h"
#include "analysis/components.h"
#include "analysis/device_table.h"
#include "analysis/events.h"

#include <linux/nvmetrace.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace::test {

constexpr uint32_t kNvme0n1 = 259u << 20 | 0;
constexpr uint32_t kNvme1n1 = 259u << 20 | 1;    // multipath head
constexpr uint32_t kNvme1c1n1 = 259u << 20 | 2;  // its path

inline nvmetrace_rec host(uint16_t ev, uint64_t ts, uint16_t tag, uint64_t lba, bool write = false,
                          uint32_t dev = kNvme0n1, uint16_t qid = 1, uint32_t len = 4096,
                          uint64_t aux = 0) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.lba = lba;
    r.aux = aux;
    r.dev = dev;
    r.len = len;
    r.event = ev;
    r.qid = ev == NVMETRACE_EV_BIO_QUEUE ? 0 : qid;
    r.tag = ev == NVMETRACE_EV_BIO_QUEUE ? 0 : tag;
    r.opcode = write ? 0x01 : 0x02;
    r.flags = (write ? NVMETRACE_REC_WRITE : 0) |
              (ev == NVMETRACE_EV_BIO_QUEUE ? 0 : NVMETRACE_REC_HAS_QID);
    return r;
}

inline nvmetrace_rec bio(uint64_t ts, uint64_t lba, uint32_t dev = kNvme0n1, bool write = false) {
    return host(NVMETRACE_EV_BIO_QUEUE, ts, 0, lba, write, dev);
}

inline nvmetrace_rec target(uint16_t ev, uint64_t ts, uint16_t cid, uint64_t lba,
                            uint32_t blocks = 8, uint64_t aux = 0) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.lba = lba;
    r.aux = aux;
    r.len = blocks;
    r.event = ev;
    r.qid = 3;
    r.cid = cid;
    r.cntlid = 1;
    r.opcode = 0x02;
    r.flags = NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID | kRecLenBlocks;
    return r;
}

// All host records of one command, bio at t0, then +1000, +2000, +50000, +500 ns.
inline std::vector<nvmetrace_rec> host_command(uint64_t t0, uint16_t tag, uint64_t lba) {
    return {bio(t0, lba), host(NVMETRACE_EV_NVME_SETUP, t0 + 1000, tag, lba),
            host(NVMETRACE_EV_RQ_ISSUE, t0 + 3000, tag, lba),
            host(NVMETRACE_EV_NVME_COMPLETE, t0 + 53000, tag, lba),
            host(NVMETRACE_EV_RQ_COMPLETE, t0 + 53500, tag, lba)};
}

inline int slot(uint16_t ev) {
    return event_slot(ev);
}

struct Fixture : ::testing::Test {
    DeviceTable devices;
    std::vector<Command> out;
    Assembler assembler{devices, [this](const Command& c) { out.push_back(c); }};

    Fixture() {
        devices.add_disk(kNvme0n1, "nvme0n1", 512);
        devices.add_disk(kNvme1n1, "nvme1n1", 512);
        devices.add_path(kNvme1c1n1, kNvme1n1, "nvme1c1n1");
        devices.add_target_namespace(1, "nvmet nsid 1", 512);
    }
    void feed(const std::vector<nvmetrace_rec>& recs) {
        for (const auto& r : recs)
            assembler.push(r);
    }
};

using AssemblerTest = Fixture;

// The host records of one nvme-tcp command: bio, setup, issue, the
// transport events given as (event, ts offset), completion, block completion.
inline std::vector<nvmetrace_rec> tcp_command(uint64_t t0, uint16_t tag, uint64_t lba, bool write,
                                              std::vector<std::pair<uint16_t, uint64_t>> transport,
                                              uint64_t complete_at) {
    std::vector<nvmetrace_rec> r{bio(t0, lba, kNvme0n1, write),
                                 host(NVMETRACE_EV_NVME_SETUP, t0 + 1000, tag, lba, write),
                                 host(NVMETRACE_EV_RQ_ISSUE, t0 + 2000, tag, lba, write)};
    for (auto [ev, dt] : transport)
        r.push_back(host(ev, t0 + dt, tag, lba, write));
    r.push_back(host(NVMETRACE_EV_NVME_COMPLETE, t0 + complete_at, tag, lba, write));
    r.push_back(host(NVMETRACE_EV_RQ_COMPLETE, t0 + complete_at + 500, tag, lba, write));
    return r;
}

inline std::vector<std::string> names(const Layout& l) {
    std::vector<std::string> n;
    for (const auto& s : l.segments)
        n.push_back(s.name);
    return n;
}

// Sum of a command's segments: must be its end to end.
inline int64_t segment_sum(const Command& c, const Layout& l) {
    int64_t sum = 0;
    for (const auto& s : l.segments) {
        EXPECT_TRUE(c.has(s.from_slot) && c.has(s.to_slot)) << s.name;
        sum += static_cast<int64_t>(c.at(s.to_slot) - c.at(s.from_slot));
    }
    return sum;
}

// (name, duration) rows of a layout, for comparing with the expected table.
using Rows = std::vector<std::pair<std::string, int64_t>>;

}  // namespace nvmetrace::test
