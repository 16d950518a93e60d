// A command run by the tool as a child (`record -- CMD ARGS`): found in PATH
// as a shell would, started with the caller's identity and environment, and
// watched through a pidfd, which a poll() loop can wait on with its other
// work.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace nvmetrace {

// The file execvp() would run for `name`: `name` itself when it holds a '/',
// else the first executable regular file of that name in $PATH.  Throws
// Error saying why it cannot be run (not found, not executable, a folder).
std::string resolve_command(const std::string& name);

// argv as one line a shell reads back into the same words: each word with a
// character outside [A-Za-z0-9_./:=,+@%-], or empty, in single quotes (a quote
// inside written '\''), joined by spaces.  For the command lines files keep.
std::string shell_words(const std::vector<std::string>& argv);

class ChildProcess {
public:
    // Forks and execs argv (argv[0] looked up in PATH).  Returns once the
    // exec has succeeded; throws Error (with the reason from the child) when
    // it failed, the child already reaped.  With output >= 0, the child's
    // standard output and error go to that fd and its input is /dev/null.
    // With before_exec, the child waits before its exec until
    // before_exec(pid) has returned (e.g. to open perf events on it that
    // start at its exec); when it throws, the child is killed, reaped, and
    // the exception passes on.
    static ChildProcess start(const std::vector<std::string>& argv, int output = -1,
                              const std::function<void(pid_t)>& before_exec = {});

    ChildProcess(ChildProcess&& o) noexcept;
    ChildProcess& operator=(ChildProcess&&) = delete;
    ChildProcess(const ChildProcess&) = delete;
    ~ChildProcess();  // kills (SIGKILL) and reaps a child still running

    pid_t pid() const { return pid_; }
    // Readable (POLLIN) once the child has exited.
    int pidfd() const { return pidfd_; }
    // Whether it has exited, without blocking; reaps it when it has.
    bool exited();
    // Sends sig unless the child has been reaped.
    void signal(int sig);
    // Waits for the child (at most timeout_ms when >= 0); its status as a
    // shell gives it (exit code, or 128 + the signal that ended it), or
    // nothing when the time ran out.
    std::optional<int> wait(int timeout_ms = -1);
    // The status once it has exited (exited() or wait() said so).
    std::optional<int> status() const { return status_; }

private:
    ChildProcess(pid_t pid, int pidfd) : pid_(pid), pidfd_(pidfd) {}
    void reap();

    pid_t pid_ = -1;
    int pidfd_ = -1;
    std::optional<int> status_;
};

}  // namespace nvmetrace
