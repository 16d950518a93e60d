// `nvmetrace compare`: two runs (each one or more recordings, joined as in
// `report`) compared by analysis/compare.h, printed as text or JSON.
#pragma once

#include "analysis/compare.h"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvmetrace {

std::string comparison_text(const Comparison& c, const std::string& a_name,
                            const std::string& b_name);
nlohmann::json comparison_json(const Comparison& c);

struct CompareOptions {
    std::vector<std::string> a, b;  // recordings of each run
    bool json = false;
    CompareRule rule;
};

int run_compare(const CompareOptions& opts);

}  // namespace nvmetrace
