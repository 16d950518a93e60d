// make_seed IN.ntr OUT.ntr RECORDS BLOCK_RECORDS [ZSTD_LEVEL]: a seed for the
// fuzz corpus from a real recording: its META as it is, its first RECORDS
// records in blocks of BLOCK_RECORDS (zstd at ZSTD_LEVEL, 0: stored), and a
// TRAILER with the original's lost count. Seeds stay small so the fuzzer runs
// fast, and real so it starts from what the module writes.
#include "format/recfile.h"
#include "util/error.h"

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
        std::vector<nvmetrace_rec> recs;
        in.for_each([&](std::span<const nvmetrace_rec> block) {
            for (const auto& r : block)
                if (recs.size() < want)
                    recs.push_back(r);
        });
        out.append(recs);
        nvmetrace::RecordingTrailer t;
        if (in.trailer())
            t.lost = in.trailer()->lost;
        out.close(t);
        printf("%s: %zu records\n", argv[2], recs.size());
    } catch (const std::exception& e) {
        fprintf(stderr, "make_seed: %s\n", e.what());
        return 1;
    }
    return 0;
}
