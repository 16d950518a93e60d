// `nvmetrace script`: every record of a recording, one line each in the
// order the recorder wrote them (time order), as `perf script` and blkparse
// print theirs: time, CPU, role, event, device, queue, command id, tag, op,
// LBA, length, aux.  Filters by event, device (records that name one), CPU
// and time window; --json prints one object a line.  The records as the module wrote
// them: nothing assembled.
#pragma once

#include "analysis/device_table.h"
#include "format/recfile.h"

#include <linux/nvmetrace.h>
#include <stdio.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvmetrace {

struct ScriptOptions {
    std::vector<std::string> files{};
    std::vector<std::string> events{};   // META event names ("bio_queue"); empty: every event
    std::vector<std::string> devices{};  // device names (nvme0n1, a target namespace); empty: all
    std::optional<double> from_s{};      // seconds since the recording's start
    std::optional<double> to_s{};
    // CPUs (--cpu 0-3,8); empty: all, records of an unknown CPU included
    std::vector<uint32_t> cpus{};
    bool json = false;
};

// What a record is printed with: its recording's META and device names.
class ScriptFormat {
public:
    ScriptFormat(const RecordingMeta& meta, std::string file);

    // Seconds since the recording's start (negative for a record before it).
    double seconds(const nvmetrace_rec& r) const;
    // "host" or "target": the side of the record's event, else the recording's role.
    std::string_view role(const nvmetrace_rec& r) const;
    std::string event_name(uint16_t event) const;
    // The host disk or the target namespace the record names; "-" for a
    // target record other than nvmet_req_init's (they carry none).
    std::string device(const nvmetrace_rec& r) const;

    // One line, no newline: the columns of header().  cpu: the CPU the
    // record was recorded on, kCpuUnknown when the file does not say.
    std::string line(const nvmetrace_rec& r, uint32_t cpu = kCpuUnknown) const;
    static std::string header();
    nlohmann::json json(const nvmetrace_rec& r, uint32_t cpu = kCpuUnknown) const;

private:
    const RecordingMeta& meta_;
    std::string file_;
    DeviceTable table_;
};

// "0-3,8" as CPU numbers (--cpu); throws Error on anything else.
std::vector<uint32_t> parse_cpu_list(const std::string& list);

int run_script(const ScriptOptions& opts, FILE* out = stdout);

}  // namespace nvmetrace
