// `nvmetrace compare --exit-code`: the status says whether the text marks
// anything as moved.
#include "cmd/compare.h"
#include "synth.h"
#include "tempdir.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

struct Dir : test::TempDir {
    Dir() : TempDir("nvmetrace-compare-cmd-test") {}
};

// Runs A and B (B from other random draws with `change` applied), and the
// options that compare them.
CompareOptions write_ab(const Dir& d, void (*change)(synth::Options&)) {
    synth::write_ab(d.root().string(), change);
    CompareOptions o;
    o.a = {d / "ha.ntr", d / "ta.ntr"};
    o.b = {d / "hb.ntr", d / "tb.ntr"};
    return o;
}

// run_compare's status and what it printed.
std::pair<int, std::string> run(const CompareOptions& o) {
    testing::internal::CaptureStdout();
    int rc = -1;
    try {
        rc = run_compare(o);
    } catch (...) {
        testing::internal::GetCapturedStdout();
        throw;
    }
    return {rc, testing::internal::GetCapturedStdout()};
}

TEST(CompareExitCode, SomethingMovedIsOne) {
    Dir d;
    CompareOptions o = write_ab(d, [](synth::Options& b) { b.storage *= 3; });
    auto [plain, text] = run(o);
    EXPECT_EQ(plain, 0) << "without --exit-code a comparison that moved is a success";
    EXPECT_NE(text.find("** up"), std::string::npos) << text;
    o.exit_code = true;
    auto [rc, text2] = run(o);
    EXPECT_EQ(rc, kCompareMoved);
    EXPECT_EQ(text2, text) << "--exit-code changes the status, not the output";
}

TEST(CompareExitCode, NothingMovedIsZero) {
    Dir d;
    CompareOptions o = write_ab(d, [](synth::Options&) {});
    o.exit_code = true;
    auto [rc, text] = run(o);
    EXPECT_EQ(rc, 0) << text;
    EXPECT_EQ(text.find("** up"), std::string::npos) << text;
    EXPECT_EQ(text.find("** down"), std::string::npos) << text;
    EXPECT_NE(text.find("moved: nothing beyond noise"), std::string::npos) << text;
}

TEST(CompareExitCode, JsonMovedIsOne) {
    Dir d;
    CompareOptions o = write_ab(d, [](synth::Options& b) {
        b.net_out *= 4;
        b.net_back *= 4;
    });
    o.exit_code = true;
    o.json = true;
    auto [rc, text] = run(o);
    EXPECT_EQ(rc, kCompareMoved);
    EXPECT_NE(text.find("\"moved\": \"up\""), std::string::npos) << text;
}

// A tiny change that is real but below the rule's size: not moved, 0.
TEST(CompareExitCode, BelowTheRuleIsZero) {
    Dir d;
    CompareOptions o = write_ab(d, [](synth::Options& b) { b.storage = b.storage * 102 / 100; });
    o.exit_code = true;
    EXPECT_EQ(run(o).first, 0);
    // the same change counts once the rule asks for less than 2 %
    o.rule.min_change = 0.01;
    o.rule.min_share = 0.001;
    EXPECT_EQ(run(o).first, kCompareMoved);
}

// A damaged recording is an error, never "moved" nor "nothing moved".
TEST(CompareExitCode, CorruptRecordingIsAnError) {
    Dir d;
    CompareOptions o = write_ab(d, [](synth::Options&) {});
    const std::string victim = o.b[0];
    const auto size = std::filesystem::file_size(victim);
    {
        std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(size / 2));
        char c = 0;
        f.read(&c, 1);
        f.seekp(static_cast<std::streamoff>(size / 2));
        c = static_cast<char>(c ^ 0x5a);
        f.write(&c, 1);
    }
    EXPECT_EQ(run(o).first, 1) << "without --exit-code: the usual error status";
    o.exit_code = true;
    EXPECT_EQ(run(o).first, kCompareError);
}

}  // namespace
}  // namespace nvmetrace
