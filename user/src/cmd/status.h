// `nvmetrace status`: what the module reports, as a table or as JSON.
#pragma once

#include "kernel/genl.h"

#include <string>

#include <nlohmann/json.hpp>

namespace nvmetrace {

// Flat object, one key per value; byte and record counts are integers, the
// state a string ("idle", "recording").  Keys are stable: scripts read them.
nlohmann::json status_json(const ModuleVersion& version, const Status& status);

// Aligned "name  value" lines, newline-terminated.
std::string status_text(const ModuleVersion& version, const Status& status);

}  // namespace nvmetrace
