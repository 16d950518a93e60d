#include "probe.h"

#include "error.h"
#include "genl.h"
#include "record.h"

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
        default:
            return "-";
    }
}

}  // namespace

int run_probe(const ProbeOptions& opts) {
    uint32_t role = 0;
    for (const auto& r : opts.roles)
        role |= r == "host" ? NVMETRACE_ROLE_HOST : NVMETRACE_ROLE_TARGET;
    if (!role)
        throw Error("probe: -r host or -r target");

    const bool btf = fs::exists("/sys/kernel/btf/vmlinux");
    fmt::print("kernel BTF: {}\n", btf ? "yes" : "no (CONFIG_DEBUG_INFO_BTF off)");
    fmt::print("function hooks: kprobes, tracepoints by name\n\n");

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
    const LayoutNotes layouts = fill_layouts(role, start);
    const std::string layout_note =
        layouts.nvmet_error.empty() ? "nvmet layout from BTF: ok" : layouts.nvmet_error;
    const bool tcp_loaded = fs::exists("/sys/module/nvme_tcp");
    std::vector<HookInfo> hooks;
    std::string start_error;
    if (!(role & NVMETRACE_ROLE_TARGET) || !start.layout.empty()) {
        try {
            genl.start(start);
            hooks = genl.get_hooks();
            genl.stop();
        } catch (const Error& e) {
            start_error = e.what();
        }
    }

    bool ok = start_error.empty() && (role != NVMETRACE_ROLE_TARGET || !start.layout.empty());
    for (uint32_t side : {NVMETRACE_ROLE_HOST, NVMETRACE_ROLE_TARGET}) {
        if (!(role & side))
            continue;
        const bool host = side == NVMETRACE_ROLE_HOST;
        const char* mod = host ? "nvme_core" : "nvmet";
        fmt::print("{} (module {}: {})\n", host ? "host" : "target", mod,
                   fs::exists(fmt::format("/sys/module/{}", mod)) ? "loaded" : "not loaded");
        if (!host && !layout_note.empty())
            fmt::print("  {}\n", layout_note);
        for (const auto& h : hooks) {
            if (!(h.role & side))
                continue;
            std::string note;
            uint32_t state = h.state;
            if (h.state == NVMETRACE_HOOK_FAILED && h.error == -ENODATA) {
                // a transport hook whose private layout was not found
                note = "needs nvme_tcp's layout: " + layouts.tcp_error;
                if (!tcp_loaded)
                    state = NVMETRACE_HOOK_WAITING;
            } else if (h.state == NVMETRACE_HOOK_WAITING)
                note = "its module is not loaded (attaches when it is)";
            else if (h.state == NVMETRACE_HOOK_ABSENT)
                note = "not in this kernel";
            else if (h.state == NVMETRACE_HOOK_FAILED)
                note = fmt::format("attach failed: error {}", h.error);
            fmt::print("  {:<6} {:<28} {:<10} {}\n", state_word(state), h.name,
                       h.kind == NVMETRACE_HOOK_KPROBE ? "kprobe" : "tracepoint", note);
            if (state == NVMETRACE_HOOK_FAILED || state == NVMETRACE_HOOK_ABSENT)
                ok = false;
        }
    }
    if (!start_error.empty())
        fmt::print("  {}\n", start_error);
    fmt::print("  load: {}\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

}  // namespace nvmetrace
