#include "cmd/status.h"

#include "version.h"

#include <linux/nvmetrace.h>

#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using ::testing::HasSubstr;

ModuleVersion sample_version() {
    return {.abi_version = NVMETRACE_ABI_VERSION, .module_version = "0.1.0", .ring_version = 1};
}

Status sample_status() {
    return {
        .state = State::kRecording,
        .rings = {.nr_rings = 4, .nr_recs = 4096, .map_size = 200704, .rec_size = 48},
        .records = 123456789012ull,
        .lost = 7,
    };
}

TEST(Status, JsonHasOneKeyPerValue) {
    const nlohmann::json j = status_json(sample_version(), sample_status());
    EXPECT_EQ(j.at("tool_version"), kToolVersion);
    EXPECT_EQ(j.at("tool_abi_version"), NVMETRACE_ABI_VERSION);
    EXPECT_EQ(j.at("module_version"), "0.1.0");
    EXPECT_EQ(j.at("abi_version"), NVMETRACE_ABI_VERSION);
    EXPECT_EQ(j.at("ring_version"), 1);
    EXPECT_EQ(j.at("state"), "recording");
    EXPECT_EQ(j.at("rings"), 4);
    EXPECT_EQ(j.at("ring_records"), 4096);
    EXPECT_EQ(j.at("ring_map_size"), 200704);
    EXPECT_EQ(j.at("record_size"), 48);
    EXPECT_EQ(j.at("records"), 123456789012ull);
    EXPECT_EQ(j.at("lost"), 7);
    EXPECT_EQ(j.at("schema"), "nvmetrace.status/1");
    EXPECT_EQ(j.size(), 13u);
}

TEST(Status, TextIsOneAlignedRowPerValue) {
    const std::string text = status_text(sample_version(), sample_status());
    EXPECT_THAT(text, HasSubstr("module   0.1.0\n"));
    EXPECT_THAT(text, HasSubstr(fmt::format("abi      {}\n", NVMETRACE_ABI_VERSION)));
    EXPECT_THAT(text, HasSubstr("state    recording\n"));
    EXPECT_THAT(text, HasSubstr("rings    4 x 4096 records of 48 bytes (196 KiB per ring)\n"));
    EXPECT_THAT(text, HasSubstr("records  123456789012\n"));
    EXPECT_THAT(text, HasSubstr("lost     7\n"));
}

TEST(Status, TextFlagsAnAbiMismatch) {
    ModuleVersion v = sample_version();
    v.abi_version = NVMETRACE_ABI_VERSION + 1;
    EXPECT_THAT(status_text(v, sample_status()), HasSubstr("versions do not match"));
}

}  // namespace
}  // namespace nvmetrace
