#include "bench/bench_io.h"

#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <linux/nvme_ioctl.h>
#include <linux/nvmetrace.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace nvmetrace::bench {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kHugePage = 2ull << 20;
constexpr uint8_t kNvmeCmdWrite = 0x01;
constexpr uint8_t kNvmeCmdRead = 0x02;

uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string read_line(const fs::path& p) {
    std::ifstream f(p);
    std::string s;
    if (f)
        std::getline(f, s);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.pop_back();
    size_t b = 0;
    while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b])))
        b++;
    return s.substr(b);
}

uint64_t read_u64(const fs::path& p, uint64_t dflt = 0) {
    const std::string s = read_line(p);
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && ptr != s.data() ? v : dflt;
}

uint64_t round_up(uint64_t v, uint64_t to) {
    return (v + to - 1) / to * to;
}

}  // namespace

const char* engine_name(Engine e) {
    return e == Engine::block ? "block" : "passthru";
}

const char* pattern_name(Pattern p) {
    switch (p) {
        case Pattern::randread:
            return "randread";
        case Pattern::randwrite:
            return "randwrite";
        case Pattern::read:
            return "read";
        case Pattern::write:
            return "write";
    }
    return "?";
}

const char* buf_name(BufKind b) {
    switch (b) {
        case BufKind::malloc:
            return "malloc";
        case BufKind::hugepage:
            return "hugepage";
        case BufKind::pool:
            return "pool";
    }
    return "?";
}

Pattern parse_pattern(const std::string& s) {
    for (Pattern p : {Pattern::randread, Pattern::randwrite, Pattern::read, Pattern::write})
        if (s == pattern_name(p))
            return p;
    throw Error(fmt::format("pattern '{}': use randread, randwrite, read or write", s));
}

BufKind parse_buf(const std::string& s) {
    for (BufKind b : {BufKind::malloc, BufKind::hugepage, BufKind::pool})
        if (s == buf_name(b))
            return b;
    throw Error(fmt::format("--buf {}: use malloc, hugepage or pool", s));
}

uint64_t parse_size(const std::string& s) {
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr == s.data())
        throw Error(fmt::format("size '{}': a number of bytes, optionally with k, m or g", s));
    std::string unit(ptr, s.data() + s.size());
    std::transform(unit.begin(), unit.end(), unit.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    uint64_t mul = 0;
    if (unit.empty() || unit == "b")
        mul = 1;
    else if (unit == "k" || unit == "kib" || unit == "kb")
        mul = 1ull << 10;
    else if (unit == "m" || unit == "mib" || unit == "mb")
        mul = 1ull << 20;
    else if (unit == "g" || unit == "gib" || unit == "gb")
        mul = 1ull << 30;
    else
        throw Error(fmt::format("size '{}': unknown unit '{}' (use k, m or g)", s, unit));
    if (v == 0 || v > (UINT64_MAX >> 30))
        throw Error(fmt::format("size '{}': must be more than 0", s));
    return v * mul;
}

std::set<int> parse_cpu_list(const std::string& s) {
    std::set<int> out;
    std::stringstream in(s);
    std::string part;
    auto num = [&](const std::string& t) {
        int v = -1;
        auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (ec != std::errc() || ptr != t.data() + t.size() || v < 0 || v > 4095)
            throw Error(fmt::format("CPU list '{}': '{}' is not a CPU number (e.g. 0-3,6)", s, t));
        return v;
    };
    while (std::getline(in, part, ',')) {
        if (part.empty())
            throw Error(fmt::format("CPU list '{}': empty element (e.g. 0-3,6)", s));
        const size_t dash = part.find('-');
        if (dash == std::string::npos) {
            out.insert(num(part));
            continue;
        }
        const int a = num(part.substr(0, dash)), b = num(part.substr(dash + 1));
        if (b < a)
            throw Error(fmt::format("CPU list '{}': range {} runs backwards", s, part));
        for (int c = a; c <= b; c++)
            out.insert(c);
    }
    if (out.empty())
        throw Error(fmt::format("CPU list '{}' is empty", s));
    return out;
}

// ------------------------------------------------------------------ device

namespace {

void read_identity(Device& d, const fs::path& disk_dir) {
    const fs::path dev = disk_dir / "device";
    d.model = read_line(dev / "model");
    d.serial = read_line(dev / "serial");
    d.firmware = read_line(dev / "firmware_rev");
    d.subsysnqn = read_line(dev / "subsysnqn");
    d.transport = read_line(dev / "transport");
    d.address = read_line(dev / "address");
    if (d.transport.empty()) {  // a multipath head: its parent is the subsystem
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(dev, ec)) {
            const std::string n = e.path().filename().string();
            if (n.starts_with("nvme") && fs::exists(e.path() / "transport")) {
                d.transport = read_line(e.path() / "transport");
                d.address = read_line(e.path() / "address");
                break;
            }
        }
    }
    if (d.nsid == 0)
        d.nsid = static_cast<uint32_t>(read_u64(disk_dir / "nsid"));
}

void read_queue(Device& d, const fs::path& queue) {
    if (!fs::is_directory(queue))
        throw Error(fmt::format("{}: no queue attributes in {}", d.path, queue.string()));
    d.lba_size = static_cast<uint32_t>(read_u64(queue / "logical_block_size", 512));
    d.max_hw_sectors_kb = static_cast<uint32_t>(read_u64(queue / "max_hw_sectors_kb"));
    d.max_sectors_kb = static_cast<uint32_t>(read_u64(queue / "max_sectors_kb"));
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(queue, ec)) {
        const std::string n = e.path().filename().string();
        if (n.find("premap") != std::string::npos || n.find("iobuf") != std::string::npos)
            d.premap_attrs[n] = read_line(e.path());
    }
}

}  // namespace

Device inspect_device(const std::string& path, const std::string& sysfs_root) {
    Device d;
    d.path = path;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT)
            throw Error(fmt::format(
                "{}: no such device (give a block device such as /dev/nvme0n1 or an NVMe "
                "generic char device such as /dev/ng0n1)",
                path));
        throw errno_error(path, errno);
    }
    const fs::path root(sysfs_root);
    std::error_code ec;
    if (S_ISBLK(st.st_mode)) {
        d.engine = Engine::block;
        const fs::path sys = fs::canonical(
            root / fmt::format("dev/block/{}:{}", major(st.st_rdev), minor(st.st_rdev)), ec);
        if (ec)
            throw Error(fmt::format("{}: block device {}:{} not in {}/dev/block", path,
                                    major(st.st_rdev), minor(st.st_rdev), sysfs_root));
        d.disk = sys.filename().string();
        d.bytes = read_u64(sys / "size") * 512;
        // A partition has no queue of its own: its disk's applies.
        const fs::path disk_dir = fs::exists(sys / "partition") ? sys.parent_path() : sys;
        read_queue(d, disk_dir / "queue");
        read_identity(d, disk_dir);
        return d;
    }
    if (!S_ISCHR(st.st_mode))
        throw Error(fmt::format(
            "{}: neither a block device nor an NVMe generic char device (/dev/ngXnY)", path));
    const fs::path sys = fs::canonical(
        root / fmt::format("dev/char/{}:{}", major(st.st_rdev), minor(st.st_rdev)), ec);
    const std::string name = ec ? "" : sys.filename().string();
    const std::string cls = ec ? "" : fs::canonical(sys / "subsystem", ec).filename().string();
    if (cls != "nvme-generic" || !name.starts_with("ng"))
        throw Error(fmt::format(
            "{}: a char device but not an NVMe generic device (/dev/ngXnY): passthrough "
            "needs the ng node of an NVMe namespace",
            path));
    d.engine = Engine::passthru;
    d.disk = "nvme" + name.substr(2);  // ng0n1 -> nvme0n1, ng0c1n1 -> nvme0c1n1
    const fs::path disk_dir = root / "class/block" / d.disk;
    if (!fs::exists(disk_dir))
        throw Error(fmt::format("{}: its namespace's block device {} is not in {}/class/block",
                                path, d.disk, sysfs_root));
    d.bytes = read_u64(disk_dir / "size") * 512;
    read_queue(d, disk_dir / "queue");
    read_identity(d, disk_dir);
    return d;
}

PoolParams read_pool_params(const std::string& sysfs_root) {
    PoolParams p;
    const fs::path mod = fs::path(sysfs_root) / "module/nvmetrace";
    p.module_loaded = fs::exists(mod);
    const fs::path params = mod / "parameters";
    if (fs::exists(params / "pool_buf_kb") && fs::exists(params / "pool_nr")) {
        p.has_params = true;
        p.buf_kb = read_u64(params / "pool_buf_kb");
        p.nr = read_u64(params / "pool_nr");
    }
    return p;
}

// ------------------------------------------------------------------ buffers

Buffers& Buffers::operator=(Buffers&& o) noexcept {
    if (this != &o) {
        this->~Buffers();
        kind_ = o.kind_;
        base_ = std::exchange(o.base_, nullptr);
        map_bytes_ = std::exchange(o.map_bytes_, 0);
        regions_ = std::move(o.regions_);
        slots_ = std::move(o.slots_);
    }
    return *this;
}

Buffers::~Buffers() {
    if (base_ && map_bytes_)
        munmap(base_, map_bytes_);
    else if (base_)
        free(base_);
    base_ = nullptr;
}

Buffers Buffers::make(BufKind kind, uint64_t slot_bytes, uint32_t nslots,
                      const std::string& pool_node) {
    Buffers b;
    b.kind_ = kind;
    const uint64_t stride = round_up(slot_bytes, kPage);
    const uint64_t total = stride * nslots;
    if (kind == BufKind::malloc || kind == BufKind::hugepage) {
        if (kind == BufKind::malloc) {
            b.base_ = aligned_alloc(kPage, total);
            if (!b.base_)
                throw Error(fmt::format("--buf malloc: cannot allocate {} MiB", total >> 20));
        } else {
            const uint64_t len = round_up(total, kHugePage);
            void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
            if (p == MAP_FAILED) {
                const int err = errno;
                std::ifstream mi("/proc/meminfo");
                std::string line, free_line = "HugePages_Free: ?";
                while (std::getline(mi, line))
                    if (line.starts_with("HugePages_Free"))
                        free_line = line;
                throw Error(fmt::format(
                    "--buf hugepage: cannot map {} MiB of 2 MiB huge pages ({}; {}): reserve "
                    "them first, e.g. echo {} > /proc/sys/vm/nr_hugepages",
                    len >> 20, strerrordesc_np(err), free_line, len / kHugePage));
            }
            b.base_ = p;
            b.map_bytes_ = len;
        }
        memset(b.base_, 0x5a, total);
        for (uint32_t i = 0; i < nslots; i++) {
            char* p = static_cast<char*>(b.base_) + stride * i;
            b.regions_.push_back({p, stride});
            b.slots_.push_back({p, i});
        }
        return b;
    }

    // The module's pool: pool_nr buffers of pool_buf_kb, contiguous at
    // NVMETRACE_POOL_MMAP_OFFSET; slots are cut from each buffer.
    const PoolParams pool = read_pool_params();
    if (!pool.module_loaded)
        throw Error("--buf pool: the nvmetrace module is not loaded (modprobe nvmetrace)");
    if (!pool.has_params)
        throw Error(
            "--buf pool: this nvmetrace module has no buffer pool (no pool_buf_kb/pool_nr in "
            "/sys/module/nvmetrace/parameters): load a module built with the pool");
    if (pool.nr == 0 || pool.buf_kb == 0)
        throw Error(fmt::format(
            "--buf pool: the pool is empty (pool_nr={}, pool_buf_kb={}): load the module "
            "with pool_nr=N pool_buf_kb=K",
            pool.nr, pool.buf_kb));
    const uint64_t buf_bytes = pool.buf_kb * 1024;
    if (slot_bytes > buf_bytes)
        throw Error(fmt::format(
            "--buf pool: an I/O of {} bytes does not fit a pool buffer of {} KiB: load the "
            "module with pool_buf_kb={} or more",
            slot_bytes, pool.buf_kb, round_up(slot_bytes, 1024) / 1024));
    const uint64_t per_buf = buf_bytes / stride;
    if (per_buf * pool.nr < nslots)
        throw Error(fmt::format(
            "--buf pool: {} I/O buffers of {} bytes needed (QD x threads), the pool holds {} "
            "({} x {} KiB): lower --qd/--threads or load the module with a larger pool",
            nslots, slot_bytes, per_buf * pool.nr, pool.nr, pool.buf_kb));
    const int fd = open(pool_node.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
        throw errno_error(fmt::format("--buf pool: cannot open {}", pool_node), errno);
    const size_t len = pool.nr * buf_bytes;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(NVMETRACE_POOL_MMAP_OFFSET));
    const int err = errno;
    close(fd);
    if (p == MAP_FAILED)
        throw errno_error(fmt::format("--buf pool: mmap of the pool ({} x {} KiB) in {} failed",
                                      pool.nr, pool.buf_kb, pool_node),
                          err);
    b.base_ = p;
    b.map_bytes_ = len;
    for (uint64_t i = 0; i < pool.nr; i++)
        b.regions_.push_back({static_cast<char*>(p) + i * buf_bytes, buf_bytes});
    for (uint32_t s = 0; s < nslots; s++) {
        const uint64_t bi = s / per_buf, within = s % per_buf;
        b.slots_.push_back(
            {static_cast<char*>(p) + bi * buf_bytes + within * stride, static_cast<uint32_t>(bi)});
    }
    return b;
}

// ------------------------------------------------------------------ CPU

std::map<int, CpuTicks> parse_proc_stat(const std::string& text) {
    std::map<int, CpuTicks> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (!line.starts_with("cpu") || line.size() < 4 ||
            !std::isdigit(static_cast<unsigned char>(line[3])))
            continue;
        std::istringstream ls(line.substr(3));
        int cpu = -1;
        // user nice system idle iowait irq softirq steal (guest and guest_nice
        // are already inside user and nice)
        uint64_t f[8] = {};
        ls >> cpu;
        for (auto& v : f)
            ls >> v;
        if (cpu < 0 || !ls)
            throw Error(fmt::format("/proc/stat: cannot parse '{}'", line));
        const uint64_t busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
        out[cpu] = {busy, busy + f[3] + f[4]};
    }
    return out;
}

std::map<int, CpuTicks> read_proc_stat() {
    std::ifstream f("/proc/stat");
    if (!f)
        throw errno_error("cannot read /proc/stat", errno);
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_proc_stat(ss.str());
}

double busy_cores(const std::map<int, CpuTicks>& before, const std::map<int, CpuTicks>& after,
                  const std::set<int>& exclude) {
    double cores = 0;
    for (const auto& [cpu, t] : after) {
        if (exclude.count(cpu))
            continue;
        auto it = before.find(cpu);
        if (it == before.end() || t.total <= it->second.total || t.busy < it->second.busy)
            continue;  // went offline and back, or no tick in between
        cores += static_cast<double>(t.busy - it->second.busy) /
                 static_cast<double>(t.total - it->second.total);
    }
    return cores;
}

// ------------------------------------------------------------------ engine

namespace {

enum Phase : int { kRamp = 0, kMeasure = 1, kStop = 2 };

struct Shared {
    std::atomic<int> phase{kRamp};
    std::atomic<bool> go{false};
    std::atomic<uint32_t> ready{0};
    std::atomic<bool> abort{false};
    std::atomic<uint64_t> measure_done{0};  // count mode: I/Os completed in the window
};

struct ThreadOut {
    RunResult r;
    Histogram hist;
    int64_t lat_sum = 0;
    uint64_t end_ns = 0;
    std::exception_ptr error;
};

class Ring {
public:
    Ring(uint32_t entries, unsigned flags) {
        io_uring_params p{};
        p.flags = flags;
        const int rc = io_uring_queue_init_params(entries, &ring_, &p);
        if (rc < 0) {
            if (rc == -EINVAL && (flags & IORING_SETUP_SQE128))
                throw Error(
                    "io_uring refused SQE128|CQE32 rings: NVMe passthrough needs Linux 5.19 "
                    "or newer");
            throw errno_error(fmt::format("io_uring_queue_init({} entries)", entries), -rc);
        }
    }
    ~Ring() { io_uring_queue_exit(&ring_); }
    Ring(const Ring&) = delete;
    Ring& operator=(const Ring&) = delete;
    io_uring* get() { return &ring_; }

private:
    io_uring ring_{};
};

void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (rc != 0)
        throw errno_error(fmt::format("--cpus: cannot pin a thread to CPU {} (offline, not "
                                      "allowed, or no such CPU?)",
                                      cpu),
                          rc);
}

std::string describe_failure(const Device& dev, const RunSpec& spec, uint64_t off, int res,
                             int* err_out) {
    const char* op = is_write(spec.pattern) ? "write" : "read";
    if (res < 0) {
        *err_out = -res;
        return fmt::format("{} of {} bytes at offset {}: {} ({})", op, spec.size, off,
                           strerrorname_np(-res) ? strerrorname_np(-res) : "?",
                           strerrordesc_np(-res));
    }
    if (dev.engine == Engine::passthru) {
        const unsigned sc = static_cast<unsigned>(res) & 0xff,
                       sct = (static_cast<unsigned>(res) >> 8) & 0x7;
        return fmt::format("{} of {} bytes at offset {}: NVMe status 0x{:x} (SCT {} SC 0x{:x})", op,
                           spec.size, off, res, sct, sc);
    }
    return fmt::format("{} of {} bytes at offset {}: short transfer of {} bytes", op, spec.size,
                       off, res);
}

void worker(const Device& dev, const RunSpec& spec, const Buffers& bufs, uint32_t tid, int fd,
            Shared& sh, ThreadOut& out) {
    bool counted_ready = false;
    try {
        if (!spec.cpus.empty())
            pin_to(spec.cpus[tid % spec.cpus.size()]);
        const bool passthru = dev.engine == Engine::passthru;
        Ring ring(spec.qd, passthru ? IORING_SETUP_SQE128 | IORING_SETUP_CQE32 : 0);
        io_uring* r = ring.get();

        // Registered buffers: the regions this thread's slots lie in.
        const bool fixed = spec.buf == BufKind::pool || spec.fixed;
        std::vector<uint16_t> buf_index(spec.qd, 0);
        if (fixed) {
            std::map<uint32_t, uint16_t> index_of;
            std::vector<iovec> iov;
            for (uint32_t i = 0; i < spec.qd; i++) {
                const auto& s = bufs.slot(tid * spec.qd + i);
                auto [it, fresh] = index_of.try_emplace(s.region, iov.size());
                if (fresh)
                    iov.push_back(bufs.regions()[s.region]);
                buf_index[i] = it->second;
            }
            const int rc =
                io_uring_register_buffers(r, iov.data(), static_cast<unsigned>(iov.size()));
            if (rc < 0)
                throw errno_error(fmt::format("io_uring_register_buffers ({} {} buffers)",
                                              iov.size(), buf_name(spec.buf)),
                                  -rc);
        }

        // Offsets: random ones aligned to the I/O size over the span; sequential
        // ones walk this thread's share of the span.
        const uint64_t span = spec.span ? spec.span : dev.bytes - spec.offset;
        const uint64_t nblocks = span / spec.size;
        const uint64_t share = std::max<uint64_t>(1, nblocks / spec.threads);
        uint64_t seq = (is_random(spec.pattern) ? 0 : tid * share);
        uint64_t seq_end = is_random(spec.pattern) ? 0 : std::min(nblocks, seq + share);
        const uint64_t seq_begin = seq;
        uint64_t rng = spec.seed * 0x9e3779b97f4a7c15ull + tid + 1;
        auto next_off = [&]() -> uint64_t {
            uint64_t blk;
            if (is_random(spec.pattern)) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                blk = rng % nblocks;
            } else {
                blk = seq++;
                if (seq >= seq_end)
                    seq = seq_begin;
            }
            return spec.offset + blk * spec.size;
        };

        std::vector<uint64_t> t_sub(spec.qd), off_of(spec.qd);
        const bool write = is_write(spec.pattern);
        auto submit_slot = [&](uint32_t slot) {
            io_uring_sqe* sqe = io_uring_get_sqe(r);
            if (!sqe)
                throw Error("io_uring: no free SQE (internal error)");
            const auto& s = bufs.slot(tid * spec.qd + slot);
            const uint64_t off = next_off();
            off_of[slot] = off;
            if (passthru) {
                memset(sqe, 0, 2 * sizeof(*sqe));
                prep_passthru(sqe, fd, write, dev.nsid, dev.lba_size, s.ptr, spec.size, off);
                if (fixed) {
                    sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
                    sqe->buf_index = buf_index[slot];
                }
            } else if (fixed) {
                if (write)
                    io_uring_prep_write_fixed(sqe, fd, s.ptr, static_cast<unsigned>(spec.size), off,
                                              buf_index[slot]);
                else
                    io_uring_prep_read_fixed(sqe, fd, s.ptr, static_cast<unsigned>(spec.size), off,
                                             buf_index[slot]);
            } else if (write) {
                io_uring_prep_write(sqe, fd, s.ptr, static_cast<unsigned>(spec.size), off);
            } else {
                io_uring_prep_read(sqe, fd, s.ptr, static_cast<unsigned>(spec.size), off);
            }
            io_uring_sqe_set_data64(sqe, slot);
            t_sub[slot] = now_ns();
        };

        counted_ready = true;
        sh.ready.fetch_add(1);
        while (!sh.go.load(std::memory_order_acquire)) {
            if (sh.abort.load())
                return;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }

        const uint64_t quota = spec.ios;  // all threads together
        auto may_issue = [&](uint32_t inflight) {
            const int ph = sh.phase.load(std::memory_order_relaxed);
            if (ph == kStop || sh.abort.load(std::memory_order_relaxed))
                return false;
            if (quota && ph == kMeasure)
                return sh.measure_done.load(std::memory_order_relaxed) + inflight < quota;
            return true;
        };

        uint32_t inflight = 0;
        for (uint32_t i = 0; i < spec.qd && may_issue(inflight); i++) {
            submit_slot(i);
            inflight++;
        }
        uint64_t stuck_since = 0;
        std::vector<uint32_t> again;
        again.reserve(spec.qd);
        while (inflight > 0) {
            __kernel_timespec ts{1, 0};
            io_uring_cqe* cqe = nullptr;
            int rc = io_uring_submit_and_wait_timeout(r, &cqe, 1, &ts, nullptr);
            if (rc < 0 && rc != -ETIME && rc != -EINTR)
                throw errno_error("io_uring_submit_and_wait", -rc);
            unsigned head, seen = 0;
            again.clear();
            io_uring_for_each_cqe(r, head, cqe) {
                seen++;
                const auto slot = static_cast<uint32_t>(cqe->user_data);
                const uint64_t t = now_ns();
                inflight--;
                if (sh.phase.load(std::memory_order_relaxed) == kMeasure) {
                    const bool ok =
                        passthru ? cqe->res == 0 : cqe->res == static_cast<int>(spec.size);
                    out.r.ios++;
                    out.r.fallbacks += !fixed;
                    if (ok) {
                        out.r.bytes += spec.size;
                        const auto lat = static_cast<int64_t>(t - t_sub[slot]);
                        out.hist.add(lat);
                        out.lat_sum += lat;
                    } else {
                        if (out.r.failed++ == 0)
                            out.r.first_error = describe_failure(dev, spec, off_of[slot], cqe->res,
                                                                 &out.r.first_errno);
                    }
                    if (quota)
                        sh.measure_done.fetch_add(1, std::memory_order_relaxed);
                }
                again.push_back(slot);
            }
            io_uring_cq_advance(r, seen);
            for (uint32_t slot : again) {
                if (!may_issue(inflight))
                    break;
                submit_slot(slot);
                inflight++;
            }
            // The end of a run waits for what is in flight, but not forever.
            if (sh.phase.load() == kStop || sh.abort.load() || (quota && !may_issue(inflight))) {
                if (seen)
                    stuck_since = 0;
                else if (!stuck_since)
                    stuck_since = now_ns();
                else if (now_ns() - stuck_since > 30'000'000'000ull)
                    throw Error(
                        fmt::format("{} I/Os still outstanding on {} 30 s after the end of the run",
                                    inflight, dev.path));
            }
        }
        out.end_ns = now_ns();
    } catch (...) {
        out.error = std::current_exception();
        sh.abort.store(true);
        if (!counted_ready)
            sh.ready.fetch_add(1);
    }
}

void check_alignment(const Device& dev, const RunSpec& spec) {
    if (spec.size % dev.lba_size != 0)
        throw Error(
            fmt::format("I/O size {} is not a multiple of {}'s logical block size ({} bytes)",
                        spec.size, dev.path, dev.lba_size));
    if (spec.offset % dev.lba_size != 0)
        throw Error(fmt::format("--offset {} is not a multiple of the logical block size ({})",
                                spec.offset, dev.lba_size));
    if (spec.offset >= dev.bytes)
        throw Error(fmt::format("--offset {} is past the end of {} ({} bytes)", spec.offset,
                                dev.path, dev.bytes));
    const uint64_t span = spec.span ? spec.span : dev.bytes - spec.offset;
    if (spec.offset + span > dev.bytes)
        throw Error(fmt::format("--span {} from offset {} runs past the end of {} ({} bytes)", span,
                                spec.offset, dev.path, dev.bytes));
    if (span < spec.size)
        throw Error(fmt::format("{} bytes to use on {}: smaller than one I/O of {} bytes", span,
                                dev.path, spec.size));
    if (spec.size > UINT32_MAX)
        throw Error(fmt::format("I/O size {}: at most 4 GiB", spec.size));
    if (spec.qd == 0 || spec.qd > 4096)
        throw Error(fmt::format("--qd {}: between 1 and 4096", spec.qd));
    if (spec.threads == 0 || spec.threads > 256)
        throw Error(fmt::format("--threads {}: between 1 and 256", spec.threads));
}

}  // namespace

void prep_passthru(io_uring_sqe* sqe, int fd, bool write, uint32_t nsid, uint32_t lba_size,
                   const void* buf, uint64_t size, uint64_t off) {
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = fd;
    sqe->cmd_op = NVME_URING_CMD_IO;
    auto* cmd = reinterpret_cast<nvme_uring_cmd*>(sqe->cmd);
    const uint64_t slba = off / lba_size;
    cmd->opcode = write ? kNvmeCmdWrite : kNvmeCmdRead;
    cmd->nsid = nsid;
    cmd->addr = reinterpret_cast<uint64_t>(buf);
    cmd->data_len = static_cast<uint32_t>(size);
    cmd->cdw10 = static_cast<uint32_t>(slba);
    cmd->cdw11 = static_cast<uint32_t>(slba >> 32);
    cmd->cdw12 = static_cast<uint32_t>(size / lba_size - 1);
}

RunResult run(const Device& dev, const RunSpec& spec, const std::string& pool_node) {
    check_alignment(dev, spec);
    const bool write = is_write(spec.pattern);
    int flags = O_CLOEXEC | (write ? O_RDWR : O_RDONLY);
    if (dev.engine == Engine::block)
        flags |= O_DIRECT;
    const int fd = open(dev.path.c_str(), flags);
    if (fd < 0)
        throw errno_error(fmt::format("cannot open {}{}", dev.path,
                                      dev.engine == Engine::block ? " with O_DIRECT" : ""),
                          errno);
    struct FdCloser {
        int fd;
        ~FdCloser() { close(fd); }
    } closer{fd};
    Device d = dev;
    if (d.engine == Engine::passthru) {
        const int id = ioctl(fd, NVME_IOCTL_ID);
        if (id <= 0)
            throw errno_error(fmt::format("{}: NVME_IOCTL_ID (not an NVMe namespace?)", dev.path),
                              id < 0 ? errno : EINVAL);
        d.nsid = static_cast<uint32_t>(id);
    }

    Buffers bufs = Buffers::make(spec.buf, spec.size, spec.qd * spec.threads, pool_node);

    Shared sh;
    std::vector<ThreadOut> outs(spec.threads);
    std::vector<std::thread> threads;
    threads.reserve(spec.threads);
    for (uint32_t t = 0; t < spec.threads; t++)
        threads.emplace_back(worker, std::cref(d), std::cref(spec), std::cref(bufs), t, fd,
                             std::ref(sh), std::ref(outs[t]));
    auto join_all = [&] {
        for (auto& t : threads)
            if (t.joinable())
                t.join();
    };
    while (sh.ready.load() < spec.threads)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (sh.abort.load()) {
        join_all();
        for (auto& o : outs)
            if (o.error)
                std::rethrow_exception(o.error);
    }

    auto sleep_until_or_abort = [&](uint64_t deadline) {
        while (!sh.abort.load()) {
            const uint64_t n = now_ns();
            if (n >= deadline)
                return;
            std::this_thread::sleep_for(
                std::chrono::nanoseconds(std::min<uint64_t>(deadline - n, 20'000'000)));
        }
    };
    const bool ramp = spec.ramp_s > 0;
    sh.phase.store(ramp ? kRamp : kMeasure);
    // Without a ramp the measured window opens before the threads are let go, so a thread
    // whose every I/O fails at once cannot end before it (which made the elapsed time wrap).
    std::map<int, CpuTicks> cpu0;
    uint64_t t0 = 0;
    if (!ramp) {
        cpu0 = read_proc_stat();
        t0 = now_ns();
    }
    sh.go.store(true, std::memory_order_release);
    if (ramp) {
        sleep_until_or_abort(now_ns() + static_cast<uint64_t>(spec.ramp_s * 1e9));
        sh.phase.store(kMeasure);
        cpu0 = read_proc_stat();
        t0 = now_ns();
    }
    uint64_t t1 = 0;
    std::map<int, CpuTicks> cpu1;
    if (spec.ios == 0) {
        sleep_until_or_abort(t0 + static_cast<uint64_t>(spec.duration_s * 1e9));
        cpu1 = read_proc_stat();
        t1 = now_ns();
        sh.phase.store(kStop);
        join_all();
    } else {
        join_all();
        cpu1 = read_proc_stat();
        for (auto& o : outs)
            t1 = std::max(t1, o.end_ns);
        if (!t1)
            t1 = now_ns();
        t1 = std::max(t1, t0);  // threads that ended in the ramp measured nothing
    }
    for (auto& o : outs)
        if (o.error)
            std::rethrow_exception(o.error);

    RunResult res;
    Histogram hist;
    int64_t lat_sum = 0;
    for (auto& o : outs) {
        res.ios += o.r.ios;
        res.bytes += o.r.bytes;
        res.failed += o.r.failed;
        res.fallbacks += o.r.fallbacks;
        if (res.first_error.empty() && !o.r.first_error.empty()) {
            res.first_error = o.r.first_error;
            res.first_errno = o.r.first_errno;
        }
        hist.merge(o.hist);
        lat_sum += o.lat_sum;
    }
    res.elapsed_s = static_cast<double>(t1 - t0) / 1e9;
    if (res.elapsed_s > 0) {
        res.iops = static_cast<double>(res.ios - res.failed) / res.elapsed_s;
        res.mib_s = static_cast<double>(res.bytes) / (1 << 20) / res.elapsed_s;
    }
    if (hist.count()) {
        res.lat_mean_us = static_cast<double>(lat_sum) / static_cast<double>(hist.count()) / 1e3;
        res.lat_p50_us = hist.quantile(0.50) / 1e3;
        res.lat_p99_us = hist.quantile(0.99) / 1e3;
        res.lat_p999_us = hist.quantile(0.999) / 1e3;
    }
    res.busy_cores = busy_cores(cpu0, cpu1, spec.exclude);
    return res;
}

}  // namespace nvmetrace::bench
