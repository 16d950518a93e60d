// Numbers and nesting read from JSON that came from a file: checked, never cast.
//
// nlohmann::json's get<uint32_t>() on 1e10, -1 or 2.5 converts silently (a
// float out of range is undefined behaviour), and its values nest as deep as
// the text does, which a recording's META must not decide.
#pragma once

#include "util/error.h"

#include <concepts>
#include <cstdint>
#include <limits>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace nvmetrace {

// V as a T: an Error naming WHAT when V is not an integer or does not fit T.
template <std::integral T>
T json_int(const nlohmann::json& v, std::string_view what) {
    using L = std::numeric_limits<T>;
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u <= static_cast<uint64_t>(L::max()))
            return static_cast<T>(u);
    } else if (v.is_number_integer()) {
        const int64_t i = v.get<int64_t>();
        if (i >= 0 ? static_cast<uint64_t>(i) <= static_cast<uint64_t>(L::max())
                   : L::is_signed && i >= static_cast<int64_t>(L::min()))
            return static_cast<T>(i);
    } else {
        throw Error(fmt::format("{}: {} is not an integer", what, v.dump()));
    }
    throw Error(
        fmt::format("{}: {} is out of range ({} to {})", what, v.dump(), L::min(), L::max()));
}

// OBJ[KEY] as a T, or FALLBACK when OBJ has no KEY; errors name WHERE.KEY.
template <std::integral T>
T json_int_or(const nlohmann::json& obj, const char* key, T fallback, std::string_view where) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null())
        return fallback;
    return json_int<T>(*it, fmt::format("{}.{}", where, key));
}

// Throws an Error naming WHAT when the JSON TEXT nests arrays and objects
// deeper than MAX_DEPTH (brackets inside strings do not count).  Linear.
void check_json_depth(std::string_view text, int max_depth, std::string_view what);

}  // namespace nvmetrace
