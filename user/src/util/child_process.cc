#include "util/child_process.h"

#include "util/error.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include <fmt/format.h>

namespace nvmetrace {

namespace {

// Why `path` cannot be executed, or "" when it can.
std::string not_executable(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        return errno == ENOENT ? "no such file" : std::string(strerror(errno));
    if (S_ISDIR(st.st_mode))
        return "a folder, not a program";
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    if (access(path.c_str(), X_OK) != 0)
        return "not executable (chmod +x?)";
    return "";
}

int pidfd_open(pid_t pid) {
    return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

int shell_status(int wstatus) {
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return 255;
}

}  // namespace

std::string shell_words(const std::vector<std::string>& argv) {
    auto plain = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string_view("_./:=,+@%-").find(c) != std::string_view::npos;
    };
    std::string line;
    for (const std::string& a : argv) {
        if (!line.empty())
            line += ' ';
        if (!a.empty() && std::all_of(a.begin(), a.end(), plain)) {
            line += a;
            continue;
        }
        line += '\'';
        for (char c : a)
            line += c == '\'' ? std::string("'\\''") : std::string(1, c);
        line += '\'';
    }
    return line;
}

std::string resolve_command(const std::string& name) {
    if (name.empty())
        throw Error("no command to run: give one after --, e.g. record -r host -- fio job.fio");
    if (name.find('/') != std::string::npos) {
        const std::string why = not_executable(name);
        if (!why.empty())
            throw Error(fmt::format("cannot run {}: {}", name, why));
        return name;
    }
    const char* env = getenv("PATH");
    const std::string_view path = env ? env : "/usr/local/bin:/usr/bin:/bin";
    std::string first_why;
    for (size_t at = 0; at <= path.size();) {
        size_t end = path.find(':', at);
        if (end == std::string_view::npos)
            end = path.size();
        std::string dir(path.substr(at, end - at));
        at = end + 1;
        const std::string file = (dir.empty() ? std::string(".") : dir) + "/" + name;
        const std::string why = not_executable(file);
        if (why.empty())
            return file;
        if (first_why.empty() && why != "no such file")
            first_why = fmt::format("{} is {}", file, why);
    }
    if (!first_why.empty())
        throw Error(fmt::format("cannot run {}: {}", name, first_why));
    throw Error(
        fmt::format("cannot run {}: not found in PATH (install it, or give its path)", name));
}

ChildProcess ChildProcess::start(const std::vector<std::string>& argv, int output,
                                 const std::function<void(pid_t)>& before_exec) {
    if (argv.empty())
        throw Error("no command to run: give one after --, e.g. record -r host -- fio job.fio");
    const std::string file = resolve_command(argv[0]);
    // everything the child needs is made before fork(): it only execs
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0)
        throw errno_error("pipe2", errno);
    int go[2] = {-1, -1};  // closed by the parent once before_exec has run
    if (before_exec && pipe2(go, O_CLOEXEC) != 0) {
        const int err = errno;
        close(report[0]);
        close(report[1]);
        throw errno_error("pipe2", err);
    }
    const int null_in = output >= 0 ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
    const pid_t pid = fork();
    if (pid < 0) {
        const int err = errno;
        close(report[0]);
        close(report[1]);
        if (go[0] >= 0) {
            close(go[0]);
            close(go[1]);
        }
        if (null_in >= 0)
            close(null_in);
        throw errno_error(fmt::format("cannot run {}: fork", argv[0]), err);
    }
    if (pid == 0) {
        close(report[0]);
        if (go[0] >= 0) {
            close(go[1]);
            char c;
            ssize_t r;
            do {
                r = read(go[0], &c, 1);
            } while (r < 0 && errno == EINTR);
            if (r != 0)  // the parent's before_exec failed (or the pipe did): no exec
                _exit(127);
        }
        if (output >= 0 && (dup2(output, 1) < 0 || dup2(output, 2) < 0 ||
                            (null_in >= 0 && dup2(null_in, 0) < 0))) {
            const int err = errno;
            [[maybe_unused]] ssize_t n = write(report[1], &err, sizeof err);
            _exit(127);
        }
        execv(file.c_str(), args.data());
        const int err = errno;
        [[maybe_unused]] ssize_t n = write(report[1], &err, sizeof err);
        _exit(127);
    }
    close(report[1]);
    if (null_in >= 0)
        close(null_in);
    ChildProcess child(pid, pidfd_open(pid));
    const int open_err = child.pidfd_ < 0 ? errno : 0;
    if (go[0] >= 0) {
        close(go[0]);
        try {
            if (!open_err)
                before_exec(pid);
        } catch (...) {
            [[maybe_unused]] ssize_t w = write(go[1], "x", 1);  // the child exits
            close(go[1]);
            close(report[0]);
            child.wait();
            throw;
        }
        close(go[1]);  // the child goes on to exec
    }
    // The pipe closes on a successful exec, or carries exec's errno.
    int err = 0;
    ssize_t n;
    do {
        n = read(report[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n == static_cast<ssize_t>(sizeof err)) {
        child.wait();
        throw errno_error(fmt::format("cannot run {}", argv[0]), err);
    }
    if (open_err) {
        child.signal(SIGKILL);
        child.wait();
        throw errno_error(fmt::format("{}: pidfd_open (Linux 5.3 or later)", argv[0]), open_err);
    }
    return child;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(o.pid_), pidfd_(o.pidfd_), status_(o.status_) {
    o.pid_ = -1;
    o.pidfd_ = -1;
}

ChildProcess::~ChildProcess() {
    if (pid_ > 0 && !status_) {
        ::kill(pid_, SIGKILL);
        int ws = 0;
        while (waitpid(pid_, &ws, 0) < 0 && errno == EINTR) {
        }
    }
    if (pidfd_ >= 0)
        close(pidfd_);
}

void ChildProcess::reap() {
    int ws = 0;
    pid_t r;
    do {
        r = waitpid(pid_, &ws, 0);
    } while (r < 0 && errno == EINTR);
    status_ = r == pid_ ? shell_status(ws) : 255;
}

bool ChildProcess::exited() {
    if (status_)
        return true;
    int ws = 0;
    const pid_t r = waitpid(pid_, &ws, WNOHANG);
    if (r == pid_)
        status_ = shell_status(ws);
    return status_.has_value();
}

void ChildProcess::signal(int sig) {
    if (pid_ > 0 && !status_)
        ::kill(pid_, sig);
}

std::optional<int> ChildProcess::wait(int timeout_ms) {
    if (status_)
        return status_;
    if (timeout_ms >= 0 && pidfd_ >= 0) {
        pollfd p{pidfd_, POLLIN, 0};
        int r;
        do {
            r = poll(&p, 1, timeout_ms);
        } while (r < 0 && errno == EINTR);
        if (r == 0)
            return std::nullopt;
    }
    reap();
    return status_;
}

}  // namespace nvmetrace
