#include "analysis/compare.h"

#include "util/error.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

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

StageDelta delta_of(std::string name, std::string id, std::optional<Moments> a,
                    std::optional<Moments> b, double a_e2e_us, const CompareRule& rule, double z) {
    StageDelta d;
    d.name = std::move(name);
    d.id = std::move(id);
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
    // Stages are matched by their stable id (the name where a row has none):
    // a reworded label is still the same stage.
    auto key = [](const StageSummary& st) -> const std::string& {
        return st.id.empty() ? st.name : st.id;
    };
    auto find = [&](const GroupSummary& s, const std::string& k) -> std::optional<Moments> {
        for (const auto& st : s.stages)
            if (key(st) == k)
                return Moments{s.n, st.mean_us, st.sd_us, &st.hist};
        return std::nullopt;
    };
    for (const auto& st : a.stages)
        g.stages.push_back(
            delta_of(st.name, st.id, find(a, key(st)), find(b, key(st)), a.mean_us, rule, z));
    for (const auto& st : b.stages)
        if (!find(a, key(st)))
            g.stages.push_back(
                delta_of(st.name, st.id, std::nullopt, find(b, key(st)), a.mean_us, rule, z));
    g.end_to_end = delta_of("end to end", "e2e", g.a, g.b, a.mean_us, rule, z);
    return g;
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

}  // namespace nvmetrace
