// `nvmetrace report`: analyse recordings: each file through its Assembler
// into Stats, or, when the files hold both sides, host and target joined
// (join_files()), then printed (report/printer.h).
#pragma once

#include <string>
#include <vector>

namespace nvmetrace {

struct ReportCommandOptions {
    std::vector<std::string> files;
    bool detail = false;
    bool json = false;
    bool commands = false;     // one JSON line per command instead of the report
    bool no_join = false;      // host and target reported apart even when both are there
    double join_window_s = 0;  // how long a command waits for its partner; 0: default
    std::string html;          // write the report as a self-contained HTML page here
};

int run_report(const ReportCommandOptions& opts);

}  // namespace nvmetrace
