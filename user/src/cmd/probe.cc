#include "cmd/probe.h"

#include "cmd/record.h"
#include "kernel/genl.h"
#include "spdk/process.h"
#include "util/error.h"

#include <linux/nvmetrace.h>

#include <cerrno>
#include <filesystem>

#include <fmt/core.h>

namespace nvmetrace {

namespace {

namespace fs = std::filesystem;

const char* state_word(uint32_t state) {
    switch (state) {
        case NVMETRACE_HOOK_ATTACHED:
            return "ok";
        case NVMETRACE_HOOK_WAITING:
            return "wait";
        case NVMETRACE_HOOK_ABSENT:
            return "absent";
        case NVMETRACE_HOOK_FAILED:
            return "FAIL";
        case NVMETRACE_HOOK_INLINED:
            return "inline";
        case NVMETRACE_HOOK_SPARE:
            return "spare";
        case NVMETRACE_HOOK_STALE:
            return "STALE";
        default:
            return "-";
    }
}

// The transport a hook belongs to: "tcp", "rdma", or "" for the generic hooks
// (block layer, nvme core, nvmet core).
std::string_view transport_of(std::string_view hook) {
    const std::string_view m = transport_module(hook);
    return m.empty() ? m : m.substr(m.find('_') + 1);
}

}  // namespace

int run_probe(const ProbeOptions& opts) {
    uint32_t role = 0;
    for (const auto& r : opts.roles)
        role |= r == "host" ? NVMETRACE_ROLE_HOST : NVMETRACE_ROLE_TARGET;
    if (!role && opts.spdk_target.empty() && opts.spdk_host.empty())
        throw Error("probe: -r host or -r target (or --spdk-target, --spdk-host)");
    if (!opts.transport.empty() && opts.transport != "tcp" && opts.transport != "rdma")
        throw Error(fmt::format("probe: -t {}: the transport is tcp or rdma", opts.transport));

    // SPDK's roles: its trace ring, not the kernel's hooks
    bool spdk_ok = true;
    const std::vector<std::string> transports = opts.transport.empty()
                                                    ? std::vector<std::string>{"tcp", "rdma"}
                                                    : std::vector<std::string>{opts.transport};
    if (!opts.spdk_host.empty()) {
        spdk_ok = spdk::probe_role(false, opts.spdk_host, transports) && spdk_ok;
        role &= ~NVMETRACE_ROLE_HOST;
    }
    if (!opts.spdk_target.empty()) {
        spdk_ok = spdk::probe_role(true, opts.spdk_target, transports) && spdk_ok;
        role &= ~NVMETRACE_ROLE_TARGET;
    }
    if (!role)
        return spdk_ok ? 0 : 1;

    const bool btf = fs::exists("/sys/kernel/btf/vmlinux");
    fmt::print("kernel BTF: {}\n", btf ? "yes" : "no (CONFIG_DEBUG_INFO_BTF off)");
    fmt::print(
        "function hooks: ftrace (one shared ops), else a kprobe each; tracepoints by name\n\n");

    GenlClient genl;
    if (genl.get_status().state == State::kRecording)
        throw Error(
            "probe: the module is recording now; probe attaches hooks itself, so run it "
            "when no recording is going on");

    // Attach for real, with a sampling rate no command meets in practice and
    // no device (host), then read back each hook's state and detach.
    StartArgs start;
    start.role = role;
    start.sample = 0xffffffffu;
    LayoutNotes layouts = fill_layouts(role, start);
    if (!start.dio_simple_layout.empty() && genl.get_version().abi_version < 8)
        start.dio_simple_layout.clear();  // a module before ABI 8 refuses it
    if (!start.aio_layout.empty() && genl.get_version().abi_version < 4) {
        start.aio_layout.clear();  // a module before ABI 4 refuses it
        layouts.aio_error = "the module predates it (ABI < 4)";
    }
    // nvme-core's tracepoints pass other arguments than the host's probes
    // take: the host's hooks are not attached even to be probed.
    if (!layouts.host_error.empty())
        start.role &= ~NVMETRACE_ROLE_HOST;
    const std::string layout_note =
        layouts.nvmet_error.empty() ? "nvmet layout from BTF: ok" : layouts.nvmet_error;
    std::vector<HookInfo> hooks;
    std::string start_error;
    if (start.role && (!(role & NVMETRACE_ROLE_TARGET) || !start.layout.empty())) {
        try {
            genl.start(start);
            hooks = genl.get_hooks();
            genl.stop();
        } catch (const Error& e) {
            start_error = e.what();
        }
    }

    bool ok = start_error.empty() && (role != NVMETRACE_ROLE_TARGET || !start.layout.empty());
    // a module loaded for a benchmark of one hook site attaches only those: a recording
    // with it would miss the others, so probe fails and says why
    const std::string bench_only = module_bench_hooks();
    for (uint32_t side : {NVMETRACE_ROLE_HOST, NVMETRACE_ROLE_TARGET}) {
        if (!(role & side))
            continue;
        const bool host = side == NVMETRACE_ROLE_HOST;
        const char* mod = host ? "nvme_core" : "nvmet";
        fmt::print("{} (module {}: {})\n", host ? "host" : "target", mod,
                   fs::exists(fmt::format("/sys/module/{}", mod)) ? "loaded" : "not loaded");
        if (!host && !layout_note.empty())
            fmt::print("  {}\n", layout_note);
        if (host && !layouts.host_error.empty()) {
            fmt::print("  {}\n", layouts.host_error);
            ok = false;
        } else if (host) {
            fmt::print("  {}\n", layouts.host_tracepoints);
        }
        if (host)
            fmt::print("  aio iocb identity (vmlinux BTF layout: {})\n",
                       layouts.aio_error.empty()
                           ? std::string("ok")
                           : layouts.aio_error + "; aio commands recorded without their reap");
        else if (layouts.nvmet_error.empty()) {
            fmt::print("  {}\n", layouts.target_tracepoints);
        }
        if (!opts.transport.empty()) {
            // the transport module of this side and its private layout
            const std::string tmod = fmt::format("{}_{}", host ? "nvme" : "nvmet", opts.transport);
            const std::string& err = tmod == "nvme_tcp"    ? layouts.tcp_error
                                     : tmod == "nvmet_tcp" ? layouts.tcpt_error
                                     : tmod == "nvme_rdma" ? layouts.rdma_error
                                                           : layouts.rdmat_error;
            fmt::print("  {} (module {}, BTF layout: {})\n", opts.transport, tmod,
                       !fs::exists("/sys/module/" + tmod) ? "module not loaded"
                       : err.empty()                      ? "ok"
                                                          : err);
        }
        for (const auto& h : hooks) {
            if (!(h.role & side))
                continue;
            const std::string_view tr = transport_of(h.name);
            if (!opts.transport.empty() && !tr.empty() && tr != opts.transport)
                continue;
            std::string note;
            uint32_t state = h.state;
            // a hook a bench_hooks module leaves off: a recording would miss it
            const bool left_off = h.state == NVMETRACE_HOOK_DETACHED && !bench_only.empty();
            if (h.state == NVMETRACE_HOOK_FAILED && h.error == -ENODATA) {
                // a transport hook whose private layout was not found
                const std::string_view lmod = transport_module(h.name);
                const std::string& why = lmod == "nvme_tcp"     ? layouts.tcp_error
                                         : lmod == "nvmet_tcp"  ? layouts.tcpt_error
                                         : lmod == "nvme_rdma"  ? layouts.rdma_error
                                         : lmod == "nvmet_rdma" ? layouts.rdmat_error
                                                                : layouts.nvmet_error;
                note = fmt::format("needs {}'s layout: {}", lmod, why);
                if (!fs::exists(fmt::format("/sys/module/{}", lmod))) {
                    state = NVMETRACE_HOOK_WAITING;
                    note =
                        fmt::format("its module {} is not loaded: load it before recording", lmod);
                }
            } else if (h.state == NVMETRACE_HOOK_WAITING)
                note = "its module is not loaded (attaches when it is)";
            else if (h.state == NVMETRACE_HOOK_ABSENT)
                note = "not in this kernel";
            else if (h.state == NVMETRACE_HOOK_INLINED)
                note = "inlined in this kernel: its stand-in records its events";
            else if (h.state == NVMETRACE_HOOK_SPARE)
                note = "a stand-in, not needed: the hooks it stands in for are attached";
            else if (h.state == NVMETRACE_HOOK_STALE)
                note = stale_note(h.name);
            else if (h.state == NVMETRACE_HOOK_FAILED)
                note = fmt::format("attach failed: error {}", h.error);
            else if (left_off)
                note = fmt::format(
                    "left off: the module was loaded with bench_hooks={} "
                    "(reload it without)",
                    bench_only);
            ok = ok && !left_off;
            fmt::print("  {:<6} {:<28} {:<10} {}\n", left_off ? "off" : state_word(state), h.name,
                       h.kind == NVMETRACE_HOOK_FTRACE   ? "ftrace"
                       : h.kind == NVMETRACE_HOOK_KPROBE ? "kprobe"
                                                         : "tracepoint",
                       note);
            if (state == NVMETRACE_HOOK_FAILED || state == NVMETRACE_HOOK_ABSENT ||
                state == NVMETRACE_HOOK_STALE)
                ok = false;
        }
    }
    if (!start_error.empty())
        fmt::print("  {}\n", start_error);
    // loaded for a benchmark of the attach mechanism: the hooks attach, and record nothing
    if (module_bench_nop()) {
        fmt::print(
            "  the module was loaded with bench_nop: its hooks record nothing "
            "(reload it without)\n");
        ok = false;
    }
    fmt::print("  load: {}\n", ok ? "ok" : "FAILED");
    return ok && spdk_ok ? 0 : 1;
}

}  // namespace nvmetrace
