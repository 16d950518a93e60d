#include "kernel/genl.h"

#include "util/error.h"

#include <linux/netlink.h>
#include <linux/nvmetrace.h>
#include <netlink/attr.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <cerrno>
#include <exception>
#include <fstream>
#include <functional>

#include <fmt/format.h>

namespace nvmetrace {

namespace {

// A module that never answers would otherwise hang the tool.
constexpr int kReplyTimeoutSeconds = 10;

using AttrTable = std::array<nlattr*, NVMETRACE_A_MAX + 1>;

const nla_policy* attr_policy() {
    static const auto policy = [] {
        std::array<nla_policy, NVMETRACE_A_MAX + 1> p{};
        auto set = [&p](int attr, uint16_t type) { p[static_cast<size_t>(attr)].type = type; };
        set(NVMETRACE_A_ABI_VERSION, NLA_U32);
        set(NVMETRACE_A_MODULE_VERSION, NLA_STRING);
        set(NVMETRACE_A_RING_VERSION, NLA_U32);
        set(NVMETRACE_A_STATE, NLA_U32);
        set(NVMETRACE_A_NR_RINGS, NLA_U32);
        set(NVMETRACE_A_RING_RECS, NLA_U32);
        set(NVMETRACE_A_RING_MAP_SIZE, NLA_U64);
        set(NVMETRACE_A_REC_SIZE, NLA_U32);
        set(NVMETRACE_A_RECORDS, NLA_U64);
        set(NVMETRACE_A_LOST, NLA_U64);
        set(NVMETRACE_A_ROLE, NLA_U32);
        set(NVMETRACE_A_SAMPLE, NLA_U32);
        set(NVMETRACE_A_SEED, NLA_U64);
        set(NVMETRACE_A_DEVS, NLA_NESTED);
        set(NVMETRACE_A_DEV, NLA_U32);
        set(NVMETRACE_A_HOOK, NLA_NESTED);
        set(NVMETRACE_A_HOOK_NAME, NLA_STRING);
        set(NVMETRACE_A_HOOK_KIND, NLA_U32);
        set(NVMETRACE_A_HOOK_STATE, NLA_U32);
        set(NVMETRACE_A_HOOK_ERROR, NLA_U32);  // s32 on the wire; same size
        set(NVMETRACE_A_HOOK_HITS, NLA_U64);
        set(NVMETRACE_A_FLAGS, NLA_U32);
        set(NVMETRACE_A_LAYOUT, NLA_NESTED);
        set(NVMETRACE_A_POOL, NLA_NESTED);
        set(NVMETRACE_A_DMA, NLA_NESTED);
        set(NVMETRACE_A_FD, NLA_U32);
        return p;
    }();
    return policy.data();
}

std::string attr_name(int attr) {
    // In enum order; an attribute added to the header but not here is shown
    // by number.
    static constexpr const char* names[] = {
        "UNSPEC",       "ABI_VERSION",   "MODULE_VERSION",
        "RING_VERSION", "STATE",         "NR_RINGS",
        "RING_RECS",    "RING_MAP_SIZE", "REC_SIZE",
        "RECORDS",      "LOST",          "ROLE",
        "SAMPLE",       "SEED",          "DEVS",
        "DEV",          "HOOK",          "HOOK_NAME",
        "HOOK_KIND",    "HOOK_STATE",    "HOOK_ERROR",
        "HOOK_HITS",    "FLAGS",         "PAD",
        "LAYOUT",       "POOL",          "DMA",
        "FD",
    };
    if (attr >= 0 && static_cast<size_t>(attr) < std::size(names))
        return names[attr];
    return fmt::format("attribute {}", attr);
}

// Attribute `attr` of a reply to `cmd`, or an Error saying it is missing.
const nlattr* need(const AttrTable& tb, int attr, uint8_t cmd) {
    if (!tb[static_cast<size_t>(attr)])
        throw Error(
            fmt::format("{}: the module's reply lacks {}: module and tool versions "
                        "do not match",
                        command_name(cmd), attr_name(attr)));
    return tb[static_cast<size_t>(attr)];
}

uint32_t need_u32(const AttrTable& tb, int attr, uint8_t cmd) {
    return nla_get_u32(const_cast<nlattr*>(need(tb, attr, cmd)));
}

uint64_t need_u64(const AttrTable& tb, int attr, uint8_t cmd) {
    return nla_get_u64(const_cast<nlattr*>(need(tb, attr, cmd)));
}

std::string need_string(const AttrTable& tb, int attr, uint8_t cmd) {
    return nla_get_string(const_cast<nlattr*>(need(tb, attr, cmd)));
}

struct MsgDeleter {
    void operator()(nl_msg* msg) const { nlmsg_free(msg); }
};
using MsgPtr = std::unique_ptr<nl_msg, MsgDeleter>;

}  // namespace

// What transact() collects; filled from libnl's C callbacks, which must not
// throw: on_msg's exceptions are parked in `failure` and rethrown after.
struct GenlClient::Reply {
    std::function<void(nlmsghdr*)> on_msg;
    bool done = false;
    int err = 0;  // positive errno from the kernel, 0 if none
    std::string ext_msg;
    std::exception_ptr failure;
};

std::string state_name(State state) {
    switch (state) {
        case State::kIdle:
            return "idle";
        case State::kRecording:
            return "recording";
    }
    return fmt::format("unknown({})", static_cast<uint32_t>(state));
}

std::string command_name(uint8_t cmd) {
    switch (cmd) {
        case NVMETRACE_CMD_GET_VERSION:
            return "GET_VERSION";
        case NVMETRACE_CMD_GET_STATUS:
            return "GET_STATUS";
        case NVMETRACE_CMD_START:
            return "START";
        case NVMETRACE_CMD_STOP:
            return "STOP";
        case NVMETRACE_CMD_GET_HOOKS:
            return "GET_HOOKS";
        case NVMETRACE_CMD_POOL_GET:
            return "POOL_GET";
        case NVMETRACE_CMD_DMA_COST:
            return "DMA_COST";
        case NVMETRACE_CMD_ADMIT:
            return "ADMIT";
        case NVMETRACE_CMD_LAYOUT:
            return "LAYOUT";
        default:
            return fmt::format("command {}", cmd);
    }
}

std::string module_bench_hooks(const std::string& sysfs_param) {
    std::ifstream in(sysfs_param);
    std::string v;
    if (!in || !std::getline(in, v) || v == "(null)")
        return {};
    return v;
}

bool module_bench_nop(const std::string& sysfs_param) {
    std::ifstream in(sysfs_param);
    std::string v;
    return in && std::getline(in, v) && v == "Y";
}

std::string genl_error_message(uint8_t cmd, int err, const std::string& ext_msg) {
    const std::string name = command_name(cmd);
    const char* desc = strerrordesc_np(err);
    const std::string what = desc ? desc : fmt::format("error {}", err);
    const std::string detail = ext_msg.empty() ? "" : ": " + ext_msg;

    switch (err) {
        case EPERM:
        case EACCES: {
            // START, STOP, ADMIT and DMA_COST need CAP_SYS_ADMIN as well (kmod/netlink.c)
            const bool sys = cmd == NVMETRACE_CMD_START || cmd == NVMETRACE_CMD_STOP ||
                             cmd == NVMETRACE_CMD_DMA_COST || cmd == NVMETRACE_CMD_ADMIT;
            return fmt::format("{}: {}: need root (CAP_NET_ADMIN{}){}", name, what,
                               sys ? " and CAP_SYS_ADMIN" : "", detail);
        }
        case EOPNOTSUPP:
            return fmt::format(
                "{}: not supported by the loaded nvmetrace module "
                "(update the module){}",
                name, detail);
        default:
            return fmt::format("{}: {}{}", name, what, detail);
    }
}

void GenlClient::SockDeleter::operator()(nl_sock* sk) const {
    nl_socket_free(sk);
}

GenlClient::GenlClient(const char* family_name) : sk_(nl_socket_alloc()) {
    if (!sk_)
        throw Error("netlink: cannot allocate a socket");
    int err = genl_connect(sk_.get());
    if (err < 0)
        throw Error(fmt::format("netlink: connect: {}", nl_geterror(err)));

    const int fd = nl_socket_get_fd(sk_.get());
    // Best effort: kernels without extended ACKs just send no message text.
    const int one = 1;
    setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
    const timeval timeout{.tv_sec = kReplyTimeoutSeconds, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    // Dump messages may be larger than libnl's default receive buffer.
    nl_socket_enable_msg_peek(sk_.get());

    family_ = genl_ctrl_resolve(sk_.get(), family_name);
    if (family_ == -NLE_OBJ_NOTFOUND)
        throw ModuleNotLoaded();
    if (family_ == -NLE_PERM)
        throw Error(fmt::format("netlink: resolving the {} family: need root", family_name));
    if (family_ < 0)
        throw Error(
            fmt::format("netlink: resolving the {} family: {}", family_name, nl_geterror(family_)));
}

GenlClient::~GenlClient() = default;

nl_msg* GenlClient::new_request(uint8_t cmd, int flags) {
    nl_msg* msg = nlmsg_alloc();
    if (!msg)
        throw Error("netlink: out of memory");
    if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family_, 0, flags, cmd,
                     NVMETRACE_GENL_VERSION)) {
        nlmsg_free(msg);
        throw Error("netlink: cannot build a request");
    }
    return msg;
}

namespace {

int on_valid(nl_msg* msg, void* arg) {
    auto* reply = static_cast<GenlClient::Reply*>(arg);
    try {
        reply->on_msg(nlmsg_hdr(msg));
        return NL_OK;
    } catch (...) {
        reply->failure = std::current_exception();
        reply->done = true;
        return NL_STOP;
    }
}

int on_ack(nl_msg*, void* arg) {
    static_cast<GenlClient::Reply*>(arg)->done = true;
    return NL_STOP;
}

int on_finish(nl_msg*, void* arg) {
    static_cast<GenlClient::Reply*>(arg)->done = true;
    return NL_STOP;
}

// The kernel's extended ACK text (NLMSGERR_ATTR_MSG), if any.
std::string ext_ack_message(const nlmsgerr* e) {
    const auto* nlh =
        reinterpret_cast<const nlmsghdr*>(reinterpret_cast<const char*>(e) - NLMSG_HDRLEN);
    if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
        return {};
    // After struct nlmsgerr comes the request's payload unless CAPPED.
    size_t payload = sizeof(*e);
    if (!(nlh->nlmsg_flags & NLM_F_CAPPED) && e->msg.nlmsg_len >= NLMSG_HDRLEN)
        payload += e->msg.nlmsg_len - NLMSG_HDRLEN;
    payload = NLMSG_ALIGN(payload);
    if (nlh->nlmsg_len < NLMSG_HDRLEN + payload)
        return {};
    const int len = static_cast<int>(nlh->nlmsg_len - NLMSG_HDRLEN - payload);
    auto* attrs =
        reinterpret_cast<nlattr*>(const_cast<char*>(reinterpret_cast<const char*>(e) + payload));
    nlattr* tb[NLMSGERR_ATTR_MAX + 1] = {};
    if (nla_parse(tb, NLMSGERR_ATTR_MAX, attrs, len, nullptr) < 0 || !tb[NLMSGERR_ATTR_MSG])
        return {};
    const auto* text = static_cast<const char*>(nla_data(tb[NLMSGERR_ATTR_MSG]));
    return std::string(text, strnlen(text, static_cast<size_t>(nla_len(tb[NLMSGERR_ATTR_MSG]))));
}

int on_error(sockaddr_nl*, nlmsgerr* e, void* arg) {
    auto* reply = static_cast<GenlClient::Reply*>(arg);
    reply->err = -e->error;
    reply->ext_msg = ext_ack_message(e);
    reply->done = true;
    return NL_STOP;
}

}  // namespace

void GenlClient::transact(nl_msg* raw, uint8_t cmd, Reply& reply) {
    MsgPtr msg(raw);
    std::unique_ptr<nl_cb, void (*)(nl_cb*)> cb(nl_cb_alloc(NL_CB_DEFAULT), nl_cb_put);
    if (!cb)
        throw Error("netlink: out of memory");
    nl_cb_set(cb.get(), NL_CB_VALID, NL_CB_CUSTOM, on_valid, &reply);
    nl_cb_set(cb.get(), NL_CB_ACK, NL_CB_CUSTOM, on_ack, &reply);
    nl_cb_set(cb.get(), NL_CB_FINISH, NL_CB_CUSTOM, on_finish, &reply);
    nl_cb_err(cb.get(), NL_CB_CUSTOM, on_error, &reply);

    int err = nl_send_auto(sk_.get(), msg.get());
    if (err < 0)
        throw Error(fmt::format("{}: netlink send: {}", command_name(cmd), nl_geterror(err)));
    while (!reply.done) {
        err = nl_recvmsgs(sk_.get(), cb.get());
        if (err < 0 && !reply.done) {
            if (err == -NLE_AGAIN)
                throw Error(fmt::format("{}: the nvmetrace module did not answer within {} s",
                                        command_name(cmd), kReplyTimeoutSeconds));
            throw Error(
                fmt::format("{}: netlink receive: {}", command_name(cmd), nl_geterror(err)));
        }
    }
    if (reply.failure)
        std::rethrow_exception(reply.failure);
    if (reply.err != 0)
        throw Error(genl_error_message(cmd, reply.err, reply.ext_msg));
}

namespace {

// The top-level attributes of one reply message.
AttrTable parse_reply(nlmsghdr* nlh, uint8_t cmd) {
    AttrTable tb{};
    int err = genlmsg_parse(nlh, 0, tb.data(), NVMETRACE_A_MAX, attr_policy());
    if (err < 0)
        throw Error(fmt::format("{}: malformed reply from the module: {}", command_name(cmd),
                                nl_geterror(err)));
    return tb;
}

}  // namespace

ModuleVersion GenlClient::get_version() {
    constexpr uint8_t cmd = NVMETRACE_CMD_GET_VERSION;
    ModuleVersion v;
    Reply reply;
    reply.on_msg = [&v](nlmsghdr* nlh) {
        const AttrTable tb = parse_reply(nlh, cmd);
        v.abi_version = need_u32(tb, NVMETRACE_A_ABI_VERSION, cmd);
        v.module_version = need_string(tb, NVMETRACE_A_MODULE_VERSION, cmd);
        v.ring_version = need_u32(tb, NVMETRACE_A_RING_VERSION, cmd);
    };
    transact(new_request(cmd, 0), cmd, reply);
    return v;
}

Status GenlClient::get_status() {
    constexpr uint8_t cmd = NVMETRACE_CMD_GET_STATUS;
    Status s;
    Reply reply;
    reply.on_msg = [&s](nlmsghdr* nlh) {
        const AttrTable tb = parse_reply(nlh, cmd);
        s.state = static_cast<State>(need_u32(tb, NVMETRACE_A_STATE, cmd));
        s.rings.nr_rings = need_u32(tb, NVMETRACE_A_NR_RINGS, cmd);
        s.rings.nr_recs = need_u32(tb, NVMETRACE_A_RING_RECS, cmd);
        s.rings.map_size = need_u64(tb, NVMETRACE_A_RING_MAP_SIZE, cmd);
        s.rings.rec_size = need_u32(tb, NVMETRACE_A_REC_SIZE, cmd);
        s.records = need_u64(tb, NVMETRACE_A_RECORDS, cmd);
        s.lost = need_u64(tb, NVMETRACE_A_LOST, cmd);
        // The configuration of the current (or last) recording.
        if (tb[NVMETRACE_A_ROLE])
            s.role = nla_get_u32(tb[NVMETRACE_A_ROLE]);
        if (tb[NVMETRACE_A_SAMPLE])
            s.sample = nla_get_u32(tb[NVMETRACE_A_SAMPLE]);
    };
    transact(new_request(cmd, 0), cmd, reply);
    return s;
}

namespace {

// NVMETRACE_A_LAYOUT of START or LAYOUT: every group args carries, whole,
// each with its module's BTF identity when it has one.
void put_layouts(nl_msg* msg, const StartArgs& args, const char* what) {
    constexpr size_t kNvmetOffsets = NVMETRACE_L_CTRL_CNTLID - NVMETRACE_L_REQ_CMD + 1;
    constexpr size_t kTcpOffsets = NVMETRACE_L_TCP_LAST - NVMETRACE_L_TCP_QUEUE_REQUEST + 1;
    if (!args.layout.empty() && args.layout.size() != kNvmetOffsets)
        throw Error(fmt::format("{}: the nvmet layout needs {} offsets, got {}", what,
                                kNvmetOffsets, args.layout.size()));
    if (!args.tcp_layout.empty() && args.tcp_layout.size() != kTcpOffsets)
        throw Error(fmt::format("{}: the nvme-tcp layout needs {} offsets, got {}", what,
                                kTcpOffsets, args.tcp_layout.size()));
    constexpr size_t kRdmaOffsets = NVMETRACE_L_RDMA_LAST - NVMETRACE_L_RDMA_WC_WR_CQE + 1;
    constexpr size_t kRdmatOffsets = NVMETRACE_L_RDMAT_RSP_REQ - NVMETRACE_L_RDMAT_WC_WR_CQE + 1;
    if (!args.rdma_layout.empty() && args.rdma_layout.size() != kRdmaOffsets)
        throw Error(fmt::format("{}: the nvme-rdma layout needs {} offsets, got {}", what,
                                kRdmaOffsets, args.rdma_layout.size()));
    if (!args.rdmat_layout.empty() && args.rdmat_layout.size() != kRdmatOffsets)
        throw Error(fmt::format("{}: the nvmet-rdma layout needs {} offsets, got {}", what,
                                kRdmatOffsets, args.rdmat_layout.size()));
    constexpr size_t kTcptOffsets = NVMETRACE_L_NVMET_TCP_LAST - NVMETRACE_L_NVMET_TCP_BASE + 1;
    if (!args.tcpt_layout.empty() && args.tcpt_layout.size() != kTcptOffsets)
        throw Error(fmt::format("{}: the nvmet-tcp layout needs {} offsets, got {}", what,
                                kTcptOffsets, args.tcpt_layout.size()));
    constexpr size_t kAioOffsets = NVMETRACE_L_VMLINUX_LAST - NVMETRACE_L_VMLINUX_BASE + 1;
    if (!args.aio_layout.empty() && args.aio_layout.size() != kAioOffsets)
        throw Error(fmt::format("{}: the aio layout needs {} offsets, got {}", what, kAioOffsets,
                                args.aio_layout.size()));
    constexpr size_t kDioSimpleOffsets =
        NVMETRACE_L_DIO_SIMPLE_LAST - NVMETRACE_L_DIO_SIMPLE_BASE + 1;
    if (!args.dio_simple_layout.empty() && args.dio_simple_layout.size() != kDioSimpleOffsets)
        throw Error(fmt::format("{}: the iomap layout needs {} offsets, got {}", what,
                                kDioSimpleOffsets, args.dio_simple_layout.size()));
    // Each module's BTF identity goes with its layout, never alone.
    const struct {
        const std::optional<uint32_t>& id;
        const std::vector<uint32_t>& layout;
        int attr;
        const char* name;
    } ids[] = {
        {args.nvmet_btf, args.layout, NVMETRACE_L_BTF_NVMET, "nvmet"},
        {args.tcp_btf, args.tcp_layout, NVMETRACE_L_BTF_NVME_TCP, "nvme-tcp"},
        {args.tcpt_btf, args.tcpt_layout, NVMETRACE_L_BTF_NVMET_TCP, "nvmet-tcp"},
        {args.rdma_btf, args.rdma_layout, NVMETRACE_L_BTF_NVME_RDMA, "nvme-rdma"},
        {args.rdmat_btf, args.rdmat_layout, NVMETRACE_L_BTF_NVMET_RDMA, "nvmet-rdma"},
    };
    for (const auto& id : ids)
        if (id.id && id.layout.empty())
            throw Error(
                fmt::format("{}: a BTF identity of {} without its layout: give both, or neither",
                            what, id.name));
    if (!args.layout.empty() || !args.tcp_layout.empty() || !args.tcpt_layout.empty() ||
        !args.rdma_layout.empty() || !args.rdmat_layout.empty() || !args.aio_layout.empty() ||
        !args.dio_simple_layout.empty()) {
        nlattr* lay = nla_nest_start(msg, NVMETRACE_A_LAYOUT | NLA_F_NESTED);
        bool ok = lay != nullptr;
        for (size_t i = 0; ok && i < args.layout.size(); i++)
            ok = nla_put_u32(msg, static_cast<int>(NVMETRACE_L_REQ_CMD + i), args.layout[i]) == 0;
        for (size_t i = 0; ok && i < args.tcp_layout.size(); i++)
            ok = nla_put_u32(msg, static_cast<int>(NVMETRACE_L_TCP_QUEUE_REQUEST + i),
                             args.tcp_layout[i]) == 0;
        for (size_t i = 0; ok && i < args.rdma_layout.size(); i++)
            ok = nla_put_u32(msg, static_cast<int>(NVMETRACE_L_RDMA_WC_WR_CQE + i),
                             args.rdma_layout[i]) == 0;
        for (size_t i = 0; ok && i < args.rdmat_layout.size(); i++)
            ok = nla_put_u32(msg, static_cast<int>(NVMETRACE_L_RDMAT_WC_WR_CQE + i),
                             args.rdmat_layout[i]) == 0;
        for (size_t i = 0; ok && i < args.tcpt_layout.size(); i++)
            ok = nla_put_u32(msg, static_cast<int>(NVMETRACE_L_NVMET_TCP_BASE + i),
                             args.tcpt_layout[i]) == 0;
        for (size_t i = 0; ok && i < args.aio_layout.size(); i++)
            ok = nla_put_u32(msg, static_cast<int>(NVMETRACE_L_VMLINUX_BASE + i),
                             args.aio_layout[i]) == 0;
        for (size_t i = 0; ok && i < args.dio_simple_layout.size(); i++)
            ok = nla_put_u32(msg, static_cast<int>(NVMETRACE_L_DIO_SIMPLE_BASE + i),
                             args.dio_simple_layout[i]) == 0;
        for (const auto& id : ids)
            if (ok && id.id)
                ok = nla_put_u32(msg, id.attr, *id.id) == 0;
        ok = ok && nla_nest_end(msg, lay) >= 0;
        if (!ok)
            throw Error(fmt::format("{}: cannot build the layout attribute", what));
    }
}

}  // namespace

State GenlClient::start(const StartArgs& args) {
    constexpr uint8_t cmd = NVMETRACE_CMD_START;
    constexpr uint32_t kRoles = NVMETRACE_ROLE_HOST | NVMETRACE_ROLE_TARGET;
    if (args.role == 0 || (args.role & ~kRoles) != 0)
        throw Error(fmt::format("START: role {:#x} is not host, target or both", args.role));
    if (args.sample == 0)
        throw Error("START: the sampling rate must be 1-of-N with N >= 1");

    MsgPtr msg(new_request(cmd, 0));
    bool ok = nla_put_u32(msg.get(), NVMETRACE_A_ROLE, args.role) == 0 &&
              nla_put_u32(msg.get(), NVMETRACE_A_SAMPLE, args.sample) == 0 &&
              nla_put_u64(msg.get(), NVMETRACE_A_SEED, args.seed) == 0;
    if (ok && !args.devs.empty()) {
        // The module's strict policy wants NLA_F_NESTED; libnl does not set it.
        nlattr* devs = nla_nest_start(msg.get(), NVMETRACE_A_DEVS | NLA_F_NESTED);
        ok = devs != nullptr;
        for (size_t i = 0; ok && i < args.devs.size(); i++)
            ok = nla_put_u32(msg.get(), NVMETRACE_A_DEV, args.devs[i]) == 0;
        ok = ok && nla_nest_end(msg.get(), devs) >= 0;
    }
    if (!ok)
        throw Error(fmt::format("START: too many devices ({}) for one request", args.devs.size()));
    if (args.dev_filter)
        ok = nla_put_u32(msg.get(), NVMETRACE_A_FLAGS, NVMETRACE_START_DEV_FILTER) == 0;
    if (!ok)
        throw Error("START: cannot build the flags attribute");
    put_layouts(msg.get(), args, "START");

    State state = State::kIdle;
    Reply reply;
    reply.on_msg = [&state](nlmsghdr* nlh) {
        state = static_cast<State>(need_u32(parse_reply(nlh, cmd), NVMETRACE_A_STATE, cmd));
    };
    transact(msg.release(), cmd, reply);
    return state;
}

std::vector<uint32_t> GenlClient::admit(const std::vector<uint32_t>& devs) {
    constexpr uint8_t cmd = NVMETRACE_CMD_ADMIT;
    MsgPtr msg(new_request(cmd, 0));
    nlattr* nest = nla_nest_start(msg.get(), NVMETRACE_A_DEVS | NLA_F_NESTED);
    bool ok = nest != nullptr;
    for (size_t i = 0; ok && i < devs.size(); i++)
        ok = nla_put_u32(msg.get(), NVMETRACE_A_DEV, devs[i]) == 0;
    ok = ok && nla_nest_end(msg.get(), nest) >= 0;
    if (!ok)
        throw Error(fmt::format("ADMIT: too many devices ({}) for one request", devs.size()));
    std::vector<uint32_t> all;
    Reply reply;
    reply.on_msg = [&all](nlmsghdr* nlh) {
        const AttrTable tb = parse_reply(nlh, cmd);
        if (!tb[NVMETRACE_A_DEVS])
            throw Error("ADMIT: malformed reply from the module: no device list");
        nlattr* a = nullptr;
        int rem = 0;
        nla_for_each_nested(a, tb[NVMETRACE_A_DEVS], rem) {
            if (nla_type(a) == NVMETRACE_A_DEV && nla_len(a) == sizeof(uint32_t))
                all.push_back(nla_get_u32(a));
        }
    };
    transact(msg.release(), cmd, reply);
    return all;
}

void GenlClient::layout(const StartArgs& groups) {
    constexpr uint8_t cmd = NVMETRACE_CMD_LAYOUT;
    MsgPtr msg(new_request(cmd, 0));
    put_layouts(msg.get(), groups, "LAYOUT");
    Reply reply;
    transact(msg.release(), cmd, reply);
}

State GenlClient::stop() {
    constexpr uint8_t cmd = NVMETRACE_CMD_STOP;
    State state = State::kIdle;
    Reply reply;
    reply.on_msg = [&state](nlmsghdr* nlh) {
        state = static_cast<State>(need_u32(parse_reply(nlh, cmd), NVMETRACE_A_STATE, cmd));
    };
    transact(new_request(cmd, 0), cmd, reply);
    return state;
}

std::vector<HookInfo> GenlClient::get_hooks() {
    constexpr uint8_t cmd = NVMETRACE_CMD_GET_HOOKS;
    std::vector<HookInfo> hooks;
    Reply reply;
    reply.on_msg = [&hooks](nlmsghdr* nlh) {
        auto* gnlh = static_cast<genlmsghdr*>(nlmsg_data(nlh));
        parse_reply(nlh, cmd);  // validates every attribute against the policy
        nlattr* pos;
        int rem;
        nla_for_each_attr(pos, genlmsg_attrdata(gnlh, 0), genlmsg_attrlen(gnlh, 0), rem) {
            if (nla_type(pos) != NVMETRACE_A_HOOK)
                continue;
            AttrTable tb{};
            int err = nla_parse_nested(tb.data(), NVMETRACE_A_MAX, pos, attr_policy());
            if (err < 0)
                throw Error(
                    fmt::format("GET_HOOKS: malformed hook from the module: {}", nl_geterror(err)));
            hooks.push_back(HookInfo{
                .name = need_string(tb, NVMETRACE_A_HOOK_NAME, cmd),
                .kind = need_u32(tb, NVMETRACE_A_HOOK_KIND, cmd),
                .state = need_u32(tb, NVMETRACE_A_HOOK_STATE, cmd),
                .error = tb[NVMETRACE_A_HOOK_ERROR]
                             ? static_cast<int32_t>(nla_get_u32(tb[NVMETRACE_A_HOOK_ERROR]))
                             : 0,
                .hits = tb[NVMETRACE_A_HOOK_HITS] ? nla_get_u64(tb[NVMETRACE_A_HOOK_HITS]) : 0,
                .role = tb[NVMETRACE_A_ROLE] ? nla_get_u32(tb[NVMETRACE_A_ROLE]) : 0,
            });
        }
    };
    transact(new_request(cmd, NLM_F_DUMP), cmd, reply);
    return hooks;
}

namespace {

// A nested attribute's members, validated against `policy` (size maxattr+1).
template <size_t N>
std::array<nlattr*, N> parse_nest(nlattr* nest, const nla_policy* policy, uint8_t cmd,
                                  const char* what) {
    std::array<nlattr*, N> tb{};
    int err =
        nla_parse_nested(tb.data(), static_cast<int>(N - 1), nest, const_cast<nla_policy*>(policy));
    if (err < 0)
        throw Error(fmt::format("{}: malformed {} from the module: {}", command_name(cmd), what,
                                nl_geterror(err)));
    return tb;
}

template <size_t N>
uint32_t get_u32(const std::array<nlattr*, N>& tb, int attr, uint32_t dflt = 0) {
    return tb[static_cast<size_t>(attr)] ? nla_get_u32(tb[static_cast<size_t>(attr)]) : dflt;
}

template <size_t N>
uint64_t get_u64(const std::array<nlattr*, N>& tb, int attr, uint64_t dflt = 0) {
    return tb[static_cast<size_t>(attr)] ? nla_get_u64(tb[static_cast<size_t>(attr)]) : dflt;
}

template <size_t N>
std::string get_string(const std::array<nlattr*, N>& tb, int attr) {
    return tb[static_cast<size_t>(attr)] ? nla_get_string(tb[static_cast<size_t>(attr)]) : "";
}

template <size_t N>
std::vector<uint32_t> get_u32_array(const std::array<nlattr*, N>& tb, int attr) {
    std::vector<uint32_t> out;
    const nlattr* a = tb[static_cast<size_t>(attr)];
    if (!a)
        return out;
    const auto len = static_cast<size_t>(nla_len(a));
    out.resize(len / sizeof(uint32_t));
    memcpy(out.data(), nla_data(a), out.size() * sizeof(uint32_t));
    return out;
}

const nla_policy* pool_policy() {
    static const auto policy = [] {
        std::array<nla_policy, NVMETRACE_P_MAX + 1> p{};
        for (int a = NVMETRACE_P_BUF_SIZE; a <= NVMETRACE_P_MAX; a++)
            p[static_cast<size_t>(a)].type = NLA_U32;
        for (int a : {NVMETRACE_P_BUF_SIZE, NVMETRACE_P_BYTES, NVMETRACE_P_MMAP_OFFSET,
                      NVMETRACE_P_KPOOL_ALLOC_FAILURES})
            p[static_cast<size_t>(a)].type = NLA_U64;
        return p;
    }();
    return policy.data();
}

const nla_policy* dma_policy() {
    static const auto policy = [] {
        std::array<nla_policy, NVMETRACE_D_MAX + 1> p{};
        auto set = [&p](int attr, uint16_t type) { p[static_cast<size_t>(attr)].type = type; };
        for (int a : {NVMETRACE_D_ITERS, NVMETRACE_D_NODE, NVMETRACE_D_MAX_SEG_SIZE,
                      NVMETRACE_D_IOMMU, NVMETRACE_D_IOMMU_DOMAIN_TYPE, NVMETRACE_D_QUEUE_MAX_BYTES,
                      NVMETRACE_D_QUEUE_MAX_SEGMENTS, NVMETRACE_D_BYTES, NVMETRACE_D_NENTS,
                      NVMETRACE_D_MAPPED_NENTS, NVMETRACE_D_LIMITS, NVMETRACE_D_ERROR})
            set(a, NLA_U32);
        set(NVMETRACE_D_HAS_DMA, NLA_U8);
        for (int a :
             {NVMETRACE_D_NO_DMA_REASON, NVMETRACE_D_WALK, NVMETRACE_D_DEVICE, NVMETRACE_D_DRIVER})
            set(a, NLA_STRING);
        set(NVMETRACE_D_OPT_SIZE, NLA_U64);
        set(NVMETRACE_D_MAX_SIZE, NLA_U64);
        set(NVMETRACE_D_SIZE, NLA_NESTED);
        return p;
    }();
    return policy.data();
}

}  // namespace

namespace {

// DEV and FD of a DeviceRef into msg; false when they do not fit.
bool put_device(nl_msg* msg, const DeviceRef& dev) {
    return (!dev.dev || nla_put_u32(msg, NVMETRACE_A_DEV, dev.dev) == 0) &&
           (dev.fd < 0 || nla_put_u32(msg, NVMETRACE_A_FD, static_cast<uint32_t>(dev.fd)) == 0);
}

}  // namespace

PoolInfo GenlClient::pool_get(std::optional<DeviceRef> dev) {
    constexpr uint8_t cmd = NVMETRACE_CMD_POOL_GET;
    MsgPtr msg(new_request(cmd, 0));
    if (dev && !put_device(msg.get(), *dev))
        throw Error("POOL_GET: cannot build the request");
    PoolInfo p;
    Reply reply;
    reply.on_msg = [&p](nlmsghdr* nlh) {
        const AttrTable tb = parse_reply(nlh, cmd);
        auto pt =
            parse_nest<NVMETRACE_P_MAX + 1>(const_cast<nlattr*>(need(tb, NVMETRACE_A_POOL, cmd)),
                                            pool_policy(), cmd, "pool attribute");
        p.buf_size = get_u64(pt, NVMETRACE_P_BUF_SIZE);
        p.nr_asked = get_u32(pt, NVMETRACE_P_NR_BUFS);
        p.allocated = get_u32(pt, NVMETRACE_P_ALLOCATED);
        p.fallbacks = get_u32(pt, NVMETRACE_P_FALLBACKS);
        p.bytes = get_u64(pt, NVMETRACE_P_BYTES);
        p.order = get_u32(pt, NVMETRACE_P_ORDER);
        p.min_order = get_u32(pt, NVMETRACE_P_MIN_ORDER);
        p.folios = get_u32(pt, NVMETRACE_P_FOLIOS);
        p.node = static_cast<int32_t>(get_u32(pt, NVMETRACE_P_NODE, static_cast<uint32_t>(-1)));
        p.mappings = get_u32(pt, NVMETRACE_P_MAPPINGS);
        p.mmap_offset = get_u64(pt, NVMETRACE_P_MMAP_OFFSET);
        p.kpool = get_u32(pt, NVMETRACE_P_KPOOL);
        p.kpool_order = get_u32(pt, NVMETRACE_P_KPOOL_ORDER);
        p.kpool_folio_size = get_u32(pt, NVMETRACE_P_KPOOL_FOLIO_SIZE);
        p.kpool_capacity = get_u32(pt, NVMETRACE_P_KPOOL_CAPACITY);
        p.kpool_in_use = get_u32(pt, NVMETRACE_P_KPOOL_IN_USE);
        p.kpool_available = get_u32(pt, NVMETRACE_P_KPOOL_AVAILABLE);
        p.kpool_high_water = get_u32(pt, NVMETRACE_P_KPOOL_HIGH_WATER);
        p.kpool_alloc_failures = get_u64(pt, NVMETRACE_P_KPOOL_ALLOC_FAILURES);
    };
    transact(msg.release(), cmd, reply);
    return p;
}

DmaCost GenlClient::dma_cost(const DeviceRef& dev, uint32_t iters) {
    constexpr uint8_t cmd = NVMETRACE_CMD_DMA_COST;
    if (iters > NVMETRACE_DMA_ITERS_MAX)
        throw Error(fmt::format("DMA_COST: at most {} iterations per size, not {}",
                                NVMETRACE_DMA_ITERS_MAX, iters));
    MsgPtr msg(new_request(cmd, 0));
    bool ok = put_device(msg.get(), dev);
    if (ok && iters) {
        nlattr* nest = nla_nest_start(msg.get(), NVMETRACE_A_DMA | NLA_F_NESTED);
        ok = nest && nla_put_u32(msg.get(), NVMETRACE_D_ITERS, iters) == 0 &&
             nla_nest_end(msg.get(), nest) >= 0;
    }
    if (!ok)
        throw Error("DMA_COST: cannot build the request");
    DmaCost c;
    Reply reply;
    reply.on_msg = [&c](nlmsghdr* nlh) {
        const AttrTable tb = parse_reply(nlh, cmd);
        c.dev = need_u32(tb, NVMETRACE_A_DEV, cmd);
        nlattr* nest = const_cast<nlattr*>(need(tb, NVMETRACE_A_DMA, cmd));
        auto dt = parse_nest<NVMETRACE_D_MAX + 1>(nest, dma_policy(), cmd, "DMA attribute");
        c.iters = get_u32(dt, NVMETRACE_D_ITERS);
        c.has_dma = dt[NVMETRACE_D_HAS_DMA] && nla_get_u8(dt[NVMETRACE_D_HAS_DMA]);
        c.no_dma_reason = get_string(dt, NVMETRACE_D_NO_DMA_REASON);
        c.walk = get_string(dt, NVMETRACE_D_WALK);
        c.device = get_string(dt, NVMETRACE_D_DEVICE);
        c.driver = get_string(dt, NVMETRACE_D_DRIVER);
        c.node = static_cast<int32_t>(get_u32(dt, NVMETRACE_D_NODE, static_cast<uint32_t>(-1)));
        c.opt_size = get_u64(dt, NVMETRACE_D_OPT_SIZE);
        c.max_size = get_u64(dt, NVMETRACE_D_MAX_SIZE);
        c.max_seg_size = get_u32(dt, NVMETRACE_D_MAX_SEG_SIZE);
        c.iommu = get_u32(dt, NVMETRACE_D_IOMMU);
        c.iommu_domain_type = get_u32(dt, NVMETRACE_D_IOMMU_DOMAIN_TYPE);
        c.queue_max_bytes = get_u32(dt, NVMETRACE_D_QUEUE_MAX_BYTES);
        c.queue_max_segments = get_u32(dt, NVMETRACE_D_QUEUE_MAX_SEGMENTS);
        nlattr* pos;
        int rem;
        nla_for_each_nested(pos, nest, rem) {
            if (nla_type(pos) != NVMETRACE_D_SIZE)
                continue;
            auto st = parse_nest<NVMETRACE_D_MAX + 1>(pos, dma_policy(), cmd, "size attribute");
            c.sizes.push_back(DmaSize{
                .bytes = get_u32(st, NVMETRACE_D_BYTES),
                .nents = get_u32(st, NVMETRACE_D_NENTS),
                .mapped_nents = get_u32(st, NVMETRACE_D_MAPPED_NENTS),
                .limits = get_u32(st, NVMETRACE_D_LIMITS),
                .error = static_cast<int32_t>(get_u32(st, NVMETRACE_D_ERROR)),
                .map_ns = get_u32_array(st, NVMETRACE_D_MAP_NS),
                .premap_ns = get_u32_array(st, NVMETRACE_D_PREMAP_NS),
                .folio_ns = get_u32_array(st, NVMETRACE_D_FOLIO_NS),
            });
        }
    };
    transact(msg.release(), cmd, reply);
    return c;
}

}  // namespace nvmetrace
