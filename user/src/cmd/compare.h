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
    bool exit_code = false;  // --exit-code: the status says whether anything moved
    CompareRule rule;
};

// compare --exit-code's status, as diff(1)'s: 0 nothing moved, 1 something
// moved, 2 a usage error (as for every command), 3 any other error (a
// recording that cannot be read, or is corrupt).  Without --exit-code an
// error is 1, as for every command.
constexpr int kCompareMoved = 1;
constexpr int kCompareError = 3;

// Whether any group's stage or end to end is marked as moved (** in the
// text, "moved" in the JSON).
bool comparison_moved(const Comparison& c);

// Prints the comparison; returns 0, or 1 when a recording is corrupt.  With
// opts.exit_code: 0, kCompareMoved or kCompareError (errors still throw).
int run_compare(const CompareOptions& opts);

}  // namespace nvmetrace
