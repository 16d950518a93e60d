// `nvmetrace pool`: the module's premapped-buffer test pool and the kernel's
// own blk_iobuf pool, as text or JSON.
#pragma once

#include "kernel/genl.h"

#include <stdint.h>

#include <string>

#include <nlohmann/json.hpp>

namespace nvmetrace {

// "absent", "built in (no device asked about)", "none on this device",
// "active", "unknown API", or "unknown(<n>)".
std::string kpool_state_name(uint32_t state);

// Short key for JSON: "absent", "built", "none", "active", "unknown_api".
std::string kpool_state_key(uint32_t state);

// Aligned "name  value" lines, newline-terminated.  `dev_name`: the device
// the kernel pool was asked about, or empty.
std::string pool_text(const PoolInfo& pool, const std::string& dev_name);

// One object; sizes in bytes.  Keys are stable: scripts read them.
nlohmann::json pool_json(const PoolInfo& pool, const std::string& dev_name);

// "4 KiB", "2 MiB", "1.5 GiB", "512 B".
std::string size_text(uint64_t bytes);

}  // namespace nvmetrace
