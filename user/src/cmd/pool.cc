#include "cmd/pool.h"

#include "util/json_num.h"

#include <linux/nvmetrace.h>

#include <string_view>

#include <fmt/format.h>

namespace nvmetrace {

std::string kpool_state_name(uint32_t state) {
    switch (state) {
        case NVMETRACE_KPOOL_ABSENT:
            return "absent (kernel built without CONFIG_BLK_IOBUF_POOL)";
        case NVMETRACE_KPOOL_BUILT:
            return "built in (give --dev to see a device's pool)";
        case NVMETRACE_KPOOL_NONE:
            return "none on this device";
        case NVMETRACE_KPOOL_ACTIVE:
            return "active";
        case NVMETRACE_KPOOL_UNKNOWN_API:
            return "built in, with an API this module does not know";
        default:
            return fmt::format("unknown({})", state);
    }
}

std::string kpool_state_key(uint32_t state) {
    switch (state) {
        case NVMETRACE_KPOOL_ABSENT:
            return "absent";
        case NVMETRACE_KPOOL_BUILT:
            return "built";
        case NVMETRACE_KPOOL_NONE:
            return "none";
        case NVMETRACE_KPOOL_ACTIVE:
            return "active";
        case NVMETRACE_KPOOL_UNKNOWN_API:
            return "unknown_api";
        default:
            return fmt::format("unknown({})", state);
    }
}

std::string size_text(uint64_t bytes) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t u = 0;
    double v = static_cast<double>(bytes);
    while (v >= 1024 && u + 1 < std::size(units)) {
        v /= 1024;
        u++;
    }
    if (v == static_cast<double>(static_cast<uint64_t>(v)))
        return fmt::format("{} {}", static_cast<uint64_t>(v), units[u]);
    return fmt::format("{:.1f} {}", v, units[u]);
}

std::string pool_text(const PoolInfo& p, const std::string& dev_name) {
    std::string out;
    auto row = [&out](std::string_view name, const std::string& value) {
        out += fmt::format("{:<12} {}\n", name, value);
    };
    if (p.buf_size == 0 || p.nr_asked == 0) {
        row("pool", "none (load the module with pool_nr=N pool_buf_kb=KB)");
    } else {
        row("pool", fmt::format("{} x {} buffers ({} asked for), {}", p.allocated,
                                size_text(p.buf_size), p.nr_asked, size_text(p.bytes)));
        std::string folios = fmt::format("{} of order {}", p.folios, p.order);
        if (p.min_order != p.order)
            folios = fmt::format("{}, order {} asked for, smallest order {}", p.folios, p.order,
                                 p.min_order);
        row("folios", folios);
        row("fallbacks", fmt::format("{} buffer{} with smaller folios", p.fallbacks,
                                     p.fallbacks == 1 ? "" : "s"));
        row("node", fmt::format("{}", p.node));
        row("mappings", fmt::format("{}", p.mappings));
        row("mmap", fmt::format("/dev/nvmetrace offset {:#x}, {} bytes, buffer i at i * {}",
                                p.mmap_offset, p.bytes, p.buf_size));
    }
    std::string kp = "kernel pool: " + kpool_state_name(p.kpool);
    if (!dev_name.empty() && p.kpool != NVMETRACE_KPOOL_ABSENT)
        kp = fmt::format("kernel pool ({}): {}", dev_name, kpool_state_name(p.kpool));
    out += kp + "\n";
    if (p.kpool == NVMETRACE_KPOOL_ACTIVE)
        out += fmt::format(
            "             order {}, {} folios of {}, {} in use, {} available, high water {}, "
            "{} failed allocations\n",
            p.kpool_order, p.kpool_capacity, size_text(p.kpool_folio_size), p.kpool_in_use,
            p.kpool_available, p.kpool_high_water, p.kpool_alloc_failures);
    return out;
}

nlohmann::json pool_json(const PoolInfo& p, const std::string& dev_name) {
    nlohmann::json kp = {{"state", kpool_state_key(p.kpool)}};
    if (!dev_name.empty())
        kp["device"] = dev_name;
    if (p.kpool == NVMETRACE_KPOOL_ACTIVE) {
        kp["order"] = p.kpool_order;
        kp["folio_size"] = p.kpool_folio_size;
        kp["capacity"] = p.kpool_capacity;
        kp["in_use"] = p.kpool_in_use;
        kp["available"] = p.kpool_available;
        kp["high_water"] = p.kpool_high_water;
        kp["alloc_failures"] = p.kpool_alloc_failures;
    }
    return {
        {"schema", json_schema("pool")},
        {"buf_size", p.buf_size},
        {"nr_bufs", p.nr_asked},
        {"allocated", p.allocated},
        {"fallbacks", p.fallbacks},
        {"bytes", p.bytes},
        {"order", p.order},
        {"min_order", p.min_order},
        {"folios", p.folios},
        {"node", p.node},
        {"mappings", p.mappings},
        {"mmap_offset", p.mmap_offset},
        {"kernel_pool", kp},
    };
}

}  // namespace nvmetrace
