#include "cmd/status.h"

#include "util/json_num.h"
#include "version.h"

#include <linux/nvmetrace.h>

#include <fmt/format.h>

namespace nvmetrace {

nlohmann::json status_json(const ModuleVersion& version, const Status& status) {
    return {
        {"schema", json_schema("status")},
        {"tool_version", kToolVersion},
        {"tool_abi_version", NVMETRACE_ABI_VERSION},
        {"module_version", version.module_version},
        {"abi_version", version.abi_version},
        {"ring_version", version.ring_version},
        {"state", state_name(status.state)},
        {"rings", status.rings.nr_rings},
        {"ring_records", status.rings.nr_recs},
        {"ring_map_size", status.rings.map_size},
        {"record_size", status.rings.rec_size},
        {"records", status.records},
        {"lost", status.lost},
    };
}

std::string status_text(const ModuleVersion& version, const Status& status) {
    std::string abi = fmt::format("{}", version.abi_version);
    if (version.abi_version != NVMETRACE_ABI_VERSION)
        abi += fmt::format(" (this nvmetrace speaks {}: versions do not match)",
                           NVMETRACE_ABI_VERSION);

    std::string out;
    auto row = [&out](std::string_view name, const std::string& value) {
        out += fmt::format("{:<8} {}\n", name, value);
    };
    row("module", version.module_version);
    row("tool", kToolVersion);
    row("abi", abi);
    row("state", state_name(status.state));
    row("rings",
        fmt::format("{} x {} records of {} bytes ({} KiB per ring)", status.rings.nr_rings,
                    status.rings.nr_recs, status.rings.rec_size, status.rings.map_size / 1024));
    row("records", fmt::format("{}", status.records));
    row("lost", fmt::format("{}", status.lost));
    return out;
}

}  // namespace nvmetrace
