// libFuzzer target: one recording file through everything that reads one.
//
// The input is a recording (.ntr). It goes through `report` (text, JSON, per
// command, and joined when it holds both sides), `script` (text and JSON) and
// `compare` of the file with itself, as the command line runs them, output
// thrown away. An nvmetrace::Error is the expected answer to a bad file (it
// names the file and what is wrong); anything else that escapes (a JSON library
// exception, std::out_of_range, ...) is a defect, and so is every sanitizer
// report, a hang or a blown stack.
//
// The mutator (recording_mutator.cc) keeps inputs valid in structure: it edits
// a block's records field by field, or META's and TRAILER's JSON value by
// value, or the block list, then recomputes every checksum as the writer does,
// so mutants get past the CRCs into the code that trusts them.
//
//   build/fuzz/recording_fuzz user/fuzz/corpus   (make fuzz)
#include "cmd/compare.h"
#include "cmd/report.h"
#include "cmd/script.h"
#include "util/error.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <typeinfo>

namespace {

std::string g_path;

// Runs fn; an nvmetrace::Error is a fine answer, anything else aborts with
// what it said.
template <typename Fn>
void expect_clean(const char* what, Fn&& fn) {
    try {
        fn();
    } catch (const nvmetrace::Error&) {
    } catch (const std::exception& e) {
        fprintf(stderr, "recording_fuzz: %s threw a %s, not nvmetrace::Error: %s\n", what,
                typeid(e).name(), e.what());
        abort();
    }
}

void write_input(const uint8_t* data, size_t size) {
    const int fd = open(g_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(g_path.c_str());
        abort();
    }
    size_t off = 0;
    while (off < size) {
        const ssize_t n = write(fd, data + off, size - off);
        if (n <= 0) {
            perror(g_path.c_str());
            abort();
        }
        off += static_cast<size_t>(n);
    }
    close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* dir = getenv("TMPDIR");
    g_path = std::string(dir && *dir ? dir : "/tmp") + "/recording_fuzz." +
             std::to_string(getpid()) + ".ntr";
    // the reports go nowhere
    if (!freopen("/dev/null", "w", stdout))
        abort();
    atexit([] { unlink(g_path.c_str()); });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // the notes and problems a report prints go to stderr: a fuzzing run
    // passes -close_fd_mask=2, which libFuzzer and the sanitizers see through
    write_input(data, size);
    using namespace nvmetrace;
    // the report as text (joined when both sides are there, with the detail),
    // as JSON of each side apart, and per command
    for (int mode = 0; mode < 3; mode++) {
        expect_clean("report", [&] {
            ReportCommandOptions o;
            o.files = {g_path};
            o.detail = mode == 0;
            o.json = o.no_join = mode == 1;
            o.commands = mode == 2;
            (void)run_report(o);
        });
    }
    for (bool json : {false, true}) {
        if (json != (size % 2 == 0))
            continue;  // one of the two forms per input, the same for the same input
        expect_clean("script", [&] {
            ScriptOptions o;
            o.files = {g_path};
            o.json = json;
            if (size % 3 == 0)
                o.cpus = {0, 2};  // the CPU filter walks the runs too
            FILE* out = fopen("/dev/null", "w");
            if (!out)
                abort();
            try {
                (void)run_script(o, out);
            } catch (...) {
                fclose(out);
                throw;
            }
            fclose(out);
        });
    }
    // compare analyses both runs again: on a quarter of the inputs
    if (size % 4 == 1)
        expect_clean("compare", [&] {
            CompareOptions o;
            o.a = {g_path};
            o.b = {g_path};
            o.json = true;
            (void)run_compare(o);
        });

    return 0;
}
