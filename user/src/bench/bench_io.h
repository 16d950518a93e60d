// The I/O engine of `nvmetrace bench`: the device under test, its buffers,
// the worker threads that drive it through io_uring, and the CPU accounting.
//
// Two data paths:
//   block     a block device opened with O_DIRECT; IORING_OP_READ/WRITE, or
//             READ_FIXED/WRITE_FIXED with registered buffers
//   passthru  an NVMe generic char device (/dev/ngXnY); IORING_OP_URING_CMD
//             with NVME_URING_CMD_IO on a ring set up with SQE128|CQE32, and
//             IORING_URING_CMD_FIXED with registered buffers
// Buffers come from malloc (page aligned), hugetlb pages, or the nvmetrace
// module's pool (mmap of /dev/nvmetrace, always registered as fixed buffers).
#pragma once

#include "analysis/stats.h"

#include <stdint.h>
#include <sys/uio.h>

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <vector>

struct io_uring_sqe;

namespace nvmetrace::bench {

enum class Engine { block, passthru };
enum class Pattern { randread, randwrite, read, write };
enum class BufKind { malloc, hugepage, pool };

const char* engine_name(Engine e);
const char* pattern_name(Pattern p);
const char* buf_name(BufKind b);
Pattern parse_pattern(const std::string& s);  // throws Error
BufKind parse_buf(const std::string& s);      // throws Error
inline bool is_write(Pattern p) {
    return p == Pattern::randwrite || p == Pattern::write;
}
inline bool is_random(Pattern p) {
    return p == Pattern::randread || p == Pattern::randwrite;
}

// "4096", "4k", "4KiB", "2m", "2MiB", "512b" -> bytes; throws Error.
uint64_t parse_size(const std::string& s);
// "0-2,5" -> {0,1,2,5}; throws Error on anything else.
std::set<int> parse_cpu_list(const std::string& s);

// What the device is and what its queue allows, from stat() and sysfs.
struct Device {
    std::string path;  // as given: /dev/nvme0n1, /dev/ng0n1
    Engine engine = Engine::block;
    std::string disk;  // the sysfs block device: nvme0n1 (for ng0n1 too)
    uint64_t bytes = 0;
    uint32_t lba_size = 512;
    uint32_t max_hw_sectors_kb = 0;
    uint32_t max_sectors_kb = 0;
    uint32_t nsid = 0;  // passthru: NVME_IOCTL_ID; block: sysfs nsid
    std::string model, serial, subsysnqn, transport, firmware;
    std::string address;  // the controller's sysfs address: "traddr=...,trsvcid=..."
    // Queue attributes a CONFIG_BLK_IOBUF_POOL kernel adds (names containing
    // "premap" or "iobuf"), name -> value; empty on stock kernels.
    std::map<std::string, std::string> premap_attrs;
};

// Throws Error saying what is wrong: no such file, neither a block device nor
// an NVMe generic char device, not readable.
Device inspect_device(const std::string& path, const std::string& sysfs_root = "/sys");

// The nvmetrace module's buffer pool geometry, from its module parameters
// (genl's PoolInfo has the module's own account of it).
struct PoolParams {
    bool module_loaded = false;
    bool has_params = false;  // the module has pool_buf_kb / pool_nr
    uint64_t buf_kb = 0;
    uint64_t nr = 0;
};
PoolParams read_pool_params(const std::string& sysfs_root = "/sys");

// Memory for every I/O slot of every thread, cut into regions that can be
// registered with io_uring (one per slot for malloc/hugepage, one per pool
// buffer for the pool).
class Buffers {
public:
    struct Slot {
        char* ptr = nullptr;
        uint32_t region = 0;
    };
    // nslots slots of slot_bytes each; throws Error when the memory is not
    // there (no huge pages reserved, no pool, pool too small).
    static Buffers make(BufKind kind, uint64_t slot_bytes, uint32_t nslots,
                        const std::string& pool_node = "/dev/nvmetrace");
    Buffers() = default;
    Buffers(Buffers&& o) noexcept { *this = std::move(o); }
    Buffers& operator=(Buffers&& o) noexcept;
    ~Buffers();

    BufKind kind() const { return kind_; }
    const std::vector<iovec>& regions() const { return regions_; }
    const Slot& slot(uint32_t i) const { return slots_[i]; }
    uint32_t nslots() const { return static_cast<uint32_t>(slots_.size()); }

private:
    BufKind kind_ = BufKind::malloc;
    void* base_ = nullptr;
    size_t map_bytes_ = 0;  // mmap'ed (hugepage, pool); 0: malloc'ed
    std::vector<iovec> regions_;
    std::vector<Slot> slots_;
};

// One measurement: a pattern, size, QD and thread count on one device.
struct RunSpec {
    Pattern pattern = Pattern::randread;
    uint64_t size = 4096;
    uint32_t qd = 1;
    uint32_t threads = 1;
    double duration_s = 5;  // measured seconds (when ios == 0)
    uint64_t ios = 0;       // measured I/Os (all threads); 0: by duration
    double ramp_s = 0;      // unmeasured seconds first
    BufKind buf = BufKind::malloc;
    bool fixed = false;     // register malloc/hugepage buffers (the pool always is)
    std::vector<int> cpus;  // thread i on cpus[i % n]; empty: not pinned
    std::set<int> exclude;  // CPUs left out of busy_cores (the target's)
    uint64_t offset = 0;    // first byte of the device used
    uint64_t span = 0;      // bytes used from offset; 0: to the end
    uint64_t seed = 1;
};

struct RunResult {
    uint64_t ios = 0;  // completed in the measured window (incl. failed)
    uint64_t bytes = 0;
    uint64_t failed = 0;
    int first_errno = 0;      // > 0: errno of the first failure (0: none or NVMe status)
    std::string first_error;  // "" when none failed
    uint64_t fallbacks = 0;   // of ios: done without a registered fixed buffer
    double elapsed_s = 0;
    double iops = 0, mib_s = 0;
    double lat_mean_us = 0, lat_p50_us = 0, lat_p99_us = 0, lat_p999_us = 0;
    double busy_cores = 0;
};

// Fills a zeroed 128-byte SQE (a ring set up with SQE128) with an NVMe read or
// write of size bytes at byte offset off of namespace nsid (lba_size bytes a
// block) through the generic char device fd: IORING_OP_URING_CMD with
// NVME_URING_CMD_IO.  buf must stay valid until the command completes.
void prep_passthru(io_uring_sqe* sqe, int fd, bool write, uint32_t nsid, uint32_t lba_size,
                   const void* buf, uint64_t size, uint64_t off);

// Runs spec on dev; throws Error on setup failures (open, ring, buffers,
// pinning).  I/O errors are counted in the result, not thrown.
RunResult run(const Device& dev, const RunSpec& spec,
              const std::string& pool_node = "/dev/nvmetrace");

// ------------------------------------------------------------------ CPU

// Jiffies per CPU from /proc/stat.  Busy: user + nice + system + irq +
// softirq + steal (idle and iowait are not busy); total: those plus idle and
// iowait.  Softirq and kworker time count where they ran, so a kernel data
// path's cost shows up even when it is not charged to the process.
struct CpuTicks {
    uint64_t busy = 0, total = 0;
};
std::map<int, CpuTicks> parse_proc_stat(const std::string& text);
std::map<int, CpuTicks> read_proc_stat();
// Cores busy on average between the two snapshots, over every CPU not in
// exclude: the sum of each CPU's busy share of its own elapsed ticks.  On
// bare metal that is busy jiffies / (HZ x seconds); under emulation, where a
// vCPU that is not scheduled loses ticks, it is still the share of the
// vCPU's time that was busy.
double busy_cores(const std::map<int, CpuTicks>& before, const std::map<int, CpuTicks>& after,
                  const std::set<int>& exclude);

}  // namespace nvmetrace::bench
