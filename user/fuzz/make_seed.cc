// make_seed IN.ntr OUT.ntr RECORDS BLOCK_RECORDS [ZSTD_LEVEL]: a seed for the
// fuzz corpus from a real recording: its META as it is, its first RECORDS
// records in blocks of BLOCK_RECORDS (zstd at ZSTD_LEVEL, 0: stored), and a
// TRAILER with the original's lost count, ending at the last record kept.
// Seeds stay small so the fuzzer runs fast, and real so it starts from what
// the module writes.
#include "format/recfile.h"
#include "util/error.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: make_seed IN.ntr OUT.ntr RECORDS BLOCK_RECORDS [ZSTD_LEVEL]\n");
        return 2;
    }
    try {
        auto in = nvmetrace::RecordingReader::open(argv[1]);
        const size_t want = std::strtoul(argv[3], nullptr, 10);
        nvmetrace::RecordingWriterOptions wo;
        wo.block_records = static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10));
        wo.zstd_level = argc == 6 ? std::atoi(argv[5]) : 0;
        auto out = nvmetrace::RecordingWriter::open(argv[2], wo);
        out.write_meta(in.meta());
        // the records with their CPUs, where the recording has them
        std::vector<nvmetrace_rec> recs;
        std::vector<nvmetrace::CpuRun> runs;
        std::span<const nvmetrace_rec> block;
        while (recs.size() < want && in.next(block)) {
            const size_t n = std::min(block.size(), want - recs.size());
            recs.insert(recs.end(), block.begin(), block.begin() + static_cast<ptrdiff_t>(n));
            std::span<const nvmetrace::CpuRun> cpus = in.cpu_runs();
            if (cpus.empty()) {
                runs.push_back({nvmetrace::kCpuUnknown, static_cast<uint32_t>(n)});
                continue;
            }
            for (size_t left = n; const auto& r : cpus) {
                if (left == 0)
                    break;
                const auto k = static_cast<uint32_t>(std::min<size_t>(left, r.count));
                runs.push_back({r.cpu, k});
                left -= k;
            }
        }
        out.append(recs, runs);
        // The end is the last record kept, on the recording's own clocks:
        // close() would take this machine's clock now, against a META
        // start from the machine that recorded (a duration of hours).
        nvmetrace::RecordingTrailer t;
        if (in.trailer())
            t.lost = in.trailer()->lost;
        const nvmetrace::RecordingMeta& m = in.meta();
        int64_t last = m.start_monotonic_ns;
        for (const auto& r : recs)
            last = std::max(last, static_cast<int64_t>(r.ts));
        t.end_monotonic_ns = last + 1;
        t.end_realtime_ns = m.start_realtime_ns + (t.end_monotonic_ns - m.start_monotonic_ns);
        t.duration_ns = static_cast<uint64_t>(t.end_monotonic_ns - m.start_monotonic_ns);
        out.close(t);
        printf("%s: %zu records\n", argv[2], recs.size());
    } catch (const std::exception& e) {
        fprintf(stderr, "make_seed: %s\n", e.what());
        return 1;
    }
    return 0;
}
