// Tests of src/util/json_num.{h,cc}, and of the META and TRAILER readers
// (format/recfile.cc) that go through them: a number out of range, a float or
// a negative count, a null device entry or a deep nest is named, never cast.
#include "util/json_num.h"

#include "format/recfile.h"
#include "util/error.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string error_of(auto&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(JsonInt, TakesIntegersThatFit) {
    EXPECT_EQ(json_int<uint32_t>(json(4294967295u), "x"), 4294967295u);
    EXPECT_EQ(json_int<int64_t>(json(-5), "x"), -5);
    EXPECT_EQ(json_int<uint16_t>(json(0), "x"), 0);
    EXPECT_EQ(json_int<uint64_t>(json(18446744073709551615ull), "x"), 18446744073709551615ull);
}

TEST(JsonInt, NamesWhatDoesNotFit) {
    EXPECT_THAT(error_of([] { (void)json_int<uint32_t>(json(10000000000ll), "META.sample"); }),
                HasSubstr("META.sample: 10000000000 is out of range (0 to 4294967295)"));
    EXPECT_THAT(error_of([] { (void)json_int<uint32_t>(json(-1), "META.sample"); }),
                HasSubstr("META.sample: -1 is out of range"));
    EXPECT_THAT(error_of([] { (void)json_int<int64_t>(json(18446744073709551615ull), "t"); }),
                HasSubstr("t: 18446744073709551615 is out of range"));
    EXPECT_THAT(error_of([] { (void)json_int<uint16_t>(json(65536), "c"); }),
                HasSubstr("out of range (0 to 65535)"));
}

TEST(JsonInt, RefusesFloatsStringsAndNulls) {
    EXPECT_THAT(error_of([] { (void)json_int<uint32_t>(json(1e10), "META.sample"); }),
                HasSubstr("META.sample: 10000000000.0 is not an integer"));
    EXPECT_THAT(error_of([] { (void)json_int<uint32_t>(json(2.5), "x"); }),
                HasSubstr("is not an integer"));
    EXPECT_THAT(error_of([] { (void)json_int<uint32_t>(json("7"), "x"); }),
                HasSubstr("x: \"7\" is not an integer"));
    EXPECT_THAT(error_of([] { (void)json_int<uint32_t>(json(true), "x"); }),
                HasSubstr("is not an integer"));
}

TEST(JsonIntOr, FallsBackOnlyWhenAbsent) {
    const json o = {{"a", 3}, {"n", nullptr}, {"f", 1.5}};
    EXPECT_EQ(json_int_or<uint32_t>(o, "a", 9, "W"), 3u);
    EXPECT_EQ(json_int_or<uint32_t>(o, "missing", 9, "W"), 9u);
    EXPECT_EQ(json_int_or<uint32_t>(o, "n", 9, "W"), 9u);
    EXPECT_THAT(error_of([&] { (void)json_int_or<uint32_t>(o, "f", 9, "W"); }),
                HasSubstr("W.f: 1.5 is not an integer"));
}

TEST(JsonDepth, CountsBracketsOutsideStrings) {
    EXPECT_NO_THROW(check_json_depth(R"({"a": [1, {"b": "[[[[[[[[[["}]})", 3, "M"));
    EXPECT_NO_THROW(check_json_depth(R"({"a": "\"[[[[[[\\"})", 1, "M"));
    EXPECT_THAT(error_of([] { check_json_depth("[[[[1]]]]", 3, "META"); }),
                HasSubstr("META: nested deeper than 3 levels (at byte 3)"));
    const std::string deep(100000, '[');
    EXPECT_THAT(error_of([&] { check_json_depth(deep, 64, "META"); }),
                HasSubstr("nested deeper than 64 levels"));
}

json good_meta() {
    return meta_to_json(make_recording_meta());
}

TEST(MetaFromJson, OutOfRangeNumbersAreNamed) {
    json m = good_meta();
    m["sample"] = 1e10;
    EXPECT_THAT(error_of([&] { (void)meta_from_json(m); }),
                HasSubstr("META.sample: 10000000000.0 is not an integer"));
    m = good_meta();
    m["sample"] = 0;
    EXPECT_THAT(error_of([&] { (void)meta_from_json(m); }), HasSubstr("META.sample: 0"));
    m = good_meta();
    m["seed"] = -3;
    EXPECT_THAT(error_of([&] { (void)meta_from_json(m); }), HasSubstr("META.seed: -3"));
    m = good_meta();
    m["start"]["monotonic_ns"] = 1e300;
    EXPECT_THAT(error_of([&] { (void)meta_from_json(m); }), HasSubstr("META.start.monotonic_ns"));
    m = good_meta();
    m["record"]["size"] = -1;
    EXPECT_THAT(error_of([&] { (void)meta_from_json(m); }), HasSubstr("META.record.size: -1"));
}

TEST(MetaFromJson, BadDeviceEntriesAreLeftOutAndSaid) {
    json m = good_meta();
    m["devices"] = json::array({
        {{"kind", "disk"}, {"dev", 271581184}, {"name", "nvme0n1"}, {"lbs", 512}},
        nullptr,
        {{"kind", "disk"}, {"dev", 1}, {"name", "nvme1n1"}, {"lbs", 1e12}},
        {{"kind", "path"}, {"dev", 2}, {"cntlid", 70000}},
        {{"kind", 5}},
    });
    const RecordingMeta meta = meta_from_json(m);
    ASSERT_EQ(meta.devices.size(), 1u);
    EXPECT_EQ(meta.devices[0]["name"], "nvme0n1");
    ASSERT_EQ(meta.dropped_devices.size(), 4u);
    EXPECT_THAT(meta.dropped_devices[0], HasSubstr("META.devices[1]: null is not an object"));
    EXPECT_THAT(meta.dropped_devices[1], HasSubstr("META.devices[2].lbs"));
    EXPECT_THAT(meta.dropped_devices[2], HasSubstr("META.devices[3].cntlid: 70000 is out of"));
    EXPECT_THAT(meta.dropped_devices[3], HasSubstr("META.devices[4].kind: 5 is not a string"));
    EXPECT_THAT(meta.dropped_devices[0], HasSubstr("that device is left out"));
}

// A string of the file that is not UTF-8 (a hostname) would make nlohmann's
// dump() throw in the middle of a report: json_text() puts U+FFFD instead.
TEST(JsonText, BytesThatAreNotUtf8BecomeReplacementCharacters) {
    const json j = {{"hostname", std::string("ho\xffst")}, {"n", 1}};
    EXPECT_THROW((void)j.dump(), json::exception);
    EXPECT_EQ(json_text(j), "{\"hostname\":\"ho\xef\xbf\xbdst\",\"n\":1}");
    EXPECT_EQ(json_text(j, 2), "{\n  \"hostname\": \"ho\xef\xbf\xbdst\",\n  \"n\": 1\n}");
}

// META's strings of another type, and nulls, found by the recording fuzzer:
// an Error naming the key, or the default, never a JSON library exception.
TEST(MetaFromJson, StringsOfAnotherTypeAreNamed) {
    json m = good_meta();
    m["hostname"] = 5;
    EXPECT_THAT(error_of([&] { (void)meta_from_json(m); }),
                HasSubstr("META.hostname: 5 is not a string"));
    m = good_meta();
    m["command_line"] = json::array({"nvmetrace", 3});
    EXPECT_THAT(error_of([&] { (void)meta_from_json(m); }),
                HasSubstr("META.command_line: [\"nvmetrace\",3] is not a list of strings"));
    m = good_meta();
    m["kernel_release"] = nullptr;
    EXPECT_EQ(meta_from_json(m).kernel_release, "");
}

TEST(TrailerFromJson, CountsMustBeCounts) {
    EXPECT_THAT(error_of([] {
                    (void)trailer_from_json({{"lost", -1}});
                }),
                HasSubstr("TRAILER.lost: -1 is out of range"));
    EXPECT_THAT(error_of([] {
                    (void)trailer_from_json({{"duration_ns", 1.5e30}});
                }),
                HasSubstr("TRAILER.duration_ns"));
    EXPECT_THAT(error_of([] {
                    (void)trailer_from_json({{"lost_per_cpu", {1, -2}}});
                }),
                HasSubstr("TRAILER.lost_per_cpu: -2"));
    EXPECT_THAT(error_of([] {
                    (void)trailer_from_json({{"lost_per_cpu", 4}});
                }),
                HasSubstr("TRAILER.lost_per_cpu is not an array"));
    const RecordingTrailer t =
        trailer_from_json({{"records", 10}, {"lost", 2}, {"lost_per_cpu", {1, 1}}});
    EXPECT_EQ(t.records, 10u);
    EXPECT_EQ(t.lost, 2u);
    EXPECT_EQ(t.lost_per_cpu.size(), 2u);
}

}  // namespace
}  // namespace nvmetrace
