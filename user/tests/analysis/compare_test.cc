#include "cmd/compare.h"

#include "analysis/join.h"
#include "spdk_synth.h"
#include "synth.h"
#include "tempdir.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

namespace fs = std::filesystem;

struct Dir : test::TempDir {
    Dir() : TempDir("nvmetrace-compare-test") {}
};

const StageDelta& stage(const GroupDelta& g, const std::string& name) {
    for (const auto& s : g.stages)
        if (s.name == name)
            return s;
    throw std::runtime_error("no stage " + name);
}

// Run A, and run B from other random draws with `change` applied.
Comparison run_ab(const Dir& d, void (*change)(synth::Options&)) {
    synth::write_ab(d.root().string(), change);
    JoinedReport ra = join_files({d / "ha.ntr", d / "ta.ntr"});
    JoinedReport rb = join_files({d / "hb.ntr", d / "tb.ntr"});
    return compare_summaries(ra.summary, rb.summary);
}

TEST(Compare, ZOfAConfidence) {
    EXPECT_NEAR(z_for_confidence(0.999), 3.2905, 1e-3);
    EXPECT_NEAR(z_for_confidence(0.95), 1.9600, 1e-3);
    EXPECT_THROW(z_for_confidence(1.5), std::exception);
}

TEST(Compare, BusyDriveMovesStorageOnly) {
    Dir d;
    Comparison c = run_ab(d, [](synth::Options& b) { b.storage *= 3; });
    ASSERT_EQ(c.groups.size(), 1u);
    const GroupDelta& g = c.groups[0];
    EXPECT_EQ(g.view, View::joined);
    const StageDelta& st = stage(g, "storage");
    EXPECT_EQ(st.moved, 1);
    EXPECT_NEAR(st.ratio, 3.0, 0.1);
    EXPECT_NEAR(st.delta_us, 100.0, 3.0);
    for (const auto& s : g.stages) {
        if (s.name != "storage") {
            EXPECT_EQ(s.moved, 0) << s.name << " delta " << s.delta_us << " z " << s.z;
        }
    }
    EXPECT_EQ(g.end_to_end.moved, 1);
    std::string text = comparison_text(c, "A", "B");
    EXPECT_NE(text.find("moved: storage up 3."), std::string::npos) << text;
    nlohmann::json j = comparison_json(c);
    EXPECT_EQ(j["groups"][0]["view"], "joined");
    bool seen = false;
    for (const auto& s : j["groups"][0]["stages"])
        if (s["name"] == "storage") {
            EXPECT_EQ(s["moved"], "up");
            seen = true;
        } else {
            EXPECT_TRUE(s["moved"].is_null()) << s.dump();
        }
    EXPECT_TRUE(seen);
}

TEST(Compare, BusyNetworkMovesNetworkOnly) {
    Dir d;
    Comparison c = run_ab(d, [](synth::Options& b) {
        b.net_out *= 4;
        b.net_back *= 4;
    });
    ASSERT_EQ(c.groups.size(), 1u);
    EXPECT_EQ(stage(c.groups[0], "network").moved, 1);
    EXPECT_EQ(stage(c.groups[0], "storage").moved, 0);
    EXPECT_EQ(stage(c.groups[0], "target driver").moved, 0);
}

TEST(Compare, SameSystemTwiceMovesNothing) {
    Dir d;
    Comparison c = run_ab(d, [](synth::Options&) {});
    ASSERT_EQ(c.groups.size(), 1u);
    for (const auto& s : c.groups[0].stages) {
        EXPECT_EQ(s.moved, 0) << s.name << " delta " << s.delta_us << " z " << s.z;
    }
    EXPECT_EQ(c.groups[0].end_to_end.moved, 0);
    EXPECT_NE(comparison_text(c, "A", "B").find("moved: nothing beyond noise"), std::string::npos);
}

TEST(Compare, TinyButRealChangeIsNotFlagged) {
    // 2 % more storage: certain with 3000 commands, but below the 10 % rule
    Dir d;
    Comparison c = run_ab(d, [](synth::Options& b) { b.storage = b.storage * 102 / 100; });
    const StageDelta& st = stage(c.groups[0], "storage");
    EXPECT_GT(st.z, 3.3);
    EXPECT_EQ(st.moved, 0);
}

TEST(Compare, RankTestIgnoresHowFarAnOutlierLies) {
    // A: 40 commands near 5 ms and one stall of 600 ms; B: 15 near 25 ms.  The
    // stall makes A's standard deviation 90 ms, yet every B is above every other A.
    GroupSummary ga, gb;
    ga.label = gb.label = "read 4KiB nvme0n1";
    StageSummary sa, sb;
    sa.name = sb.name = "storage";
    double sum = 0;
    for (int i = 0; i < 40; i++) {
        sa.hist.add(5'000'000 + i * 10'000);
        sum += 5'000 + i * 10;
    }
    sa.hist.add(600'000'000);
    sum += 600'000;
    ga.n = 41;
    sa.mean_us = ga.mean_us = sum / 41;
    sa.sd_us = 92'000;
    for (int i = 0; i < 15; i++)
        sb.hist.add(25'000'000 + i * 100'000);
    gb.n = 15;
    sb.mean_us = gb.mean_us = 25'700;
    sb.sd_us = 450;
    ga.stages.push_back(sa);
    gb.stages.push_back(sb);
    Summary a, b;
    a.groups.push_back(ga);
    b.groups.push_back(gb);
    Comparison c = compare_summaries(a, b);
    ASSERT_EQ(c.groups.size(), 1u);
    const StageDelta& st = stage(c.groups[0], "storage");
    EXPECT_GT(st.z, 4.5);
    EXPECT_EQ(st.moved, 1);
    EXPECT_DOUBLE_EQ(rank_z(sa.hist, sa.hist), 0.0);
    EXPECT_LT(rank_z(sb.hist, sa.hist), -4.5);
}

TEST(Compare, GroupsWithoutPartnerAreListed) {
    Summary a, b;
    GroupSummary g;
    g.label = "read 4KiB nvme0n1";
    g.size_label = "4KiB";
    g.n = 10;
    a.groups.push_back(g);
    g.op = Op::write;
    g.label = "write 4KiB nvme0n1";
    b.groups.push_back(g);
    Comparison c = compare_summaries(a, b);
    EXPECT_TRUE(c.groups.empty());
    EXPECT_EQ(c.only_a, std::vector<std::string>{"read 4KiB nvme0n1"});
    EXPECT_EQ(c.only_b, std::vector<std::string>{"write 4KiB nvme0n1"});
}

// Stages are matched by id: B's labels reworded (as a later version of the
// tool may word them) still pair with A's stages, and the result carries the
// id and A's label.
TEST(Compare, StagesAreMatchedByIdNotByLabel) {
    Dir d;
    synth::Options a;
    a.commands = 3000;
    synth::Options b = a;
    b.rng_seed = 99;
    b.host_start_ns = 9'000'000'000;
    b.storage *= 3;
    synth::write(d / "ha.ntr", d / "ta.ntr", a);
    synth::write(d / "hb.ntr", d / "tb.ntr", b);
    JoinedReport ra = join_files({d / "ha.ntr", d / "ta.ntr"});
    JoinedReport rb = join_files({d / "hb.ntr", d / "tb.ntr"});
    ASSERT_EQ(rb.summary.groups.size(), 1u);
    size_t stages = 0;
    for (auto& st : rb.summary.groups[0].stages) {
        ASSERT_FALSE(st.id.empty()) << st.name;
        st.name = "reworded " + st.name;
        stages++;
    }
    const Comparison c = compare_summaries(ra.summary, rb.summary);
    ASSERT_EQ(c.groups.size(), 1u);
    ASSERT_EQ(c.groups[0].stages.size(), stages);  // none unpaired
    for (const auto& st : c.groups[0].stages) {
        EXPECT_TRUE(st.a && st.b) << st.name;
        EXPECT_EQ(st.name.rfind("reworded", 0), std::string::npos) << st.name;
    }
    const StageDelta& storage = stage(c.groups[0], "storage");
    EXPECT_EQ(storage.id, "storage");
    EXPECT_EQ(storage.moved, 1);
    EXPECT_NEAR(storage.ratio, 3.0, 0.1);
}

TEST(Compare, LinuxAndSpdkSideBySide) {
    // the same reads, through the kernel's drivers (A) and through SPDK's on both sides (B)
    Dir d;
    synth::Options o;
    o.commands = 3000;
    synth::write(d / "ha.ntr", d / "ta.ntr", o);
    o.rng_seed = 2;
    synth::write(d / "hb.ntr", d / "tb.ntr", o);
    synth::as_spdk_host(d / "hb.ntr", d / "shb.ntr");
    synth::as_spdk_target(d / "tb.ntr", d / "stb.ntr", true);
    JoinedReport ra = join_files({d / "ha.ntr", d / "ta.ntr"});
    JoinedReport rb = join_files({d / "shb.ntr", d / "stb.ntr"});
    ASSERT_EQ(rb.join.matched, 3000u);
    const Comparison c = compare_summaries(ra.summary, rb.summary);
    ASSERT_EQ(c.groups.size(), 1u);
    const GroupDelta& g = c.groups[0];
    EXPECT_EQ(g.view, View::joined);
    // the kernel's host block layer has no SPDK counterpart; the rest pair by id
    const StageDelta& block = stage(g, "host block layer");
    EXPECT_TRUE(block.a.has_value());
    EXPECT_FALSE(block.b.has_value());
    for (const char* id : {"network", "target.driver", "storage"}) {
        const auto it = std::find_if(g.stages.begin(), g.stages.end(),
                                     [&](const StageDelta& s) { return s.id == id; });
        ASSERT_NE(it, g.stages.end()) << id;
        EXPECT_TRUE(it->a.has_value()) << id;
        EXPECT_TRUE(it->b.has_value()) << id;
        EXPECT_EQ(it->moved, 0) << id << ": the same stage times in both runs";
    }
    const std::string text = comparison_text(c, "Linux", "SPDK");
    EXPECT_NE(text.find("host block layer"), std::string::npos) << text;
    EXPECT_NE(text.find("storage"), std::string::npos) << text;
}

}  // namespace
}  // namespace nvmetrace
