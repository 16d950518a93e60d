#include "format/recfile.h"

#include "format/recfile_internal.h"
#include "util/error.h"
#include "util/json_num.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace nvmetrace {

namespace {

// ------------------------------------------------------------------ CRC32C

constexpr uint32_t kCrc32cPoly = 0x82f63b78u;  // Castagnoli, bit-reversed

constexpr std::array<uint32_t, 256> make_crc32c_table() {
    std::array<uint32_t, 256> table{};
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int bit = 0; bit < 8; bit++) {
            c = (c >> 1) ^ (kCrc32cPoly & (0u - (c & 1u)));
        }
        table[i] = c;
    }
    return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

}  // namespace

namespace recfile_internal {

int64_t clock_ns(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string errno_text(int err) {
    const char* desc = strerrordesc_np(err);
    return desc ? desc : fmt::format("error {}", err);
}

uint32_t header_crc(const BlockHeader& hdr) {
    return crc32c(std::as_bytes(std::span(&hdr, 1)).first(offsetof(BlockHeader, header_crc)));
}

const char* block_type_name(uint16_t type) {
    switch (static_cast<BlockType>(type)) {
        case BlockType::meta:
            return "META";
        case BlockType::records:
            return "RECORDS";
        case BlockType::trailer:
            return "TRAILER";
        case BlockType::cpus:
            return "CPUS";
        case BlockType::devices:
            return "DEVICES";
    }
    return "unknown";
}

ssize_t pread_full(int fd, void* buf, size_t n, uint64_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t r =
            ::pread(fd, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(off + done));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (r == 0) {
            break;
        }
        done += static_cast<size_t>(r);
    }
    return static_cast<ssize_t>(done);
}

}  // namespace recfile_internal

using namespace recfile_internal;

namespace {

// META's KEY as a T (a string, or a list of strings): FALLBACK when it is
// absent or null, an Error naming it when it is of another type.
template <typename T>
T json_get(const nlohmann::json& j, const char* key, T fallback) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
        return fallback;
    try {
        return it->template get<T>();
    } catch (const nlohmann::json::exception&) {
        throw Error(fmt::format("META.{}: {} is not {}", key, json_text(*it),
                                std::is_same_v<T, std::string> ? "a string" : "a list of strings"));
    }
}

}  // namespace

#if defined(__x86_64__)
namespace {
// The SSE 4.2 crc32 instruction computes this very CRC (Castagnoli,
// reflected), 8 bytes per instruction: reading a recording checks every
// block, and the table loop was a tenth of `report`'s time.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const std::byte* p, size_t n,
                                                        uint32_t crc) {
    uint64_t c = crc;
    // 32 bytes a round: fewer loop instructions (the recorder checksums
    // every record it writes)
    for (; n >= 32; n -= 32, p += 32) {
        uint64_t v[4];
        std::memcpy(v, p, 32);
        c = __builtin_ia32_crc32di(c, v[0]);
        c = __builtin_ia32_crc32di(c, v[1]);
        c = __builtin_ia32_crc32di(c, v[2]);
        c = __builtin_ia32_crc32di(c, v[3]);
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    auto c32 = static_cast<uint32_t>(c);
    for (; n; n--, p++)
        c32 = __builtin_ia32_crc32qi(c32, static_cast<unsigned char>(*p));
    return c32;
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
}  // namespace
#endif

uint32_t crc32c(std::span<const std::byte> data, uint32_t crc) {
    crc = ~crc;
#if defined(__x86_64__)
    if (kHaveSse42)
        return ~crc32c_sse42(data.data(), data.size(), crc);
#endif
    for (std::byte b : data) {
        crc = (crc >> 8) ^ kCrc32cTable[(crc ^ static_cast<uint32_t>(b)) & 0xffu];
    }
    return ~crc;
}

// ------------------------------------------------------------------ schema

const std::vector<RecordField>& record_schema() {
    // Every field of struct nvmetrace_rec, in order; the static_assert below
    // proves the list covers the struct with no hidden padding.
#define NVMETRACE_FIELD(f)                                       \
    RecordField {                                                \
#f, static_cast < uint32_t>(offsetof(nvmetrace_rec, f)), \
            static_cast < uint32_t>(sizeof(nvmetrace_rec::f)),   \
            "u" + std::to_string(8 * sizeof(nvmetrace_rec::f))   \
    }
    static const std::vector<RecordField> fields = {
        NVMETRACE_FIELD(ts),     NVMETRACE_FIELD(lba),    NVMETRACE_FIELD(aux),
        NVMETRACE_FIELD(dev),    NVMETRACE_FIELD(len),    NVMETRACE_FIELD(event),
        NVMETRACE_FIELD(qid),    NVMETRACE_FIELD(cid),    NVMETRACE_FIELD(tag),
        NVMETRACE_FIELD(cntlid), NVMETRACE_FIELD(opcode), NVMETRACE_FIELD(flags),
        NVMETRACE_FIELD(seq),
    };
#undef NVMETRACE_FIELD
    static_assert(3 * 8 + 2 * 4 + 5 * 2 + 2 * 1 + 4 == sizeof(nvmetrace_rec),
                  "record_schema() must list every field of struct nvmetrace_rec");
    return fields;
}

const std::map<uint16_t, std::string>& default_event_names() {
    static const std::map<uint16_t, std::string> names = {
        {NVMETRACE_EV_BIO_QUEUE, "bio_queue"},
        {NVMETRACE_EV_RQ_INSERT, "rq_insert"},
        {NVMETRACE_EV_RQ_ISSUE, "rq_issue"},
        {NVMETRACE_EV_NVME_SETUP, "nvme_setup"},
        {NVMETRACE_EV_NVME_COMPLETE, "nvme_complete"},
        {NVMETRACE_EV_RQ_COMPLETE, "rq_complete"},
        {NVMETRACE_EV_NVMET_INIT, "nvmet_init"},
        {NVMETRACE_EV_NVMET_EXEC, "nvmet_exec"},
        {NVMETRACE_EV_NVMET_BIO_DONE, "nvmet_bio_done"},
        {NVMETRACE_EV_NVMET_COMPLETE, "nvmet_complete"},
        {NVMETRACE_EV_SYSCALL_SUBMIT, "syscall_submit"},
        {NVMETRACE_EV_FILE_SUBMIT, "file_submit"},
        {NVMETRACE_EV_AIO_COMPLETE, "aio_complete"},
        {NVMETRACE_EV_AIO_REAP, "aio_reap"},
        {NVMETRACE_EV_URING_WQ, "uring_wq"},
        {NVMETRACE_EV_URING_CQE, "uring_cqe"},
        {NVMETRACE_EV_URING_REAP, "uring_reap"},
        {NVMETRACE_EV_URING_SUBMIT, "uring_submit"},
        {NVMETRACE_EV_SYNC_SUBMIT, "sync_submit"},
        {NVMETRACE_EV_SYNC_RETURN, "sync_return"},
        {NVMETRACE_EV_FS_SUBMIT, "fs_submit"},
        {NVMETRACE_EV_PAGECACHE_READ, "pagecache_read"},
        {NVMETRACE_EV_TCP_CMD_SEND, "tcp_cmd_send"},
        {NVMETRACE_EV_TCP_H2C_SEND, "tcp_h2c_send"},
        {NVMETRACE_EV_TCP_R2T_RECV, "tcp_r2t_recv"},
        {NVMETRACE_EV_TCP_C2H_RECV, "tcp_c2h_recv"},
        {NVMETRACE_EV_TCP_RSP_RECV, "tcp_rsp_recv"},
        {NVMETRACE_EV_TCPT_CMD_RECV, "tcpt_cmd_recv"},
        {NVMETRACE_EV_TCPT_R2T_SEND, "tcpt_r2t_send"},
        {NVMETRACE_EV_TCPT_H2C_RECV, "tcpt_h2c_recv"},
        {NVMETRACE_EV_TCPT_DATA_RECV, "tcpt_data_recv"},
        {NVMETRACE_EV_RDMA_POST_SEND, "rdma_post_send"},
        {NVMETRACE_EV_RDMA_SEND_DONE, "rdma_send_done"},
        {NVMETRACE_EV_RDMA_RECV_DONE, "rdma_recv_done"},
        {NVMETRACE_EV_RDMA_COMPLETE, "rdma_complete"},
        {NVMETRACE_EV_RDMAT_RECV, "rdmat_recv"},
        {NVMETRACE_EV_RDMAT_READ_DONE, "rdmat_read_done"},
        {NVMETRACE_EV_RDMAT_RSP_POST, "rdmat_rsp_post"},
        {NVMETRACE_EV_RDMAT_SEND_DONE, "rdmat_send_done"},
        {NVMETRACE_EV_GAP, "gap"},
        {NVMETRACE_EV_SPDK_SUBMIT, "spdk_submit"},
        {NVMETRACE_EV_SPDK_COMPLETE, "spdk_complete"},
    };
    return names;
}

// ------------------------------------------------------------------ META JSON

RecordingMeta make_recording_meta() {
    RecordingMeta meta;
    utsname u{};
    if (uname(&u) == 0) {
        meta.hostname = u.nodename;
        meta.kernel_release = u.release;
    }
    // Bracket the realtime read with two monotonic reads and pair it with
    // their midpoint: the pair is then off by at most half the bracket.
    int64_t mono0 = clock_ns(CLOCK_MONOTONIC);
    meta.start_realtime_ns = clock_ns(CLOCK_REALTIME);
    int64_t mono1 = clock_ns(CLOCK_MONOTONIC);
    meta.start_monotonic_ns = mono0 + (mono1 - mono0) / 2;
    return meta;
}

nlohmann::json meta_to_json(const RecordingMeta& meta) {
    nlohmann::json j = meta.extra.is_object() ? meta.extra : nlohmann::json::object();
    j["format_version"] = meta.format_version;
    j["clock"] = meta.clock;
    j["hostname"] = meta.hostname;
    j["kernel_release"] = meta.kernel_release;
    j["module_version"] = meta.module_version;
    j["tool_version"] = meta.tool_version;
    j["role"] = meta.role;
    j["transport"] = meta.transport;
    j["sample"] = meta.sample;
    j["seed"] = meta.seed;
    j["start"] = {{"realtime_ns", meta.start_realtime_ns},
                  {"monotonic_ns", meta.start_monotonic_ns}};
    j["command_line"] = meta.command_line;
    j["devices"] = meta.devices;
    nlohmann::json fields = nlohmann::json::array();
    for (const RecordField& f : meta.record_fields) {
        fields.push_back(
            {{"name", f.name}, {"offset", f.offset}, {"size", f.size}, {"type", f.type}});
    }
    j["record"] = {{"size", meta.record_size}, {"byte_order", "little"}, {"fields", fields}};
    nlohmann::json events = nlohmann::json::object();
    for (const auto& [num, name] : meta.events) {
        events[std::to_string(num)] = name;
    }
    j["events"] = events;
    return j;
}

void check_device_entry(const nlohmann::json& d, const std::string& where) {
    if (!d.is_object()) {
        throw Error(fmt::format("{}: {} is not an object", where, json_text(d)));
    }
    // the fields devices_from_json() reads for the entry's kind, checked here
    // once; the rest is stored as given
    const auto str = [&](const char* k) {
        if (auto f = d.find(k); f != d.end() && !f->is_string()) {
            throw Error(fmt::format("{}.{}: {} is not a string", where, k, json_text(*f)));
        }
    };
    str("kind");
    const std::string kind = d.value("kind", "");
    if (kind == "disk" || kind == "path") {
        (void)json_int_or<uint32_t>(d, "dev", 0, where);
        (void)json_int_or<uint16_t>(d, "cntlid", 0, where);
        str("name");
    }
    if (kind == "disk" || kind == "target_ns") {
        (void)json_int_or<uint32_t>(d, "lbs", 0, where);
    }
    if (kind == "path") {
        (void)json_int_or<uint32_t>(d, "head_dev", 0, where);
    }
    if (kind == "target_ns") {
        (void)json_int_or<uint32_t>(d, "nsid", 0, where);
        str("device_path");
        str("subsysnqn");
    }
    (void)json_int_or<int64_t>(d, "appeared_ns", 0, where);
    (void)json_int_or<int64_t>(d, "gone_ns", 0, where);
}

nlohmann::json device_change_to_json(const DeviceChange& c) {
    return {{"monotonic_ns", c.monotonic_ns}, {"added", c.added}, {"gone", c.gone}};
}

DeviceChange device_change_from_json(const nlohmann::json& j) {
    if (!j.is_object()) {
        throw Error(fmt::format("{} is not an object", json_text(j)));
    }
    DeviceChange c;
    c.monotonic_ns = json_int<int64_t>(j.at("monotonic_ns"), "monotonic_ns");
    for (const char* k : {"added", "gone"}) {
        if (auto it = j.find(k); it != j.end()) {
            if (!it->is_array()) {
                throw Error(fmt::format("{}: {} is not an array", k, json_text(*it)));
            }
            (std::string_view(k) == "added" ? c.added : c.gone) = *it;
        }
    }
    return c;
}

namespace {

// The device's identity as text: its gone entry (device_gone_entry()).
std::string device_key(const nlohmann::json& d) {
    return device_gone_entry(d).dump();
}

}  // namespace

nlohmann::json device_gone_entry(const nlohmann::json& d) {
    static constexpr std::array<const char*, 3> kDisk{"kind", "name", "dev"};
    static constexpr std::array<const char*, 3> kTarget{"kind", "subsysnqn", "nsid"};
    nlohmann::json g = nlohmann::json::object();
    if (!d.is_object())
        return g;
    const auto kind = d.find("kind");
    for (const char* k : kind != d.end() && *kind == "target_ns" ? kTarget : kDisk)
        if (auto it = d.find(k); it != d.end())
            g[k] = *it;
    return g;
}

void DeviceIndex::catch_up(const nlohmann::json& devices) {
    for (; indexed < devices.size(); indexed++) {
        const nlohmann::json& d = devices[indexed];
        if (d.is_object() && !d.contains("gone_ns"))
            open[device_key(d)].push_back(indexed);
    }
}

void apply_device_change(RecordingMeta& meta, const DeviceChange& c, const std::string& where,
                         DeviceIndex* index) {
    DeviceIndex local;
    DeviceIndex& idx = index ? *index : local;
    idx.catch_up(meta.devices);
    // gone first: a disk that changed controller in this change is gone
    // (its old entry) and added (its new one)
    for (const nlohmann::json& g : c.gone) {
        if (!g.is_object())
            continue;
        auto it = idx.open.find(device_key(g));
        if (it == idx.open.end() || it->second.empty())
            continue;
        meta.devices[it->second.back()]["gone_ns"] = c.monotonic_ns;
        it->second.pop_back();
    }
    for (size_t i = 0; i < c.added.size(); i++) {
        const std::string at = fmt::format("{}.added[{}]", where, i);
        try {
            if (meta.devices.size() >= kMaxDevices)
                throw Error(
                    fmt::format("{}: the recording already names {} devices, the most a "
                                "reader keeps",
                                at, kMaxDevices));
            check_device_entry(c.added[i], at);
            nlohmann::json d = c.added[i];
            d["appeared_ns"] = c.monotonic_ns;
            meta.devices.push_back(std::move(d));
        } catch (const Error& e) {
            meta.dropped_devices.push_back(fmt::format("{}; that device is left out", e.what()));
        }
    }
    idx.catch_up(meta.devices);
}

RecordingMeta meta_from_json(const nlohmann::json& j) {
    static const char* const kCore[] = {
        "format_version", "clock",        "hostname",  "kernel_release", "module_version",
        "tool_version",   "role",         "transport", "sample",         "seed",
        "start",          "command_line", "devices",   "record",         "events"};
    if (!j.is_object()) {
        throw Error("META is not a JSON object");
    }
    RecordingMeta m;
    m.format_version = json_int_or<uint32_t>(j, "format_version", 0, "META");
    m.clock = json_get<std::string>(j, "clock", "");
    m.hostname = json_get<std::string>(j, "hostname", "");
    m.kernel_release = json_get<std::string>(j, "kernel_release", "");
    m.module_version = json_get<std::string>(j, "module_version", "");
    m.tool_version = json_get<std::string>(j, "tool_version", "");
    m.role = json_get<std::string>(j, "role", "");
    m.transport = json_get<std::string>(j, "transport", "unknown");
    m.sample = json_int_or<uint32_t>(j, "sample", 1, "META");
    if (m.sample == 0) {
        throw Error("META.sample: 0 (one command in 0 cannot be sampled; 1 is every command)");
    }
    m.seed = json_int_or<uint64_t>(j, "seed", 0, "META");
    if (auto it = j.find("start"); it != j.end()) {
        m.start_realtime_ns = json_int<int64_t>(it->at("realtime_ns"), "META.start.realtime_ns");
        m.start_monotonic_ns = json_int<int64_t>(it->at("monotonic_ns"), "META.start.monotonic_ns");
    }
    m.command_line = json_get<std::vector<std::string>>(j, "command_line", {});
    m.devices = nlohmann::json::array();
    if (auto it = j.find("devices"); it != j.end()) {
        if (!it->is_array()) {
            throw Error("META.devices is not an array");
        }
        for (size_t i = 0; i < it->size(); i++) {
            const nlohmann::json& d = (*it)[i];
            const std::string where = fmt::format("META.devices[{}]", i);
            try {
                check_device_entry(d, where);
                m.devices.push_back(d);
            } catch (const Error& e) {
                m.dropped_devices.push_back(fmt::format("{}; that device is left out", e.what()));
            }
        }
    }
    // The schema is what makes the records readable: no defaults for it.
    const nlohmann::json& rec = j.at("record");
    m.record_size = json_int<uint32_t>(rec.at("size"), "META.record.size");
    if (json_get<std::string>(rec, "byte_order", "little") != "little") {
        throw Error("records are not little-endian");
    }
    m.record_fields.clear();
    for (const nlohmann::json& f : rec.at("fields")) {
        m.record_fields.push_back({f.at("name").get<std::string>(),
                                   json_int<uint32_t>(f.at("offset"), "META.record.fields.offset"),
                                   json_int<uint32_t>(f.at("size"), "META.record.fields.size"),
                                   f.at("type").get<std::string>()});
    }
    m.events.clear();
    if (auto it = j.find("events"); it != j.end()) {
        for (const auto& [num, name] : it->items()) {
            unsigned long n = std::stoul(num);
            if (n > UINT16_MAX) {
                throw Error(fmt::format("event number {} out of range", num));
            }
            m.events[static_cast<uint16_t>(n)] = name.get<std::string>();
        }
    }
    m.extra = nlohmann::json::object();
    for (const auto& item : j.items()) {
        const std::string& key = item.key();
        if (std::find_if(std::begin(kCore), std::end(kCore),
                         [&](const char* c) { return key == c; }) == std::end(kCore)) {
            m.extra[key] = item.value();
        }
    }
    return m;
}

nlohmann::json trailer_to_json(const RecordingTrailer& t) {
    return {
        {"end", {{"realtime_ns", t.end_realtime_ns}, {"monotonic_ns", t.end_monotonic_ns}}},
        {"duration_ns", t.duration_ns},
        {"records", t.records},
        {"lost", t.lost},
        {"lost_per_cpu", t.lost_per_cpu},
        {"stats", t.stats},
    };
}

RecordingTrailer trailer_from_json(const nlohmann::json& j) {
    if (!j.is_object()) {
        throw Error("TRAILER is not a JSON object");
    }
    RecordingTrailer t;
    if (auto it = j.find("end"); it != j.end()) {
        t.end_realtime_ns = json_int_or<int64_t>(*it, "realtime_ns", 0, "TRAILER.end");
        t.end_monotonic_ns = json_int_or<int64_t>(*it, "monotonic_ns", 0, "TRAILER.end");
    }
    t.duration_ns = json_int_or<uint64_t>(j, "duration_ns", 0, "TRAILER");
    t.records = json_int_or<uint64_t>(j, "records", 0, "TRAILER");
    t.lost = json_int_or<uint64_t>(j, "lost", 0, "TRAILER");
    if (auto it = j.find("lost_per_cpu"); it != j.end()) {
        if (!it->is_array()) {
            throw Error("TRAILER.lost_per_cpu is not an array");
        }
        for (const nlohmann::json& v : *it) {
            t.lost_per_cpu.push_back(json_int<uint64_t>(v, "TRAILER.lost_per_cpu"));
        }
    }
    t.stats = json_get<nlohmann::json>(j, "stats", nlohmann::json::object());
    return t;
}

}  // namespace nvmetrace
