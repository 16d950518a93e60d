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
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace nvmetrace {

// J as text (INDENT as nlohmann's dump()), never throwing: a string from a file
// may hold bytes that are not UTF-8 (a hostname, a device name), which dump()
// refuses with an exception; here each such byte becomes U+FFFD.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Every JSON document the tool prints carries "schema": "nvmetrace.KIND/VERSION"
// (report, compare, status, ...): a consumer checks the kind and refuses a
// version it does not know.  The version changes only when a key goes or
// changes its meaning; keys are added without one.
inline constexpr int kJsonSchemaVersion = 1;
inline std::string json_schema(std::string_view kind) {
    return fmt::format("nvmetrace.{}/{}", kind, kJsonSchemaVersion);
}

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
        throw Error(fmt::format("{}: {} is not an integer", what, json_text(v)));
    }
    throw Error(
        fmt::format("{}: {} is out of range ({} to {})", what, json_text(v), L::min(), L::max()));
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
