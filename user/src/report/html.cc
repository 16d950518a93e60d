#include "report/html.h"

#include "util/error.h"
#include "util/json_num.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <map>

#include <fmt/core.h>

namespace nvmetrace {

namespace {

// [[us, fraction of the commands at or below it], ...] from a histogram of
// n values (ns): a point at each bucket's largest value, thinned to about 50
// per decade; values at or below 0 count but have no point (log axis).
nlohmann::json cdf_points(const Histogram& h, uint64_t n) {
    nlohmann::json pts = nlohmann::json::array();
    if (!n)
        return pts;
    constexpr double kStep = 1.0 / 50;  // decades between points
    uint64_t seen = 0;
    double last_log = -1e300;
    double pending_x = 0, pending_f = 0;
    bool pending = false;
    h.for_each_bucket([&](uint64_t low, uint64_t count) {
        seen += count;
        if (low == 0)
            return;  // 0 and the negative values (counted as 0): in `seen` only
        // the bucket's largest value: all of `seen` are at or below it
        const uint64_t top = low + Histogram::bucket_width(Histogram::bucket(low)) - 1;
        const double x = static_cast<double>(top) / 1e3;
        const double f = static_cast<double>(seen) / static_cast<double>(n);
        if (std::log10(x) - last_log >= kStep) {
            pts.push_back({x, f});
            last_log = std::log10(x);
            pending = false;
        } else {
            pending_x = x;
            pending_f = f;
            pending = true;
        }
    });
    if (pending)
        pts.push_back({pending_x, pending_f});
    return pts;
}

// '<' as \u003c: the JSON cannot end its <script> element early.
std::string script_json(const nlohmann::json& j) {
    const std::string text = json_text(j);
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (c == '<')
            out += "\\u003c";
        else
            out += c;
    }
    return out;
}

std::string html_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '&':
                out += "&amp;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

}  // namespace

uint64_t html_interval_ns(uint64_t duration_ns) {
    constexpr uint64_t kMin = 100'000;
    const double raw = static_cast<double>(duration_ns) / 120;
    uint64_t best = kMin;
    double best_d = INFINITY;
    // the nearest on a log scale of 1, 2, 5 times 10^k from 100 us up
    for (uint64_t p = kMin; static_cast<double>(p) <= raw * 10; p *= 10)
        for (uint64_t m : {1, 2, 5}) {
            const double d = std::fabs(std::log(static_cast<double>(p * m) / raw));
            if (d < best_d) {
                best_d = d;
                best = p * m;
            }
        }
    return best;
}

nlohmann::json html_plot_json(const Summary& s, const std::vector<Interval>& intervals,
                              uint64_t interval_ns) {
    using nlohmann::json;
    json j = {{"interval_s", static_cast<double>(interval_ns) / 1e9}, {"groups", json::array()}};
    std::map<size_t, size_t> by_id;  // GroupSummary::id -> index
    for (const auto& g : s.groups) {
        json cdf = json::array();
        cdf.push_back({{"name", "end to end"}, {"points", cdf_points(g.hist, g.n)}});
        for (const auto& st : g.stages)
            cdf.push_back({{"name", st.name}, {"points", cdf_points(st.hist, g.n)}});
        by_id.emplace(g.id, j["groups"].size());
        j["groups"].push_back({{"label", g.label}, {"cdf", cdf}, {"over_time", json::array()}});
    }
    for (const auto& iv : intervals)
        for (const auto& r : iv.rows) {
            auto it = by_id.find(r.group);
            if (it == by_id.end())
                continue;
            j["groups"][it->second]["over_time"].push_back({{"start_s", iv.start_s},
                                                            {"end_s", iv.end_s},
                                                            {"n", r.n},
                                                            {"p50_us", r.p50_us},
                                                            {"p99_us", r.p99_us}});
        }
    return j;
}

std::string report_html(const nlohmann::json& reports, const nlohmann::json& plots,
                        const HtmlAssets& assets) {
    if (assets.library_js.empty())
        throw Error(fmt::format("report --html: {}", assets.missing.empty()
                                                         ? "the plotting library is not built in"
                                                         : assets.missing));
    std::string title = "nvmetrace report";
    if (reports.is_array() && !reports.empty() && reports[0].contains("recorded_on"))
        title += ": " + reports[0]["recorded_on"].get<std::string>();
    std::string page;
    page.reserve(assets.library_js.size() + 1'000'000);
    page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    page += "<meta name=\"generator\" content=\"nvmetrace report --html\">\n";
    page += fmt::format("<title>{}</title>\n<style>\n", html_escape(title));
    page += assets.report_css;
    page += "</style>\n</head>\n<body>\n";
    page += fmt::format("<h1>{}</h1>\n", html_escape(title));
    page += "<main id=\"nvmetrace\"><p class=\"loading\">Rendering the report...</p></main>\n";
    page += "<script type=\"application/json\" id=\"nvmetrace-report\">";
    page += script_json(reports);
    page += "</script>\n<script type=\"application/json\" id=\"nvmetrace-plots\">";
    page += script_json(plots);
    page += "</script>\n<script>\n";
    page += assets.library_js;
    page += "</script>\n<script>\n";
    page += assets.report_js;
    page += "</script>\n</body>\n</html>\n";
    return page;
}

void check_html_writable(const std::string& path) {
    if (path.empty())
        throw Error("report --html: name the page's file");
    struct stat st;
    const bool existed = ::stat(path.c_str(), &st) == 0;
    if (existed && S_ISDIR(st.st_mode))
        throw Error(fmt::format("report --html: {} is a directory", path));
    FILE* f = std::fopen(path.c_str(), "a");
    if (!f)
        throw errno_error(fmt::format("report --html: cannot write {}", path), errno);
    std::fclose(f);
    if (!existed)
        ::unlink(path.c_str());
}

void write_html_file(const std::string& path, const std::string& html) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f)
        throw errno_error(fmt::format("report --html: cannot write {}", path), errno);
    const size_t n = std::fwrite(html.data(), 1, html.size(), f);
    const int err = n == html.size() ? 0 : errno;
    if (std::fclose(f) != 0 || err)
        throw errno_error(fmt::format("report --html: writing {}", path), err ? err : errno);
}

}  // namespace nvmetrace
