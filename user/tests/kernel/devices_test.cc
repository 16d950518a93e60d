#include "kernel/devices.h"

#include "analysis/device_table.h"
#include "format/recfile.h"
#include "kernel/device_watch.h"
#include "util/error.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

namespace fs = std::filesystem;

class FakeSysfs : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() /
                ("nvmetrace-devices-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root_);
    }
    void TearDown() override { fs::remove_all(root_); }
    void put(const std::string& rel, const std::string& value) {
        fs::path p = root_ / rel;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << value << "\n";
    }
    void ctrl(const std::string& name, const std::string& transport, int cntlid) {
        put("sys/class/nvme/" + name + "/transport", transport);
        put("sys/class/nvme/" + name + "/cntlid", std::to_string(cntlid));
        put("sys/class/nvme/" + name + "/address", "traddr=127.0.0.1,trsvcid=4420");
        put("sys/class/nvme/" + name + "/subsysnqn", "nqn.test");
    }
    std::string sys() const { return (root_ / "sys").string(); }
    fs::path root_;
};

TEST_F(FakeSysfs, MultipathHeadCollectsItsPaths) {
    ctrl("nvme0", "tcp", 1);
    ctrl("nvme1", "tcp", 2);
    put("sys/class/nvme/nvme0/nvme0c0n1/dev", "259:1");
    put("sys/class/nvme/nvme1/nvme0c1n1/diskseq", "7");  // hidden: no dev
    put("sys/block/nvme0n1/dev", "259:0");
    put("sys/block/nvme0n1/queue/logical_block_size", "512");
    put("sys/block/nvme0n1/nsid", "1");
    auto all = find_host_namespaces("", sys());
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].name, "nvme0n1");
    EXPECT_EQ(all[0].dev, kernel_dev(259, 0));
    EXPECT_EQ(all[0].block_size, 512u);
    EXPECT_EQ(all[0].nsid, 1u);
    ASSERT_EQ(all[0].paths.size(), 2u);
    EXPECT_EQ(all[0].paths[0].name, "nvme0c0n1");
    EXPECT_EQ(all[0].paths[0].dev, kernel_dev(259, 1));
    EXPECT_EQ(all[0].paths[1].cntlid, 2u);
    EXPECT_EQ(all[0].paths[1].dev, kernel_dev(0, 7));
    EXPECT_EQ(&pick_host_namespace(all, "/dev/nvme0n1"), &all[0]);
    EXPECT_EQ(&pick_host_namespace(all, "nvme0c1n1"), &all[0]);
}

TEST_F(FakeSysfs, PcieAndOtherTransportsAreLeftOut) {
    ctrl("nvme0", "pcie", 1);
    put("sys/class/nvme/nvme0/nvme0n1/dev", "259:0");
    ctrl("nvme1", "rdma", 1);
    put("sys/class/nvme/nvme1/nvme1n1/dev", "259:5");
    put("sys/class/nvme/nvme1/nvme1n1/queue/logical_block_size", "4096");
    EXPECT_EQ(find_host_namespaces("tcp", sys()).size(), 0u);
    auto rdma = find_host_namespaces("", sys());
    ASSERT_EQ(rdma.size(), 1u);
    EXPECT_EQ(rdma[0].name, "nvme1n1");
    EXPECT_EQ(rdma[0].block_size, 4096u);
    EXPECT_TRUE(rdma[0].paths.empty());
}

TEST_F(FakeSysfs, UnknownDeviceSaysWhatExists) {
    ctrl("nvme1", "tcp", 1);
    put("sys/class/nvme/nvme1/nvme1n1/dev", "259:5");
    auto all = find_host_namespaces("", sys());
    try {
        pick_host_namespace(all, "nvme7n1");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("nvme7n1"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("nvme1n1"), std::string::npos);
    }
    try {
        pick_host_namespace({}, "nvme0n1");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("nvme connect"), std::string::npos);
    }
}

TEST_F(FakeSysfs, TargetNamespacesFromConfigfs) {
    put("cfg/nvmet/subsystems/nqn.b/namespaces/2/device_path", "/dev/nullb1");
    put("cfg/nvmet/subsystems/nqn.b/namespaces/2/enable", "1");
    put("cfg/nvmet/subsystems/nqn.a/namespaces/1/device_path", "/dev/nullb0");
    put("cfg/nvmet/subsystems/nqn.a/namespaces/1/enable", "0");
    put("sys/block/nullb0/queue/logical_block_size", "512");
    put("sys/block/nullb1/queue/logical_block_size", "4096");
    auto t = find_target_namespaces((root_ / "cfg").string(), sys());
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t[0].subsysnqn, "nqn.a");
    EXPECT_EQ(t[0].block_size, 512u);
    EXPECT_FALSE(t[0].enabled);
    EXPECT_EQ(t[1].nsid, 2u);
    EXPECT_EQ(t[1].block_size, 4096u);
    EXPECT_TRUE(t[1].enabled);
}

// A subsystem counts before it has a namespace: a target being set up is a
// target.  No configfs at all is no subsystem, not an error.
TEST_F(FakeSysfs, NvmetSubsystemsWithOrWithoutNamespaces) {
    EXPECT_TRUE(find_nvmet_subsystems((root_ / "cfg").string()).empty());
    put("cfg/nvmet/subsystems/nqn.b/attr_allow_any_host", "1");
    put("cfg/nvmet/subsystems/nqn.a/namespaces/1/enable", "1");
    EXPECT_EQ(find_nvmet_subsystems((root_ / "cfg").string()),
              (std::vector<std::string>{"nqn.a", "nqn.b"}));
}

TEST(Devices, JsonRoundTripFeedsTheDeviceTable) {
    HostNamespace h;
    h.name = "nvme0n1";
    h.dev = kernel_dev(259, 0);
    h.block_size = 512;
    h.paths.push_back({"nvme0c0n1", kernel_dev(259, 1), "nvme0", 1});
    TargetNamespace t{"nqn.a", 1, "/dev/nullb0", 4096, true};
    nlohmann::json j = devices_to_json({h}, {t});
    ASSERT_EQ(j.size(), 3u);
    EXPECT_EQ(j[1]["kind"], "path");
    EXPECT_EQ(j[1]["head_dev"], h.dev);
    DeviceTable table;
    devices_from_json(j, table);
    devices_from_json(nlohmann::json::object(), table);  // not an array: ignored
}

// A recording started before any namespace: each look finds what was
// connected, reconnected (a new controller, same subsystem) or removed since
// the last one, and which host disks to admit.
TEST_F(FakeSysfs, DeviceWatchFollowsNamespacesAsTheyComeAndGo) {
    DeviceWatch w({.host = true,
                   .sysfs_root = sys(),
                   .configfs_root = (root_ / "cfg").string(),
                   .uevents = false,
                   .period_ns = 1000},
                  {}, {});
    EXPECT_EQ(w.fd(), -1);
    EXPECT_FALSE(w.poll(10, true));  // nothing yet
    ctrl("nvme0", "tcp", 1);
    put("sys/class/nvme/nvme0/nvme0c0n1/diskseq", "7");
    put("sys/block/nvme0n1/dev", "259:0");
    put("sys/block/nvme0n1/nsid", "1");
    EXPECT_FALSE(w.poll(500));  // the period has not passed, no uevent
    auto c = w.poll(2000);
    ASSERT_TRUE(c);
    ASSERT_EQ(c->block.added.size(), 2u);  // the head and its path
    EXPECT_TRUE(c->block.gone.empty());
    // the path before its head
    EXPECT_EQ(c->admit, (std::vector<uint32_t>{kernel_dev(0, 7), kernel_dev(259, 0)}));
    ASSERT_EQ(c->lines.size(), 2u);
    EXPECT_EQ(c->lines[0], "nvme0n1 (tcp nqn.test, nvme0, cntlid 1) appeared: recording it");
    EXPECT_FALSE(w.poll(4000));  // the same devices: no change

    // the head made anew under another number, its path the same: the path
    // is given again, tied to the new head
    put("sys/block/nvme0n1/dev", "259:1");
    c = w.poll(4200, true);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->admit, (std::vector<uint32_t>{kernel_dev(0, 7), kernel_dev(259, 1)}));
    ASSERT_EQ(c->block.added.size(), 2u);
    for (const auto& d : c->block.added) {
        if (d["kind"] == "path") {
            EXPECT_EQ(d["head_dev"], kernel_dev(259, 1));
        }
    }
    EXPECT_EQ(c->block.gone.size(), 2u);
    EXPECT_NE(
        std::find(c->lines.begin(), c->lines.end(),
                  "path nvme0c0n1 (nvme0, cntlid 1): its disk is now dev 259:1: recording it"),
        c->lines.end());
    put("sys/block/nvme0n1/dev", "259:0");
    ASSERT_TRUE(w.poll(4400, true));

    // the path is lost and comes back on a new controller
    fs::remove_all(root_ / "sys/class/nvme/nvme0");
    ctrl("nvme1", "tcp", 2);
    put("sys/class/nvme/nvme1/nvme0c1n1/diskseq", "9");
    c = w.poll(6000);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->admit, (std::vector<uint32_t>{kernel_dev(0, 9), kernel_dev(259, 0)}));
    ASSERT_EQ(c->block.gone.size(), 2u);
    EXPECT_EQ(c->block.gone[1],
              nlohmann::json({{"kind", "path"}, {"name", "nvme0c0n1"}, {"dev", kernel_dev(0, 7)}}));
    EXPECT_EQ(c->lines.back(), "path nvme0c0n1 (nvme0, cntlid 1) went away");

    // every disk gone
    fs::remove_all(root_ / "sys/class/nvme/nvme1");
    c = w.poll(8000);
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->admit.empty());
    EXPECT_EQ(c->block.gone.size(), 2u);
}

// -d names a namespace before it exists: only it is followed, and a name
// may be its disk, a path, its controller or its subsystem's NQN.
TEST_F(FakeSysfs, DeviceWatchFollowsOnlyTheNamedNamespaces) {
    DeviceWatch w({.host = true, .names = {"/dev/nvme1n1"}, .sysfs_root = sys(), .uevents = false},
                  {}, {});
    ctrl("nvme0", "tcp", 1);
    put("sys/class/nvme/nvme0/nvme0n1/dev", "259:0");
    EXPECT_FALSE(w.poll(0, true));
    ctrl("nvme1", "tcp", 3);
    put("sys/class/nvme/nvme1/nvme1n1/dev", "259:4");
    auto c = w.poll(0, true);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->admit, std::vector<uint32_t>{kernel_dev(259, 4)});

    HostNamespace ns;
    ns.name = "nvme2n1";
    ns.ctrl = "nvme2";
    ns.subsysnqn = "nqn.2014-08.org.example:one";
    ns.paths.push_back({"nvme2c5n1", 0, "nvme5", 5});
    for (const char* n :
         {"nvme2n1", "/dev/nvme2n1", "nvme2", "nqn.2014-08.org.example:one", "nvme2c5n1", "nvme5"})
        EXPECT_TRUE(namespace_selected(ns, {n})) << n;
    EXPECT_TRUE(namespace_selected(ns, {}));
    EXPECT_FALSE(namespace_selected(ns, {"nvme2n11", "nqn.2014-08.org.example"}));
}

// A target's namespaces added and removed in configfs are changes too,
// with nothing to admit (the target role records every namespace).
TEST_F(FakeSysfs, DeviceWatchFollowsTargetNamespaces) {
    DeviceWatch w({.target = true,
                   .sysfs_root = sys(),
                   .configfs_root = (root_ / "cfg").string(),
                   .uevents = false},
                  {}, {});
    put("cfg/nvmet/subsystems/nqn.t/namespaces/1/device_path", "/dev/nullb0");
    put("cfg/nvmet/subsystems/nqn.t/namespaces/1/enable", "1");
    auto c = w.poll(0, true);
    ASSERT_TRUE(c);
    ASSERT_EQ(c->block.added.size(), 1u);
    EXPECT_EQ(c->block.added[0]["nsid"], 1);
    EXPECT_TRUE(c->admit.empty());
    EXPECT_EQ(c->lines[0], "target namespace 1 of nqn.t (/dev/nullb0) appeared: recording it");
    fs::remove_all(root_ / "cfg/nvmet/subsystems/nqn.t/namespaces/1");
    c = w.poll(0, true);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->block.gone[0],
              nlohmann::json({{"kind", "target_ns"}, {"subsysnqn", "nqn.t"}, {"nsid", 1}}));
}

// A namespace being set up (mkdir, device_path, enable, as nvmetcli does it)
// is one change, at its enable, naming its device; nvmet shows an unset
// device_path as "(null)".  Disabled, it has gone, before its rmdir.
TEST_F(FakeSysfs, DeviceWatchFollowsATargetNamespaceFromItsEnable) {
    const std::string ns = "cfg/nvmet/subsystems/nqn.t/namespaces/2/";
    put(ns + "device_path", "(null)");
    put(ns + "enable", "0");
    auto t = find_target_namespaces((root_ / "cfg").string(), sys());
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].device_path, "");
    DeviceWatch w({.target = true,
                   .sysfs_root = sys(),
                   .configfs_root = (root_ / "cfg").string(),
                   .uevents = false},
                  {}, t);
    EXPECT_FALSE(w.poll(0, true));
    put(ns + "device_path", "/dev/nullb1");
    EXPECT_FALSE(w.poll(0, true));
    put(ns + "enable", "1");
    auto c = w.poll(0, true);
    ASSERT_TRUE(c);
    ASSERT_EQ(c->lines.size(), 1u);
    EXPECT_EQ(c->lines[0], "target namespace 2 of nqn.t (/dev/nullb1) appeared: recording it");
    EXPECT_TRUE(c->block.gone.empty());
    put(ns + "enable", "0");
    c = w.poll(0, true);
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->block.added.empty());
    ASSERT_EQ(c->lines.size(), 1u);
    EXPECT_EQ(c->lines[0], "target namespace 2 of nqn.t (/dev/nullb1) went away");
    fs::remove_all(root_ / "cfg/nvmet/subsystems/nqn.t/namespaces/2");
    EXPECT_FALSE(w.poll(0, true));
}

// Transport modules loaded while recording are named in a change, once per
// load (a load makes the BTF file anew), modules first; one whose layout the
// recording started with is named only when loaded again.
TEST_F(FakeSysfs, DeviceWatchNamesTransportModulesAsTheyLoad) {
    put("sys/kernel/btf/nvmet_tcp", "btf 1");
    put("sys/kernel/btf/nvme_rdma", "btf 1");  // loaded, but not in the started set
    DeviceWatch w({.host = true,
                   .target = true,
                   .sysfs_root = sys(),
                   .configfs_root = (root_ / "cfg").string(),
                   .uevents = false,
                   .modules = {"nvme_tcp", "nvme_rdma", "nvmet_tcp"},
                   .modules_started = {"nvmet_tcp"}},
                  {}, {});
    auto c = w.poll(0, true);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->modules, std::vector<std::string>{"nvme_rdma"});
    EXPECT_TRUE(c->block.added.empty());
    EXPECT_FALSE(w.poll(0, true));

    // nvme_tcp loads, with a namespace: the module and the disk in one change
    put("sys/kernel/btf/nvme_tcp", "btf 1");
    ctrl("nvme0", "tcp", 1);
    put("sys/class/nvme/nvme0/nvme0n1/dev", "259:0");
    c = w.poll(0, true);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->modules, std::vector<std::string>{"nvme_tcp"});
    EXPECT_EQ(c->admit, std::vector<uint32_t>{kernel_dev(259, 0)});

    // nvmet_tcp loaded again: a new file (its inode differs from the old one's)
    put("sys/kernel/btf/nvmet_tcp.new", "btf 2");
    fs::rename(root_ / "sys/kernel/btf/nvmet_tcp.new", root_ / "sys/kernel/btf/nvmet_tcp");
    c = w.poll(0, true);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->modules, std::vector<std::string>{"nvmet_tcp"});

    // unloaded: nothing to say; loaded again: named again
    fs::remove(root_ / "sys/kernel/btf/nvme_tcp");
    EXPECT_FALSE(w.poll(0, true));
    put("sys/kernel/btf/nvme_tcp.new", "btf 1");
    fs::rename(root_ / "sys/kernel/btf/nvme_tcp.new", root_ / "sys/kernel/btf/nvme_tcp");
    c = w.poll(0, true);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->modules, std::vector<std::string>{"nvme_tcp"});
}

// A controller reset or a reconnect gives a disk another controller id while
// recording: each command gets the id its disk had when it ran.
TEST(Devices, ControllerIdOfADiskAtEachInstant) {
    const nlohmann::json j = nlohmann::json::parse(R"([
        {"kind": "path", "name": "nvme0c0n1", "dev": 9, "head_dev": 5, "cntlid": 1},
        {"kind": "path", "name": "nvme0c0n1", "dev": 9, "head_dev": 5, "cntlid": 3,
         "appeared_ns": 5000, "gone_ns": 9000},
        {"kind": "path", "name": "nvme0c0n1", "dev": 9, "head_dev": 5, "cntlid": 2,
         "appeared_ns": 2000},
        {"kind": "disk", "name": "nvme1n1", "dev": 7, "cntlid": 4, "appeared_ns": 3000}])");
    DeviceTable table;
    devices_from_json(j, table);
    EXPECT_EQ(table.cntlid(9, 0), 1u);
    EXPECT_EQ(table.cntlid(9, 1999), 1u);
    EXPECT_EQ(table.cntlid(9, 2000), 2u);
    EXPECT_EQ(table.cntlid(9, 4999), 2u);
    EXPECT_EQ(table.cntlid(9, 5000), 3u);
    EXPECT_EQ(table.cntlid(9), 3u);
    EXPECT_EQ(table.head(9), 5u);
    EXPECT_EQ(table.cntlid(7, 100), 4u);  // before it appeared: its only id
    EXPECT_EQ(table.cntlid(8, 100), 0u);
    EXPECT_EQ(table.gone_after(9, 0), 9000u);  // the second entry went, the third stays
    EXPECT_EQ(table.gone_after(9, 9001), 0u);
    EXPECT_EQ(table.gone_after(7, 0), 0u);
    // the id after the next change, if it came soon enough after ts
    EXPECT_EQ(table.cntlid_next(9, 1500, 1000), 2u);
    EXPECT_EQ(table.cntlid_next(9, 900, 1000), 0u);  // 1.1 us before it: too long
    EXPECT_EQ(table.cntlid_next(9, 4500, 1000), 3u);
    EXPECT_EQ(table.cntlid_next(9, 5000, 1000), 0u);  // the last change is behind
    EXPECT_EQ(table.cntlid_next(7, 2500, 1000), 0u);  // one id only
    EXPECT_EQ(table.cntlid_next(8, 0, 1000), 0u);
}

// A dev number freed by one namespace and taken by another: commands of
// each go by a number of their own, so they are named and grouped apart.
TEST(Devices, ADevNumberTakenByAnotherDiskIsToldApart) {
    DeviceTable t;
    t.add_disk(5, "nvme0n1", 512, 1);
    t.add_path(7, 5, "nvme0c0n1", 1);
    t.add_disk(5, "nvme0n2", 4096, 1, 3000);  // nvme0n1 went, nvme0n2 got its number
    t.add_path(8, 5, "nvme0c0n2", 1, 3000);
    t.add_disk(5, "nvme0n1", 512, 2, 6000);  // and back
    EXPECT_EQ(t.head(7, 1000), 5u);
    EXPECT_EQ(t.disk_name(t.head(7, 1000)), "nvme0n1");
    const uint32_t n2 = t.head(8, 4000);
    EXPECT_GE(n2, DeviceTable::kAliasBase);
    EXPECT_EQ(t.disk_name(n2), "nvme0n2");
    EXPECT_EQ(t.head(5, 4000), n2);
    EXPECT_EQ(t.head(5, 7000), 5u);
    EXPECT_EQ(t.disk_name(5), "nvme0n1");
    EXPECT_EQ(t.cntlid(5, 7000), 2u);
    DeviceTable plain;  // no number taken twice: every disk its own head
    plain.add_disk(5, "nvme0n1");
    EXPECT_EQ(plain.head(5, 100), 5u);
}

// The recorder's live table takes each change as the file's reader will.
TEST(Devices, AChangeGoesIntoTheTableAsTheReaderSeesIt) {
    DeviceTable table;
    table.add_path(9, 5, "nvme0c0n1", 1);
    DeviceChange c;
    c.monotonic_ns = 4000;
    c.gone.push_back({{"kind", "path"}, {"name", "nvme0c0n1"}, {"dev", 9}});
    c.gone.push_back(nullptr);
    c.added.push_back(
        {{"kind", "path"}, {"name", "nvme0c0n1"}, {"dev", 9}, {"head_dev", 5}, {"cntlid", 2}});
    device_change_to_table(c, table);
    EXPECT_EQ(table.cntlid(9, 3999), 1u);
    EXPECT_EQ(table.cntlid(9, 4000), 2u);
    EXPECT_EQ(table.gone_after(9, 0), 4000u);
}

// Null fields (the fuzzer's find: nlohmann's value() throws on them) take their
// defaults; an entry that is no object is passed over.
TEST(Devices, NullFieldsTakeTheirDefaults) {
    const nlohmann::json j = nlohmann::json::parse(R"([
        {"kind": "disk", "dev": 271581184, "name": null, "lbs": null, "cntlid": null},
        {"kind": "target_ns", "nsid": 3, "device_path": null, "lbs": 4096},
        null, 7, {"kind": null}])");
    DeviceTable table;
    devices_from_json(j, table);
    EXPECT_EQ(table.disk_name(271581184), "dev 259:0");  // nameless: named by its number
    EXPECT_EQ(table.target_name(3), "ns3");
    EXPECT_EQ(table.target_block_size(3), 4096u);
}

}  // namespace
}  // namespace nvmetrace
