// Uprobe events made through tracefs (uprobe_events), named in a group of
// their own and removed when the owner goes: what `record --spdk-host -t
// rdma` places on SPDK's library.  Each event's fields (its fetch
// arguments) are read back from its format file, so a sample's raw bytes
// are decoded by name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace nvmetrace {

// A field of an event's raw sample: "field:u16 cid;\toffset:10;\tsize:2;".
struct TraceField {
    size_t offset = 0, size = 0;
};

// An event's format file's fields by name.  Throws Error on a format with
// no field lines.
std::map<std::string, TraceField, std::less<>> parse_trace_format(std::string_view format);

// The field's value in a raw sample (little-endian, 1-8 bytes); 0 when the
// sample is too short.
uint64_t trace_field(const std::vector<uint8_t>& raw, const TraceField& f);

// The tracefs mount: /sys/kernel/tracing or /sys/kernel/debug/tracing;
// mounted on /sys/kernel/tracing when neither is.  Throws Error saying what
// the kernel lacks (CONFIG_UPROBE_EVENTS) or that root is needed.
std::string tracefs_dir();

// The events in uprobe_events's text ("GROUP/NAME") that a recorder made
// under group nvmetrace_<pid> and whose process is not `alive`: left by a
// recorder that was killed.
std::vector<std::string> stale_uprobe_events(std::string_view uprobe_events,
                                             const std::function<bool(int)>& alive);

class UprobeEvents {
public:
    // Events in group `group` (e.g. "nvmetrace_1234").
    explicit UprobeEvents(std::string group);
    ~UprobeEvents();  // removes every event it made
    UprobeEvents(const UprobeEvents&) = delete;
    UprobeEvents& operator=(const UprobeEvents&) = delete;

    struct Event {
        std::string name;
        uint64_t id = 0;  // perf_event_attr.config for PERF_TYPE_TRACEPOINT
        std::map<std::string, TraceField, std::less<>> fields;
    };
    // Places a uprobe at `offset` in `file` with fetch arguments `args`
    // ("cid=+12(%si):u16 ..."); throws Error with the kernel's reason.
    Event add(const std::string& name, const std::string& file, uint64_t offset,
              const std::string& args);

private:
    std::string dir_, group_;
    std::vector<Event> events_;
};

}  // namespace nvmetrace
