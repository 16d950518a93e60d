// Control channel: the nvmetrace generic netlink family.
//
// One GenlClient is one netlink socket bound to the family; each method is
// one request and its reply.  Failures throw Error with a message the user
// can act on ("nvmetrace module not loaded: modprobe nvmetrace", "... need
// root").  Not thread-safe: use one client per thread.
#pragma once

#include "kernel/ring_reader.h"

#include <linux/nvmetrace.h>
#include <stdint.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

struct nl_sock;
struct nl_msg;

namespace nvmetrace {

// NVMETRACE_CMD_GET_VERSION
struct ModuleVersion {
    uint32_t abi_version = 0;    // NVMETRACE_ABI_VERSION of the module
    std::string module_version;  // the module's VERSION
    uint32_t ring_version = 0;   // NVMETRACE_RING_VERSION of the module
};

enum class State : uint32_t {
    kIdle = 0,       // NVMETRACE_STATE_IDLE
    kRecording = 1,  // NVMETRACE_STATE_RECORDING
};

// "idle", "recording", or "unknown(<n>)" for a state newer than this tool.
std::string state_name(State state);

// NVMETRACE_CMD_GET_STATUS
struct Status {
    State state = State::kIdle;
    RingGeometry rings;    // NR_RINGS, RING_RECS, RING_MAP_SIZE, REC_SIZE
    uint64_t records = 0;  // committed, all rings
    uint64_t lost = 0;     // dropped, all rings
    uint32_t role = 0;     // NVMETRACE_ROLE_* of the current or last recording, 0 if none
    uint32_t sample = 0;   // its 1-of-N sampling, 0 if none
};

// Arguments of NVMETRACE_CMD_START.
struct StartArgs {
    uint32_t role = 0;           // NVMETRACE_ROLE_* mask, not 0
    uint32_t sample = 1;         // record 1 command in `sample`, >= 1
    uint64_t seed = 0;           // sampling hash seed
    std::vector<uint32_t> devs;  // dev_t (kernel encoding) to trace; empty = all
    // Record only `devs`, even when it is empty; more come with admit().
    // Modules of ABI 5 and later only.
    bool dev_filter = false;
    // nvmet's private offsets (NVMETRACE_L_* order: req.cmd, req.cqe, req.sq,
    // sq.ctrl, sq.qid, ctrl.cntlid), from BTF; required for the target role.
    std::vector<uint32_t> layout;
    // nvme-tcp's (NVMETRACE_L_TCP_QUEUE_REQUEST .. _TCP_LAST order),
    // from BTF; empty: the nvme-tcp hooks are refused.
    std::vector<uint32_t> tcp_layout;
    // nvme-rdma's (NVMETRACE_L_RDMA_*) and nvmet-rdma's (NVMETRACE_L_RDMAT_*),
    // from BTF; empty: their hooks are refused.
    std::vector<uint32_t> rdma_layout;
    std::vector<uint32_t> rdmat_layout;
    // nvmet-tcp's (NVMETRACE_L_NVMET_TCP_BASE .. _LAST order), from BTF;
    // empty: the nvmet-tcp hooks are refused.
    std::vector<uint32_t> tcpt_layout;
    // The kernel's (NVMETRACE_L_VMLINUX_BASE .. _LAST order: struct
    // aio_kiocb's rw and ki_res), from BTF; empty: aio commands are recorded
    // without their iocb (no AIO_REAP).  Modules of ABI 4 and later only.
    std::vector<uint32_t> aio_layout;
    // iomap's struct iomap_dio_simple (NVMETRACE_L_DIO_SIMPLE_BASE .. _LAST
    // order), from BTF where the kernel has it (7.3 on); empty: a small
    // O_DIRECT read of a file starts at its bio.  Modules of ABI 8 and later.
    std::vector<uint32_t> dio_simple_layout;
    // The identity of the module each layout above comes from
    // (NVMETRACE_L_BTF_*: module_btf_id()), only with that layout.  When
    // the module is loaded again during the recording, the hooks that read
    // its layout re-attach only if its BTF still has this identity; without
    // one they stay off (NVMETRACE_HOOK_STALE).
    std::optional<uint32_t> nvmet_btf, tcp_btf, tcpt_btf, rdma_btf, rdmat_btf;
};

// One NVMETRACE_A_HOOK nest of the GET_HOOKS dump.
struct HookInfo {
    std::string name;
    uint32_t kind = 0;   // enum nvmetrace_hook_kind
    uint32_t state = 0;  // enum nvmetrace_hook_state
    int32_t error = 0;   // -errno of the last failed attach, 0 if none
    uint64_t hits = 0;
    uint32_t role = 0;  // NVMETRACE_ROLE_* the hook serves
};

// NVMETRACE_CMD_POOL_GET: the module's test pool and the kernel's own
// blk_iobuf pool (NVMETRACE_P_*).
struct PoolInfo {
    uint64_t buf_size = 0;   // bytes per buffer; 0: no pool
    uint32_t nr_asked = 0;   // pool_nr
    uint32_t allocated = 0;  // buffers allocated
    uint32_t fallbacks = 0;  // buffers made of folios smaller than `order`
    uint64_t bytes = 0;
    uint32_t order = 0;      // folio order asked for
    uint32_t min_order = 0;  // smallest folio order obtained
    uint32_t folios = 0;
    int32_t node = -1;
    uint32_t mappings = 0;  // user mappings right now
    uint64_t mmap_offset = 0;
    // The kernel's pool (CONFIG_BLK_IOBUF_POOL): enum nvmetrace_kpool_state,
    // and its figures when kpool == NVMETRACE_KPOOL_ACTIVE.
    uint32_t kpool = NVMETRACE_KPOOL_ABSENT;
    uint32_t kpool_order = 0;
    uint32_t kpool_folio_size = 0;
    uint32_t kpool_capacity = 0;
    uint32_t kpool_in_use = 0;
    uint32_t kpool_available = 0;
    uint32_t kpool_high_water = 0;
    uint64_t kpool_alloc_failures = 0;
};

// A block device named to POOL_GET or DMA_COST (ABI 7): the module takes it
// from `fd`, a descriptor of this process open for reading on it (it looks at
// no device its caller could not open); `dev`, when not 0, must be the same
// device.  fd -1 sends DEV alone, which the module refuses.
struct DeviceRef {
    uint32_t dev = 0;  // kernel dev_t encoding
    int fd = -1;
};

// One I/O size of NVMETRACE_CMD_DMA_COST: raw nanoseconds per iteration.
struct DmaSize {
    uint32_t bytes = 0;
    uint32_t nents = 0;               // scatterlist entries (4 KiB pages)
    uint32_t mapped_nents = 0;        // DMA segments dma_map_sg() returned
    uint32_t limits = 0;              // NVMETRACE_DMA_OVER_* bits
    int32_t error = 0;                // -errno when not measured
    std::vector<uint32_t> map_ns;     // map + unmap
    std::vector<uint32_t> premap_ns;  // premapped: sync for device + for cpu
    std::vector<uint32_t> folio_ns;   // map + unmap of one contiguous entry (may be empty)
};

// NVMETRACE_CMD_DMA_COST's reply.
struct DmaCost {
    uint32_t dev = 0;  // dev_t asked about, kernel encoding
    uint32_t iters = 0;
    bool has_dma = false;
    std::string no_dma_reason;
    std::string walk;    // devices from the disk up
    std::string device;  // the DMA device
    std::string driver;
    int32_t node = -1;
    uint64_t opt_size = 0;  // dma_opt_mapping_size(); SIZE_MAX: no limit
    uint64_t max_size = 0;  // dma_max_mapping_size()
    uint32_t max_seg_size = 0;
    uint32_t iommu = 0;  // enum nvmetrace_dma_iommu
    uint32_t iommu_domain_type = 0;
    uint32_t queue_max_bytes = 0;
    uint32_t queue_max_segments = 0;
    std::vector<DmaSize> sizes;
};

class GenlClient {
public:
    // Connects and resolves the family.  Throws ModuleNotLoaded when the
    // family is not registered.  `family_name` is for tests, which talk to
    // the kernel's own "nlctrl" family to exercise the error paths.
    explicit GenlClient(const char* family_name = NVMETRACE_GENL_NAME);
    ~GenlClient();
    GenlClient(const GenlClient&) = delete;
    GenlClient& operator=(const GenlClient&) = delete;

    ModuleVersion get_version();
    Status get_status();
    // Return the state the module reports after the command.
    State start(const StartArgs& args);
    // NVMETRACE_CMD_ADMIT: devices that appeared after START, into this
    // socket's recording (START had dev_filter).  Returns every device the
    // recording now has.  Modules of ABI 5 and later only.
    std::vector<uint32_t> admit(const std::vector<uint32_t>& devs);
    // NVMETRACE_CMD_LAYOUT (ABI 6): the layouts of transport modules loaded
    // since start(), into this socket's recording: `groups` carries only
    // those (their *_layout members, each with its *_btf identity); their
    // hooks attach before it returns.
    void layout(const StartArgs& groups);
    State stop();
    std::vector<HookInfo> get_hooks();
    // `dev`: a block device whose queue's blk_iobuf pool to report as well.
    PoolInfo pool_get(std::optional<DeviceRef> dev = std::nullopt);
    // `iters`: iterations per size, 1..NVMETRACE_DMA_ITERS_MAX; 0: the
    // module's default.
    DmaCost dma_cost(const DeviceRef& dev, uint32_t iters = 0);

    // Generic netlink family id (for diagnostics).
    [[nodiscard]] int family() const { return family_; }

    // Implementation detail of genl.cc (its libnl callbacks fill it).
    struct Reply;

private:
    // Sends `msg` (consumed) and collects the reply messages for `cmd`.
    void transact(nl_msg* msg, uint8_t cmd, Reply& reply);
    nl_msg* new_request(uint8_t cmd, int flags);

    struct SockDeleter {
        void operator()(nl_sock* sk) const;
    };
    std::unique_ptr<nl_sock, SockDeleter> sk_;
    int family_ = -1;
};

// The user-facing name of a command ("GET_STATUS") for error messages.
std::string command_name(uint8_t cmd);

// The message for a kernel error `err` (positive errno) in reply to `cmd`,
// with the kernel's extended-ack text `ext_msg` when it sent one.  Exposed
// for tests.
std::string genl_error_message(uint8_t cmd, int err, const std::string& ext_msg);

// The hooks the loaded module lets attach when it was loaded with the benchmark
// parameter bench_hooks (its comma-separated names), or "" when it was not (or
// when no module is loaded).  sysfs_param: the parameter's file, for tests.
std::string module_bench_hooks(
    const std::string& sysfs_param = "/sys/module/nvmetrace/parameters/bench_hooks");

// Whether the loaded module was loaded with the benchmark parameter bench_nop:
// its hooks attach with handlers that do nothing, so a recording holds no
// command.  false when it was not (or when no module is loaded).
bool module_bench_nop(
    const std::string& sysfs_param = "/sys/module/nvmetrace/parameters/bench_nop");

}  // namespace nvmetrace
