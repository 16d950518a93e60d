// `nvmetrace export`: recordings as a Chrome trace-event JSON file, which
// ui.perfetto.dev and chrome://tracing open.  The input is what `report`
// reads: each file through its Assembler, or, when the files hold both
// sides, host and target joined (join_files()).  Every command is a slice on
// its queue's track, its stages and components nested inside it; a joined
// command's target part is a slice on the target queue's track, on the
// host's clock.  Events are written as they come: memory is the join's and
// one end time per sub-track.
#pragma once

#include <stdio.h>

#include <string>
#include <vector>

namespace nvmetrace {

struct ExportOptions {
    std::vector<std::string> files{};
    std::string output{};      // "": default_export_path(files[0]); "-": stdout
    bool no_join = false;      // host and target apart even when both are there
    double join_window_s = 0;  // how long a command waits for its partner; 0: default
};

// "<basename of first without .ntr>.trace.json", in the current folder.
std::string default_export_path(const std::string& first);

// Writes the trace; notes and problems go to `err`.  Returns the exit code:
// 1 when a recording had a damaged block (the trace holds what came before).
int run_export(const ExportOptions& opts, FILE* err = stderr);

}  // namespace nvmetrace
