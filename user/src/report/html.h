// `nvmetrace report --html`: the report as one self-contained HTML page.
//
// The page holds the report's JSON (summary_json(), exactly what `report
// --json` prints) in <script type="application/json" id="nvmetrace-report">,
// the data of the plots that JSON has no room for (the latency distributions
// from the histograms, p50/p99 per interval) in id="nvmetrace-plots", and
// the scripts that render tables and plots from them in the browser: the
// plotting library (Vega-Lite through vega-embed, from npm, user/html) and
// user/html/report.js, all inlined at build time (html/embed.cmake), so the
// page opens offline.
#pragma once

#include "analysis/stats.h"

#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvmetrace {

// What the page inlines.  library_js empty: the plotting library was not
// built in, and `missing` says why and how to get it.
struct HtmlAssets {
    std::string_view library_js;
    std::string_view report_js;
    std::string_view report_css;
    std::string_view missing;
};

// The assets built into the binary (generated/html_assets.cc).
const HtmlAssets& builtin_html_assets();

// The interval of the latency-over-time plot for a recording of this
// length: 1, 2 or 5 times a power of ten nanoseconds, about 120 intervals
// (76 to 190), at least 100 us.
uint64_t html_interval_ns(uint64_t duration_ns);

// The plots' data of one report (one element of the page's reports):
//   {"interval_s": ..., "groups": [{"label", "cdf": [{"name", "points":
//   [[us, fraction at or below], ...]}, ...], "over_time": [{"start_s",
//   "end_s", "n", "p50_us", "p99_us"}, ...]}, ...]}
// groups in the order of s.groups; cdf: "end to end", then each stage
// (points at values above 0 only: a log axis), about 50 per decade.
// Intervals are matched to groups by IntervalRow::group (labels may repeat).
nlohmann::json html_plot_json(const Summary& s, const std::vector<Interval>& intervals,
                              uint64_t interval_ns);

// The page: `reports` is the array `report --json` prints, `plots` one
// html_plot_json() per element.  Throws Error when the plotting library is
// not in `assets`.
std::string report_html(const nlohmann::json& reports, const nlohmann::json& plots,
                        const HtmlAssets& assets = builtin_html_assets());

// Writes the page to `path` (replacing it); Error naming the path on failure.
void write_html_file(const std::string& path, const std::string& html);
// Error naming the path when it cannot be written (before the work), leaving
// no file behind.
void check_html_writable(const std::string& path);

}  // namespace nvmetrace
