// `report --html` of a build without the plotting library: linked with the
// assets html/embed.cmake makes when it finds no node_modules (in place of
// the library's own generated/html_assets.cc), run_report() fails with the
// remedy and writes no page.
#include "cmd/report.h"
#include "report/html.h"
#include "synth.h"
#include "tempdir.h"
#include "util/error.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using ::testing::HasSubstr;

TEST(HtmlMissingLibrary, ReportSaysHowToGetItAndWritesNothing) {
    ASSERT_TRUE(builtin_html_assets().library_js.empty());
    test::TempDir dir;
    synth::Options o;
    o.commands = 200;
    synth::write(dir.path("h.ntr"), dir.path("t.ntr"), o);
    ReportCommandOptions opts;
    opts.files = {dir.path("h.ntr"), dir.path("t.ntr")};
    opts.html = dir.path("r.html");
    try {
        run_report(opts);
        FAIL() << "a page without its plotting library";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("report --html: the plotting library"));
        EXPECT_THAT(e.what(), HasSubstr("run tools/html-deps (or tools/deps) and rebuild"));
    }
    EXPECT_FALSE(std::filesystem::exists(opts.html));
}

}  // namespace
}  // namespace nvmetrace
