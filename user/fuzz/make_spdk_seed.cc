// Not fuzzed: writes the seeds of spdk_trace_fuzz into a directory, SPDK trace
// files laid out as SPDK v26.05 lays them out (the unit tests' writer):
// entries on two cores, one with a submission continued over three entries,
// and a ring that wrapped.
//
//   make_spdk_seed DIR
#include "spdk/trace_file_synth.h"

#include <stdio.h>

#include <string>

using nvmetrace::spdk::test::kTcpNew;
using nvmetrace::spdk::test::kTcpSubmit;
using nvmetrace::spdk::test::SynthTrace;

namespace {

bool write(const std::string& path, const SynthTrace& s) {
    FILE* f = fopen(path.c_str(), "wb");
    if (!f)
        return false;
    const bool ok = fwrite(s.bytes().data(), 1, s.bytes().size(), f) == s.bytes().size();
    return fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_spdk_seed DIR\n");
        return 2;
    }
    const std::string dir = argv[1];
    SynthTrace two(2, 8);
    two.tcp_tpoints();
    two.enable(kTcpNew);
    two.hit(0, kTcpNew, 2);
    two.record(0, 100, kTcpNew, 1, {1});
    two.record(1, 110, kTcpSubmit, 2, {0xabc, 5, 2, 0x1000, 0, 7, 1});
    two.record(0, 120, kTcpNew, 3, {2});
    SynthTrace wrapped(1, 8);
    wrapped.tcp_tpoints();
    for (uint64_t i = 0; i < 4; i++)
        wrapped.record(0, 200 + i, kTcpSubmit, i, {i, i, 2, 0, 0, 0, 1});
    if (!write(dir + "/two-cores", two) || !write(dir + "/wrapped", wrapped)) {
        perror(dir.c_str());
        return 1;
    }
    return 0;
}
