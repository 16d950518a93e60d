#include "util/perf_samples.h"

#include "util/error.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

namespace nvmetrace {

std::vector<int> parse_cpu_list(std::string_view list) {
    std::vector<int> cpus;
    std::string s(list);
    std::istringstream in(s);
    std::string part;
    while (std::getline(in, part, ',')) {
        if (part.empty() || part == "\n")
            continue;
        const auto dash = part.find('-');
        const int a = std::stoi(part.substr(0, dash));
        const int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
        for (int c = a; c <= b; c++)
            cpus.push_back(c);
    }
    return cpus;
}

bool parse_perf_sample(const uint8_t* p, size_t n, uint64_t& id, PerfSample& out) {
    // u64 id; u32 pid, tid; u64 time; u32 cpu, res; u32 size; u8 raw[size]
    constexpr size_t kFixed = 8 + 8 + 8 + 8 + 4;
    if (n < kFixed)
        return false;
    uint32_t size = 0;
    std::memcpy(&id, p, 8);
    std::memcpy(&out.pid, p + 8, 4);
    std::memcpy(&out.tid, p + 12, 4);
    std::memcpy(&out.time, p + 16, 8);
    std::memcpy(&out.cpu, p + 24, 4);
    std::memcpy(&size, p + 32, 4);
    if (kFixed + size > n)
        return false;
    out.raw.assign(p + kFixed, p + kFixed + size);
    return true;
}

TracepointSampler::TracepointSampler(pid_t pid, const std::vector<uint64_t>& ids, size_t pages,
                                     Mode mode)
    : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))), pages_(pages) {
    // (task, CPU) pairs, one ring each: per CPU for a task and its threads to come (perf
    // maps no inherited event opened on every CPU at once), per thread otherwise
    std::vector<std::pair<pid_t, int>> where;
    if (mode == Mode::threads) {
        std::error_code ec;
        for (const auto& d :
             std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec))
            where.emplace_back(std::stoi(d.path().filename().string()), -1);
        if (where.empty())
            throw Error(fmt::format("process {} is not running", pid));
    } else {
        std::ifstream online("/sys/devices/system/cpu/online");
        std::string list;
        std::getline(online, list);
        const std::vector<int> cpus = parse_cpu_list(list);
        if (cpus.empty())
            throw Error("/sys/devices/system/cpu/online names no CPU");
        for (const int cpu : cpus)
            where.emplace_back(pid, cpu);
    }
    try {
        for (const auto& [task, cpu] : where) {
            Ring ring;
            for (size_t i = 0; i < ids.size(); i++) {
                perf_event_attr a{};
                a.size = sizeof a;
                a.type = PERF_TYPE_TRACEPOINT;
                a.config = ids[i];
                a.sample_period = 1;
                a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                PERF_SAMPLE_CPU | PERF_SAMPLE_RAW;
                a.disabled = mode == Mode::from_exec ? 1 : 0;
                a.enable_on_exec = mode == Mode::from_exec ? 1 : 0;
                a.inherit = mode == Mode::threads ? 0 : 1;
                a.use_clockid = 1;
                a.clockid = CLOCK_MONOTONIC;
                const int fd = static_cast<int>(
                    syscall(SYS_perf_event_open, &a, task, cpu, -1, PERF_FLAG_FD_CLOEXEC));
                if (fd < 0) {
                    // a thread that ended while the list was read: nothing of it to follow
                    if (errno == ESRCH && mode == Mode::threads && ring.fd < 0)
                        break;
                    throw errno_error(
                        fmt::format("perf_event_open (tracepoint {}, process {}{})", ids[i], task,
                                    cpu >= 0 ? fmt::format(", CPU {}", cpu) : ""),
                        errno);
                }
                fds_.push_back(fd);
                uint64_t sid = 0;
                if (ioctl(fd, PERF_EVENT_IOC_ID, &sid) != 0)
                    throw errno_error("PERF_EVENT_IOC_ID", errno);
                event_of_[sid] = i;
                if (ring.fd < 0) {
                    void* m = mmap(nullptr, (pages_ + 1) * page_, PROT_READ | PROT_WRITE,
                                   MAP_SHARED, fd, 0);
                    if (m == MAP_FAILED)
                        throw errno_error(fmt::format("mmap of a perf ring of process {}", task),
                                          errno);
                    ring.fd = fd;
                    ring.base = m;
                    rings_.push_back(ring);
                } else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring.fd) != 0) {
                    throw errno_error("PERF_EVENT_IOC_SET_OUTPUT", errno);
                }
            }
        }
    } catch (...) {
        close_all();
        throw;
    }
}

TracepointSampler::~TracepointSampler() {
    close_all();
}

void TracepointSampler::close_all() {
    for (auto& r : rings_)
        if (r.base)
            munmap(r.base, (pages_ + 1) * page_);
    rings_.clear();
    for (const int fd : fds_)
        close(fd);
    fds_.clear();
}

void TracepointSampler::drain(Ring& r, std::vector<PerfSample>& out) {
    auto* meta = static_cast<perf_event_mmap_page*>(r.base);
    const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    const auto* data = static_cast<const uint8_t*>(r.base) + page_;
    const size_t size = pages_ * page_;
    while (tail < head) {
        perf_event_header h;
        for (size_t i = 0; i < sizeof h; i++)
            reinterpret_cast<uint8_t*>(&h)[i] = data[(tail + i) % size];
        if (h.size < sizeof h)
            break;  // never written so; stop rather than loop
        scratch_.resize(h.size);
        for (size_t i = 0; i < h.size; i++)
            scratch_[i] = data[(tail + i) % size];
        const uint8_t* body = scratch_.data() + sizeof h;
        const size_t n = h.size - sizeof h;
        if (h.type == PERF_RECORD_SAMPLE) {
            PerfSample s;
            uint64_t id = 0;
            if (parse_perf_sample(body, n, id, s)) {
                const auto it = event_of_.find(id);
                if (it != event_of_.end()) {
                    s.event = it->second;
                    out.push_back(std::move(s));
                }
            }
        } else if (h.type == PERF_RECORD_LOST && n >= 16) {
            uint64_t lost = 0;
            std::memcpy(&lost, body + 8, 8);
            lost_ += lost;
        }
        tail += h.size;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

void TracepointSampler::read(std::vector<PerfSample>& out) {
    for (auto& r : rings_)
        drain(r, out);
}

}  // namespace nvmetrace
