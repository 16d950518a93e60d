// The netlink client.  The module cannot be loaded on every build machine:
// tests that need it skip unless /sys/module/nvmetrace exists, and the
// "not loaded" path is checked only when it does not.
#include "kernel/genl.h"

#include "cmd/dmacost.h"
#include "cmd/record.h"
#include "kernel/btf_layout.h"
#include "kernel/devices.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nvmetrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using ::testing::HasSubstr;

bool module_loaded() {
    return access("/sys/module/nvmetrace", F_OK) == 0;
}

TEST(Genl, CommandNames) {
    EXPECT_EQ(command_name(NVMETRACE_CMD_GET_VERSION), "GET_VERSION");
    EXPECT_EQ(command_name(NVMETRACE_CMD_GET_STATUS), "GET_STATUS");
    EXPECT_EQ(command_name(NVMETRACE_CMD_START), "START");
    EXPECT_EQ(command_name(NVMETRACE_CMD_STOP), "STOP");
    EXPECT_EQ(command_name(NVMETRACE_CMD_GET_HOOKS), "GET_HOOKS");
    EXPECT_EQ(command_name(NVMETRACE_CMD_POOL_GET), "POOL_GET");
    EXPECT_EQ(command_name(NVMETRACE_CMD_DMA_COST), "DMA_COST");
    EXPECT_EQ(command_name(200), "command 200");
}

TEST(Genl, StateNames) {
    EXPECT_EQ(state_name(State::kIdle), "idle");
    EXPECT_EQ(state_name(State::kRecording), "recording");
    EXPECT_EQ(state_name(static_cast<State>(7)), "unknown(7)");
}

TEST(Genl, ErrorMessagesSayWhatToDo) {
    EXPECT_EQ(genl_error_message(NVMETRACE_CMD_START, EPERM, ""),
              "START: Operation not permitted: need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)");
    EXPECT_EQ(genl_error_message(NVMETRACE_CMD_GET_STATUS, EPERM, ""),
              "GET_STATUS: Operation not permitted: need root (CAP_NET_ADMIN)");
    EXPECT_EQ(genl_error_message(NVMETRACE_CMD_GET_HOOKS, EOPNOTSUPP, ""),
              "GET_HOOKS: not supported by the loaded nvmetrace module (update the module)");
    EXPECT_EQ(genl_error_message(NVMETRACE_CMD_START, EINVAL, "unknown flags"),
              "START: Invalid argument: unknown flags");
    EXPECT_EQ(genl_error_message(NVMETRACE_CMD_STOP, EBUSY, ""), "STOP: Device or resource busy");
}

TEST(Genl, ModuleNotLoadedSaysHowToLoadIt) {
    EXPECT_STREQ(ModuleNotLoaded().what(), "nvmetrace module not loaded: modprobe nvmetrace");
}

TEST(Genl, ResolveFailsCleanlyWithoutTheModule) {
    if (module_loaded())
        GTEST_SKIP() << "the nvmetrace module is loaded";
    try {
        GenlClient client;
        FAIL() << "resolved family " << client.family() << " without the module";
    } catch (const ModuleNotLoaded& e) {
        EXPECT_STREQ(e.what(), "nvmetrace module not loaded: modprobe nvmetrace");
    }
}

// The kernel's own generic netlink controller ("nlctrl") stands in for the
// module: it exists everywhere and answers our command numbers with errors,
// which exercises the request, reply and error paths without the module.
std::optional<std::string> error_from_nlctrl(const std::function<void(GenlClient&)>& call) {
    GenlClient client("nlctrl");
    try {
        call(client);
    } catch (const Error& e) {
        return e.what();
    }
    return std::nullopt;
}

TEST(Genl, KernelErrorsBecomeOneLine) {
    // nlctrl has no handler for command 1 (GET_VERSION here).
    EXPECT_EQ(error_from_nlctrl([](GenlClient& c) { c.get_version(); }),
              "GET_VERSION: not supported by the loaded nvmetrace module (update the module)");
}

TEST(Genl, RefusedRequestNamesTheCommand) {
    // Command 3 (START here) is nlctrl's GETFAMILY, which refuses a request
    // naming no family; the reply is an error, with an extended ACK text on
    // kernels that give one.
    StartArgs args;
    args.role = NVMETRACE_ROLE_HOST;
    args.devs = {1, 2};
    const auto err = error_from_nlctrl([&args](GenlClient& c) { c.start(args); });
    ASSERT_TRUE(err.has_value());
    EXPECT_THAT(*err, ::testing::StartsWith("START: "));
}

TEST(Genl, LayoutIdentityGoesOnlyWithItsLayout) {
    // checked before anything is sent: nlctrl never sees it
    StartArgs args;
    args.role = NVMETRACE_ROLE_HOST;
    args.tcp_btf = 0x1234;
    EXPECT_EQ(error_from_nlctrl([&args](GenlClient& c) { c.start(args); }),
              "START: a BTF identity of nvme-tcp without its layout: give both, or neither");
}

TEST(Genl, StartValidatesItsArgumentsBeforeSending) {
    if (!module_loaded())
        GTEST_SKIP() << "needs the nvmetrace module";
    GenlClient client;
    auto args = [](uint32_t role, uint32_t sample) {
        StartArgs a;
        a.role = role;
        a.sample = sample;
        return a;
    };
    EXPECT_THROW(client.start(args(0, 1)), Error);
    EXPECT_THROW(client.start(args(4, 1)), Error);
    EXPECT_THROW(client.start(args(NVMETRACE_ROLE_HOST, 0)), Error);
}

TEST(Genl, VersionAndStatusFromTheModule) {
    if (!module_loaded())
        GTEST_SKIP() << "needs the nvmetrace module";
    GenlClient client;
    const ModuleVersion v = client.get_version();
    EXPECT_EQ(v.abi_version, unsigned{NVMETRACE_ABI_VERSION});
    EXPECT_EQ(v.ring_version, unsigned{NVMETRACE_RING_VERSION});
    EXPECT_FALSE(v.module_version.empty());
    const Status s = client.get_status();
    EXPECT_EQ(s.rings.rec_size, sizeof(nvmetrace_rec));
    EXPECT_GE(s.rings.nr_rings, 1u);
    EXPECT_NO_THROW(check_ring_geometry(s.rings));
}

// A block device of the guest for PoolAndDmaCostFromTheModule: the one
// NVMETRACE_TEST_BDEV names (26-genl-gtest loads null_blk), else /dev/nullb0.
std::string test_block_device() {
    const char* env = std::getenv("NVMETRACE_TEST_BDEV");
    return env && *env ? env : "/dev/nullb0";
}

// The message of what f throws, "" if it throws nothing.
template <class F>
std::string thrown(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

// Loaded without a pool (26-genl-gtest): POOL_GET says so, and POOL_GET and
// DMA_COST take a device only by a descriptor of ours open for reading on it
// (ABI 7), with the module's own message for each wrong one.
TEST(Genl, PoolAndDmaCostFromTheModule) {
    if (!module_loaded())
        GTEST_SKIP() << "needs the nvmetrace module";
    GenlClient client;
    const PoolInfo p = client.pool_get();
    EXPECT_EQ(p.buf_size, 0u);
    EXPECT_EQ(p.allocated, 0u);
    EXPECT_EQ(p.mappings, 0u);
    EXPECT_EQ(p.mmap_offset, NVMETRACE_POOL_MMAP_OFFSET);
    EXPECT_EQ(p.kpool, unsigned{NVMETRACE_KPOOL_ABSENT});  // stock kernels

    // a number alone is refused, whether the device is there or not
    EXPECT_THAT(thrown([&] {
                    client.dma_cost({7u << 20 | 250u, -1}, 4);
                }),
                HasSubstr("DMA_COST: Invalid argument: FD is required"));
    EXPECT_THAT(thrown([&] {
                    client.pool_get(DeviceRef{7u << 20 | 250u, -1});
                }),
                HasSubstr("POOL_GET: Invalid argument: FD is required"));

    const std::string path = test_block_device();
    const int rd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(rd, 0) << path << ": " << std::strerror(errno);
    struct stat st {};
    ASSERT_EQ(fstat(rd, &st), 0);
    ASSERT_TRUE(S_ISBLK(st.st_mode)) << path;
    const uint32_t dev = kernel_dev(major(st.st_rdev), minor(st.st_rdev));

    const int chr = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(chr, 0);
    EXPECT_THAT(thrown([&] {
                    client.dma_cost({0, chr}, 4);
                }),
                HasSubstr("FD is not a block device"));
    const int wr = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(wr, 0) << path << ": " << std::strerror(errno);
    EXPECT_THAT(thrown([&] {
                    client.dma_cost({0, wr}, 4);
                }),
                HasSubstr("FD is not open for reading"));
    EXPECT_THAT(thrown([&] {
                    client.pool_get(DeviceRef{0, wr});
                }),
                HasSubstr("FD is not open for reading"));
    const int closed = dup(chr);
    ASSERT_GE(closed, 0);
    close(closed);
    EXPECT_THAT(thrown([&] {
                    client.dma_cost({0, closed}, 4);
                }),
                HasSubstr("FD is not an open file descriptor"));
    EXPECT_THAT(thrown([&] {
                    client.dma_cost({dev + 1, rd}, 4);
                }),
                HasSubstr("DEV is not the device FD is open on"));
    close(chr);
    close(wr);

    // the descriptor's own device is measured, and named in the reply
    DmaCost cost;
    ASSERT_NO_THROW(cost = client.dma_cost({dev, rd}, 4));
    EXPECT_EQ(cost.dev, dev);
    EXPECT_EQ(cost.iters, 4u);
    EXPECT_FALSE(cost.walk.empty());
    ASSERT_NO_THROW(cost = client.dma_cost({0, rd}, 4));
    EXPECT_EQ(cost.dev, dev);
    PoolInfo with_dev;
    ASSERT_NO_THROW(with_dev = client.pool_get(DeviceRef{0, rd}));
    EXPECT_EQ(with_dev.kpool, unsigned{NVMETRACE_KPOOL_ABSENT});
    close(rd);

    EXPECT_THROW(client.dma_cost({dev, -1}, NVMETRACE_DMA_ITERS_MAX + 1), Error);
}

// The tool opens the node the name leads to, and refuses one of another device.
TEST(Genl, OpenBlockDeviceFromTheModule) {
    if (!module_loaded())
        GTEST_SKIP() << "needs the nvmetrace module";
    const std::string path = test_block_device();
    const BlockDevice bd = resolve_block_device(path);
    const OpenBlockDevice opened = open_block_device(bd);
    EXPECT_EQ(opened.ref().dev, bd.dev);
    EXPECT_GE(opened.ref().fd, 0);
    const std::string name = path.substr(path.rfind('/') + 1);
    EXPECT_EQ(open_block_device(resolve_block_device(name)).path(), "/dev/" + name);
    EXPECT_THAT(thrown([&] {
                    open_block_device(BlockDevice{bd.dev + 1, path});
                }),
                HasSubstr(path + " is the device "));
}

// ADMIT adds devices to a recording that started with a device filter (even
// an empty one), for the socket that started it only; the reply is every
// device of the recording, each once; the table holds NVMETRACE_MAX_DEVS.
TEST(Genl, AdmitGrowsTheOwnersFilteredRecording) {
    if (!module_loaded())
        GTEST_SKIP() << "needs the nvmetrace module";
    GenlClient client;
    const auto dev = [](uint32_t minor) { return 7u << 20 | minor; };  // loop devices
    EXPECT_THAT(thrown([&] { client.admit({dev(1)}); }),
                HasSubstr("ADMIT: No such file or directory: nothing is recording"));

    StartArgs a;
    a.role = NVMETRACE_ROLE_HOST;
    a.dev_filter = true;  // and no device yet
    ASSERT_EQ(client.start(a), State::kRecording);
    EXPECT_EQ(client.admit({dev(1)}), std::vector<uint32_t>{dev(1)});
    EXPECT_EQ(client.admit({dev(2), dev(1), dev(2)}), (std::vector<uint32_t>{dev(1), dev(2)}));
    GenlClient other;
    EXPECT_THAT(thrown([&] { other.admit({dev(3)}); }),
                HasSubstr("the recording belongs to another socket"));
    std::vector<uint32_t> more;
    for (uint32_t i = 0; i < NVMETRACE_MAX_DEVS - 2; i++)
        more.push_back(dev(100 + i));
    EXPECT_EQ(client.admit(more).size(), size_t{NVMETRACE_MAX_DEVS});
    EXPECT_THAT(thrown([&] { client.admit({dev(3)}); }),
                HasSubstr("ADMIT: No space left on device: the recording has as many devices as "
                          "it can hold"));
    EXPECT_EQ(client.stop(), State::kIdle);

    StartArgs every;  // no filter: every device is recorded already
    every.role = NVMETRACE_ROLE_HOST;
    ASSERT_EQ(client.start(every), State::kRecording);
    EXPECT_THAT(thrown([&] { client.admit({dev(1)}); }),
                HasSubstr("the recording has every device: START had no device filter"));
    EXPECT_EQ(client.stop(), State::kIdle);
}

// The state of every nvme_tcp hook in the dump, by name.
std::map<std::string, uint32_t> tcp_hook_states(GenlClient& client) {
    std::map<std::string, uint32_t> out;
    for (const HookInfo& h : client.get_hooks())
        if (transport_module(h.name) == "nvme_tcp")
            out[h.name] = h.state;
    return out;
}

// Whether tracefs lists `fn` among the functions ftrace calls out of.
bool ftrace_hooked(const std::string& fn) {
    std::ifstream ef("/sys/kernel/tracing/enabled_functions");
    std::string line;
    while (std::getline(ef, line))
        if (line.starts_with(fn + " ") || line == fn)
            return true;
    return false;
}

// A host role's START arguments with the layouts this kernel's BTF gives now.
StartArgs host_start_args() {
    StartArgs args;
    args.role = NVMETRACE_ROLE_HOST;
    fill_layouts(args.role, args);
    return args;
}

void reload_nvme_tcp() {
    ASSERT_EQ(std::system("modprobe -r nvme_tcp && modprobe nvme_tcp"), 0)
        << "cannot reload nvme_tcp (a controller connected?)";
}

// nvme_tcp loaded again during a recording: with START's identity of its
// BTF (the module is the same) its hooks attach again; with another (as a
// rebuilt module would have) they stay off, STALE, and hook nothing, while
// the hooks that read no private layout stay attached.  Reloads nvme_tcp:
// 26-genl-gtest loads it with no controller connected.
TEST(Genl, ReloadedModuleWithOtherLayoutLeavesItsHooksStale) {
    if (!module_loaded())
        GTEST_SKIP() << "needs the nvmetrace module";
    if (access("/sys/module/nvme_tcp", F_OK) != 0)
        GTEST_SKIP() << "needs nvme_tcp loaded";
    GenlClient client;
    const StartArgs args = host_start_args();
    ASSERT_FALSE(args.tcp_layout.empty()) << "no nvme_tcp layout from BTF";
    ASSERT_TRUE(args.tcp_btf.has_value()) << "no identity of nvme_tcp's BTF";
    std::string err;
    EXPECT_EQ(module_btf_id("nvme_tcp", "/sys/kernel/btf", &err), args.tcp_btf) << err;

    for (const bool same : {true, false}) {
        SCOPED_TRACE(same ? "START's identity" : "another identity");
        StartArgs a = args;
        if (!same)
            *a.tcp_btf ^= 0x80000000u;
        ASSERT_EQ(client.start(a), State::kRecording);
        const auto before = tcp_hook_states(client);
        std::vector<std::string> attached;
        for (const auto& [name, state] : before)
            if (state == NVMETRACE_HOOK_ATTACHED)
                attached.push_back(name);
        EXPECT_FALSE(attached.empty()) << "no nvme_tcp hook attached at START";
        EXPECT_TRUE(ftrace_hooked("nvme_tcp_recv_skb"));

        reload_nvme_tcp();
        const auto after = tcp_hook_states(client);
        for (const auto& name : attached) {
            EXPECT_EQ(after.at(name),
                      same ? unsigned{NVMETRACE_HOOK_ATTACHED} : unsigned{NVMETRACE_HOOK_STALE})
                << name;
            EXPECT_EQ(ftrace_hooked(name), same) << name << " in enabled_functions";
        }
        for (const HookInfo& h : client.get_hooks()) {
            if (h.name == "block_rq_issue") {
                EXPECT_EQ(h.state, unsigned{NVMETRACE_HOOK_ATTACHED});
            }
            if (h.state == NVMETRACE_HOOK_STALE) {
                EXPECT_EQ(h.error, -ESTALE) << h.name;
            }
        }
        if (!same) {
            // LAYOUT with the loaded module's own ends it (ABI 6)
            StartArgs groups;
            ASSERT_EQ(transport_layout("nvme_tcp", groups), "");
            client.layout(groups);
            const auto now = tcp_hook_states(client);
            for (const auto& name : attached) {
                EXPECT_EQ(now.at(name), unsigned{NVMETRACE_HOOK_ATTACHED}) << name;
                EXPECT_TRUE(ftrace_hooked(name)) << name << " in enabled_functions";
            }
        }
        EXPECT_EQ(client.stop(), State::kIdle);
    }
}

// nvme_tcp loaded after START (a connect loads it): its hooks are off for the
// want of its layout until the recording's owner gives it (LAYOUT, ABI 6),
// checked against the module as it loaded.  Unloads and loads nvme_tcp:
// 26-genl-gtest runs it with no controller connected.
TEST(Genl, LayoutGivenWhileRecordingAttachesAModuleLoadedSinceStart) {
    if (!module_loaded())
        GTEST_SKIP() << "needs the nvmetrace module";
    if (std::system("modprobe -r nvme_tcp") != 0 || access("/sys/module/nvme_tcp", F_OK) == 0)
        GTEST_SKIP() << "cannot unload nvme_tcp (a controller connected?)";
    GenlClient client;
    const StartArgs args = host_start_args();
    ASSERT_TRUE(args.tcp_layout.empty()) << "an nvme_tcp layout with nvme_tcp unloaded";
    ASSERT_EQ(client.start(args), State::kRecording);
    ASSERT_EQ(std::system("modprobe nvme_tcp"), 0);
    auto states = tcp_hook_states(client);
    ASSERT_FALSE(states.empty());
    for (const auto& [name, state] : states)
        EXPECT_NE(state, unsigned{NVMETRACE_HOOK_ATTACHED}) << name << " without a layout";

    StartArgs groups;
    ASSERT_EQ(transport_layout("nvme_tcp", groups), "");
    ASSERT_TRUE(groups.tcp_btf.has_value());
    // not the loaded module's identity: refused, nothing attached
    StartArgs other = groups;
    *other.tcp_btf ^= 1u;
    try {
        client.layout(other);
        ADD_FAILURE() << "LAYOUT with another module's identity was taken";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("not the BTF of the module"), std::string::npos)
            << e.what();
    }
    // from another socket: not its recording
    {
        GenlClient intruder;
        EXPECT_THROW(intruder.layout(groups), Error);
    }
    for (const auto& [name, state] : tcp_hook_states(client))
        EXPECT_NE(state, unsigned{NVMETRACE_HOOK_ATTACHED}) << name << " after refused LAYOUTs";

    client.layout(groups);
    int attached = 0;
    for (const auto& [name, state] : tcp_hook_states(client)) {
        if (state == NVMETRACE_HOOK_ATTACHED) {
            attached++;
            EXPECT_TRUE(ftrace_hooked(name)) << name << " in enabled_functions";
        } else {
            EXPECT_TRUE(state == NVMETRACE_HOOK_SPARE || state == NVMETRACE_HOOK_INLINED)
                << name << " state " << state;
        }
    }
    EXPECT_GE(attached, 2);
    client.layout(groups);  // the layout the hooks read already: nothing changes
    EXPECT_EQ(tcp_hook_states(client).size(), states.size());

    // loaded again, the same module: its hooks come back on their own
    reload_nvme_tcp();
    int back = 0;
    for (const auto& [name, state] : tcp_hook_states(client))
        back += state == NVMETRACE_HOOK_ATTACHED;
    EXPECT_EQ(back, attached);
    EXPECT_EQ(client.stop(), State::kIdle);
}

TEST(Genl, BenchHooksParameterAsTheModuleShowsIt) {
    const std::string f = testing::TempDir() + "/bench_hooks";
    EXPECT_EQ(module_bench_hooks(f + ".absent"), "");  // no module, or one without it
    std::ofstream(f) << "(null)\n";                    // loaded without it: charp unset
    EXPECT_EQ(module_bench_hooks(f), "");
    std::ofstream(f) << "block_rq_issue,nvmet_req_init\n";
    EXPECT_EQ(module_bench_hooks(f), "block_rq_issue,nvmet_req_init");
}

TEST(Genl, BenchNopParameterAsTheModuleShowsIt) {
    const std::string f = testing::TempDir() + "/bench_nop";
    EXPECT_FALSE(module_bench_nop(f + ".absent"));  // no module, or one without it
    std::ofstream(f) << "N\n";                      // a bool parameter, unset
    EXPECT_FALSE(module_bench_nop(f));
    std::ofstream(f) << "Y\n";
    EXPECT_TRUE(module_bench_nop(f));
}

}  // namespace
}  // namespace nvmetrace
