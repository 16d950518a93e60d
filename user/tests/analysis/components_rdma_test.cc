// The nvme-rdma host and nvmet-rdma target events in the analysis: commands
// assembled from synthetic records with known times, their components in path
// order, each non-negative and together the end to end, and the join.
#include "analysis/components.h"
#include "analysis/join.h"
#include "analysis/stats.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

constexpr uint32_t kDev = 259u << 20 | 0;

nvmetrace_rec host(uint16_t ev, uint64_t ts, uint16_t tag, uint64_t lba, bool write) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.lba = lba;
    r.dev = kDev;
    r.len = 4096;
    r.event = ev;
    r.qid = ev == NVMETRACE_EV_BIO_QUEUE ? 0 : 2;
    r.tag = ev == NVMETRACE_EV_BIO_QUEUE ? 0 : tag;
    r.cid = ev == NVMETRACE_EV_NVME_SETUP ? static_cast<uint16_t>(0x3000 | tag) : 0;
    r.aux = ev == NVMETRACE_EV_NVME_SETUP ? 1 : 0;  // nsid
    r.opcode = write ? 0x01 : 0x02;
    r.flags = (write ? NVMETRACE_REC_WRITE : 0) |
              (ev == NVMETRACE_EV_BIO_QUEUE ? 0 : NVMETRACE_REC_HAS_QID) |
              (ev == NVMETRACE_EV_NVME_SETUP ? NVMETRACE_REC_HAS_CID : 0);
    return r;
}

nvmetrace_rec target(uint16_t ev, uint64_t ts, uint16_t cid, uint64_t lba, bool write) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.lba = lba;
    r.len = 8;
    r.event = ev;
    r.qid = 2;
    r.cid = cid;
    r.cntlid = 1;
    r.aux = ev == NVMETRACE_EV_NVMET_COMPLETE ? 0 : 1;  // status, else nsid
    r.opcode = write ? 0x01 : 0x02;
    r.flags = NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID | kRecLenBlocks |
              (write ? NVMETRACE_REC_WRITE : 0);
    return r;
}

using Timeline = std::vector<std::pair<uint16_t, uint64_t>>;

// One host command: its records in time order (the order the Assembler gets
// them in), at t0 + each offset.
std::vector<nvmetrace_rec> host_records(uint64_t t0, uint16_t tag, uint64_t lba, bool write,
                                        Timeline tl) {
    std::vector<nvmetrace_rec> r;
    for (auto [ev, dt] : tl)
        r.push_back(host(ev, t0 + dt, tag, lba, write));
    return r;
}

std::vector<nvmetrace_rec> target_records(uint64_t t0, uint16_t cid, uint64_t lba, bool write,
                                          Timeline tl) {
    std::vector<nvmetrace_rec> r;
    for (auto [ev, dt] : tl)
        r.push_back(target(ev, t0 + dt, cid, lba, write));
    return r;
}

// A read over nvme-rdma: the capsule's send completes before the response.
const Timeline kHostRead = {
    {NVMETRACE_EV_BIO_QUEUE, 0},          {NVMETRACE_EV_NVME_SETUP, 1000},
    {NVMETRACE_EV_RQ_ISSUE, 2000},        {NVMETRACE_EV_RDMA_POST_SEND, 3000},
    {NVMETRACE_EV_RDMA_SEND_DONE, 8000},  {NVMETRACE_EV_RDMA_RECV_DONE, 40'000},
    {NVMETRACE_EV_RDMA_COMPLETE, 41'000}, {NVMETRACE_EV_NVME_COMPLETE, 42'000},
    {NVMETRACE_EV_RQ_COMPLETE, 42'500},
};
// A write whose capsule's send completes after the response.
const Timeline kHostWrite = {
    {NVMETRACE_EV_BIO_QUEUE, 0},           {NVMETRACE_EV_NVME_SETUP, 1000},
    {NVMETRACE_EV_RQ_ISSUE, 2000},         {NVMETRACE_EV_RDMA_POST_SEND, 3000},
    {NVMETRACE_EV_RDMA_RECV_DONE, 40'000}, {NVMETRACE_EV_RDMA_SEND_DONE, 40'400},
    {NVMETRACE_EV_RDMA_COMPLETE, 41'000},  {NVMETRACE_EV_NVME_COMPLETE, 42'000},
    {NVMETRACE_EV_RQ_COMPLETE, 42'500},
};
// A write on the target whose data is pulled with RDMA READ.
const Timeline kTargetWrite = {
    {NVMETRACE_EV_RDMAT_RECV, 0},          {NVMETRACE_EV_NVMET_INIT, 500},
    {NVMETRACE_EV_RDMAT_READ_DONE, 6000},  {NVMETRACE_EV_NVMET_EXEC, 6500},
    {NVMETRACE_EV_NVMET_BIO_DONE, 20'500}, {NVMETRACE_EV_NVMET_COMPLETE, 21'000},
    {NVMETRACE_EV_RDMAT_RSP_POST, 21'300}, {NVMETRACE_EV_RDMAT_SEND_DONE, 30'000},
};
// A read on the target: no RDMA READ, the data goes with the response.
const Timeline kTargetRead = {
    {NVMETRACE_EV_RDMAT_RECV, 0},           {NVMETRACE_EV_NVMET_INIT, 500},
    {NVMETRACE_EV_NVMET_EXEC, 1500},        {NVMETRACE_EV_NVMET_BIO_DONE, 15'500},
    {NVMETRACE_EV_NVMET_COMPLETE, 16'000},  {NVMETRACE_EV_RDMAT_RSP_POST, 16'200},
    {NVMETRACE_EV_RDMAT_SEND_DONE, 25'000},
};

struct Row {
    std::string name;
    int64_t ns;
};

// A command's components (segments; details indented by two spaces), each
// with its time, checked to tile the end to end.
std::vector<Row> rows(const Command& c) {
    const View v = view_of(c);
    const Layout l = layout_for(v, layout_key(v, c.present, kComponents), kComponents);
    EXPECT_TRUE(l.complete());
    std::vector<Row> out;
    int64_t sum = 0;
    for (size_t i = 0; i < l.segments.size(); i++) {
        const auto& s = l.segments[i];
        EXPECT_TRUE(c.has(s.from_slot) && c.has(s.to_slot)) << s.name;
        const auto d = static_cast<int64_t>(c.at(s.to_slot) - c.at(s.from_slot));
        EXPECT_GE(d, 0) << s.name;
        if (i > 0) {
            EXPECT_EQ(l.segments[i - 1].to_slot, s.from_slot) << s.name;
        }
        sum += d;
        if (s.seam) {
            EXPECT_EQ(d, 0) << s.name;
        } else {
            out.push_back({s.name, d});
        }
        for (const auto& det : l.details)
            if (det.segment == i && c.has(det.from_slot) && c.has(det.to_slot))
                out.push_back({"  " + det.name,
                               static_cast<int64_t>(c.at(det.to_slot) - c.at(det.from_slot))});
    }
    EXPECT_EQ(sum, static_cast<int64_t>(c.at(l.last_slot) - c.at(l.first_slot)));
    return out;
}

bool operator==(const Row& a, const Row& b) {
    return a.name == b.name && a.ns == b.ns;
}
void PrintTo(const Row& r, std::ostream* os) {
    *os << r.name << " " << r.ns;
}

struct RdmaTest : ::testing::Test {
    DeviceTable devices;
    std::vector<Command> out;
    Assembler assembler{devices, [this](const Command& c) { out.push_back(c); }};
    void feed(const std::vector<nvmetrace_rec>& recs) {
        for (const auto& r : recs)
            assembler.push(r);
    }
};

TEST_F(RdmaTest, HostReadComponentsInPathOrder) {
    feed(host_records(1'000'000, 7, 100, false, kHostRead));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(rows(out[0]), (std::vector<Row>{
                                {"host block layer, submission", 1000},
                                {"host driver, submission", 1000},
                                {"host driver, to the NIC (nvme-rdma)", 1000},
                                {"network and target (not recorded)", 37'000},
                                {"  command posted to send done (RDMA)", 5000},
                                {"network: host receive path", 1000},
                                {"host driver, completion", 1000},
                                {"host block layer, completion", 500},
                            }));
}

// The send completion after the response is the same command, not a reused
// tag, and the same components.
TEST_F(RdmaTest, HostSendDoneAfterTheResponse) {
    feed(host_records(0, 9, 200, true, kHostWrite));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(assembler.counts().lost_end, 0u);
    EXPECT_EQ(assembler.counts().cut_start, 0u);
    EXPECT_EQ(out[0].at(event_slot(NVMETRACE_EV_RDMA_SEND_DONE)), 40'400u);
    auto r = rows(out[0]);
    ASSERT_EQ(r.size(), 8u);
    EXPECT_EQ(r[4], (Row{"  command posted to send done (RDMA)", 37'400}));
}

// A second send completion for the same tag means the tag was reused.
TEST_F(RdmaTest, HostSendDoneTwiceIsAReusedTag) {
    auto recs = host_records(0, 9, 200, false, kHostRead);
    recs.insert(recs.begin() + 5, host(NVMETRACE_EV_RDMA_SEND_DONE, 9000, 9, 200, false));
    feed(recs);
    EXPECT_EQ(assembler.counts().lost_end, 1u);
}

TEST_F(RdmaTest, TargetWriteWithRdmaRead) {
    feed(target_records(5'000'000'000, 0x2003, 300, true, kTargetWrite));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].side, Side::target);
    EXPECT_EQ(rows(out[0]), (std::vector<Row>{
                                {"network: target receive path", 500},
                                {"network: RDMA READ of data (target)", 5500},
                                {"  data transfer (RDMA, at the target)", 6000},
                                {"target driver, submission", 500},
                                {"storage: target block layer and drive", 14'000},
                                {"target driver, completion", 500},
                                {"target driver, response (nvmet-rdma)", 300},
                                {"network: response send done (RDMA)", 8700},
                            }));
}

// The target command waits for its response's send completion: it is not
// handed on at nvmet_req_complete.
TEST_F(RdmaTest, TargetReadEndsAtTheSendCompletion) {
    auto recs = target_records(0, 0x2004, 400, false, kTargetRead);
    feed({recs.begin(), recs.end() - 1});
    EXPECT_TRUE(out.empty());
    feed({recs.back()});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(rows(out[0]).back(), (Row{"network: response send done (RDMA)", 8800}));
}

// Without the send completion (its record lost, or the hook off), a command
// that reached nvmet_req_complete is still reported: at the end of the
// recording, or when its key is used again.
TEST_F(RdmaTest, TargetWithoutSendCompletionIsStillReported) {
    auto a = target_records(0, 0x2005, 500, false, kTargetRead);
    a.pop_back();
    feed(a);
    EXPECT_TRUE(out.empty());
    feed(target_records(100'000, 0x2005, 600, false, kTargetRead));  // same cid, new command
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].lba, 500u);
    EXPECT_EQ(rows(out[0]).back(), (Row{"target driver, response (nvmet-rdma)", 200}));
    auto b = target_records(200'000, 0x2006, 700, false, kTargetRead);
    b.pop_back();
    feed(b);
    assembler.finish();
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(assembler.counts().cut_end, 0u);
    EXPECT_EQ(assembler.counts().lost_end, 0u);
}

Command assemble_one(const std::vector<nvmetrace_rec>& recs) {
    DeviceTable devices;
    std::vector<Command> out;
    Assembler a(devices, [&](const Command& c) { out.push_back(c); });
    for (const auto& r : recs)
        a.push(r);
    a.finish();
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? Command{} : out[0];
}

// Joined: network = (response received - command posted) on the host minus
// (response posted - capsule received) on the target; the target's clock
// (here 7 s off) is never compared with the host's.
TEST(RdmaJoin, WriteComponentsSumToTheHostsEndToEnd) {
    Command h = assemble_one(host_records(10'000'000'000, 3, 800, true, kHostWrite));
    Command t = assemble_one(target_records(3'000'000'000, 0x3003, 800, true, kTargetWrite));
    int64_t net = 0;
    Command j = join_commands(h, t, &net);
    EXPECT_EQ(net, 37'000 - 21'300);
    EXPECT_EQ(rows(j), (std::vector<Row>{
                           {"host block layer, submission", 1000},
                           {"host driver, submission", 1000},
                           {"host driver, to the NIC (nvme-rdma)", 1000},
                           {"network: wire and NICs (computed)", 15'700},
                           {"  command posted to send done (RDMA)", 37'400},
                           {"network: target receive path", 500},
                           {"network: RDMA READ of data (target)", 5500},
                           {"  data transfer (RDMA, at the target)", 6000},
                           {"target driver, submission", 500},
                           {"storage: target block layer and drive", 14'000},
                           {"target driver, completion", 500},
                           {"target driver, response (nvmet-rdma)", 300},
                           {"  response posted to send done (RDMA)", 8700},
                           {"network: host receive path", 1000},
                           {"host driver, completion", 1000},
                           {"host block layer, completion", 500},
                       }));
}

// Through the Joiner and Stats: every component's mean, and none negative.
TEST(RdmaJoin, ReportTableForReads) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    for (uint16_t i = 0; i < 10; i++) {
        jn.add(hs, assemble_one(
                       host_records(1'000'000 + i * 100'000u, i, 1000 + i * 8u, false, kHostRead)));
        jn.add(ts, assemble_one(target_records(7'000'000 + i * 100'000u,
                                               static_cast<uint16_t>(0x3000 | i), 1000 + i * 8u,
                                               false, kTargetRead)));
    }
    DeviceTable devices;
    Stats st(devices, {.sample_n = 1});
    JoinCounts jc = jn.join([&](const Command& c) { st.add(c); });
    EXPECT_EQ(jc.matched, 10u);
    EXPECT_EQ(jc.negative_network, 0u);
    const auto s = st.summary(2'000'000'000);
    ASSERT_EQ(s.groups.size(), 1u);
    const auto& g = s.groups[0];
    std::vector<std::pair<std::string, double>> got;
    for (const auto& c : g.components) {
        EXPECT_EQ(c.negative, 0u) << c.name;
        got.emplace_back(std::string(2 * static_cast<size_t>(c.depth), ' ') + c.name, c.mean_us);
    }
    // host span 37 us, target residence 16.2 us
    EXPECT_EQ(got, (std::vector<std::pair<std::string, double>>{
                       {"host block layer, submission", 1.0},
                       {"host driver, submission", 1.0},
                       {"host driver, to the NIC (nvme-rdma)", 1.0},
                       {"network: wire and NICs (computed)", 20.8},
                       {"  command posted to send done (RDMA)", 5.0},
                       {"network: target receive path", 0.5},
                       {"target driver, submission", 1.0},
                       {"storage: target block layer and drive", 14.0},
                       {"target driver, completion", 0.5},
                       {"target driver, response (nvmet-rdma)", 0.2},
                       {"  response posted to send done (RDMA)", 8.8},
                       {"network: host receive path", 1.0},
                       {"host driver, completion", 1.0},
                       {"host block layer, completion", 0.5},
                       {"end to end", 42.5},
                   }));
}

// Every combination of the RDMA events a command may lack (a hook that did
// not attach, a record lost) has a path on each view, tiling it.
TEST(RdmaLayout, EveryShapeHasAPath) {
    const uint16_t host_opt[] = {NVMETRACE_EV_RDMA_POST_SEND, NVMETRACE_EV_RDMA_SEND_DONE,
                                 NVMETRACE_EV_RDMA_RECV_DONE, NVMETRACE_EV_RDMA_COMPLETE};
    const uint16_t target_opt[] = {NVMETRACE_EV_RDMAT_RECV, NVMETRACE_EV_RDMAT_READ_DONE,
                                   NVMETRACE_EV_RDMAT_RSP_POST, NVMETRACE_EV_RDMAT_SEND_DONE};
    EventMask hbase = 0, tbase = 0;
    for (uint16_t ev : {NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_RQ_ISSUE,
                        NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE})
        hbase |= EventMask{1} << event_slot(ev);
    for (uint16_t ev : {NVMETRACE_EV_NVMET_INIT, NVMETRACE_EV_NVMET_EXEC,
                        NVMETRACE_EV_NVMET_BIO_DONE, NVMETRACE_EV_NVMET_COMPLETE})
        tbase |= EventMask{1} << event_slot(ev);
    for (uint32_t hm = 0; hm < 16; hm++) {
        for (uint32_t tm = 0; tm < 16; tm++) {
            EventMask h = hbase, t = tbase;
            for (size_t i = 0; i < 4; i++) {
                if (hm >> i & 1u)
                    h |= EventMask{1} << event_slot(host_opt[i]);
                if (tm >> i & 1u)
                    t |= EventMask{1} << event_slot(target_opt[i]);
            }
            for (auto [view, present] :
                 {std::pair{View::host_only, h}, std::pair{View::target_only, t},
                  std::pair{View::joined, h | t}}) {
                Layout l = layout_for(view, layout_key(view, present, kComponents), kComponents);
                EXPECT_TRUE(l.complete()) << hm << " " << tm;
                for (size_t i = 1; i < l.segments.size(); i++)
                    EXPECT_EQ(l.segments[i - 1].to_slot, l.segments[i].from_slot);
            }
        }
    }
}

}  // namespace
}  // namespace nvmetrace
