// libFuzzer target: one SPDK trace file (the shared-memory ring an SPDK app
// writes) through everything that reads one: the layout, the tracepoints and
// counters `probe` prints, each core's entries, and the raw decoding the live
// follower uses.  An nvmetrace::Error is the expected answer to a bad file;
// anything else that escapes, a sanitizer report or a hang is a defect.
//
// The seeds are written by make_spdk_seed (rings laid out as SPDK v26.05 lays
// them out); tests/fuzz-check makes them and runs this after recording_fuzz.
#include "spdk/trace_file.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <typeinfo>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using nvmetrace::spdk::TraceFile;
    try {
        const TraceFile f = TraceFile::parse({data, size}, "fuzz");
        for (const auto& t : f.tpoints)
            (void)f.hits(t.id), (void)f.enabled(t.id);
        for (const auto& c : f.lcores)
            (void)f.entries(c);
        // the follower's path: raw entries as they come, the last maybe unfinished
        size_t used = 0;
        (void)f.decode({data, size - size % 32}, true, &used);
        if (used > size / 32)
            abort();
    } catch (const nvmetrace::Error&) {
    } catch (const std::exception& e) {
        fprintf(stderr, "spdk_trace_fuzz: a %s escaped, not nvmetrace::Error: %s\n",
                typeid(e).name(), e.what());
        abort();
    }
    return 0;
}
