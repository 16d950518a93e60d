#include "report/html.h"

#include "analysis/join.h"
#include "cmd/report.h"
#include "report/printer.h"
#include "synth.h"
#include "tempdir.h"
#include "util/error.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The text of the <script type="application/json" id=ID> element.
std::string json_element(const std::string& page, const std::string& id) {
    const std::string open = "<script type=\"application/json\" id=\"" + id + "\">";
    const size_t b = page.find(open);
    if (b == std::string::npos)
        return "";
    const size_t e = page.find("</script>", b);
    return page.substr(b + open.size(), e - b - open.size());
}

// A joined synthetic recording, its report as `report --json` makes it, and
// the plots' data.
class HtmlPage : public ::testing::Test {
protected:
    void SetUp() override {
        synth::Options o;
        o.commands = 5000;
        o.queues = 3;
        synth::write(dir_.path("h.ntr"), dir_.path("t.ntr"), o);
        files_ = {dir_.path("h.ntr"), dir_.path("t.ntr")};
        // as report --html does: the interval from the commands' span
        uint64_t first = UINT64_MAX, last = 0;
        JoinFilesOptions span;
        span.on_command = [&](const Command& c) {
            first = std::min(first, c.first_ts());
            last = std::max(last, c.last_ts());
        };
        join_files(files_, span);
        ASSERT_LT(first, last);
        interval_ns_ = html_interval_ns(last - first);
        JoinFilesOptions jo;
        jo.interval_ns = interval_ns_;
        jo.on_interval = [&](const Interval& iv) { intervals_.push_back(iv); };
        rep_ = join_files(files_, jo);
        ReportOptions ro;
        ro.recorded_on = rep_.recorded_on;
        ro.join = rep_.join;
        nlohmann::json j = summary_json(rep_.summary, rep_.counts, ro);
        j["files"] = files_;
        j["role"] = "joined";
        reports_ = nlohmann::json::array();
        reports_.push_back(j);
        plots_ = nlohmann::json::array();
        plots_.push_back(html_plot_json(rep_.summary, intervals_, interval_ns_));
    }

    test::TempDir dir_;
    std::vector<std::string> files_;
    uint64_t interval_ns_ = 0;
    std::vector<Interval> intervals_;
    JoinedReport rep_;
    nlohmann::json reports_, plots_;
};

TEST_F(HtmlPage, EmbedsTheReportJsonUnchanged) {
    if (builtin_html_assets().library_js.empty())
        GTEST_SKIP() << builtin_html_assets().missing;
    const std::string page = report_html(reports_, plots_);
    ASSERT_FALSE(rep_.summary.groups.empty());
    const std::string text = json_element(page, "nvmetrace-report");
    ASSERT_FALSE(text.empty());
    const nlohmann::json embedded = nlohmann::json::parse(text);
    EXPECT_EQ(embedded, reports_);
    EXPECT_EQ(nlohmann::json::parse(json_element(page, "nvmetrace-plots")), plots_);
    // the same numbers the joined run made: stages, percentiles, queues
    const auto& g = embedded[0]["groups"][0];
    EXPECT_EQ(g["stages"].size(), rep_.summary.groups[0].stages.size());
    EXPECT_EQ(g["latency_us"]["p99"].get<double>(), rep_.summary.groups[0].p99_us);
    EXPECT_EQ(g["queues"].size(), 3u);
}

TEST_F(HtmlPage, IsSelfContained) {
    if (builtin_html_assets().library_js.empty())
        GTEST_SKIP() << builtin_html_assets().missing;
    const std::string page = report_html(reports_, plots_);
    // nothing loaded from anywhere: no external script, style sheet or image
    const std::regex remote(R"re((src|href)\s*=\s*["']?\s*(https?:)?//)re", std::regex::icase);
    EXPECT_FALSE(std::regex_search(page, remote));
    EXPECT_THAT(page, Not(HasSubstr("<link")));
    EXPECT_THAT(page, Not(HasSubstr("<script src")));
    // the library and the page's script are inlined
    EXPECT_THAT(page, HasSubstr(std::string(builtin_html_assets().report_js.substr(0, 200))));
    EXPECT_THAT(page, HasSubstr("vegaEmbed"));
}

// `report --html` itself, joined and file by file: the page's JSON is what
// `report --json` prints for the same files, and every group has its
// latency over time.
TEST_F(HtmlPage, ReportCommandEmbedsReportJson) {
    if (builtin_html_assets().library_js.empty())
        GTEST_SKIP() << builtin_html_assets().missing;
    for (bool no_join : {false, true}) {
        ReportCommandOptions opts;
        opts.files = files_;
        opts.no_join = no_join;
        opts.json = true;
        ::testing::internal::CaptureStdout();
        EXPECT_EQ(run_report(opts), 0);
        const nlohmann::json json = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
        ASSERT_EQ(json.size(), no_join ? 2u : 1u);
        opts.json = false;
        opts.html = dir_.path(no_join ? "apart.html" : "joined.html");
        EXPECT_EQ(run_report(opts), 0);
        std::ifstream in(opts.html);
        std::stringstream ss;
        ss << in.rdbuf();
        EXPECT_EQ(nlohmann::json::parse(json_element(ss.str(), "nvmetrace-report")), json);
        const nlohmann::json plots =
            nlohmann::json::parse(json_element(ss.str(), "nvmetrace-plots"));
        ASSERT_EQ(plots.size(), json.size());
        for (size_t i = 0; i < plots.size(); i++) {
            ASSERT_EQ(plots[i]["groups"].size(), json[i]["groups"].size());
            for (const auto& g : plots[i]["groups"])
                EXPECT_GE(g["over_time"].size(), 50u) << g["label"] << " no_join " << no_join;
        }
    }
}

// Two groups may share a label (the same op, size and disk on two paths):
// their intervals go by group, not by label.
TEST(Html, IntervalsGoToTheirGroupNotTheFirstOfItsLabel) {
    Summary s;
    s.groups.resize(2);
    s.groups[0].label = s.groups[1].label = "read 4KiB nvme0n1 (aio)";
    s.groups[0].id = 1;  // creation order need not be the summary's
    s.groups[1].id = 0;
    Interval iv;
    iv.end_s = 0.1;
    IntervalRow a, b;
    a.group = 0;
    a.label = b.label = s.groups[0].label;
    a.n = 7;
    b.group = 1;
    b.n = 3;
    iv.rows = {a, b};
    const nlohmann::json j = html_plot_json(s, {iv}, 100'000'000);
    ASSERT_EQ(j["groups"][0]["over_time"].size(), 1u);
    ASSERT_EQ(j["groups"][1]["over_time"].size(), 1u);
    EXPECT_EQ(j["groups"][0]["over_time"][0]["n"], 3);
    EXPECT_EQ(j["groups"][1]["over_time"][0]["n"], 7);
}

TEST(Html, MarkupInTheJsonCannotEndItsElement) {
    const HtmlAssets a{"/* library */", "/* report */", "", ""};
    const nlohmann::json reports = {{{"recorded_on", "</script><script>alert(1)</script>"}}};
    const std::string page = report_html(reports, nlohmann::json::array(), a);
    EXPECT_EQ(nlohmann::json::parse(json_element(page, "nvmetrace-report")), reports);
    EXPECT_THAT(page, Not(HasSubstr("<script>alert")));
}

TEST(Html, MissingLibraryIsAnErrorSayingHowToGetIt) {
    const HtmlAssets a{"", "/* report */", "", "no vega; run tools/html-deps and rebuild"};
    try {
        report_html(nlohmann::json::array(), nlohmann::json::array(), a);
        FAIL() << "a page without its plotting library";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("report --html"));
        EXPECT_THAT(e.what(), HasSubstr("run tools/html-deps and rebuild"));
    }
    // the built-in assets: either the library, or the reason and the remedy
    const HtmlAssets& b = builtin_html_assets();
    if (b.library_js.empty())
        EXPECT_THAT(std::string(b.missing), HasSubstr("tools/html-deps"));
    else
        EXPECT_TRUE(b.missing.empty());
}

TEST_F(HtmlPage, PlotsHoldDistributionsAndTime) {
    const auto& pg = plots_[0]["groups"];
    ASSERT_EQ(pg.size(), rep_.summary.groups.size());
    const auto& g0 = pg[0];
    EXPECT_EQ(g0["label"], rep_.summary.groups[0].label);
    // end to end, then each stage
    ASSERT_EQ(g0["cdf"].size(), 1 + rep_.summary.groups[0].stages.size());
    EXPECT_EQ(g0["cdf"][0]["name"], "end to end");
    for (const auto& c : g0["cdf"]) {
        const auto& pts = c["points"];
        ASSERT_GT(pts.size(), 2u) << c["name"];
        for (size_t i = 1; i < pts.size(); i++) {
            EXPECT_GT(pts[i][0].get<double>(), pts[i - 1][0].get<double>());
            EXPECT_GE(pts[i][1].get<double>(), pts[i - 1][1].get<double>());
        }
        EXPECT_DOUBLE_EQ(pts.back()[1].get<double>(), 1.0) << c["name"];
    }
    // the end to end's CDF passes its median
    const double p50 = rep_.summary.groups[0].p50_us;
    double below = 0;
    for (const auto& p : g0["cdf"][0]["points"])
        if (p[0].get<double>() < p50 * 0.99)
            below = p[1].get<double>();
    EXPECT_GT(below, 0.3);
    EXPECT_LT(below, 0.5);
    // ~120 intervals, p50 at or below p99, every command in one
    const auto& t = g0["over_time"];
    EXPECT_GE(t.size(), 76u);
    EXPECT_LE(t.size(), 191u);
    uint64_t n = 0;
    for (const auto& r : t) {
        EXPECT_LE(r["p50_us"].get<double>(), r["p99_us"].get<double>());
        EXPECT_GT(r["p50_us"].get<double>(), 0);
        n += r["n"].get<uint64_t>();
    }
    EXPECT_EQ(n, rep_.summary.groups[0].n);
}

TEST(Html, IntervalGivesAbout120Points) {
    for (uint64_t d : {uint64_t{100'000'000}, uint64_t{1'000'000'000}, uint64_t{7'300'000'000},
                       uint64_t{60'000'000'000}, uint64_t{3'600'000'000'000}}) {
        const uint64_t iv = html_interval_ns(d);
        const double points = static_cast<double>(d) / static_cast<double>(iv);
        EXPECT_GE(points, 75) << d;
        EXPECT_LE(points, 191) << d;
    }
    EXPECT_EQ(html_interval_ns(1'000'000), 100'000u);  // short: at least 100 us
    EXPECT_EQ(html_interval_ns(0), 100'000u);
}

TEST(Html, UnwritablePathIsAnError) {
    test::TempDir dir;
    EXPECT_THROW(check_html_writable(dir.root().string()), Error);
    EXPECT_THROW(check_html_writable(dir.path("no/such/dir/r.html")), Error);
    EXPECT_THROW(write_html_file(dir.path("no/such/dir/r.html"), "x"), Error);
    // a writable path is checked without leaving a file behind
    check_html_writable(dir.path("r.html"));
    EXPECT_FALSE(std::filesystem::exists(dir.path("r.html")));
    write_html_file(dir.path("r.html"), "page");
    std::ifstream in(dir.path("r.html"));
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str(), "page");
}

}  // namespace
}  // namespace nvmetrace
