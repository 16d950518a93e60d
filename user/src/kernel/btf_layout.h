// Layouts of private kernel structs, read from the running kernel's BTF.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

struct btf;  // libbpf

namespace nvmetrace {

// Where a struct member sits: byte offset and size.
struct FieldLoc {
    uint32_t offset = 0;
    uint32_t size = 0;
};

// The nvmet fields the target hooks read (see kmod/probes/probe.h).
struct NvmetLayout {
    FieldLoc req_cmd, req_cqe, req_sq, sq_ctrl, sq_qid, ctrl_cntlid;
};

// The nvme-tcp host fields its hooks read, in NVMETRACE_L_TCP_* order
// (queue.request ... request.offset; see the UAPI header).  queue_size is
// sizeof(struct nvme_tcp_queue), not a member.
struct NvmeTcpLayout {
    std::vector<uint32_t> offsets;  // NVMETRACE_L_TCP_QUEUE_REQUEST + i
};

// The nvme-rdma host fields (NVMETRACE_L_RDMA_* order) and the nvmet-rdma
// target fields (NVMETRACE_L_RDMAT_* order); queue_size is a struct's size.
struct RdmaLayout {
    std::vector<uint32_t> offsets;
};

// The nvmet-tcp target fields its hooks read, in NVMETRACE_L_NVMET_TCP_*
// order (cmd.queue ... req.transfer_len; see the UAPI header).  cmd_size and
// queue_size are sizeof(struct nvmet_tcp_cmd / nvmet_tcp_queue).
struct NvmetTcpLayout {
    std::vector<uint32_t> offsets;  // NVMETRACE_L_NVMET_TCP_BASE + i
};

// The kernel's own fields (NVMETRACE_L_VMLINUX_* order): struct aio_kiocb's
// rw (a struct kiocb) and ki_res (a struct io_event), the aio iocb identity.
struct AioLayout {
    std::vector<uint32_t> offsets;  // NVMETRACE_L_VMLINUX_BASE + i
};

// The kernel's own, a group apart (NVMETRACE_L_DIO_SIMPLE_* order): iomap's
// struct iomap_dio_simple (7.3 on), its kiocb pointer and its bio.
struct DioSimpleLayout {
    std::vector<uint32_t> offsets;  // NVMETRACE_L_DIO_SIMPLE_BASE + i
};

// The identity of a module's layout (NVMETRACE_L_BTF_*): the CRC-32C of its
// BTF file, btf_dir/<module> (normally /sys/kernel/btf/<module>).  nullopt
// and *error (when given) set when it cannot be read.
std::optional<uint32_t> module_btf_id(const std::string& module,
                                      const std::string& btf_dir = "/sys/kernel/btf",
                                      std::string* error = nullptr);

// Looks up struct members in /sys/kernel/btf/vmlinux + /sys/kernel/btf/<module>
// (or files given for tests). Errors are returned as text, never thrown past.
class BtfLayout {
public:
    // module: "nvmet"; btf_dir: normally /sys/kernel/btf.
    static BtfLayout load(const std::string& module,
                          const std::string& btf_dir = "/sys/kernel/btf");
    // From files: vmlinux BTF (raw or ELF) and a module (raw BTF or .ko ELF).
    static BtfLayout load_files(const std::string& vmlinux, const std::string& module_file);
    // The kernel's BTF alone: member() and struct_size() look in it.
    static BtfLayout load_vmlinux(const std::string& vmlinux = "/sys/kernel/btf/vmlinux");

    BtfLayout(BtfLayout&&) noexcept;
    BtfLayout& operator=(BtfLayout&&) noexcept;
    ~BtfLayout();

    bool ok() const { return module_btf_ != nullptr; }
    const std::string& error() const { return error_; }

    // Byte offset and size of struct_name.member (direct member, or inside an
    // anonymous struct/union member). nullopt and error() set when absent.
    std::optional<FieldLoc> member(const std::string& struct_name, const std::string& member);
    // member(), and its size must be `size` bytes (0: any size).
    std::optional<FieldLoc> sized_member(const std::string& struct_name, const std::string& member,
                                         uint32_t size);

    // All six nvmet fields, with sizes checked (pointers 8, qid/cntlid 2).
    std::optional<NvmetLayout> nvmet();

    // Size of a struct, nullopt and error() set when absent.
    std::optional<uint32_t> struct_size(const std::string& struct_name);

    // The nvme-tcp host group (module BTF "nvme_tcp"), sizes checked.
    std::optional<NvmeTcpLayout> nvme_tcp();

    // The nvme-rdma host group (module BTF "nvme_rdma") and the nvmet-rdma
    // target group (module BTF "nvmet_rdma"), sizes checked.
    std::optional<RdmaLayout> nvme_rdma();
    std::optional<RdmaLayout> nvmet_rdma();

    // The nvmet-tcp target group (module BTF "nvmet_tcp"), sizes checked.
    std::optional<NvmetTcpLayout> nvmet_tcp();

    // The vmlinux group (load_vmlinux()): struct aio_kiocb's rw (a struct
    // kiocb) and ki_res (32 bytes, the UAPI struct io_event).
    std::optional<AioLayout> aio();

    // The vmlinux BTF's struct iomap_dio_simple: iocb (a pointer) and bio (a
    // struct bio); nullopt in kernels without it (before 7.3).
    std::optional<DioSimpleLayout> dio_simple();

    // The arguments tracepoint `name` passes its probes, spelled as C
    // ("struct request *"), the probe's leading data pointer left out: from
    // the typedef btf_trace_<name> the kernel's BTF has for each tracepoint.
    // nullopt and error() set when absent.
    std::optional<std::vector<std::string>> tracepoint_args(const std::string& name);

    // Checks that the tracepoints of `module` ("nvme_core", "nvmet") that
    // nvmetrace's probes take (kmod/probes/nvme.c, nvmet.c) pass the
    // arguments those probes are written for.  nullopt when they do, when
    // the module has none nvmetrace takes, when its BTF cannot be read (then
    // ok() is false) or has no btf_trace_ typedef to check against; else the
    // text that says which differs and how.  *checked (when given) counts
    // the tracepoints compared.
    std::optional<std::string> probe_prototype_mismatch(const std::string& module,
                                                        int* checked = nullptr);

private:
    BtfLayout() = default;
    ::btf* base_ = nullptr;
    ::btf* module_btf_ = nullptr;
    std::string error_;
};

}  // namespace nvmetrace
