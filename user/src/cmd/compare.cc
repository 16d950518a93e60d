#include "cmd/compare.h"

#include "analysis/join.h"
#include "util/error.h"
#include "util/json_num.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nvmetrace {

namespace {

std::string moved_word(int m) {
    return m > 0 ? "up" : m < 0 ? "down" : "";
}

nlohmann::json moments_json(const std::optional<Moments>& m) {
    if (!m)
        return nullptr;
    return {{"n", m->n}, {"mean_us", m->mean_us}, {"sd_us", m->sd_us}};
}

nlohmann::json delta_json(const StageDelta& d) {
    nlohmann::json j = {{"name", d.name},
                        {"id", d.id},
                        {"a", moments_json(d.a)},
                        {"b", moments_json(d.b)},
                        {"delta_us", d.delta_us},
                        {"ratio", d.ratio},
                        {"z", std::isfinite(d.z) ? d.z : (d.z > 0 ? 1e308 : -1e308)}};
    j["moved"] = d.moved ? nlohmann::json(moved_word(d.moved)) : nlohmann::json(nullptr);
    return j;
}

std::string view_word(View v) {
    return v == View::joined ? "joined" : v == View::host_only ? "host" : "target";
}

}  // namespace

std::string comparison_text(const Comparison& c, const std::string& a_name,
                            const std::string& b_name) {
    std::string out = fmt::format("A: {}\nB: {}\n", a_name, b_name);
    for (const auto& g : c.groups) {
        out += fmt::format("\n== {} ({}): A {} commands, B {} commands\n", g.label,
                           view_word(g.view), g.a.n, g.b.n);
        out += fmt::format("  {:<36}{:>11}{:>11}{:>11}{:>8}  {}\n", "stage", "A mean us",
                           "B mean us", "delta us", "ratio", "moved");
        auto row = [&](const StageDelta& d) {
            auto num = [](const std::optional<Moments>& m) {
                return m ? fmt::format("{:.2f}", m->mean_us) : std::string("-");
            };
            std::string ratio = d.a && d.b && d.ratio != 0 ? fmt::format("{:.2f}", d.ratio) : "-";
            std::string delta = d.a && d.b ? fmt::format("{:+.2f}", d.delta_us) : "-";
            std::string moved = d.moved ? fmt::format("** {}", moved_word(d.moved)) : "";
            out += fmt::format("  {:<36}{:>11}{:>11}{:>11}{:>8}  {}\n", d.name, num(d.a), num(d.b),
                               delta, ratio, moved);
        };
        for (const auto& d : g.stages)
            row(d);
        row(g.end_to_end);
        std::vector<std::string> moved;
        for (const auto& d : g.stages)
            if (d.moved)
                moved.push_back(fmt::format("{} {} {:.2f}x", d.name, moved_word(d.moved), d.ratio));
        out += moved.empty() ? "  moved: nothing beyond noise\n"
                             : fmt::format("  moved: {}\n", fmt::join(moved, ", "));
    }
    for (const auto& l : c.only_a)
        out += fmt::format("\nonly in A: {}\n", l);
    for (const auto& l : c.only_b)
        out += fmt::format("\nonly in B: {}\n", l);
    out += fmt::format(
        "\nmoved (**): the per-command times differ beyond noise (Mann-Whitney |z| > {:.2f}, "
        "{:g} % confidence) and the means by at least {:g} % of A's stage and {:g} % of A's "
        "end to end\n",
        c.z, c.rule.confidence * 100, c.rule.min_change * 100, c.rule.min_share * 100);
    return out;
}

nlohmann::json comparison_json(const Comparison& c) {
    nlohmann::json j;
    j["schema"] = json_schema("compare");
    j["rule"] = {{"confidence", c.rule.confidence},
                 {"z", c.z},
                 {"min_change", c.rule.min_change},
                 {"min_share", c.rule.min_share}};
    j["groups"] = nlohmann::json::array();
    for (const auto& g : c.groups) {
        nlohmann::json gj = {{"label", g.label}, {"view", view_word(g.view)}};
        gj["stages"] = nlohmann::json::array();
        for (const auto& d : g.stages)
            gj["stages"].push_back(delta_json(d));
        gj["end_to_end"] = delta_json(g.end_to_end);
        j["groups"].push_back(gj);
    }
    j["only_a"] = c.only_a;
    j["only_b"] = c.only_b;
    return j;
}

bool comparison_moved(const Comparison& c) {
    for (const auto& g : c.groups) {
        if (g.end_to_end.moved)
            return true;
        for (const auto& d : g.stages)
            if (d.moved)
                return true;
    }
    return false;
}

int run_compare(const CompareOptions& opts) {
    if (opts.a.empty() || opts.b.empty())
        throw Error(
            "compare: name both runs: compare A.ntr B.ntr, or compare --a HOST.ntr TARGET.ntr "
            "--b HOST2.ntr TARGET2.ntr");
    if (!(opts.rule.min_change >= 0) || !(opts.rule.min_share >= 0))
        throw Error("compare: --min-change and --min-share are percentages >= 0");
    z_for_confidence(opts.rule.confidence);  // throws for a bad one
    JoinedReport a = join_files(opts.a);
    JoinedReport b = join_files(opts.b);
    Comparison c = compare_summaries(a.summary, b.summary, opts.rule);
    int rc = 0;
    for (const JoinedReport* r : {&a, &b}) {
        for (const auto& n : r->notes)
            fmt::print(stderr, "nvmetrace: {}\n", n);
        for (const auto& p : r->problems)
            fmt::print(stderr, "nvmetrace: {}\n", p);
        if (r->corrupt)
            rc = opts.exit_code ? kCompareError : 1;
    }
    if (opts.json) {
        nlohmann::json j = comparison_json(c);
        j["a"] = {{"files", opts.a}, {"recorded_on", a.recorded_on}};
        j["b"] = {{"files", opts.b}, {"recorded_on", b.recorded_on}};
        if (a.join.active)
            j["a"]["matched_share_of_host"] =
                a.join.host ? static_cast<double>(a.join.matched) / a.join.host : 0.0;
        if (b.join.active)
            j["b"]["matched_share_of_host"] =
                b.join.host ? static_cast<double>(b.join.matched) / b.join.host : 0.0;
        fmt::print("{}\n", json_text(j, 2));
    } else {
        fmt::print("{}", comparison_text(c, fmt::format("{}", fmt::join(opts.a, " ")),
                                         fmt::format("{}", fmt::join(opts.b, " "))));
    }
    if (rc == 0 && opts.exit_code && comparison_moved(c))
        rc = kCompareMoved;
    return rc;
}

}  // namespace nvmetrace
