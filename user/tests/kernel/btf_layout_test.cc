// BtfLayout against BTF made here with libbpf's writer: a "vmlinux" base with
// struct request, and a split "module" with the tracepoint typedefs, written
// out raw and read back through load_files() as /sys/kernel/btf would be.
#include "kernel/btf_layout.h"

#include "tempdir.h"

#include <stdio.h>

#include <fstream>
#include <string>
#include <vector>

#include <bpf/btf.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

void write_raw(const ::btf* b, const std::string& path) {
    __u32 size = 0;
    const void* data = btf__raw_data(b, &size);
    ASSERT_NE(data, nullptr);
    FILE* f = fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fwrite(data, 1, size, f), size);
    fclose(f);
}

// Adds typedef void (*btf_trace_<name>)(void *__data, <args>) to b.
void add_tracepoint(::btf* b, const std::string& name, const std::vector<int>& args) {
    // the parameters follow their prototype directly: make their types first
    int void_ptr = btf__add_ptr(b, 0);
    int proto = btf__add_func_proto(b, 0);
    ASSERT_GT(proto, 0);
    ASSERT_EQ(btf__add_func_param(b, "__data", void_ptr), 0);
    for (int a : args)
        ASSERT_EQ(btf__add_func_param(b, "", a), 0);
    int ptr = btf__add_ptr(b, proto);
    ASSERT_GT(btf__add_typedef(b, ("btf_trace_" + name).c_str(), ptr), 0);
}

class BtfLayoutTest : public ::testing::Test {
protected:
    // The base ("vmlinux"): struct request { u64 x; }, and an int.
    void SetUp() override {
        base_ = btf__new_empty();
        ASSERT_NE(base_, nullptr);
        int u64 = btf__add_int(base_, "u64", 8, 0);
        request_ = btf__add_struct(base_, "request", 8);
        ASSERT_EQ(btf__add_field(base_, "x", u64, 0, 0), 0);
        write_raw(base_, dir_.path("vmlinux"));
    }
    void TearDown() override { btf__free(base_); }

    // A module split off the base, with struct nvme_command and the two
    // nvme-core tracepoints; setup_cmd_args are nvme_setup_cmd's arguments
    // (-1: struct request *, -2: struct nvme_command *, else a type id).
    BtfLayout module(const std::vector<int>& setup_cmd_args) {
        ::btf* m = btf__new_empty_split(base_);
        EXPECT_NE(m, nullptr);
        int cmd = btf__add_struct(m, "nvme_command", 0);
        int rq_ptr = btf__add_ptr(m, request_);
        int cmd_ptr = btf__add_ptr(m, cmd);
        std::vector<int> args;
        for (int a : setup_cmd_args)
            args.push_back(a == -1 ? rq_ptr : a == -2 ? cmd_ptr : a);
        add_tracepoint(m, "nvme_setup_cmd", args);
        add_tracepoint(m, "nvme_complete_rq", {rq_ptr});
        write_raw(m, dir_.path("nvme_core"));
        btf__free(m);
        return BtfLayout::load_files(dir_.path("vmlinux"), dir_.path("nvme_core"));
    }

    test::TempDir dir_;
    ::btf* base_ = nullptr;
    int request_ = 0;
};

TEST_F(BtfLayoutTest, TracepointArgsSpelledAsC) {
    BtfLayout l = module({-1, -2});
    ASSERT_TRUE(l.ok()) << l.error();
    auto args = l.tracepoint_args("nvme_setup_cmd");
    ASSERT_TRUE(args) << l.error();
    EXPECT_EQ(*args, (std::vector<std::string>{"struct request *", "struct nvme_command *"}));
    EXPECT_FALSE(l.tracepoint_args("nvme_sq"));
    EXPECT_NE(l.error().find("btf_trace_nvme_sq"), std::string::npos) << l.error();
}

TEST_F(BtfLayoutTest, MatchingTracepointsPass) {
    BtfLayout l = module({-1, -2});
    ASSERT_TRUE(l.ok()) << l.error();
    EXPECT_EQ(l.probe_prototype_mismatch("nvme_core"), std::nullopt);
}

TEST_F(BtfLayoutTest, ChangedTracepointIsNamed) {
    // nvme_setup_cmd gains an argument: the probe would read the wrong ones
    BtfLayout l = module({-1, -2, -1});
    ASSERT_TRUE(l.ok()) << l.error();
    auto why = l.probe_prototype_mismatch("nvme_core");
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("nvme_setup_cmd passes (struct request *, struct nvme_command *, "
                        "struct request *)"),
              std::string::npos)
        << *why;
    EXPECT_NE(why->find("takes (struct request *, struct nvme_command *)"), std::string::npos)
        << *why;
}

TEST_F(BtfLayoutTest, ArgumentOfAnotherTypeIsNamed) {
    // the command passed as a pointer to const
    ::btf* m = btf__new_empty_split(base_);
    int cmd = btf__add_struct(m, "nvme_command", 0);
    int cst = btf__add_const(m, cmd);
    int rq_ptr = btf__add_ptr(m, request_);
    int cst_ptr = btf__add_ptr(m, cst);
    add_tracepoint(m, "nvme_setup_cmd", {rq_ptr, cst_ptr});
    add_tracepoint(m, "nvme_complete_rq", {rq_ptr});
    write_raw(m, dir_.path("nvme_core2"));
    btf__free(m);
    BtfLayout l = BtfLayout::load_files(dir_.path("vmlinux"), dir_.path("nvme_core2"));
    ASSERT_TRUE(l.ok()) << l.error();
    auto why = l.probe_prototype_mismatch("nvme_core");
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("const struct nvme_command *"), std::string::npos) << *why;
}

TEST_F(BtfLayoutTest, TracepointWithoutTypedefIsUnchecked) {
    // a kernel without CONFIG_BPF_EVENTS has no btf_trace_ typedefs
    ::btf* m = btf__new_empty_split(base_);
    int rq_ptr = btf__add_ptr(m, request_);
    add_tracepoint(m, "nvme_complete_rq", {rq_ptr});
    write_raw(m, dir_.path("nvme_core3"));
    btf__free(m);
    BtfLayout l = BtfLayout::load_files(dir_.path("vmlinux"), dir_.path("nvme_core3"));
    ASSERT_TRUE(l.ok()) << l.error();
    EXPECT_EQ(l.probe_prototype_mismatch("nvme_core"), std::nullopt);
    // while one that is there is still checked
    ::btf* m2 = btf__new_empty_split(base_);
    int int_type = btf__add_int(m2, "int", 4, BTF_INT_SIGNED);
    add_tracepoint(m2, "nvme_complete_rq", {int_type});
    write_raw(m2, dir_.path("nvme_core4"));
    btf__free(m2);
    BtfLayout l2 = BtfLayout::load_files(dir_.path("vmlinux"), dir_.path("nvme_core4"));
    auto why = l2.probe_prototype_mismatch("nvme_core");
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("nvme_complete_rq passes (int)"), std::string::npos) << *why;
}

TEST_F(BtfLayoutTest, ModuleWithoutBtfIsNotAMismatch) {
    // nvme_core not loaded: nothing to check, and load() says why
    BtfLayout l = BtfLayout::load_files(dir_.path("vmlinux"), dir_.path("absent"));
    EXPECT_FALSE(l.ok());
    EXPECT_EQ(l.probe_prototype_mismatch("nvme_core"), std::nullopt);
}

TEST_F(BtfLayoutTest, OtherModulesHaveNothingToCheck) {
    BtfLayout l = module({-1, -2});
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l.probe_prototype_mismatch("nvme_tcp"), std::nullopt);
}

// The kernel's own group, from vmlinux alone: struct aio_kiocb's rw (a struct
// kiocb, at 0 in a union as fs/aio.c has it) and ki_res (a struct io_event).
// res_size: the size of ki_res's type as this "kernel" has it.
std::string write_aio_vmlinux(const test::TempDir& dir, uint32_t res_size) {
    ::btf* b = btf__new_empty();
    EXPECT_NE(b, nullptr);
    const int u64 = btf__add_int(b, "u64", 8, 0);
    const int kiocb = btf__add_struct(b, "kiocb", 48);
    EXPECT_EQ(btf__add_field(b, "ki_pos", u64, 8 * 8, 0), 0);
    const int io_event = btf__add_struct(b, "io_event", res_size);
    EXPECT_EQ(btf__add_field(b, "obj", u64, 8 * 8, 0), 0);
    const int u = btf__add_union(b, nullptr, 96);
    EXPECT_EQ(btf__add_field(b, "ki_filp", u64, 0, 0), 0);
    EXPECT_EQ(btf__add_field(b, "rw", kiocb, 0, 0), 0);
    btf__add_struct(b, "aio_kiocb", 176);
    EXPECT_EQ(btf__add_field(b, nullptr, u, 0, 0), 0);
    EXPECT_EQ(btf__add_field(b, "ki_ctx", u64, 96 * 8, 0), 0);
    EXPECT_EQ(btf__add_field(b, "ki_res", io_event, 112 * 8, 0), 0);
    const std::string path = dir.path("vmlinux");
    write_raw(b, path);
    btf__free(b);
    return path;
}

TEST(AioLayout, OffsetsFromTheKernelAlone) {
    test::TempDir dir;
    BtfLayout l = BtfLayout::load_vmlinux(write_aio_vmlinux(dir, 32));
    ASSERT_TRUE(l.ok()) << l.error();
    auto a = l.aio();
    ASSERT_TRUE(a) << l.error();
    EXPECT_EQ(a->offsets, (std::vector<uint32_t>{0, 112}));
}

TEST(AioLayout, MemberOfAnotherSizeIsRefused) {
    // ki_res is not the io_event this tool knows: no offsets, a reason
    test::TempDir dir;
    const std::string path = write_aio_vmlinux(dir, 40);
    BtfLayout l = BtfLayout::load_vmlinux(path);
    ASSERT_TRUE(l.ok()) << l.error();
    EXPECT_EQ(l.aio(), std::nullopt);
    EXPECT_EQ(BtfLayout::load_vmlinux(dir.path("absent")).aio(), std::nullopt);
    EXPECT_NE(BtfLayout::load_vmlinux(dir.path("absent")).error().find("cannot read kernel BTF"),
              std::string::npos);
}

// iomap's fast path of a small O_DIRECT read (7.3 on): struct iomap_dio_simple's kiocb
// pointer and its bio, a struct bio of the kernel's size; a kernel without the struct has
// no group.
TEST(DioSimpleLayout, OffsetsWhereTheKernelHasTheStruct) {
    test::TempDir dir;
    ::btf* b = btf__new_empty();
    ASSERT_NE(b, nullptr);
    const int u64 = btf__add_int(b, "u64", 8, 0);
    const int bio = btf__add_struct(b, "bio", 136);
    EXPECT_EQ(btf__add_field(b, "bi_next", u64, 0, 0), 0);
    btf__add_struct(b, "iomap_dio_simple", 256);
    EXPECT_EQ(btf__add_field(b, "iocb", u64, 0, 0), 0);
    EXPECT_EQ(btf__add_field(b, "bio", bio, 64 * 8, 0), 0);
    const std::string path = dir.path("vmlinux");
    write_raw(b, path);
    btf__free(b);
    BtfLayout l = BtfLayout::load_vmlinux(path);
    ASSERT_TRUE(l.ok()) << l.error();
    auto d = l.dio_simple();
    ASSERT_TRUE(d) << l.error();
    EXPECT_EQ(d->offsets, (std::vector<uint32_t>{0, 64}));
    // before 7.3: no such struct, no group
    BtfLayout old = BtfLayout::load_vmlinux(write_aio_vmlinux(dir, 32));
    ASSERT_TRUE(old.ok()) << old.error();
    EXPECT_EQ(old.dio_simple(), std::nullopt);
}

// The identity START carries with a module's layout: the CRC-32C of the
// module's BTF file as the kernel exposes it, the value the module computes
// over the .BTF section of a module being loaded (kmod/layout_id.h).
TEST(ModuleBtfId, Crc32cOfTheFile) {
    test::TempDir dir;
    {
        std::ofstream f(dir.path("nvme_tcp"), std::ios::binary);
        f << "123456789";
    }
    std::string err;
    EXPECT_EQ(module_btf_id("nvme_tcp", dir.root().string(), &err), 0xe3069283u);
    EXPECT_EQ(err, "");
    {
        std::ofstream f(dir.path("nvme_tcp"), std::ios::binary);
        f << "123456780";  // one byte changed: another identity
    }
    EXPECT_NE(module_btf_id("nvme_tcp", dir.root().string()), 0xe3069283u);
}

TEST(ModuleBtfId, MissingOrEmptyFileIsAClearError) {
    test::TempDir dir;
    std::string err;
    EXPECT_EQ(module_btf_id("nvmet_tcp", dir.root().string(), &err), std::nullopt);
    EXPECT_NE(err.find("cannot read module BTF " + dir.path("nvmet_tcp")), std::string::npos)
        << err;
    EXPECT_NE(err.find("module not loaded"), std::string::npos) << err;
    std::ofstream(dir.path("nvmet_tcp")).close();
    EXPECT_EQ(module_btf_id("nvmet_tcp", dir.root().string(), &err), std::nullopt);
    EXPECT_EQ(err, "module BTF " + dir.path("nvmet_tcp") + " is empty");
}

}  // namespace
}  // namespace nvmetrace
