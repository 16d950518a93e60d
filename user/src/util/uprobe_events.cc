#include "util/uprobe_events.h"

#include "util/error.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

namespace nvmetrace {

namespace {

constexpr long kTracefsMagic = 0x74726163;  // TRACEFS_MAGIC

bool is_tracefs(const std::string& dir) {
    struct statfs s;
    return statfs(dir.c_str(), &s) == 0 && s.f_type == kTracefsMagic;
}

// Writes `line` to a tracefs control file (appending); the kernel's errno on failure.
int write_control(const std::string& path, const std::string& line) {
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0)
        return errno;
    const ssize_t n = write(fd, line.data(), line.size());
    const int err = n < 0 ? errno : 0;
    close(fd);
    return err;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    if (!in)
        throw errno_error(fmt::format("cannot read {}", path), errno ? errno : ENOENT);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The last lines of tracefs's error_log that name uprobe_events: the kernel's reason.
std::string error_log(const std::string& dir) {
    std::ifstream in(dir + "/error_log");
    std::string line, last;
    while (std::getline(in, line))
        if (line.find("uprobe_events") != std::string::npos || line.find("Command:") == 0 ||
            line.find("  ") == 0)
            last += line + "\n";
    while (!last.empty() && last.back() == '\n')
        last.pop_back();
    return last;
}

}  // namespace

std::map<std::string, TraceField, std::less<>> parse_trace_format(std::string_view format) {
    std::map<std::string, TraceField, std::less<>> out;
    size_t pos = 0;
    while (pos < format.size()) {
        size_t eol = format.find('\n', pos);
        if (eol == std::string_view::npos)
            eol = format.size();
        const std::string_view line = format.substr(pos, eol - pos);
        pos = eol + 1;
        // "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;"
        const size_t f = line.find("field:");
        const size_t o = line.find("offset:");
        const size_t s = line.find("size:");
        if (f == std::string_view::npos || o == std::string_view::npos ||
            s == std::string_view::npos)
            continue;
        const size_t semi = line.find(';', f);
        if (semi == std::string_view::npos)
            continue;
        std::string_view decl = line.substr(f + 6, semi - f - 6);
        const size_t sp = decl.find_last_of(" \t*");
        std::string name(sp == std::string_view::npos ? decl : decl.substr(sp + 1));
        if (const size_t br = name.find('['); br != std::string::npos)
            name.resize(br);
        TraceField tf;
        tf.offset = std::strtoul(std::string(line.substr(o + 7)).c_str(), nullptr, 10);
        tf.size = std::strtoul(std::string(line.substr(s + 5)).c_str(), nullptr, 10);
        out[name] = tf;
    }
    if (out.empty())
        throw Error("an event format with no fields");
    return out;
}

uint64_t trace_field(const std::vector<uint8_t>& raw, const TraceField& f) {
    if (f.size == 0 || f.size > 8 || f.offset + f.size > raw.size())
        return 0;
    uint64_t v = 0;
    std::memcpy(&v, raw.data() + f.offset, f.size);  // little-endian
    return v;
}

std::string tracefs_dir() {
    for (const char* d : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"})
        if (is_tracefs(d))
            return d;
    if (mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0)
        throw errno_error(
            "tracefs is not mounted and cannot be (mount -t tracefs nodev "
            "/sys/kernel/tracing; root is needed)",
            errno);
    return "/sys/kernel/tracing";
}

std::vector<std::string> stale_uprobe_events(std::string_view uprobe_events,
                                             const std::function<bool(int)>& alive) {
    std::vector<std::string> out;
    std::istringstream in{std::string(uprobe_events)};
    std::string line;
    while (std::getline(in, line)) {
        // "p:nvmetrace_1234/spdk_rdma_submit /path/lib.so:0x... args"
        if (line.size() < 2 || line[1] != ':')
            continue;
        const std::string name = line.substr(2, line.find(' ') - 2);
        const size_t slash = name.find('/');
        constexpr std::string_view kPrefix = "nvmetrace_";
        if (slash == std::string::npos || name.compare(0, kPrefix.size(), kPrefix) != 0)
            continue;
        const std::string pid = name.substr(kPrefix.size(), slash - kPrefix.size());
        if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos ||
            pid.size() > 9)
            continue;
        if (!alive(std::stoi(pid)))
            out.push_back(name);
    }
    return out;
}

UprobeEvents::UprobeEvents(std::string group) : dir_(tracefs_dir()), group_(std::move(group)) {
    if (access((dir_ + "/uprobe_events").c_str(), W_OK) != 0)
        throw errno_error(fmt::format("{}/uprobe_events: uprobes cannot be placed (a kernel "
                                      "with CONFIG_UPROBE_EVENTS, as root)",
                                      dir_),
                          errno);
    // events a killed recorder left: removed (an event no process uses costs nothing, but
    // the list grows)
    std::string text;
    try {
        text = read_text(dir_ + "/uprobe_events");
    } catch (const Error&) {
    }
    for (const auto& name :
         stale_uprobe_events(text, [](int pid) { return kill(pid, 0) == 0 || errno != ESRCH; }))
        write_control(dir_ + "/uprobe_events", fmt::format("-:{}\n", name));
}

UprobeEvents::~UprobeEvents() {
    for (auto it = events_.rbegin(); it != events_.rend(); ++it)
        write_control(dir_ + "/uprobe_events", fmt::format("-:{}/{}\n", group_, it->name));
}

UprobeEvents::Event UprobeEvents::add(const std::string& name, const std::string& file,
                                      uint64_t offset, const std::string& args) {
    const std::string def = fmt::format("p:{}/{} {}:{:#x} {}\n", group_, name, file, offset, args);
    // one left by a recorder that was killed: removed first
    write_control(dir_ + "/uprobe_events", fmt::format("-:{}/{}\n", group_, name));
    if (const int err = write_control(dir_ + "/uprobe_events", def); err != 0) {
        const std::string why = error_log(dir_);
        throw Error(fmt::format("cannot place a uprobe at {}:{:#x}: {}{}{}", file, offset,
                                std::strerror(err), why.empty() ? "" : "\n", why));
    }
    Event e;
    e.name = name;
    const std::string ev = fmt::format("{}/events/{}/{}", dir_, group_, name);
    events_.push_back(e);  // removed at the end even if what follows fails
    const std::string id = read_text(ev + "/id");
    events_.back().id = std::strtoull(id.c_str(), nullptr, 10);
    events_.back().fields = parse_trace_format(read_text(ev + "/format"));
    return events_.back();
}

}  // namespace nvmetrace
