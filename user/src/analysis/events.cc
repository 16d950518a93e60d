#include "analysis/events.h"

#include <array>

namespace nvmetrace {

std::string_view op_name(Op op) {
    return op == Op::write ? "write" : "read";
}

int event_slot(uint16_t event) {
    // A direct table: this runs once per record.
    static const auto table = [] {
        std::array<int8_t, 256> t{};
        t.fill(-1);
        for (size_t i = 0; i < std::size(kEvents); i++)
            t[kEvents[i].event] = static_cast<int8_t>(i);
        return t;
    }();
    return event < table.size() ? table[event] : -1;
}

}  // namespace nvmetrace
