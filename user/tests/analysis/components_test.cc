#include "analysis/components.h"

#include "analysis/assembler.h"
#include "analysis/records.h"

#include <algorithm>
#include <deque>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using namespace test;

// ----------------------------------------------------------------- layouts

TEST(Layout, EveryViewOfTheTableIsAChain) {
    for (View v : {View::host_only, View::target_only, View::joined}) {
        Layout l = make_layout(v, 0, kComponents);
        EXPECT_TRUE(l.complete());
        for (size_t i = 1; i < l.segments.size(); i++)
            EXPECT_EQ(l.segments[i - 1].to_slot, l.segments[i].from_slot);
        EXPECT_EQ(l.segments.front().from_slot, l.first_slot);
        EXPECT_EQ(l.segments.back().to_slot, l.last_slot);
    }
}

TEST(Layout, HostOnlyComponentsAndStages) {
    Layout l = make_layout(View::host_only, 0, kComponents);
    ASSERT_EQ(l.segments.size(), 4u);
    EXPECT_EQ(l.segments[0].name, "host block layer, submission");
    EXPECT_EQ(l.segments[1].name, "host driver, submission");
    EXPECT_EQ(l.segments[2].name, "network and target (not recorded)");
    EXPECT_EQ(l.segments[3].name, "host block layer, completion");
    ASSERT_EQ(l.stages.size(), 3u);
    EXPECT_EQ(l.stages[0].name, "host block layer");
    EXPECT_EQ(l.stages[1].name, "host driver");
    EXPECT_EQ(l.stages[2].name, "network and target (not recorded)");
    EXPECT_TRUE(l.stages[2].not_recorded);
    EXPECT_EQ(l.segments[3].stage, 0u);  // completion counts in the block layer
}

TEST(Layout, TargetOnlyStages) {
    Layout l = make_layout(View::target_only, 0, kComponents);
    ASSERT_EQ(l.stages.size(), 2u);
    EXPECT_EQ(l.stages[0].name, "target driver");
    EXPECT_EQ(l.stages[1].name, "storage");
    ASSERT_EQ(l.segments.size(), 3u);
    EXPECT_EQ(l.segments[1].name, "storage: target block layer and drive");
}

TEST(Layout, MissingBoundaryMergesNeighbours) {
    EventMask missing = EventMask{1} << event_slot(NVMETRACE_EV_NVME_SETUP);
    Layout l = make_layout(View::host_only, missing, kComponents);
    ASSERT_EQ(l.segments.size(), 3u);
    EXPECT_EQ(l.segments[0].name, "host block layer, submission + host driver, submission");
    EXPECT_TRUE(l.segments[0].merged);
    // The block layer and the driver become one stage, completion included.
    ASSERT_EQ(l.stages.size(), 2u);
    EXPECT_EQ(l.stages[0].name, "host block layer + host driver");
    EXPECT_TRUE(l.stages[0].merged);
    EXPECT_EQ(l.segments[2].stage, 0u);
    ASSERT_EQ(l.missing.size(), 1u);
    EXPECT_EQ(l.missing[0], "nvme_setup_cmd");
}

TEST(Layout, BrokenTableIsRefused) {
    static constexpr ComponentDef broken[] = {
        {"a", NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_NVME_SETUP, "host driver", kHost, 0},
        {"b", NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_RQ_COMPLETE, "host driver", kHost, 0},
    };
    EXPECT_THROW(make_layout(View::host_only, 0, broken), std::logic_error);
    static constexpr ComponentDef bad_stage[] = {
        {"a", NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_RQ_COMPLETE, "no such stage", kHost, 0},
    };
    EXPECT_THROW(make_layout(View::host_only, 0, bad_stage), std::logic_error);
}

// For random commands with random gaps and random lost inner records, the
// components and the stages of each command add up to its end to end.
TEST(Layout, ComponentsAndStagesSumToEndToEndForEveryCommand) {
    std::mt19937_64 rng(42);
    const int order[] = {
        event_slot(NVMETRACE_EV_BIO_QUEUE),     event_slot(NVMETRACE_EV_RQ_INSERT),
        event_slot(NVMETRACE_EV_NVME_SETUP),    event_slot(NVMETRACE_EV_RQ_ISSUE),
        event_slot(NVMETRACE_EV_NVME_COMPLETE), event_slot(NVMETRACE_EV_RQ_COMPLETE)};
    for (int i = 0; i < 20'000; i++) {
        Command c;
        uint64_t t = rng() % 1'000'000'000;
        for (size_t k = 0; k < std::size(order); k++) {
            t += rng() % 100'000;
            bool inner = k > 0 && k + 1 < std::size(order);
            if (inner && rng() % 4 == 0)
                continue;  // lost
            c.ts[order[k]] = t;
            c.present |= EventMask{1} << order[k];
        }
        Layout l = make_layout(view_of(c), missing_boundaries(c, kComponents), kComponents);
        int64_t e2e = static_cast<int64_t>(c.at(l.last_slot) - c.at(l.first_slot));
        int64_t seg_sum = 0;
        std::vector<int64_t> stage_sum(l.stages.size());
        for (const auto& s : l.segments) {
            ASSERT_TRUE(c.has(s.from_slot) && c.has(s.to_slot));
            int64_t d = static_cast<int64_t>(c.at(s.to_slot) - c.at(s.from_slot));
            seg_sum += d;
            stage_sum[s.stage] += d;
        }
        int64_t st = 0;
        for (auto v : stage_sum)
            st += v;
        ASSERT_EQ(seg_sum, e2e);
        ASSERT_EQ(st, e2e);
    }
}

// Transport events that are absent (another transport, or a hook that could
// not attach) pick the coarser components; a missing required one still
// merges its neighbours.
TEST(Layout, OptionalEventsNeverMissing) {
    EventMask base = 0;
    for (uint16_t ev : {NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_RQ_ISSUE,
                        NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE})
        base |= EventMask{1} << event_slot(ev);
    Layout plain = layout_for(View::host_only, base, kComponents);
    EXPECT_TRUE(plain.complete());
    EXPECT_EQ(plain.segments.size(), 4u);
    EventMask send = base | EventMask{1} << event_slot(NVMETRACE_EV_TCP_CMD_SEND);
    EventMask no_complete = send & ~(EventMask{1} << event_slot(NVMETRACE_EV_NVME_COMPLETE));
    Layout merged = layout_for(View::host_only, no_complete, kComponents);
    ASSERT_EQ(merged.missing.size(), 1u);
    EXPECT_EQ(merged.missing[0], "nvme_complete_rq");
}

// Every combination of transport events has a path, and its components tile
// the command.
TEST(Layout, EveryTransportShapeHasAPath) {
    const uint16_t optional[] = {NVMETRACE_EV_TCP_CMD_SEND, NVMETRACE_EV_TCP_R2T_RECV,
                                 NVMETRACE_EV_TCP_H2C_SEND, NVMETRACE_EV_TCP_C2H_RECV,
                                 NVMETRACE_EV_TCP_RSP_RECV};
    EventMask base = 0;
    for (uint16_t ev : {NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_RQ_ISSUE,
                        NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE})
        base |= EventMask{1} << event_slot(ev);
    for (uint32_t m = 0; m < 1u << std::size(optional); m++) {
        EventMask present = base;
        for (size_t i = 0; i < std::size(optional); i++)
            if (m >> i & 1u)
                present |= EventMask{1} << event_slot(optional[i]);
        Layout l = layout_for(View::host_only, present, kComponents);
        EXPECT_TRUE(l.complete()) << m;
        for (size_t i = 1; i < l.segments.size(); i++)
            EXPECT_EQ(l.segments[i - 1].to_slot, l.segments[i].from_slot);
    }
}

// SPDK's host joined with nvmet-rdma: the path runs from SPDK's submission through the
// target's receive, its rows and its posted response, to SPDK's completion (not ending at
// the response: the seam from nvmet_rdma_queue_response to SPDK's completion).
TEST(SpdkLayout, HostJoinedWithNvmetRdmaEndsAtItsCompletion) {
    EventMask present = 0;
    for (uint16_t ev :
         {NVMETRACE_EV_SPDK_SUBMIT, NVMETRACE_EV_RDMAT_RECV, NVMETRACE_EV_NVMET_INIT,
          NVMETRACE_EV_NVMET_EXEC, NVMETRACE_EV_NVMET_BIO_DONE, NVMETRACE_EV_NVMET_COMPLETE,
          NVMETRACE_EV_RDMAT_RSP_POST, NVMETRACE_EV_RDMAT_SEND_DONE, NVMETRACE_EV_SPDK_COMPLETE})
        present |= EventMask{1} << slot(ev);
    Layout l = layout_for(View::joined, present, kComponents);
    ASSERT_TRUE(l.complete());
    ASSERT_FALSE(l.segments.empty());
    EXPECT_EQ(l.segments.front().from_slot, slot(NVMETRACE_EV_SPDK_SUBMIT));
    EXPECT_EQ(l.segments.back().to_slot, slot(NVMETRACE_EV_SPDK_COMPLETE));
    for (size_t i = 1; i < l.segments.size(); i++)
        EXPECT_EQ(l.segments[i - 1].to_slot, l.segments[i].from_slot);
    // the capsule's arrival at the target is a boundary: the wire is computed to it
    bool to_recv = false;
    for (const auto& seg : l.segments)
        to_recv = to_recv || seg.to_slot == slot(NVMETRACE_EV_RDMAT_RECV);
    EXPECT_TRUE(to_recv);
}

// With libaio's rows after the block layer, the hop into nvme_complete_rq is still listed
// under the block layer's completion row (as in the seed), not under the reap.
TEST(TcpLayout, HandoffStaysUnderTheBlockLayersCompletion) {
    EventMask present = 0;
    for (uint16_t ev :
         {NVMETRACE_EV_SYSCALL_SUBMIT, NVMETRACE_EV_FILE_SUBMIT, NVMETRACE_EV_BIO_QUEUE,
          NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_TCP_CMD_SEND,
          NVMETRACE_EV_TCP_C2H_RECV, NVMETRACE_EV_TCP_RSP_RECV, NVMETRACE_EV_NVME_COMPLETE,
          NVMETRACE_EV_RQ_COMPLETE, NVMETRACE_EV_AIO_COMPLETE, NVMETRACE_EV_AIO_REAP})
        present |= EventMask{1} << slot(ev);
    for (View v : {View::host_only, View::joined}) {
        Layout l = layout_for(v, present, kComponents);
        auto d = std::find_if(l.details.begin(), l.details.end(), [](const Layout::Detail& x) {
            return x.name == "handoff to nvme_complete_rq";
        });
        ASSERT_NE(d, l.details.end());
        EXPECT_EQ(d->from_slot, slot(NVMETRACE_EV_TCP_RSP_RECV));
        EXPECT_EQ(l.segments.at(d->segment).name, "host block layer, completion");
        EXPECT_EQ(l.segments.back().name, "wake-up and reap (io_getevents)");
    }
}

// A target-only nvmet-tcp write (no host recording): its path starts at the
// command's arrival on the socket and tiles arrival to nvmet_req_complete,
// through the R2T and the H2C data.
TEST(TcpTarget, TargetOnlyWriteStartsAtTheArrival) {
    DeviceTable devices;
    devices.add_target_namespace(1, "nvmet nsid 1", 512);
    std::vector<Command> out;
    Assembler ta(devices, [&](const Command& c) { out.push_back(c); });
    const uint16_t cid = 0x2003;
    const uint64_t lba = 100;
    const std::tuple<uint16_t, uint64_t, uint64_t> evs[] = {
        {NVMETRACE_EV_NVMET_INIT, 10'000, 1},    {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
        {NVMETRACE_EV_TCPT_R2T_SEND, 10'500, 0}, {NVMETRACE_EV_TCPT_H2C_RECV, 20'000, 0},
        {NVMETRACE_EV_NVMET_EXEC, 21'000, 0},    {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
        {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}};
    for (auto [ev, ts, aux] : evs) {
        auto r = target(ev, ts, cid, lba, 8, aux);
        r.opcode = 0x01;
        r.flags |= NVMETRACE_REC_WRITE;
        ta.push(r);
    }
    ta.finish();
    ASSERT_EQ(out.size(), 1u);
    const Command& c = out[0];
    EXPECT_EQ(view_of(c), View::target_only);
    EXPECT_EQ(c.at(slot(NVMETRACE_EV_TCPT_CMD_RECV)), 9'000u);
    const Layout l = layout_for(View::target_only,
                                layout_key(View::target_only, c.present, kComponents), kComponents);
    EXPECT_TRUE(l.complete());
    Rows got;
    for (const auto& sg : l.segments)
        got.emplace_back(sg.name, static_cast<int64_t>(c.at(sg.to_slot) - c.at(sg.from_slot)));
    EXPECT_EQ(got, (Rows{{"network: target receive path", 1000},
                         {"target driver, submission", 500},
                         {"network: R2T to H2C data (wire and host)", 9500},
                         {"network: target receive path, H2C data", 1000},
                         {"storage: target block layer and drive", 9000},
                         {"target driver, completion", 1000}}));
}

// Every stage and component name has a stable id; ids are unique per table,
// dotted lower-case words, and a merged row's id joins its parts' ids.
TEST(Ids, EveryRowHasAUniqueWellFormedId) {
    auto well_formed = [](std::string_view id) {
        if (id.empty() || id.front() == '.' || id.back() == '.')
            return false;
        for (size_t i = 0; i < id.size(); i++) {
            const char c = id[i];
            if (c == '.' ? id[i - 1] == '.'
                         : !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
                return false;
        }
        return true;
    };
    for (std::span<const NamedId> table :
         {std::span<const NamedId>(kStageIds), std::span<const NamedId>(kComponentIds)}) {
        std::vector<std::string_view> names, ids;
        for (const auto& e : table) {
            EXPECT_TRUE(well_formed(e.id)) << e.id;
            names.push_back(e.name);
            ids.push_back(e.id);
        }
        std::sort(names.begin(), names.end());
        std::sort(ids.begin(), ids.end());
        EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
        EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
    }
    for (const auto& st : kStages)
        EXPECT_FALSE(stage_id(st.name).empty()) << st.name;
    for (const auto& c : kComponents) {
        EXPECT_FALSE(component_id(c.name).empty()) << c.name;
        EXPECT_FALSE(stage_id(c.stage).empty()) << c.stage;
    }
    EXPECT_EQ(component_id("end to end"), "e2e");
    EXPECT_EQ(component_id("host block layer, submission + host driver, submission"),
              "host.block.submit+host.driver.submit");
    EXPECT_EQ(stage_id("host driver + network"), "host.driver+network");
    EXPECT_EQ(component_id("no such row"), "");
    EXPECT_EQ(stage_id("storage + no such stage"), "");
}

}  // namespace
}  // namespace nvmetrace
