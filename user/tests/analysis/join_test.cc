#include "analysis/join.h"

#include "analysis/assembler.h"
#include "analysis/components.h"
#include "analysis/records.h"
#include "format/recfile.h"
#include "report/printer.h"
#include "spdk_synth.h"
#include "synth.h"
#include "tempdir.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using namespace test;

namespace fs = std::filesystem;

struct Dir : test::TempDir {
    Dir() : TempDir("nvmetrace-join-test") {}
};

uint64_t unmatched(const std::array<uint64_t, kUnmatchedReasons>& a, Unmatched u) {
    return a[static_cast<size_t>(u)];
}

const GroupSummary* joined_group(const Summary& s) {
    for (const auto& g : s.groups)
        if (g.view == View::joined)
            return &g;
    return nullptr;
}

TEST(JoinFiles, AllMatchedOnClocksAnHourApart) {
    Dir d;
    synth::Options o;
    o.commands = 5000;
    synth::write(d / "h.ntr", d / "t.ntr", o);
    std::vector<double> e2e;
    JoinFilesOptions jo;
    jo.on_command = [&](const Command& c) {
        ASSERT_EQ(view_of(c), View::joined);
        // the computed network: (complete - issue) on the host minus the residence
        int64_t net = static_cast<int64_t>(c.at(event_slot(NVMETRACE_EV_NVMET_INIT)) -
                                           c.at(event_slot(NVMETRACE_EV_RQ_ISSUE)));
        EXPECT_GT(net, 0);
        e2e.push_back(static_cast<double>(c.at(event_slot(NVMETRACE_EV_RQ_COMPLETE)) -
                                          c.at(event_slot(NVMETRACE_EV_BIO_QUEUE))));
    };
    JoinedReport r = join_files({d / "h.ntr", d / "t.ntr"}, jo);
    EXPECT_TRUE(r.join.active);
    EXPECT_EQ(r.join.host, 5000u);
    EXPECT_EQ(r.join.target, 5000u);
    EXPECT_EQ(r.join.matched, 5000u);
    EXPECT_EQ(r.join.negative_network, 0u);
    EXPECT_EQ(r.counts.records_host, 5u * 5000);
    EXPECT_EQ(r.counts.records_target, 4u * 5000);
    const GroupSummary* g = joined_group(r.summary);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->n, 5000u);
    double mean = 0;
    for (double x : e2e)
        mean += x;
    mean /= static_cast<double>(e2e.size()) * 1e3;
    EXPECT_NEAR(g->mean_us, mean, 1e-6);  // the joined end to end is the host's
    double stages = 0;
    for (const auto& st : g->stages)
        stages += st.mean_us;
    EXPECT_NEAR(stages, g->mean_us, 1e-6);
}

TEST(JoinFiles, HostClockAheadOfTheTarget) {
    // the host booted an hour before the target: its offset is negative
    Dir d;
    synth::Options o;
    o.commands = 2000;
    o.host_start_ns = 3'601'000'000'000;
    o.target_offset_ns = -3'600'000'000'000;
    synth::write(d / "h.ntr", d / "t.ntr", o);
    JoinFilesOptions jo;
    jo.window_ns = 100'000'000;  // 0.1 s: the offset must be right, not just close
    JoinedReport r = join_files({d / "h.ntr", d / "t.ntr"}, jo);
    EXPECT_EQ(r.join.matched, 2000u);
    EXPECT_EQ(r.join.target, 2000u);
}

TEST(JoinFiles, WrongWallClocksAreCorrectedByTheCommands) {
    Dir d;
    synth::Options o;
    o.commands = 3000;
    synth::write(d / "h.ntr", d / "t.ntr", o);
    // the host's wall clock 20 minutes off: the offset comes from the keys
    o.host_wall_error_ns = 1'200'000'000'000;
    synth::write(d / "h2.ntr", d / "t2.ntr", o);
    JoinedReport a = join_files({d / "h.ntr", d / "t.ntr"});
    JoinedReport b = join_files({d / "h2.ntr", d / "t2.ntr"});
    EXPECT_EQ(a.join.matched, 3000u);
    EXPECT_EQ(b.join.matched, 3000u);
}

TEST(JoinFiles, TargetRecordsLongerThanTheHost) {
    Dir d;
    synth::Options o;
    o.commands = 2000;
    o.target_extra_before = 300;
    o.target_extra_after = 200;
    synth::write(d / "h.ntr", d / "t.ntr", o);
    JoinedReport r = join_files({d / "h.ntr", d / "t.ntr"});
    EXPECT_EQ(r.join.matched, 2000u);
    EXPECT_EQ(r.join.host, 2000u);
    EXPECT_EQ(r.join.target, 2500u);
    EXPECT_EQ(unmatched(r.join.target_unmatched, Unmatched::outside_window), 500u);
    EXPECT_EQ(r.summary.groups.size(), 2u);  // joined, and the target's own
}

TEST(JoinFiles, SampledDifferentlyIsSaid) {
    Dir d;
    synth::Options o;
    o.commands = 4000;
    o.target_sample = 4;
    synth::write(d / "h.ntr", d / "t.ntr", o);
    JoinedReport r = join_files({d / "h.ntr", d / "t.ntr"});
    const uint64_t ns = unmatched(r.join.host_unmatched, Unmatched::not_sampled);
    EXPECT_EQ(r.join.matched + ns, 4000u);
    EXPECT_EQ(r.join.matched, r.join.target);
    EXPECT_GT(ns, 2500u);  // about 3 in 4
    EXPECT_LT(ns, 3500u);
}

TEST(JoinFiles, SeveralHostsGroupedPerController) {
    Dir d;
    synth::Options o1, o2;
    o1.commands = o2.commands = 2000;
    o2.cntlid = 2;
    o2.rng_seed = 7;
    o2.host_start_ns = 5'000'000'000;  // another machine: another clock
    o2.target_offset_ns = o1.target_offset_ns - 4'000'000'000;
    o2.wall_base_ns = o1.wall_base_ns - 4'000'000'000;
    synth::write(d / "h1.ntr", d / "t1.ntr", o1);
    synth::write(d / "h2.ntr", d / "t2.ntr", o2);
    // one target machine recorded in two files: same clock, same boot
    JoinedReport r = join_files({d / "h1.ntr", d / "h2.ntr", d / "t1.ntr", d / "t2.ntr"});
    EXPECT_EQ(r.host_files, 2u);
    EXPECT_EQ(r.target_files, 2u);
    EXPECT_EQ(r.join.matched, 4000u);
    std::vector<std::string> labels;
    for (const auto& g : r.summary.groups) {
        EXPECT_EQ(g.view, View::joined);
        labels.push_back(g.label);
    }
    EXPECT_EQ(labels, (std::vector<std::string>{"read 4KiB synth-host:nvme0n1 (cntlid 1)",
                                                "read 4KiB synth-host:nvme0n1 (cntlid 2)"}));

    // only the first host given: the second's commands on the target say why
    JoinedReport one = join_files({d / "h1.ntr", d / "t1.ntr", d / "t2.ntr"});
    EXPECT_EQ(one.join.matched, 2000u);
    EXPECT_EQ(unmatched(one.join.target_unmatched, Unmatched::other_controller), 2000u);
}

TEST(JoinFiles, TheTargetAloneStillReports) {
    Dir d;
    synth::Options o;
    o.commands = 500;
    synth::write(d / "h.ntr", d / "t.ntr", o);
    EXPECT_FALSE(files_hold_both_sides({d / "t.ntr"}));
    JoinedReport r = join_files({d / "t.ntr"});
    EXPECT_FALSE(r.join.active);
    ASSERT_EQ(r.summary.groups.size(), 1u);
    EXPECT_EQ(r.summary.groups[0].view, View::target_only);
    EXPECT_EQ(r.summary.groups[0].n, 500u);
}

TEST(JoinFiles, MemoryIsBoundedByTheCommandsWaiting) {
    Dir d;
    synth::Options o;
    o.commands = 200'000;  // 4 s of commands, 80 us each
    synth::write(d / "h.ntr", d / "t.ntr", o);
    JoinedReport r = join_files({d / "h.ntr", d / "t.ntr"});
    EXPECT_EQ(r.join.matched, 200'000u);
    // waiting: the commands of a few round trips, not the recording
    EXPECT_LT(r.join.peak_pending, 100u);
}

TEST(JoinFiles, TargetsOfTwoMachinesAreRefused) {
    Dir d;
    synth::Options o1, o2;
    o1.commands = o2.commands = 10;
    o2.target_offset_ns += 1'000'000'000;
    synth::write(d / "h1.ntr", d / "t1.ntr", o1);
    synth::write(d / "h2.ntr", d / "t2.ntr", o2);
    try {
        join_files({d / "h1.ntr", d / "t1.ntr", d / "t2.ntr"});
        FAIL() << "no error";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("target recordings of two machines"),
                  std::string::npos)
            << e.what();
    }
}

// ----------------------------------------------------------------- the Joiner

// ----------------------------------------------------------------- joining

// A host command (one nvme-tcp read) on the host's clock: sent at t0 + 3000,
// data back at t0 + 3000 + span.
Command host_cmd(uint64_t t0, uint16_t qid, uint16_t cid, uint64_t lba, uint64_t span,
                 bool write = false) {
    Command c;
    c.side = Side::host;
    c.op = write ? Op::write : Op::read;
    c.lba = lba;
    c.size = 4096;
    c.dev = kNvme0n1;
    c.nsid = 1;
    c.qid = qid;
    c.cid = cid;
    c.has_cid = true;
    auto set = [&](uint16_t ev, uint64_t t) {
        c.ts[event_slot(ev)] = t;
        c.present |= EventMask{1} << event_slot(ev);
    };
    set(NVMETRACE_EV_BIO_QUEUE, t0);
    set(NVMETRACE_EV_NVME_SETUP, t0 + 1000);
    set(NVMETRACE_EV_RQ_ISSUE, t0 + 2000);
    set(NVMETRACE_EV_TCP_CMD_SEND, t0 + 3000);
    set(write ? NVMETRACE_EV_TCP_RSP_RECV : NVMETRACE_EV_TCP_C2H_RECV, t0 + 3000 + span);
    set(NVMETRACE_EV_NVME_COMPLETE, t0 + 3500 + span);
    set(NVMETRACE_EV_RQ_COMPLETE, t0 + 4000 + span);
    return c;
}

// A target command on the target's clock: init at t0, residence `res`.
Command target_cmd(uint64_t t0, uint16_t qid, uint16_t cid, uint64_t lba, uint64_t res,
                   bool write = false) {
    Command c;
    c.side = Side::target;
    c.op = write ? Op::write : Op::read;
    c.lba = lba;
    c.size = 4096;
    c.nsid = 1;
    c.qid = qid;
    c.cid = cid;
    c.cntlid = 1;
    c.has_cid = true;
    auto set = [&](uint16_t ev, uint64_t t) {
        c.ts[event_slot(ev)] = t;
        c.present |= EventMask{1} << event_slot(ev);
    };
    set(NVMETRACE_EV_NVMET_INIT, t0);
    set(NVMETRACE_EV_NVMET_EXEC, t0 + 1000);
    set(NVMETRACE_EV_NVMET_BIO_DONE, t0 + res - 1000);
    set(NVMETRACE_EV_NVMET_COMPLETE, t0 + res);
    return c;
}

struct JoinRun {
    std::vector<Command> out;
    JoinCounts counts;
};

TEST(Join, ComputedNetworkIsHostSpanMinusTargetResidence) {
    // the target's clock is 7 s behind the host's: never compared
    Command h = host_cmd(10'000'000'000, 1, 0x1005, 800, 60'000);
    Command t = target_cmd(3'000'000'000, 1, 0x1005, 800, 45'000);
    int64_t net = 0;
    Command j = join_commands(h, t, &net);
    EXPECT_EQ(net, 15'000);
    EXPECT_EQ(view_of(j), View::joined);
    Layout l =
        layout_for(View::joined, layout_key(View::joined, j.present, kComponents), kComponents);
    std::vector<std::string> shown;
    int64_t sum = 0;
    for (const auto& s : l.segments) {
        sum += static_cast<int64_t>(j.at(s.to_slot) - j.at(s.from_slot));
        if (!s.seam)
            shown.push_back(s.name);
        else
            EXPECT_EQ(j.at(s.to_slot), j.at(s.from_slot));
    }
    EXPECT_EQ(sum, static_cast<int64_t>(h.at(event_slot(NVMETRACE_EV_RQ_COMPLETE)) -
                                        h.at(event_slot(NVMETRACE_EV_BIO_QUEUE))));
    EXPECT_EQ(shown, (std::vector<std::string>{
                         "host block layer, submission", "host driver, submission",
                         "network: wire and NICs (computed)", "target driver, submission",
                         "storage: target block layer and drive", "target driver, completion",
                         "network: host receive path", "host block layer, completion"}));
    EXPECT_EQ(static_cast<int64_t>(j.at(event_slot(NVMETRACE_EV_NVMET_INIT)) -
                                   j.at(event_slot(NVMETRACE_EV_TCP_CMD_SEND))),
              15'000);
}

// ----------------------------------------------------------------- nvme-tcp joined

// One nvme-tcp command recorded by host and target, each side's records
// through its own Assembler (the target's clock 5 s off: never compared),
// then joined.  Offsets are ns from the host's bio and from the target's
// clock base; the target's command arrival is written after nvmet_req_init
// with the arrival time in aux, as kmod/probes/nvmet_tcp.c does.
struct TcpJoined {
    Command cmd;
    Layout layout;
    AssemblyCounts target_counts;
    std::vector<std::pair<std::string, int64_t>> shown;  // name, duration (seams left out)
    std::vector<std::pair<std::string, int64_t>> details;
};

TcpJoined tcp_joined(bool write, std::vector<std::pair<uint16_t, uint64_t>> host_transport,
                     uint64_t complete_at,
                     std::vector<std::tuple<uint16_t, uint64_t, uint64_t>> target_events) {
    const uint64_t base = 5'000'000'000;
    const uint16_t tag = 3, cid = 0x2003;
    const uint64_t lba = 100;
    DeviceTable devices;
    devices.add_disk(kNvme0n1, "nvme0n1", 512);
    devices.add_target_namespace(1, "nvmet nsid 1", 512);
    std::vector<Command> hosts, targets;
    Assembler ha(devices, [&](const Command& c) { hosts.push_back(c); });
    Assembler ta(devices, [&](const Command& c) { targets.push_back(c); });
    for (auto r : tcp_command(0, tag, lba, write, host_transport, complete_at)) {
        if (r.event == NVMETRACE_EV_NVME_SETUP) {
            r.cid = cid;
            r.flags |= NVMETRACE_REC_HAS_CID;
            r.aux = 1;
        }
        r.qid = 3;
        ha.push(r);
    }
    for (auto [ev, ts, aux] : target_events) {
        auto r =
            target(ev, base + ts, cid, lba, 8, ev == NVMETRACE_EV_TCPT_CMD_RECV ? base + aux : aux);
        if (ev == NVMETRACE_EV_NVMET_INIT)
            r.aux = 1;
        if (write) {
            r.opcode = 0x01;
            r.flags |= NVMETRACE_REC_WRITE;
        }
        ta.push(r);
    }
    ha.finish();
    ta.finish();
    EXPECT_EQ(hosts.size(), 1u);
    EXPECT_EQ(targets.size(), 1u);
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    for (const auto& c : hosts)
        jn.add(hs, c);
    for (const auto& c : targets)
        jn.add(ts, c);
    TcpJoined out;
    std::vector<Command> joined;
    JoinCounts jc = jn.join([&](const Command& c) { joined.push_back(c); });
    EXPECT_EQ(jc.matched, 1u);
    EXPECT_EQ(joined.size(), 1u);
    if (joined.empty())
        return out;
    out.cmd = joined[0];
    out.target_counts = ta.counts();
    const Command& c = out.cmd;
    EXPECT_EQ(view_of(c), View::joined);
    out.layout =
        layout_for(View::joined, layout_key(View::joined, c.present, kComponents), kComponents);
    EXPECT_TRUE(out.layout.complete());
    int64_t sum = 0;
    for (const auto& sg : out.layout.segments) {
        const int64_t d = static_cast<int64_t>(c.at(sg.to_slot) - c.at(sg.from_slot));
        EXPECT_GE(d, 0) << sg.name;
        sum += d;
        if (!sg.seam)
            out.shown.emplace_back(sg.name, d);
        else
            EXPECT_EQ(d, 0);
    }
    EXPECT_EQ(sum, static_cast<int64_t>(c.at(slot(NVMETRACE_EV_RQ_COMPLETE)) -
                                        c.at(slot(NVMETRACE_EV_BIO_QUEUE))));
    for (const auto& d : out.layout.details)
        if (c.has(d.from_slot) && c.has(d.to_slot))
            out.details.emplace_back(d.name,
                                     static_cast<int64_t>(c.at(d.to_slot) - c.at(d.from_slot)));
    return out;
}

// A read: the seed's table, in path order, with known figures.
TEST(TcpJoin, ReadHasTheSeedsComponents) {
    TcpJoined j = tcp_joined(false,
                             {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                              {NVMETRACE_EV_TCP_C2H_RECV, 40'000},
                              {NVMETRACE_EV_TCP_RSP_RECV, 41'000}},
                             42'000,
                             {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
                              {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
                              {NVMETRACE_EV_NVMET_EXEC, 11'000, 0},
                              {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
                              {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}});
    EXPECT_EQ(j.shown, (Rows{{"host block layer, submission", 1000},
                             {"host driver, submission", 2000},
                             {"network: wire and NICs (computed)", 15'000},
                             {"network: target receive path", 1000},
                             {"target driver, submission", 1000},
                             {"storage: target block layer and drive", 19'000},
                             {"target driver, completion", 1000},
                             {"network: host receive path", 1000},
                             {"host driver, completion", 1000},
                             {"host block layer, completion", 500}}));
    EXPECT_EQ(j.details, (Rows{{"handoff to nvme_complete_rq", 1000}}));
}

// A read completing on the C2H SUCCESS flag: no response capsule anywhere.
TEST(TcpJoin, ReadCompletingOnC2hSuccess) {
    TcpJoined j = tcp_joined(
        false, {{NVMETRACE_EV_TCP_CMD_SEND, 3000}, {NVMETRACE_EV_TCP_C2H_RECV, 40'000}}, 45'000,
        {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
         {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
         {NVMETRACE_EV_NVMET_EXEC, 11'000, 0},
         {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
         {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}});
    EXPECT_EQ(j.shown, (Rows{{"host block layer, submission", 1000},
                             {"host driver, submission", 2000},
                             {"network: wire and NICs (computed)", 15'000},
                             {"network: target receive path", 1000},
                             {"target driver, submission", 1000},
                             {"storage: target block layer and drive", 19'000},
                             {"target driver, completion", 1000},
                             {"network: host receive path", 5000},
                             {"host block layer, completion", 500}}));
    EXPECT_EQ(j.details, (Rows{{"handoff to nvme_complete_rq", 5000}}));
}

// A write whose data is in the command capsule: no R2T, no H2C PDU.
TEST(TcpJoin, InCapsuleWrite) {
    TcpJoined j = tcp_joined(
        true, {{NVMETRACE_EV_TCP_CMD_SEND, 3000}, {NVMETRACE_EV_TCP_RSP_RECV, 50'000}}, 51'000,
        {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
         {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
         {NVMETRACE_EV_TCPT_DATA_RECV, 10'200, 4096},
         {NVMETRACE_EV_NVMET_EXEC, 14'000, 0},
         {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
         {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}});
    EXPECT_EQ(j.shown, (Rows{{"host block layer, submission", 1000},
                             {"host driver, submission", 2000},
                             {"network: wire and NICs (computed)", 25'000},
                             {"network: target receive path", 1000},
                             {"target driver, submission", 200},
                             {"network: target receive path, in-capsule data", 3800},
                             {"storage: target block layer and drive", 16'000},
                             {"target driver, completion", 1000},
                             {"host driver, completion", 1000},
                             {"host block layer, completion", 500}}));
}

// A write solicited by one R2T and sent in three H2C data PDUs (what the
// Linux target does when the write is larger than the host's MAXH2CDATA):
// the first of each repeated record counts.
TEST(TcpJoin, R2tWriteWithSeveralH2cPdus) {
    TcpJoined j = tcp_joined(true,
                             {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                              {NVMETRACE_EV_TCP_R2T_RECV, 15'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 16'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 17'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 18'000},
                              {NVMETRACE_EV_TCP_RSP_RECV, 60'000}},
                             61'000,
                             {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
                              {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
                              {NVMETRACE_EV_TCPT_R2T_SEND, 10'300, 0},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 20'000, 0},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 21'000, 131072},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 22'000, 262144},
                              {NVMETRACE_EV_NVMET_EXEC, 25'000, 0},
                              {NVMETRACE_EV_NVMET_BIO_DONE, 40'000, 0},
                              {NVMETRACE_EV_NVMET_COMPLETE, 41'000, 0}});
    EXPECT_EQ(j.target_counts.repeats, 2u);
    EXPECT_EQ(j.target_counts.lost_end, 0u);
    EXPECT_EQ(j.shown, (Rows{{"host block layer, submission", 1000},
                             {"host driver, submission", 2000},
                             {"network: wire and NICs (computed)", 25'000},
                             {"network: target receive path", 1000},
                             {"target driver, submission", 300},
                             {"network: R2T to H2C data (wire and host)", 9700},
                             {"network: target receive path, H2C data", 5000},
                             {"storage: target block layer and drive", 15'000},
                             {"target driver, completion", 1000},
                             {"host driver, completion", 1000},
                             {"host block layer, completion", 500}}));
}

// Several R2Ts for one write (a target other than Linux's may send them):
// the first R2T and the first H2C bound the components, the rest are counted.
TEST(TcpJoin, SeveralR2tsPerWrite) {
    TcpJoined j = tcp_joined(true,
                             {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                              {NVMETRACE_EV_TCP_R2T_RECV, 15'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 16'000},
                              {NVMETRACE_EV_TCP_R2T_RECV, 25'000},
                              {NVMETRACE_EV_TCP_H2C_SEND, 26'000},
                              {NVMETRACE_EV_TCP_RSP_RECV, 60'000}},
                             61'000,
                             {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
                              {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 9'000},
                              {NVMETRACE_EV_TCPT_R2T_SEND, 10'300, 0},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 20'000, 0},
                              {NVMETRACE_EV_TCPT_R2T_SEND, 20'500, 65536},
                              {NVMETRACE_EV_TCPT_H2C_RECV, 30'000, 65536},
                              {NVMETRACE_EV_NVMET_EXEC, 35'000, 0},
                              {NVMETRACE_EV_NVMET_BIO_DONE, 40'000, 0},
                              {NVMETRACE_EV_NVMET_COMPLETE, 41'000, 0}});
    EXPECT_EQ(j.target_counts.repeats, 2u);
    EXPECT_EQ(j.target_counts.lost_end, 0u);
    ASSERT_GE(j.shown.size(), 7u);
    EXPECT_EQ(j.shown[5],
              (std::pair<std::string, int64_t>{"network: R2T to H2C data (wire and host)", 9700}));
    EXPECT_EQ(j.shown[6],
              (std::pair<std::string, int64_t>{"network: target receive path, H2C data", 15'000}));
}

// An arrival noted after nvmet_req_init belongs to a later PDU: dropped, and
// the computed network runs to nvmet_req_init.
TEST(TcpJoin, ArrivalAfterInitIsDropped) {
    TcpJoined j = tcp_joined(false,
                             {{NVMETRACE_EV_TCP_CMD_SEND, 3000},
                              {NVMETRACE_EV_TCP_C2H_RECV, 40'000},
                              {NVMETRACE_EV_TCP_RSP_RECV, 41'000}},
                             42'000,
                             {{NVMETRACE_EV_NVMET_INIT, 10'000, 0},
                              {NVMETRACE_EV_TCPT_CMD_RECV, 10'100, 10'050},
                              {NVMETRACE_EV_NVMET_EXEC, 11'000, 0},
                              {NVMETRACE_EV_NVMET_BIO_DONE, 30'000, 0},
                              {NVMETRACE_EV_NVMET_COMPLETE, 31'000, 0}});
    EXPECT_EQ(j.target_counts.late_times, 1u);
    EXPECT_FALSE(j.cmd.has(slot(NVMETRACE_EV_TCPT_CMD_RECV)));
    ASSERT_GE(j.shown.size(), 4u);
    EXPECT_EQ(j.shown[2],
              (std::pair<std::string, int64_t>{"network: wire and NICs (computed)", 16'000}));
    EXPECT_EQ(j.shown[3].first, "target driver, submission");
}

TEST(Join, CommandIdReuseIsResolvedByOrderWithinTheQueue) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    // the same (qid, cid, lba) three times, and another queue with the same cid
    const uint64_t spans[] = {50'000, 70'000, 90'000};
    for (int i = 0; i < 3; i++) {
        jn.add(hs, host_cmd(1'000'000 + i * 200'000ull, 2, 0x2007, 64, spans[i]));
        jn.add(ts, target_cmd(5'000'000 + i * 200'000ull, 2, 0x2007, 64, spans[i] - 10'000));
    }
    jn.add(hs, host_cmd(1'100'000, 3, 0x2007, 64, 40'000));
    jn.add(ts, target_cmd(5'100'000, 3, 0x2007, 64, 38'000));
    std::vector<int64_t> nets;
    JoinCounts jc = jn.join([&](const Command& c) {
        ASSERT_EQ(view_of(c), View::joined);
        nets.push_back(static_cast<int64_t>(c.at(event_slot(NVMETRACE_EV_NVMET_INIT)) -
                                            c.at(event_slot(NVMETRACE_EV_TCP_CMD_SEND))));
    });
    EXPECT_TRUE(jc.active);
    EXPECT_EQ(jc.matched, 4u);
    EXPECT_EQ(jc.negative_network, 0u);
    // handed over as they complete; each paired with its own
    std::sort(nets.begin(), nets.end());
    EXPECT_EQ(nets, (std::vector<int64_t>{2'000, 10'000, 10'000, 10'000}));
}

// A command held longer than the join window (through a controller reset
// under load: 2.03 s where the window is 2 s) meets its partner: both end
// about together, and each waits from its end, not its start.  Other
// commands go on meanwhile and are handed on as they end.
TEST(Join, CommandsLongerThanTheWindowStillMeet) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    constexpr uint64_t kHeld = 3'000'000'000;  // > the 2 s window
    jn.add(hs, host_cmd(1'000'000, 2, 7, 64, kHeld));
    jn.add(ts, target_cmd(1'004'000, 2, 7, 64, kHeld - 10'000));
    for (uint16_t i = 0; i < 40; i++) {  // the other queue, 100 ms apart
        const uint64_t t0 = 1'000'000 + i * 100'000'000ull;
        jn.add(hs, host_cmd(t0, 1, i, 8 * i, 50'000));
        jn.add(ts, target_cmd(t0 + 4'000, 1, i, 8 * i, 40'000));
    }
    size_t joined = 0;
    JoinCounts jc = jn.join([&](const Command& c) { joined += view_of(c) == View::joined; });
    EXPECT_EQ(jc.matched, 41u);
    EXPECT_EQ(joined, 41u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::not_found)], 0u);
    EXPECT_EQ(jc.target_unmatched[static_cast<size_t>(Unmatched::not_found)], 0u);
}

TEST(Join, UnmatchedBothWaysWithReasons) {
    Joiner jn;
    // the target recording covers [5.0 ms, 5.6 ms] of its clock
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 5'000'000, 5'600'000, 0, {}});
    for (int i = 0; i < 3; i++) {  // matched: offset +4 ms
        jn.add(hs,
               host_cmd(1'000'000 + i * 100'000ull, 1, static_cast<uint16_t>(i), 8 * i, 50'000));
        jn.add(ts,
               target_cmd(5'003'000 + i * 100'000ull, 1, static_cast<uint16_t>(i), 8 * i, 40'000));
    }
    Command nocid = host_cmd(1'050'000, 1, 9, 999, 50'000);
    nocid.has_cid = false;
    jn.add(hs, nocid);
    jn.add(hs, host_cmd(3'000'000, 1, 10, 1000, 50'000));    // 7 ms on the target: after its end
    jn.add(hs, host_cmd(1'250'000, 1, 11, 1008, 50'000));    // inside, but not there
    jn.add(ts, target_cmd(5'150'000, 1, 12, 2000, 40'000));  // no host command
    size_t host_only = 0, target_only = 0, joined = 0;
    JoinCounts jc = jn.join([&](const Command& c) {
        View v = view_of(c);
        (v == View::joined ? joined : v == View::host_only ? host_only : target_only)++;
    });
    EXPECT_EQ(joined, 3u);
    EXPECT_EQ(host_only, 3u);
    EXPECT_EQ(target_only, 1u);
    EXPECT_EQ(jc.host, 6u);
    EXPECT_EQ(jc.matched, 3u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::no_command_id)], 1u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::outside_window)], 1u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::not_found)], 1u);
    EXPECT_EQ(jc.target_unmatched[static_cast<size_t>(Unmatched::not_found)], 1u);
}

// A namespace of a controller whose disks the host followed only for a
// while (they appeared and went while it recorded): a target command on it
// outside those spans, or in flight as its disk was admitted, is not a loss.
TEST(Join, TargetCommandsWhileTheHostDidNotFollowTheirDevice) {
    Joiner jn;
    Joiner::Source host{Side::host, 1, 0, 0, UINT64_MAX, 0, {1}};
    host.followed[{1, 1}] = {{100'000'000, 300'000'000}, {500'000'000, UINT64_MAX}};
    host.followed[{1, 2}] = {{0, UINT64_MAX}};  // another namespace: no say on nsid 1
    size_t hs = jn.add_source(host);
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    jn.add(hs, host_cmd(200'000'000, 1, 1, 8, 50'000));  // matched
    jn.add(ts, target_cmd(200'003'000, 1, 1, 8, 40'000));
    jn.add(ts, target_cmd(90'000'000, 1, 2, 16, 40'000));   // before the device appeared
    jn.add(ts, target_cmd(120'000'000, 1, 3, 24, 40'000));  // just after: in flight then
    jn.add(ts, target_cmd(400'000'000, 1, 4, 32, 40'000));  // between gone and back
    jn.add(ts, target_cmd(250'000'000, 1, 5, 40, 40'000));  // followed then: a loss
    jn.add(ts, target_cmd(600'000'000, 1, 6, 48, 40'000));  // followed again: a loss
    JoinCounts jc = jn.join([](const Command&) {});
    EXPECT_EQ(jc.matched, 1u);
    EXPECT_EQ(jc.target_unmatched[static_cast<size_t>(Unmatched::before_device)], 3u);
    EXPECT_EQ(jc.target_unmatched[static_cast<size_t>(Unmatched::not_found)], 2u);
    EXPECT_EQ(unmatched_key(Unmatched::before_device), "before_device");
}

// The link goes down with commands in flight: the target ran one and its
// answer was lost, the host gave up on both at its I/O timeout, seconds
// later, and they failed over.  The target's command waited out the window
// before the host's request came: each side is unmatched as failed over,
// not as a loss; a third target command nobody gave up on still is one.
TEST(Join, FailedOverRequestsAndTheTargetCommandsTheyLeft) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    auto attempt = [](uint64_t t0, uint16_t cid, uint64_t lba) {
        Command c = host_cmd(t0, 1, cid, lba, 50'000);
        for (uint16_t ev : {NVMETRACE_EV_TCP_C2H_RECV, NVMETRACE_EV_NVME_COMPLETE})
            c.present &= ~(EventMask{1} << event_slot(ev));
        c.ts[event_slot(NVMETRACE_EV_RQ_COMPLETE)] = t0 + 3'000'000'000ull;  // timed out
        c.failed_over = true;
        return c;
    };
    jn.add(ts, target_cmd(1'003'000, 1, 7, 8, 40'000));  // ran; its answer was lost
    jn.add(hs, attempt(1'000'000, 7, 8));
    jn.add(hs, attempt(1'010'000, 8, 16));                // never reached the target
    jn.add(ts, target_cmd(1'023'000, 1, 9, 24, 40'000));  // no host request at all
    // I/O on another queue goes on meanwhile: the target's commands wait out the window
    jn.add(hs, host_cmd(2'600'000'000ull, 2, 1, 32, 50'000));
    jn.add(ts, target_cmd(2'600'003'000ull, 2, 1, 32, 40'000));
    JoinCounts jc = jn.join([](const Command&) {});
    EXPECT_EQ(jc.matched, 1u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::failed_over)], 2u);
    EXPECT_EQ(jc.target_unmatched[static_cast<size_t>(Unmatched::failed_over)], 1u);
    EXPECT_EQ(jc.target_unmatched[static_cast<size_t>(Unmatched::not_found)], 1u);
    EXPECT_EQ(unmatched_key(Unmatched::failed_over), "failed_over");
}

// A namespace connected again: its head disk number was admitted before, its
// new path disk only a little after the kernel read its partition table, so
// such a read has its bio and completion but no nvme_setup_cmd (no command
// id).  In flight as a device was admitted: not a loss; later, it would be.
TEST(Join, HostCommandWithoutIdInFlightAsItsDeviceWasAdmitted) {
    Joiner jn;
    Joiner::Source host{Side::host, 1, 0, 0, UINT64_MAX, 0, {1}};
    host.followed[{1, 1}] = {{0, 300'000'000}, {500'000'000, UINT64_MAX}};
    size_t hs = jn.add_source(host);
    jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    Command scan = host_cmd(480'000'000, 1, 1, 0, 50'000);
    scan.has_cid = false;
    jn.add(hs, scan);
    Command later = host_cmd(900'000'000, 1, 2, 8, 50'000);
    later.has_cid = false;
    jn.add(hs, later);
    JoinCounts jc = jn.join([](const Command&) {});
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::before_device)], 1u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::no_command_id)], 1u);
}

// A controller reset seen by the recorder a little late: a host command
// between the reset and the recorder's look carries its disk's old id and
// the next one; it matches the target command of either, never a third.
TEST(Join, ACommandRightBeforeAControllerChangeSeenMatchesEitherId) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    Command h = host_cmd(1'000'000, 1, 1, 8, 50'000);
    h.cntlid = 1;
    h.cntlid_next = 2;
    Command t = target_cmd(1'003'000, 1, 1, 8, 40'000);
    t.cntlid = 2;  // it ran on the new controller
    jn.add(hs, h);
    jn.add(ts, t);
    Command h3 = host_cmd(2'000'000, 1, 2, 16, 50'000);
    h3.cntlid = 1;
    h3.cntlid_next = 2;
    Command t3 = target_cmd(2'003'000, 1, 2, 16, 40'000);
    t3.cntlid = 3;
    jn.add(hs, h3);
    jn.add(ts, t3);
    JoinCounts jc = jn.join([](const Command&) {});
    EXPECT_EQ(jc.matched, 1u);
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::not_found)], 1u);
}

// The spans come from the devices as the reader leaves them after the
// DEVICES blocks: a path disk counts for its head's namespace, a reset
// moves a disk to another controller id, a disk there from the start and
// never gone has no say.
TEST(Join, FollowedSpansFromTheDeviceChanges) {
    RecordingMeta m;
    m.devices = nlohmann::json::array();
    m.devices.push_back(
        {{"kind", "disk"}, {"name", "nvme9n1"}, {"dev", 3}, {"nsid", 4}, {"cntlid", 9}});
    apply_device_change(
        m,
        {1000,
         nlohmann::json::array(
             {{{"kind", "disk"}, {"name", "nvme0n1"}, {"dev", 5}, {"nsid", 1}, {"cntlid", 1}},
              {{"kind", "path"},
               {"name", "nvme0c0n1"},
               {"dev", 7},
               {"head_dev", 5},
               {"cntlid", 1}}}),
         nlohmann::json::array()},
        "test");
    apply_device_change(
        m,
        {2000,
         nlohmann::json::array({{{"kind", "path"},
                                 {"name", "nvme0c0n1"},
                                 {"dev", 7},
                                 {"head_dev", 5},
                                 {"cntlid", 2}}}),
         nlohmann::json::array({{{"kind", "path"}, {"name", "nvme0c0n1"}, {"dev", 7}}})},
        "test");
    // nvme0n1 gone; its dev number 5 is then nvme0n2's, namespace 2
    apply_device_change(
        m,
        {3000, nlohmann::json::array(),
         nlohmann::json::array({{{"kind", "disk"}, {"name", "nvme0n1"}, {"dev", 5}},
                                {{"kind", "path"}, {"name", "nvme0c0n1"}, {"dev", 7}}})},
        "test");
    apply_device_change(
        m,
        {4000,
         nlohmann::json::array(
             {{{"kind", "disk"}, {"name", "nvme0n2"}, {"dev", 5}, {"nsid", 2}, {"cntlid", 2}},
              {{"kind", "path"},
               {"name", "nvme0c0n2"},
               {"dev", 8},
               {"head_dev", 5},
               {"cntlid", 2}}}),
         nlohmann::json::array()},
        "test");
    const Followed f = host_followed(m);
    using Spans = std::vector<std::pair<uint64_t, uint64_t>>;
    EXPECT_EQ(f.size(), 3u);
    EXPECT_EQ(f.at({1, 1}), (Spans{{1000, 3000}, {1000, 2000}}));  // the disk, the path
    EXPECT_EQ(f.at({2, 1}), (Spans{{2000, 3000}}));
    EXPECT_EQ(f.at({2, 2}), (Spans{{4000, UINT64_MAX}, {4000, UINT64_MAX}}));
    EXPECT_FALSE(f.count({9, 4}));
}

TEST(Join, NotSampledOnTheOtherSide) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1'000'000, 77, 0, UINT64_MAX, 0, {}});
    jn.add(hs, host_cmd(1'000'000, 1, 1, 8, 50'000));
    (void)ts;
    JoinCounts jc = jn.join([](const Command&) {});
    EXPECT_EQ(jc.host_unmatched[static_cast<size_t>(Unmatched::not_sampled)], 1u);
}

TEST(Join, NegativeNetworkIsCountedAndReported) {
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    size_t ts = jn.add_source({Side::target, 1, 0, 0, UINT64_MAX, 0, {}});
    jn.add(hs, host_cmd(1'000'000, 1, 1, 8, 50'000));
    jn.add(ts, target_cmd(9'000'000, 1, 1, 8, 52'000));  // longer than the host waited
    jn.add(hs, host_cmd(2'000'000, 1, 2, 16, 50'000));
    jn.add(ts, target_cmd(10'000'000, 1, 2, 16, 40'000));
    DeviceTable devices;
    devices.add_disk(kNvme0n1, "nvme0n1", 512);
    Stats stats(devices, {});
    ReportOptions ro;
    ro.detail = true;
    ro.join = jn.join([&](const Command& c) { stats.add(c); });
    EXPECT_EQ(ro.join.negative_network, 1u);
    Summary s = stats.summary();
    ASSERT_EQ(s.groups.size(), 1u);
    const auto& g = s.groups[0];
    EXPECT_EQ(g.view, View::joined);
    auto net = std::find_if(g.components.begin(), g.components.end(), [](const auto& c) {
        return c.name == "network: wire and NICs (computed)";
    });
    ASSERT_NE(net, g.components.end());
    EXPECT_EQ(net->negative, 1u);
    EXPECT_DOUBLE_EQ(net->mean_us, (-2.0 + 10.0) / 2);
    AssemblyCounts counts;
    counts.records_host = 14;
    counts.records_target = 8;
    std::string text = summary_text(s, counts, ro);
    EXPECT_NE(text.find("records: 14 host, 8 target; 2 matched (100 % of the host's)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("negative network: 1 joined commands"), std::string::npos) << text;
    EXPECT_EQ(text.find("seam"), std::string::npos) << text;
    EXPECT_NE(text.find("all with the target's side"), std::string::npos) << text;
}

// Two recordings, each through its own Assembler, on clocks 1 h apart: the
// host's records (nvme_setup_cmd carries the command id) and the target's.
TEST(Join, TwoRecordingsThroughTheAssembler) {
    DeviceTable devices;
    devices.add_disk(kNvme0n1, "nvme0n1", 512);
    devices.add_target_namespace(1, "nvmet nsid 1", 512);
    std::vector<Command> hosts, targets;
    Assembler ha(devices, [&](const Command& c) { hosts.push_back(c); });
    Assembler ta(devices, [&](const Command& c) { targets.push_back(c); });
    const uint64_t hour = 3'600'000'000'000ull;
    for (uint16_t i = 0; i < 20; i++) {
        uint64_t t0 = 1'000'000 + i * 100'000ull;
        uint16_t tag = i % 2;  // cids reused: (genctr << 12) | tag, genctr wraps at 16
        uint16_t cid = static_cast<uint16_t>(((i / 2) & 0xf) << 12 | tag);
        uint64_t lba = 8u * (i % 3);  // and LBAs repeat
        auto setup = host(NVMETRACE_EV_NVME_SETUP, t0 + 1000, tag, lba);
        setup.cid = cid;
        setup.flags |= NVMETRACE_REC_HAS_CID;
        setup.aux = 1;
        for (const auto& r : {bio(t0, lba), setup, host(NVMETRACE_EV_RQ_ISSUE, t0 + 2000, tag, lba),
                              host(NVMETRACE_EV_NVME_COMPLETE, t0 + 60'000, tag, lba),
                              host(NVMETRACE_EV_RQ_COMPLETE, t0 + 61'000, tag, lba)})
            ha.push(r);
        uint64_t u = hour + t0 + 10'000;
        for (auto r : {target(NVMETRACE_EV_NVMET_INIT, u, cid, lba, 8, 1),
                       target(NVMETRACE_EV_NVMET_EXEC, u + 1000, cid, lba),
                       target(NVMETRACE_EV_NVMET_BIO_DONE, u + 40'000 + i, cid, lba),
                       target(NVMETRACE_EV_NVMET_COMPLETE, u + 41'000 + i, cid, lba)}) {
            r.qid = 1;
            ta.push(r);
        }
    }
    ha.finish();
    ta.finish();
    ASSERT_EQ(hosts.size(), 20u);
    ASSERT_EQ(targets.size(), 20u);
    EXPECT_TRUE(hosts[0].has_cid);
    Joiner jn;
    size_t hs = jn.add_source({Side::host, 1, 0, ha.counts().first_ts, ha.counts().last_ts, 0, {}});
    size_t ts =
        jn.add_source({Side::target, 1, 0, ta.counts().first_ts, ta.counts().last_ts, 0, {}});
    for (const auto& c : hosts)
        jn.add(hs, c);
    for (const auto& c : targets)
        jn.add(ts, c);
    int i = 0;
    JoinCounts jc = jn.join([&](const Command& c) {
        ASSERT_EQ(view_of(c), View::joined);
        // host span 58 us, target residence 41 us + i: the network tells them apart
        EXPECT_EQ(static_cast<int64_t>(c.at(event_slot(NVMETRACE_EV_NVMET_INIT)) -
                                       c.at(event_slot(NVMETRACE_EV_RQ_ISSUE))),
                  58'000 - 41'000 - i);
        i++;
    });
    EXPECT_EQ(jc.matched, 20u);
}

}  // namespace
}  // namespace nvmetrace

namespace nvmetrace {
namespace {

TEST(JoinFiles, SpdkTargetJoinsByQueueLbaAndTime) {
    for (bool tcp : {true, false}) {
        SCOPED_TRACE(tcp ? "tcp" : "rdma");
        Dir d;
        synth::Options o;
        o.commands = 3000;
        o.target_offset_ns = 0;  // one machine, as a kernel host beside SPDK's target
        synth::write(d / "h.ntr", d / "t.ntr", o);
        synth::as_spdk_target(d / "t.ntr", d / "s.ntr", tcp);
        JoinedReport r = join_files({d / "h.ntr", d / "s.ntr"});
        EXPECT_EQ(r.join.host, 3000u);
        EXPECT_EQ(r.join.matched, 3000u);
        EXPECT_EQ(r.join.negative_network, 0u);
        const GroupSummary* g = joined_group(r.summary);
        ASSERT_NE(g, nullptr);
        EXPECT_TRUE(g->spdk_target);
        std::vector<std::string> names;
        for (const auto& st : g->stages)
            names.push_back(st.name);
        EXPECT_NE(std::find(names.begin(), names.end(), "target driver (SPDK)"), names.end());
        EXPECT_NE(std::find(names.begin(), names.end(), "storage (SPDK bdev, drive)"), names.end());
        // the ids stay the kernel rows': a compare of a kernel and an SPDK run lines them up
        for (const auto& st : g->stages) {
            if (st.name == "storage (SPDK bdev, drive)") {
                EXPECT_EQ(st.id, "storage");
            }
        }
    }
}

TEST(JoinFiles, SpdkTargetOnAnotherMachineIsCalibratedWithoutCommandIds) {
    Dir d;
    synth::Options o;
    o.commands = 3000;
    // an hour apart, and the host's wall clock 20 minutes off: only the commands say
    o.host_wall_error_ns = 1'200'000'000'000;
    synth::write(d / "h.ntr", d / "t.ntr", o);
    synth::as_spdk_target(d / "t.ntr", d / "s.ntr", true);
    JoinFilesOptions jo;
    jo.window_ns = 100'000'000;
    JoinedReport r = join_files({d / "h.ntr", d / "s.ntr"}, jo);
    EXPECT_EQ(r.join.matched, 3000u);
}

TEST(Join, KeyFieldsOneSourceLacksAreLeftOutOfEveryKey) {
    Command h;
    h.side = Side::host;
    h.lba = 800;
    h.nsid = 1;
    h.qid = 2;
    h.cid = 0x1005;
    h.has_cid = true;
    h.present = EventMask{1} << event_slot(NVMETRACE_EV_RQ_ISSUE) |
                EventMask{1} << event_slot(NVMETRACE_EV_RQ_COMPLETE);
    h.ts[static_cast<size_t>(event_slot(NVMETRACE_EV_RQ_ISSUE))] = 1000;
    h.ts[static_cast<size_t>(event_slot(NVMETRACE_EV_RQ_COMPLETE))] = 9000;
    Command t;
    t.side = Side::target;
    t.lba = 800;
    t.qid = 2;
    t.cid = 77;  // the SPDK recorder's number
    t.present = EventMask{1} << event_slot(NVMETRACE_EV_NVMET_INIT) |
                EventMask{1} << event_slot(NVMETRACE_EV_NVMET_COMPLETE);
    t.ts[static_cast<size_t>(event_slot(NVMETRACE_EV_NVMET_INIT))] = 3000;
    t.ts[static_cast<size_t>(event_slot(NVMETRACE_EV_NVMET_COMPLETE))] = 6000;
    for (bool spdk : {false, true}) {
        Joiner jn;
        const size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
        Joiner::Source ts{Side::target, 1, 0, 0, UINT64_MAX, 0, {}};
        if (spdk)
            ts.keys = {.cid = false, .nsid = false, .qid = true};
        const size_t tsrc = jn.add_source(ts);
        jn.add(hs, h);
        jn.add(tsrc, t);
        const JoinCounts jc = jn.join([](const Command&) {});
        EXPECT_EQ(jc.matched, spdk ? 1u : 0u);
    }
    // the queue id still tells commands apart where both sides have it
    Joiner jn;
    const size_t hs = jn.add_source({Side::host, 1, 0, 0, UINT64_MAX, 0, {}});
    Joiner::Source ts{Side::target, 1, 0, 0, UINT64_MAX, 0, {}};
    ts.keys = {.cid = false, .nsid = false, .qid = true};
    const size_t tsrc = jn.add_source(ts);
    Command other = t;
    other.qid = 3;
    jn.add(hs, h);
    jn.add(tsrc, other);
    EXPECT_EQ(jn.join([](const Command&) {}).matched, 0u);
    EXPECT_THROW(jn.add_source(ts), std::logic_error);
}

TEST(JoinFiles, SpdkHostJoinsAKernelTargetAndAnSpdkTarget) {
    for (bool spdk_target : {false, true}) {
        SCOPED_TRACE(spdk_target ? "SPDK's target" : "the kernel's target");
        Dir d;
        synth::Options o;
        o.commands = 3000;
        synth::write(d / "h.ntr", d / "t.ntr", o);  // clocks an hour apart: calibrated
        synth::as_spdk_host(d / "h.ntr", d / "sh.ntr");
        if (spdk_target)
            synth::as_spdk_target(d / "t.ntr", d / "st.ntr", true);
        JoinFilesOptions jo;
        jo.window_ns = 100'000'000;
        JoinedReport r = join_files({d / "sh.ntr", d / (spdk_target ? "st.ntr" : "t.ntr")}, jo);
        EXPECT_EQ(r.join.host, 3000u);
        EXPECT_EQ(r.join.matched, 3000u);
        EXPECT_EQ(r.join.negative_network, 0u);
        EXPECT_EQ(r.join.ambiguous, 0u);
        const GroupSummary* g = joined_group(r.summary);
        ASSERT_NE(g, nullptr);
        EXPECT_TRUE(g->missing.empty());
        EXPECT_EQ(g->spdk_target, spdk_target);
        // the host's span: from the command handed to SPDK's queue pair to its response
        const double span =
            o.net_out + o.target_submit + o.storage + o.target_complete + o.net_back + 0.0;
        EXPECT_NEAR(g->mean_us, span / 1e3, span / 1e3 * 0.1);
        double stages = 0;
        for (const auto& st : g->stages)
            stages += st.mean_us;
        EXPECT_NEAR(stages, g->mean_us, 1e-6);
    }
}

TEST(JoinFiles, SpdkHostJoinsAKernelRdmaTargetToItsCompletion) {
    // the SPDK host's span ends at its own completion, after nvmet-rdma's response is posted
    Dir d;
    synth::Options o;
    o.commands = 2000;
    synth::write(d / "h.ntr", d / "t.ntr", o);
    synth::as_spdk_host(d / "h.ntr", d / "sh.ntr");
    // its send completion after the host's completion, as it comes on a real target
    synth::as_rdma_target(d / "t.ntr", d / "rt.ntr", 2 * o.net_back);
    JoinFilesOptions jo;
    jo.window_ns = 100'000'000;
    JoinedReport r = join_files({d / "sh.ntr", d / "rt.ntr"}, jo);
    EXPECT_EQ(r.join.host, 2000u);
    EXPECT_EQ(r.join.matched, 2000u);
    EXPECT_EQ(r.join.negative_network, 0u);
    const GroupSummary* g = joined_group(r.summary);
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(g->missing.empty());
    EXPECT_EQ(g->span.to,
              "its response processed, before the app's callback (NVME_TCP_COMPLETE; "
              "over RDMA, nvme_rdma_req_complete)");
    const double span =
        o.net_out + o.target_submit + o.storage + o.target_complete + o.net_back + 0.0;
    EXPECT_NEAR(g->mean_us, span / 1e3, span / 1e3 * 0.1);
    double stages = 0;
    for (const auto& st : g->stages)
        stages += st.mean_us;
    EXPECT_NEAR(stages, g->mean_us, 1e-6);
}

}  // namespace
}  // namespace nvmetrace
