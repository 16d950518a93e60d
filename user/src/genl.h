// Control channel: the nvmetrace generic netlink family.
//
// One GenlClient is one netlink socket bound to the family; each method is
// one request and its reply.  Failures throw Error with a message the user
// can act on ("nvmetrace module not loaded: modprobe nvmetrace", "... need
// root").  Not thread-safe: use one client per thread.
#pragma once

#include "ring_reader.h"

#include <linux/nvmetrace.h>
#include <stdint.h>

#include <memory>
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
    // nvmet's private offsets (NVMETRACE_L_* order: req.cmd, req.cqe, req.sq,
    // sq.ctrl, sq.qid, ctrl.cntlid), from BTF; required for the target role.
    std::vector<uint32_t> layout;
    // nvme-tcp's (NVMETRACE_L_TCP_QUEUE_REQUEST .. _TCP_REQ_OFFSET order),
    // from BTF; empty: the nvme-tcp hooks are refused.
    std::vector<uint32_t> tcp_layout;
    // nvme-rdma's (NVMETRACE_L_RDMA_*) and nvmet-rdma's (NVMETRACE_L_RDMAT_*),
    // from BTF; empty: their hooks are refused.
    std::vector<uint32_t> rdma_layout;
    std::vector<uint32_t> rdmat_layout;
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
    State stop();
    std::vector<HookInfo> get_hooks();

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

}  // namespace nvmetrace
