#include "kernel/btf_layout.h"

#include "format/recfile.h"

#include <linux/nvmetrace.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <utility>
#include <vector>

#include <bpf/btf.h>
#include <fmt/format.h>

namespace nvmetrace {

namespace {

std::string errtext(long err) {
    return std::strerror(static_cast<int>(err < 0 ? -err : err));
}

// Search a struct's members (descending into anonymous struct/union members)
// for name; adds the byte offset of the enclosing anonymous members.
bool find_member(const ::btf* btf, const struct btf_type* t, const std::string& name,
                 uint32_t base_bits, FieldLoc* out) {
    const struct btf_member* m = btf_members(t);
    for (unsigned i = 0; i < btf_vlen(t); i++, m++) {
        uint32_t bits = base_bits + btf_member_bit_offset(t, i);
        const char* mname = btf__name_by_offset(btf, m->name_off);
        const struct btf_type* mt = btf__type_by_id(btf, m->type);
        // skip typedefs/qualifiers to see what the member is
        __s32 rid = btf__resolve_type(btf, m->type);
        const struct btf_type* rt = rid >= 0 ? btf__type_by_id(btf, rid) : mt;
        if (mname && *mname) {
            if (name == mname) {
                if (btf_member_bitfield_size(t, i) != 0 || bits % 8 != 0)
                    return false;
                __s64 sz = btf__resolve_size(btf, m->type);
                if (sz < 0)
                    return false;
                out->offset = bits / 8;
                out->size = static_cast<uint32_t>(sz);
                return true;
            }
        } else if (rt && (btf_is_struct(rt) || btf_is_union(rt))) {
            if (find_member(btf, rt, name, bits, out))
                return true;
        }
    }
    return false;
}

}  // namespace

BtfLayout::BtfLayout(BtfLayout&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      module_btf_(std::exchange(o.module_btf_, nullptr)),
      error_(std::move(o.error_)) {}

BtfLayout& BtfLayout::operator=(BtfLayout&& o) noexcept {
    if (this != &o) {
        this->~BtfLayout();
        base_ = std::exchange(o.base_, nullptr);
        module_btf_ = std::exchange(o.module_btf_, nullptr);
        error_ = std::move(o.error_);
    }
    return *this;
}

BtfLayout::~BtfLayout() {
    if (module_btf_)
        btf__free(module_btf_);
    if (base_)
        btf__free(base_);
}

std::optional<uint32_t> module_btf_id(const std::string& module, const std::string& btf_dir,
                                      std::string* error) {
    const std::string path = btf_dir + "/" + module;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        if (error)
            *error = fmt::format(
                "cannot read module BTF {}: {} (module not loaded, or kernel without "
                "CONFIG_DEBUG_INFO_BTF_MODULES)",
                path, errtext(errno));
        return std::nullopt;
    }
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                  std::istreambuf_iterator<char>()};
    if (bytes.empty()) {
        if (error)
            *error = fmt::format("module BTF {} is empty", path);
        return std::nullopt;
    }
    return crc32c(std::as_bytes(std::span(bytes)));
}

BtfLayout BtfLayout::load(const std::string& module, const std::string& btf_dir) {
    return load_files(btf_dir + "/vmlinux", btf_dir + "/" + module);
}

BtfLayout BtfLayout::load_files(const std::string& vmlinux, const std::string& module_file) {
    BtfLayout l;
    // A module that is not loaded has no BTF file: say so without parsing
    // the kernel's BTF (megabytes; record reads several modules' layouts).
    if (::access(vmlinux.c_str(), R_OK) == 0 && ::access(module_file.c_str(), R_OK) != 0) {
        l.error_ = fmt::format(
            "cannot read module BTF {}: {} (module not loaded, or kernel without "
            "CONFIG_DEBUG_INFO_BTF_MODULES)",
            module_file, errtext(errno));
        return l;
    }
    l.base_ = btf__parse(vmlinux.c_str(), nullptr);
    if (!l.base_) {
        l.error_ = fmt::format(
            "cannot read kernel BTF {}: {} (kernel built without "
            "CONFIG_DEBUG_INFO_BTF?)",
            vmlinux, errtext(errno));
        return l;
    }
    l.module_btf_ = btf__parse_split(module_file.c_str(), l.base_);
    if (!l.module_btf_) {
        l.error_ = fmt::format(
            "cannot read module BTF {}: {} (module not loaded, or kernel "
            "without CONFIG_DEBUG_INFO_BTF_MODULES)",
            module_file, errtext(errno));
    }
    return l;
}

BtfLayout BtfLayout::load_vmlinux(const std::string& vmlinux) {
    BtfLayout l;
    // the kernel's BTF is the one searched: no module split off it
    l.module_btf_ = btf__parse(vmlinux.c_str(), nullptr);
    if (!l.module_btf_)
        l.error_ = fmt::format(
            "cannot read kernel BTF {}: {} (kernel built without CONFIG_DEBUG_INFO_BTF?)", vmlinux,
            errtext(errno));
    return l;
}

std::optional<FieldLoc> BtfLayout::member(const std::string& struct_name,
                                          const std::string& member_name) {
    if (!ok())
        return std::nullopt;
    __s32 id = btf__find_by_name_kind(module_btf_, struct_name.c_str(), BTF_KIND_STRUCT);
    if (id < 0) {
        error_ = fmt::format("struct {} not in BTF", struct_name);
        return std::nullopt;
    }
    const struct btf_type* t = btf__type_by_id(module_btf_, id);
    FieldLoc loc;
    if (!find_member(module_btf_, t, member_name, 0, &loc)) {
        error_ = fmt::format("struct {} has no member {} (or it is a bit field)", struct_name,
                             member_name);
        return std::nullopt;
    }
    return loc;
}

std::optional<NvmetLayout> BtfLayout::nvmet() {
    struct Want {
        const char* st;
        const char* mem;
        uint32_t size;
        FieldLoc NvmetLayout::*dst;
    };
    static const Want wants[] = {
        {"nvmet_req", "cmd", 8, &NvmetLayout::req_cmd},
        {"nvmet_req", "cqe", 8, &NvmetLayout::req_cqe},
        {"nvmet_req", "sq", 8, &NvmetLayout::req_sq},
        {"nvmet_sq", "ctrl", 8, &NvmetLayout::sq_ctrl},
        {"nvmet_sq", "qid", 2, &NvmetLayout::sq_qid},
        {"nvmet_ctrl", "cntlid", 2, &NvmetLayout::ctrl_cntlid},
    };
    NvmetLayout out;
    for (const auto& w : wants) {
        auto loc = sized_member(w.st, w.mem, w.size);
        if (!loc)
            return std::nullopt;
        out.*(w.dst) = *loc;
    }
    return out;
}

std::optional<FieldLoc> BtfLayout::sized_member(const std::string& struct_name,
                                                const std::string& member_name, uint32_t size) {
    auto loc = member(struct_name, member_name);
    if (loc && size && loc->size != size) {
        error_ = fmt::format("{}.{} is {} bytes in this kernel, nvmetrace reads {}", struct_name,
                             member_name, loc->size, size);
        return std::nullopt;
    }
    return loc;
}

std::optional<uint32_t> BtfLayout::struct_size(const std::string& struct_name) {
    if (!ok())
        return std::nullopt;
    __s32 id = btf__find_by_name_kind(module_btf_, struct_name.c_str(), BTF_KIND_STRUCT);
    if (id < 0) {
        error_ = fmt::format("struct {} not in BTF", struct_name);
        return std::nullopt;
    }
    return btf__type_by_id(module_btf_, id)->size;
}

namespace {

// A field a transport's hooks read: member mem of struct st, or st's size
// when mem is nullptr, and the size the hook reads it as (0: any; with type
// set, the size of struct `type`).
struct FieldWant {
    const char* st;
    const char* mem;
    uint32_t size;
    const char* type = nullptr;  // size must equal this struct's size
};

// A layout whose offsets are those (or the sizes) of wants, in order;
// nullopt and btf.error() set at the first that is absent or of another size.
template <class Layout>
std::optional<Layout> resolve_fields(BtfLayout& btf, std::span<const FieldWant> wants) {
    Layout out;
    for (const auto& w : wants) {
        if (!w.mem) {
            auto sz = btf.struct_size(w.st);
            if (!sz)
                return std::nullopt;
            out.offsets.push_back(*sz);
            continue;
        }
        uint32_t size = w.size;
        if (w.type) {
            auto sz = btf.struct_size(w.type);
            if (!sz)
                return std::nullopt;
            size = *sz;
        }
        auto loc = btf.sized_member(w.st, w.mem, size);
        if (!loc)
            return std::nullopt;
        out.offsets.push_back(loc->offset);
    }
    return out;
}

}  // namespace

std::optional<NvmeTcpLayout> BtfLayout::nvme_tcp() {
    // NVMETRACE_L_TCP_* order; the sizes are what kmod/probes/nvme_tcp.c reads.
    static const FieldWant wants[] = {
        {"nvme_tcp_queue", "request", 8},        {"nvme_tcp_queue", "send_list", 16},
        {"nvme_tcp_queue", "req_list", 8},       {"nvme_tcp_queue", "pdu", 8},
        {"nvme_tcp_queue", "pdu_remaining", 4},  {"nvme_tcp_queue", "pdu_offset", 4},
        {"nvme_tcp_queue", "data_remaining", 8}, {"nvme_tcp_queue", "ddgst_remaining", 8},
        {"nvme_tcp_queue", "data_digest", 1},    {"nvme_tcp_queue", "ctrl", 8},
        {"nvme_tcp_queue", nullptr, 0},          {"nvme_tcp_ctrl", "queues", 8},
        {"nvme_tcp_ctrl", "tag_set", 0},         {"nvme_tcp_request", "entry", 16},
        {"nvme_tcp_request", "lentry", 8},       {"nvme_tcp_request", "state", 4},
        {"nvme_tcp_request", "offset", 8},       {"nvme_tcp_request", "queue", 8},
        {"nvme_request", "genctr", 1},
    };
    static_assert(std::size(wants) == NVMETRACE_L_TCP_LAST - NVMETRACE_L_TCP_QUEUE_REQUEST + 1);
    return resolve_fields<NvmeTcpLayout>(*this, wants);
}

std::optional<NvmetTcpLayout> BtfLayout::nvmet_tcp() {
    // NVMETRACE_L_NVMET_TCP_* order; the sizes are what kmod/probes/nvmet_tcp.c reads.
    // struct nvmet_req is nvmet's, but nvmet_tcp's BTF has its own copy.
    static const FieldWant wants[] = {
        {"nvmet_tcp_cmd", "queue", 8},       {"nvmet_tcp_cmd", "req", 0},
        {"nvmet_tcp_cmd", "rbytes_done", 4}, {"nvmet_tcp_cmd", "pdu_len", 4},
        {"nvmet_tcp_cmd", nullptr, 0},       {"nvmet_tcp_queue", "pdu", 0},
        {"nvmet_tcp_queue", nullptr, 0},     {"nvmet_req", "transfer_len", 8},
    };
    static_assert(std::size(wants) == NVMETRACE_L_NVMET_TCP_LAST - NVMETRACE_L_NVMET_TCP_BASE + 1);
    return resolve_fields<NvmetTcpLayout>(*this, wants);
}

std::optional<AioLayout> BtfLayout::aio() {
    // NVMETRACE_L_VMLINUX_* order; what kmod/probes/aio.c reads: the kiocb
    // blkdev_*_iter gets, and the UAPI struct io_event (32 bytes) around obj
    static const FieldWant wants[] = {
        {"aio_kiocb", "rw", 0, "kiocb"},
        {"aio_kiocb", "ki_res", 32},
    };
    static_assert(std::size(wants) == NVMETRACE_L_VMLINUX_LAST - NVMETRACE_L_VMLINUX_BASE + 1);
    return resolve_fields<AioLayout>(*this, wants);
}

std::optional<DioSimpleLayout> BtfLayout::dio_simple() {
    // NVMETRACE_L_DIO_SIMPLE_* order; what kmod/probes/aio.c reads: the kiocb
    // pointer beside the bio of a small O_DIRECT read
    static const FieldWant wants[] = {
        {"iomap_dio_simple", "iocb", 8},
        {"iomap_dio_simple", "bio", 0, "bio"},
    };
    static_assert(std::size(wants) ==
                  NVMETRACE_L_DIO_SIMPLE_LAST - NVMETRACE_L_DIO_SIMPLE_BASE + 1);
    return resolve_fields<DioSimpleLayout>(*this, wants);
}

std::optional<RdmaLayout> BtfLayout::nvme_rdma() {
    // NVMETRACE_L_RDMA_* order
    static const FieldWant wants[] = {
        {"ib_wc", "wr_cqe", 8},
        {"ib_wc", "status", 4},
        {"ib_wc", "qp", 8},
        {"ib_qp", "qp_context", 8},
        {"nvme_rdma_qe", "cqe", 8},
        {"nvme_rdma_qe", "data", 8},
        {"nvme_rdma_request", "sqe", 0, "nvme_rdma_qe"},
        {"nvme_rdma_queue", "ctrl", 8},
        {"nvme_rdma_queue", nullptr, 0},
        {"nvme_rdma_ctrl", "queues", 8},
        {"nvme_rdma_ctrl", "tag_set", 0, "blk_mq_tag_set"},
        {"nvme_request", "genctr", 1},
    };
    static_assert(std::size(wants) == NVMETRACE_L_RDMA_LAST - NVMETRACE_L_RDMA_WC_WR_CQE + 1);
    return resolve_fields<RdmaLayout>(*this, wants);
}

std::optional<RdmaLayout> BtfLayout::nvmet_rdma() {
    // NVMETRACE_L_RDMAT_* order
    static const FieldWant wants[] = {
        {"ib_wc", "wr_cqe", 8},
        {"ib_wc", "status", 4},
        {"ib_wc", "qp", 8},
        {"ib_qp", "qp_context", 8},
        {"nvmet_rdma_cmd", "cqe", 8},
        {"nvmet_rdma_cmd", "nvme_cmd", 8},
        {"nvmet_rdma_queue", "nvme_sq", 0, "nvmet_sq"},
        {"nvmet_rdma_rsp", "send_cqe", 8},
        {"nvmet_rdma_rsp", "read_cqe", 8},
        {"nvmet_rdma_rsp", "req", 0, "nvmet_req"},
    };
    static_assert(std::size(wants) == NVMETRACE_L_RDMAT_RSP_REQ - NVMETRACE_L_RDMAT_WC_WR_CQE + 1);
    return resolve_fields<RdmaLayout>(*this, wants);
}

namespace {

// A BTF type spelled as C, as far as a probe's arguments need: pointers,
// qualifiers, struct/union/enum tags and named types.
std::string c_type(const ::btf* btf, __u32 id, int depth = 0) {
    if (id == 0)
        return "void";
    const struct btf_type* t = btf__type_by_id(btf, id);
    if (!t || depth > 16)
        return "?";
    const char* name = btf__name_by_offset(btf, t->name_off);
    const std::string n = name ? name : "";
    switch (btf_kind(t)) {
        case BTF_KIND_PTR:
            return c_type(btf, t->type, depth + 1) + " *";
        case BTF_KIND_CONST:
            return "const " + c_type(btf, t->type, depth + 1);
        case BTF_KIND_VOLATILE:
            return "volatile " + c_type(btf, t->type, depth + 1);
        case BTF_KIND_STRUCT:
            return "struct " + n;
        case BTF_KIND_UNION:
            return "union " + n;
        case BTF_KIND_ENUM:
        case BTF_KIND_ENUM64:
            return "enum " + n;
        default:
            return n.empty() ? "?" : n;
    }
}

// The tracepoints of each module that nvmetrace's probes take, with the
// arguments the probes are written for.  nvmet's request is `void *` in
// kmod/probes/nvmet.c (struct nvmet_req is private) but the tracepoint
// passes a struct nvmet_req *, which is what must not change.  The block
// layer's tracepoints are checked when the module is built
// (check_trace_callback_type_* in kmod/probes/blk.c).
struct TracepointWant {
    const char* module;
    const char* name;
    std::vector<std::string_view> args;
};

const std::vector<TracepointWant>& tracepoint_wants() {
    static const std::vector<TracepointWant> wants = {
        {"nvme_core", "nvme_setup_cmd", {"struct request *", "struct nvme_command *"}},
        {"nvme_core", "nvme_complete_rq", {"struct request *"}},
        {"nvmet", "nvmet_req_init", {"struct nvmet_req *", "struct nvme_command *"}},
        {"nvmet", "nvmet_req_complete", {"struct nvmet_req *"}},
    };
    return wants;
}

}  // namespace

std::optional<std::vector<std::string>> BtfLayout::tracepoint_args(const std::string& name) {
    if (!ok())
        return std::nullopt;
    const std::string tname = "btf_trace_" + name;
    __s32 id = btf__find_by_name_kind(module_btf_, tname.c_str(), BTF_KIND_TYPEDEF);
    if (id < 0) {
        error_ = fmt::format("tracepoint {} not in BTF (no typedef {})", name, tname);
        return std::nullopt;
    }
    // typedef void (*btf_trace_<name>)(void *__data, <TP_PROTO args>);
    const struct btf_type* t = btf__type_by_id(module_btf_, btf__type_by_id(module_btf_, id)->type);
    if (t && btf_is_ptr(t))
        t = btf__type_by_id(module_btf_, t->type);
    if (!t || !btf_is_func_proto(t) || btf_vlen(t) < 1) {
        error_ = fmt::format("{} in BTF is not a pointer to a probe's prototype", tname);
        return std::nullopt;
    }
    std::vector<std::string> args;
    const struct btf_param* p = btf_params(t);
    for (unsigned i = 1; i < btf_vlen(t); i++)
        args.push_back(c_type(module_btf_, p[i].type));
    return args;
}

std::optional<std::string> BtfLayout::probe_prototype_mismatch(const std::string& module,
                                                               int* checked) {
    if (checked)
        *checked = 0;
    if (!ok())
        return std::nullopt;
    for (const auto& w : tracepoint_wants()) {
        if (module != w.module)
            continue;
        // No typedef (a kernel without CONFIG_BPF_EVENTS has none): nothing
        // to check against, as on a kernel without BTF.
        auto args = tracepoint_args(w.name);
        if (!args)
            continue;
        if (checked)
            ++*checked;
        if (!std::equal(args->begin(), args->end(), w.args.begin(), w.args.end()))
            return fmt::format(
                "tracepoint {} passes ({}) in this kernel, nvmetrace's probe takes ({}): "
                "it is not attached (the kernel changed it; nvmetrace needs updating)",
                w.name, fmt::join(*args, ", "), fmt::join(w.args, ", "));
    }
    return std::nullopt;
}

}  // namespace nvmetrace
