#include "util/json_num.h"

namespace nvmetrace {

void check_json_depth(std::string_view text, int max_depth, std::string_view what) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < text.size(); i++) {
        const char c = text[i];
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                throw Error(fmt::format("{}: nested deeper than {} levels (at byte {})", what,
                                        max_depth, i));
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
}

}  // namespace nvmetrace
