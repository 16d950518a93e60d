// Writes a synthetic host and target recording (tests/synth.h) for the
// browser test of `report --html` (html_browser_test.sh):
//   synth_recording HOST.ntr TARGET.ntr [COMMANDS]
#include "synth.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

int main(int argc, char** argv) {
    if (argc < 3 || argc > 4) {
        std::fprintf(stderr, "usage: synth_recording HOST.ntr TARGET.ntr [COMMANDS]\n");
        return 2;
    }
    nvmetrace::synth::Options o;
    o.commands = argc == 4 ? std::strtoull(argv[3], nullptr, 10) : 20000;
    o.queues = 4;
    o.jitter = 0.6;
    try {
        nvmetrace::synth::write(argv[1], argv[2], o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "synth_recording: %s\n", e.what());
        return 1;
    }
    return 0;
}
