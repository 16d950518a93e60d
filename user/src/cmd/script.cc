#include "cmd/script.h"

#include "analysis/events.h"
#include "kernel/devices.h"
#include "util/error.h"
#include "util/json_num.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace nvmetrace {

namespace {

std::string op_text(const nvmetrace_rec& r) {
    std::string op = r.opcode == 0x02   ? "R"  // nvme_cmd_read
                     : r.opcode == 0x01 ? "W"  // nvme_cmd_write
                                        : fmt::format("{:#04x}", r.opcode);
    if (r.flags & NVMETRACE_REC_PASSTHRU)
        op += "P";  // passthrough: no bio
    if (r.flags & NVMETRACE_REC_SPDK)
        op += "S";  // written from an SPDK app's trace (its event: the kernel's of that place)
    return op;
}

// A field shown only where the record says it is known.
std::string known(bool is_known, uint64_t v) {
    return is_known ? std::to_string(v) : "-";
}

// ns past the recording's start: a window given in seconds, made integral once
uint64_t window_ns(const RecordingMeta& meta, double s) {
    const double ns = static_cast<double>(meta.start_monotonic_ns) + s * 1e9;
    if (ns <= 0)
        return 0;
    if (ns >= 1.8e19)
        return std::numeric_limits<uint64_t>::max();
    return static_cast<uint64_t>(ns);
}

// perf script's "[003]"; "-" when the recording does not say
std::string cpu_text(uint32_t cpu) {
    return cpu == kCpuUnknown ? "-" : fmt::format("[{:03}]", cpu);
}

}  // namespace

std::vector<uint32_t> parse_cpu_list(const std::string& list) {
    auto bad = [&] {
        return Error(fmt::format("--cpu {}: a list of CPUs and ranges, as 0-3,8", list));
    };
    auto number = [&](std::string_view t) {
        uint32_t v = 0;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (t.empty() || ec != std::errc() || end != t.data() + t.size())
            throw bad();
        return v;
    };
    std::vector<uint32_t> cpus;
    std::string_view rest = list;
    while (true) {
        const size_t comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        const size_t dash = item.find('-');
        const uint32_t lo = number(item.substr(0, dash));
        const uint32_t hi = dash == std::string_view::npos ? lo : number(item.substr(dash + 1));
        // a range no machine has CPUs for is a typo, not a filter
        if (hi < lo || hi - lo >= 65536)
            throw bad();
        for (uint32_t c = lo; c <= hi; c++)
            cpus.push_back(c);
        if (comma == std::string_view::npos)
            break;
        rest.remove_prefix(comma + 1);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

ScriptFormat::ScriptFormat(const RecordingMeta& meta, std::string file)
    : meta_(meta), file_(std::move(file)) {
    devices_from_json(meta.devices, table_);
}

double ScriptFormat::seconds(const nvmetrace_rec& r) const {
    return (static_cast<double>(r.ts) - static_cast<double>(meta_.start_monotonic_ns)) / 1e9;
}

std::string_view ScriptFormat::role(const nvmetrace_rec& r) const {
    const int slot = event_slot(r.event);
    if (slot >= 0)
        return kEvents[slot].side == Side::target ? "target" : "host";
    return meta_.role == "target" ? "target" : "host";
}

std::string ScriptFormat::event_name(uint16_t event) const {
    // the recording's own name; one made before its META named every event
    // gets this build's name for it
    auto it = meta_.events.find(event);
    if (it != meta_.events.end())
        return it->second;
    it = default_event_names().find(event);
    return it != default_event_names().end() ? it->second : fmt::format("event{}", event);
}

std::string ScriptFormat::device(const nvmetrace_rec& r) const {
    // The host's records carry the disk's dev_t; the target's carry no
    // device, but nvmet_req_init's aux is the namespace id.
    if (role(r) == "host")
        return table_.disk_name(r.dev);
    return r.event == NVMETRACE_EV_NVMET_INIT ? table_.target_name(static_cast<uint32_t>(r.aux))
                                              : "-";
}

std::string ScriptFormat::header() {
    return fmt::format("# {:>15} {:>5} {:<6} {:<14} {:<10} {:>4} {:>6} {:>5} {:<3} {:>12} {:>8} {}",
                       "time (s)", "cpu", "role", "event", "device", "qid", "cid", "tag", "op",
                       "lba", "len", "aux");
}

std::string ScriptFormat::line(const nvmetrace_rec& r, uint32_t cpu) const {
    if (r.event == NVMETRACE_EV_GAP) {
        // the ring's own marker: ts and lba are the last and first dropped
        // record's times, aux how many, dev the CPU
        nvmetrace_rec first = r;
        first.ts = r.lba;
        return fmt::format(
            "{:>17.9f} {:>5} gap cpu {}: {} records dropped between {:.9f} and {:.9f}", seconds(r),
            cpu_text(cpu), r.dev, r.aux, seconds(first), seconds(r));
    }
    const bool blocks = r.flags & NVMETRACE_REC_LEN_BLOCKS;
    return fmt::format(
        "{:>17.9f} {:>5} {:<6} {:<14} {:<10} {:>4} {:>6} {:>5} {:<3} {:>12} {:>8} {}", seconds(r),
        cpu_text(cpu), role(r), event_name(r.event), device(r),
        known(r.flags & NVMETRACE_REC_HAS_QID, r.qid),
        known(r.flags & NVMETRACE_REC_HAS_CID, r.cid), r.tag, op_text(r),
        known(r.lba != NVMETRACE_NO_LBA, r.lba), fmt::format("{}{}", r.len, blocks ? "b" : ""),
        r.aux);
}

nlohmann::json ScriptFormat::json(const nvmetrace_rec& r, uint32_t cpu) const {
    nlohmann::json j = {
        {"schema", json_schema("script")},
        {"file", file_},
        {"ts", r.ts},
        {"time_s", seconds(r)},
        {"cpu", cpu == kCpuUnknown ? nlohmann::json() : nlohmann::json(cpu)},
        {"role", role(r)},
        {"event", event_name(r.event)},
        {"event_id", r.event},
        {"device", device(r)},
        {"dev", r.dev},
        {"tag", r.tag},
        {"cntlid", r.cntlid},
        {"opcode", r.opcode},
        {"op", op_text(r)},
        {"flags", r.flags},
        {"spdk", (r.flags & NVMETRACE_REC_SPDK) != 0},
        {"aux", r.aux},
        {"seq", r.seq},
    };
    if (r.event == NVMETRACE_EV_GAP) {
        nvmetrace_rec first = r;
        first.ts = r.lba;
        j["gap"] = {{"cpu", r.dev},      {"records", r.aux},
                    {"first_ts", r.lba}, {"first_s", seconds(first)},
                    {"last_ts", r.ts},   {"last_s", seconds(r)}};
    }
    // unknown fields are null, not a number that looks real
    j["qid"] = (r.flags & NVMETRACE_REC_HAS_QID) ? nlohmann::json(r.qid) : nlohmann::json();
    j["cid"] = (r.flags & NVMETRACE_REC_HAS_CID) ? nlohmann::json(r.cid) : nlohmann::json();
    j["lba"] = r.lba != NVMETRACE_NO_LBA ? nlohmann::json(r.lba) : nlohmann::json();
    if (r.flags & NVMETRACE_REC_LEN_BLOCKS)
        j["len_blocks"] = r.len;
    else
        j["len"] = r.len;
    return j;
}

int run_script(const ScriptOptions& opts, FILE* out) {
    if (opts.files.empty())
        throw Error("script: name at least one recording");
    if (opts.from_s && opts.to_s && *opts.from_s > *opts.to_s)
        throw Error(fmt::format("script: --from {} is after --to {}", *opts.from_s, *opts.to_s));
    for (double s : {opts.from_s.value_or(0), opts.to_s.value_or(0)})
        if (!std::isfinite(s))
            throw Error("script: --from and --to take a number of seconds");

    // Open every file first: a filter that matches nothing in any of them is
    // a mistake to say before printing anything.
    std::vector<RecordingReader> readers;
    std::set<std::string> event_names, device_names;
    for (const auto& path : opts.files) {
        readers.push_back(RecordingReader::open(path));
        const RecordingMeta& meta = readers.back().meta();
        for (const auto& [id, name] : meta.events)
            event_names.insert(name);
        DeviceTable table;
        devices_from_json(meta.devices, table);
        for (auto& n : table.names())
            device_names.insert(std::move(n));
    }
    for (const auto& e : opts.events)
        if (!event_names.contains(e))
            throw Error(fmt::format("script: no event '{}' in these recordings (events: {})", e,
                                    fmt::join(event_names, ", ")));
    for (const auto& d : opts.devices)
        if (!device_names.contains(d))
            throw Error(fmt::format(
                "script: no device '{}' in these recordings (devices: {})", d,
                device_names.empty() ? "none" : fmt::format("{}", fmt::join(device_names, ", "))));

    int rc = 0;
    for (size_t i = 0; i < readers.size(); i++) {
        RecordingReader& reader = readers[i];
        const RecordingMeta& meta = reader.meta();
        ScriptFormat fmt_(meta, opts.files[i]);
        std::set<uint16_t> events;
        for (const auto& [id, name] : meta.events)
            if (std::find(opts.events.begin(), opts.events.end(), name) != opts.events.end())
                events.insert(id);
        const uint64_t from = opts.from_s ? window_ns(meta, *opts.from_s) : 0;
        const uint64_t to =
            opts.to_s ? window_ns(meta, *opts.to_s) : std::numeric_limits<uint64_t>::max();
        if (!opts.json)
            fmt::print(out, "{}# {}: {} on {} (kernel {}), 1 of {} commands sampled\n{}\n",
                       i ? "\n" : "", opts.files[i], meta.role, meta.hostname, meta.kernel_release,
                       meta.sample, ScriptFormat::header());
        bool cpus_known = false;
        std::span<const nvmetrace_rec> recs;
        while (reader.next(recs)) {
            // the block's CPU runs, walked alongside its records
            cpus_known = cpus_known || !reader.cpu_runs().empty();
            CpuRunCursor cpus(reader.cpu_runs());
            for (const auto& r : recs) {
                const uint32_t cpu = cpus.next();
                if (!opts.cpus.empty() &&
                    !std::binary_search(opts.cpus.begin(), opts.cpus.end(), cpu))
                    continue;
                if (r.ts < from || r.ts > to)
                    continue;
                if (!opts.events.empty() && !events.contains(r.event))
                    continue;
                if (!opts.devices.empty() && std::find(opts.devices.begin(), opts.devices.end(),
                                                       fmt_.device(r)) == opts.devices.end())
                    continue;
                if (opts.json)
                    fmt::print(out, "{}\n", json_text(fmt_.json(r, cpu)));
                else
                    fmt::print(out, "{}\n", fmt_.line(r, cpu));
            }
        }
        if (!opts.cpus.empty() && !cpus_known && reader.records_read() > 0)
            fmt::print(stderr,
                       "nvmetrace: {}: the recording does not say which CPU its records were "
                       "recorded on: --cpu left them all out\n",
                       opts.files[i]);
        for (const auto& n : reader.notes())
            fmt::print(stderr, "nvmetrace: {}: {}\n", opts.files[i], n);
        if (reader.end() != RecordingEnd::clean) {
            // the lines above are every record before the place it names
            fmt::print(stderr, "nvmetrace: {}\n", reader.problem());
            if (reader.end() == RecordingEnd::corrupt)
                rc = 1;
        }
    }
    return rc;
}

}  // namespace nvmetrace
