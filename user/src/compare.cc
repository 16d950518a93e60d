#include "compare.h"

#include "error.h"
#include "join.h"

#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nvmetrace {

double z_for_confidence(double confidence) {
    if (!(confidence > 0 && confidence < 1))
        throw Error(
            fmt::format("confidence {}: want a number between 0 and 1 (e.g. 0.999)", confidence));
    // two-sided: P(|Z| > z) = erfc(z / sqrt 2) = 1 - confidence; bisect
    const double tail = 1 - confidence;
    double lo = 0, hi = 40;
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2;
        (std::erfc(mid / std::sqrt(2.0)) > tail ? lo : hi) = mid;
    }
    return (lo + hi) / 2;
}

double rank_z(const Histogram& a, const Histogram& b) {
    const double na = static_cast<double>(a.count()), nb = static_cast<double>(b.count());
    if (na == 0 || nb == 0)
        return 0;
    // both histograms' buckets in value order; U_B = sum over B of (A below + ties / 2)
    std::vector<std::pair<uint64_t, uint64_t>> av, bv;
    a.for_each_bucket([&](uint64_t low, uint64_t n) { av.emplace_back(low, n); });
    b.for_each_bucket([&](uint64_t low, uint64_t n) { bv.emplace_back(low, n); });
    double u = 0, a_below = 0;
    size_t i = 0;
    for (const auto& [low, n] : bv) {
        while (i < av.size() && av[i].first < low)
            a_below += static_cast<double>(av[i++].second);
        double ties = i < av.size() && av[i].first == low ? static_cast<double>(av[i].second) : 0;
        u += static_cast<double>(n) * (a_below + ties / 2);
    }
    const double sd = std::sqrt(na * nb * (na + nb + 1) / 12);
    return (u - na * nb / 2) / sd;
}

namespace {

StageDelta delta_of(std::string name, std::optional<Moments> a, std::optional<Moments> b,
                    double a_e2e_us, const CompareRule& rule, double z) {
    StageDelta d;
    d.name = std::move(name);
    d.a = a;
    d.b = b;
    if (!a || !b)
        return d;
    d.delta_us = b->mean_us - a->mean_us;
    d.ratio = a->mean_us != 0 ? b->mean_us / a->mean_us : 0;
    if (a->n < 2 || b->n < 2 || !a->hist || !b->hist)
        return d;
    const double mag = std::fabs(d.delta_us);
    d.z = rank_z(*a->hist, *b->hist);
    d.a->hist = d.b->hist = nullptr;  // the summaries may go before the result
    const bool beyond_noise = std::fabs(d.z) > z && (d.z > 0) == (d.delta_us > 0);
    const bool matters =
        mag >= rule.min_change * std::fabs(a->mean_us) && mag >= rule.min_share * a_e2e_us;
    if (beyond_noise && matters)
        d.moved = d.delta_us > 0 ? 1 : -1;
    return d;
}

GroupDelta group_delta(const GroupSummary& a, const GroupSummary& b, const CompareRule& rule,
                       double z) {
    GroupDelta g;
    g.label = a.label == b.label ? a.label : fmt::format("{} -> {}", a.label, b.device);
    g.view = a.view;
    g.a = {a.n, a.mean_us, a.sd_us, &a.hist};
    g.b = {b.n, b.mean_us, b.sd_us, &b.hist};
    auto find = [](const GroupSummary& s, const std::string& name) -> std::optional<Moments> {
        for (const auto& st : s.stages)
            if (st.name == name)
                return Moments{s.n, st.mean_us, st.sd_us, &st.hist};
        return std::nullopt;
    };
    for (const auto& st : a.stages)
        g.stages.push_back(
            delta_of(st.name, find(a, st.name), find(b, st.name), a.mean_us, rule, z));
    for (const auto& st : b.stages)
        if (!find(a, st.name))
            g.stages.push_back(
                delta_of(st.name, std::nullopt, find(b, st.name), a.mean_us, rule, z));
    g.end_to_end = delta_of("end to end", g.a, g.b, a.mean_us, rule, z);
    return g;
}

std::string moved_word(int m) {
    return m > 0 ? "up" : m < 0 ? "down" : "";
}

nlohmann::json moments_json(const std::optional<Moments>& m) {
    if (!m)
        return nullptr;
    return {{"n", m->n}, {"mean_us", m->mean_us}, {"sd_us", m->sd_us}};
}

nlohmann::json delta_json(const StageDelta& d) {
    nlohmann::json j = {
        {"name", d.name},         {"a", moments_json(d.a)},
        {"b", moments_json(d.b)}, {"delta_us", d.delta_us},
        {"ratio", d.ratio},       {"z", std::isfinite(d.z) ? d.z : (d.z > 0 ? 1e308 : -1e308)}};
    j["moved"] = d.moved ? nlohmann::json(moved_word(d.moved)) : nlohmann::json(nullptr);
    return j;
}

std::string view_word(View v) {
    return v == View::joined ? "joined" : v == View::host_only ? "host" : "target";
}

}  // namespace

Comparison compare_summaries(const Summary& a, const Summary& b, const CompareRule& rule) {
    Comparison c;
    c.rule = rule;
    c.z = z_for_confidence(rule.confidence);
    std::vector<bool> b_used(b.groups.size());
    std::vector<const GroupSummary*> a_left;
    for (const auto& ga : a.groups) {
        bool found = false;
        for (size_t i = 0; i < b.groups.size(); i++)
            if (!b_used[i] && b.groups[i].label == ga.label && b.groups[i].view == ga.view) {
                c.groups.push_back(group_delta(ga, b.groups[i], rule, c.z));
                b_used[i] = found = true;
                break;
            }
        if (!found)
            a_left.push_back(&ga);
    }
    // renamed devices: the only unpaired group of B with the same op, size and view
    for (const auto* ga : a_left) {
        std::vector<size_t> cand;
        for (size_t i = 0; i < b.groups.size(); i++)
            if (!b_used[i] && b.groups[i].op == ga->op && b.groups[i].size == ga->size &&
                b.groups[i].size_label == ga->size_label && b.groups[i].view == ga->view)
                cand.push_back(i);
        if (cand.size() == 1) {
            c.groups.push_back(group_delta(*ga, b.groups[cand[0]], rule, c.z));
            b_used[cand[0]] = true;
        } else {
            c.only_a.push_back(ga->label);
        }
    }
    for (size_t i = 0; i < b.groups.size(); i++)
        if (!b_used[i])
            c.only_b.push_back(b.groups[i].label);
    return c;
}

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
            rc = 1;
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
        fmt::print("{}\n", j.dump(2));
    } else {
        fmt::print("{}", comparison_text(c, fmt::format("{}", fmt::join(opts.a, " ")),
                                         fmt::format("{}", fmt::join(opts.b, " "))));
    }
    return rc;
}

}  // namespace nvmetrace
