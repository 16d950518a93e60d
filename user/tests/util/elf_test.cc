// Built with -g whatever the build type (tests/CMakeLists.txt): the test
// reads its own binary's symbols and DWARF.
#include "util/elf.h"

#include "util/error.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

struct nvmetrace_elf_test_layout {
    char a;
    double b;
    unsigned short c[3];
    void* d;
};

extern "C" __attribute__((noinline, used)) int nvmetrace_elf_test_function(int x) {
    return x * 7 + 3;
}

namespace nvmetrace {
namespace {

std::string self() {
    return std::filesystem::read_symlink("/proc/self/exe").string();
}

TEST(Elf, AFunctionsFileOffsetHoldsItsCode) {
    const auto off = elf_function_offset(self(), "nvmetrace_elf_test_function");
    ASSERT_TRUE(off.has_value());
    // the bytes at that offset in the file are the function's code in memory
    std::ifstream f(self(), std::ios::binary);
    f.seekg(static_cast<std::streamoff>(*off));
    std::vector<char> code(16);
    f.read(code.data(), 16);
    ASSERT_TRUE(f.good());
    EXPECT_EQ(
        std::memcmp(code.data(), reinterpret_cast<const void*>(&nvmetrace_elf_test_function), 16),
        0);
    EXPECT_FALSE(elf_function_offset(self(), "no_such_function_here").has_value());
    EXPECT_THROW(elf_function_offset("/proc/self/status", "x"), Error);
}

TEST(Elf, AMembersOffsetFromDwarf) {
    EXPECT_EQ(dwarf_member_offset(self(), "nvmetrace_elf_test_layout", "b"),
              offsetof(nvmetrace_elf_test_layout, b));
    EXPECT_EQ(dwarf_member_offset(self(), "nvmetrace_elf_test_layout", "d"),
              offsetof(nvmetrace_elf_test_layout, d));
    EXPECT_FALSE(dwarf_member_offset(self(), "nvmetrace_elf_test_layout", "e").has_value());
    EXPECT_FALSE(dwarf_member_offset(self(), "no_such_struct", "a").has_value());
}

TEST(Elf, TheLoadersListOfAProgramsLibraries) {
    const auto objs = loaded_objects(self());
    ASSERT_GE(objs.size(), 2u);
    EXPECT_EQ(objs.front(), self());
    EXPECT_TRUE(std::any_of(objs.begin(), objs.end(), [](const std::string& o) {
        return std::filesystem::path(o).filename().string().rfind("libc.so", 0) == 0;
    }));
    EXPECT_THROW(loaded_objects("/nonexistent/program"), Error);
}

}  // namespace
}  // namespace nvmetrace
