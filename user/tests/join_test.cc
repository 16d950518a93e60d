#include "join.h"

#include "synth.h"
#include "tempdir.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

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

}  // namespace
}  // namespace nvmetrace
