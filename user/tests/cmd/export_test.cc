// nvmetrace export over synthetic recordings (tests/synth.h): a host's and a
// target's at a queue depth over one, joined, written as a trace-event file
// and read back: its format, slices that nest on every track, stages inside
// their command, components that add up to it, and the target part of a
// joined command on a target track inside the host command's span.
#include "cmd/export.h"

#include "synth.h"
#include "tempdir.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace nvmetrace {
namespace {

using ::testing::HasSubstr;

// Runs export; returns what it said on stderr.
std::string run(const ExportOptions& opts, int* rc = nullptr) {
    char* buf = nullptr;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    int r = -1;
    try {
        r = run_export(opts, f);
    } catch (...) {
        fclose(f);
        free(buf);
        throw;
    }
    fclose(f);
    std::string said(buf, len);
    free(buf);
    if (rc)
        *rc = r;
    return said;
}

nlohmann::json load(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

// A time of the format (microseconds) as integral ns.
int64_t ns(const nlohmann::json& v) {
    return std::llround(v.get<double>() * 1000);
}

// Where slice E ends, in ns: ts + dur is exact in the file (multiples of
// 1/1024 us), each of them rounded to ns apart is not.
int64_t end_ns(const nlohmann::json& e) {
    return std::llround((e["ts"].get<double>() + e["dur"].get<double>()) * 1000);
}

std::pair<int, int> track(const nlohmann::json& e) {
    return {e["pid"].get<int>(), e["tid"].get<int>()};
}

int level(const std::string& cat) {
    return cat == "stage" ? 1 : cat == "component" ? 2 : 0;
}

struct Slice {
    size_t index;  // in traceEvents
    int64_t ts, end;
    int level;
    long parent = -1;  // index of the enclosing slice on its track
};

// Every X slice with its parent on its (pid, tid); fails the test on a
// partial overlap.
std::vector<Slice> nest(const nlohmann::json& events) {
    std::map<std::pair<int, int>, std::vector<Slice>> tracks;
    for (size_t i = 0; i < events.size(); i++) {
        const auto& e = events[i];
        if (e["ph"] != "X")
            continue;
        const int64_t ts = ns(e["ts"]);
        tracks[track(e)].push_back({i, ts, end_ns(e), level(e["cat"].get<std::string>())});
    }
    std::vector<Slice> all;
    for (auto& [key, slices] : tracks) {
        std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
            return std::tuple(a.ts, -a.end, a.level) < std::tuple(b.ts, -b.end, b.level);
        });
        std::vector<Slice> stack;
        for (Slice s : slices) {
            // past the one on top (one of the same zero-length span holds it)
            while (!stack.empty() && (stack.back().end < s.ts ||
                                      (stack.back().end == s.ts && stack.back().ts < s.ts)))
                stack.pop_back();
            if (!stack.empty()) {
                EXPECT_LE(s.end, stack.back().end)
                    << "partial overlap on pid " << key.first << " tid " << key.second << ": "
                    << events[s.index].dump() << " and " << events[stack.back().index].dump();
                s.parent = static_cast<long>(stack.back().index);
            }
            stack.push_back(s);
            all.push_back(s);
        }
    }
    return all;
}

class ExportTest : public ::testing::Test {
protected:
    void SetUp() override {
        host_ = dir_ / "h.ntr";
        target_ = dir_ / "t.ntr";
        o_.commands = 300;
        o_.queues = 2;
        o_.depth = 16;
        o_.interval_ns = 10'000;  // a queue's command every 20 us, each ~75 us: QD ~4
        synth::write(host_, target_, o_);
    }
    test::TempDir dir_{"nvmetrace-export"};
    synth::Options o_;
    std::string host_, target_;
};

TEST_F(ExportTest, JoinedPairIsAValidNestedTrace) {
    const std::string out = dir_ / "pair.trace.json";
    int rc = -1;
    const std::string said = run({.files = {host_, target_}, .output = out}, &rc);
    EXPECT_EQ(rc, 0);
    EXPECT_THAT(said, HasSubstr("300 commands (300 joined)"));

    // (a) the format
    const nlohmann::json t = load(out);
    ASSERT_TRUE(t.is_object());
    EXPECT_EQ(t["displayTimeUnit"], "ns");
    ASSERT_TRUE(t["metadata"].is_object());
    EXPECT_EQ(t["metadata"]["joined"], true);
    EXPECT_EQ(t["metadata"]["join"]["matched"], 300);
    const nlohmann::json& ev = t["traceEvents"];
    ASSERT_TRUE(ev.is_array());
    std::map<int, std::string> process;
    std::map<std::pair<int, int>, std::string> thread;
    for (const auto& e : ev) {
        ASSERT_TRUE(e["pid"].is_number_integer()) << e.dump();
        ASSERT_TRUE(e["tid"].is_number_integer()) << e.dump();
        if (e["ph"] == "M") {
            const std::string n = e["name"];
            ASSERT_TRUE(n == "process_name" || n == "thread_name" || n == "process_sort_index" ||
                        n == "thread_sort_index")
                << n;
            if (n == "process_name")
                process[e["pid"].get<int>()] = e["args"]["name"];
            if (n == "thread_name")
                thread[track(e)] = e["args"]["name"];
            continue;
        }
        ASSERT_EQ(e["ph"], "X") << e.dump();
        ASSERT_TRUE(e.contains("name") && e.contains("cat") && e.contains("args")) << e.dump();
        ASSERT_TRUE(e["name"].is_string() && e["cat"].is_string() && e["args"].is_object());
        ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number()) << e.dump();
        EXPECT_GE(e["ts"].get<double>(), 0);
        EXPECT_GE(e["dur"].get<double>(), 0);
        ASSERT_TRUE(thread.contains(track(e))) << "a slice before its thread's name";
    }
    ASSERT_EQ(process.size(), 2u);
    EXPECT_THAT(process[1], HasSubstr("host synth-host"));
    EXPECT_THAT(process[2], HasSubstr("target synth-target"));
    // sub-tracks: several commands of one queue overlap
    EXPECT_TRUE(std::any_of(thread.begin(), thread.end(),
                            [](const auto& kv) { return kv.second == "nvme0n1 q1 #2"; }));
    EXPECT_TRUE(std::any_of(thread.begin(), thread.end(),
                            [](const auto& kv) { return kv.second == "target q2 (cntlid 1) #2"; }));

    // (b) nesting on every track, (c) stages in their command, components in a stage
    const std::vector<Slice> slices = nest(ev);
    std::map<long, const Slice*> by_index;
    for (const Slice& s : slices)
        by_index[static_cast<long>(s.index)] = &s;
    std::map<size_t, int64_t> component_sum;  // command or target part -> its components
    std::map<std::string, size_t> commands;   // name -> index
    size_t targets = 0;
    for (const Slice& s : slices) {
        const auto& e = ev[s.index];
        const std::string cat = e["cat"];
        if (cat == "command") {
            EXPECT_EQ(s.parent, -1) << e.dump();
            EXPECT_TRUE(commands.emplace(e["name"].get<std::string>(), s.index).second)
                << "two of " << e["name"];
            EXPECT_EQ(e["args"]["view"], "joined");
            EXPECT_TRUE(e["args"]["cid"].is_number());
            EXPECT_EQ(e["args"]["group"], "read 4KiB nvme0n1");
        } else if (cat == "command.target") {
            EXPECT_EQ(s.parent, -1);
            targets++;
        } else if (cat == "stage") {
            ASSERT_GE(s.parent, 0) << e.dump();
            EXPECT_THAT(ev[static_cast<size_t>(s.parent)]["cat"].get<std::string>(),
                        HasSubstr("command"));
        } else {
            ASSERT_EQ(cat, "component");
            ASSERT_GE(s.parent, 0) << e.dump();
            const Slice* stage = by_index.at(s.parent);
            EXPECT_EQ(ev[stage->index]["cat"], "stage");
            EXPECT_EQ(ev[stage->index]["name"], e["args"]["stage"]);
            component_sum[static_cast<size_t>(stage->parent)] += s.end - s.ts;
        }
    }
    EXPECT_EQ(commands.size(), 300u);
    EXPECT_EQ(targets, 300u);

    // (d) a command's components, on its host track and its target part's,
    // add up to its slice; (e) the target part is on a target track inside it
    for (const Slice& s : slices) {
        const auto& e = ev[s.index];
        if (e["cat"] != "command.target")
            continue;
        const std::string host_name = e["args"]["host_command"];
        ASSERT_TRUE(commands.contains(host_name));
        const size_t h = commands[host_name];
        const auto& he = ev[h];
        EXPECT_THAT(process[e["pid"].get<int>()], HasSubstr("target"));
        EXPECT_THAT(thread[track(e)], ::testing::StartsWith(fmt::format(
                                          "target q{} ", he["args"]["qid"].get<int>())));
        const int64_t hts = ns(he["ts"]), hend = end_ns(he);
        EXPECT_GE(s.ts, hts);
        EXPECT_LE(s.end, hend);
        EXPECT_LT(s.ts, s.end);
        EXPECT_EQ(component_sum[h] + component_sum[s.index], hend - hts) << he.dump();
        // the target part: network before it, network and host after it
        EXPECT_GT(s.ts, hts);
        EXPECT_LT(s.end, hend);
    }
}

TEST_F(ExportTest, HostAloneIsOnItsOwnTracks) {
    const std::string out = dir_ / "h.json";
    run({.files = {host_}, .output = out});
    const nlohmann::json t = load(out);
    EXPECT_EQ(t["metadata"]["joined"], false);
    size_t commands = 0;
    for (const auto& e : t["traceEvents"]) {
        if (e["ph"] == "X" && e["cat"] == "command") {
            commands++;
            EXPECT_EQ(e["args"]["view"], "host");
        }
        // metadata events have no "cat": a const json's [] of a missing key is undefined
        EXPECT_NE(e.value("cat", ""), "command.target");
    }
    EXPECT_EQ(commands, 300u);
    nest(t["traceEvents"]);
}

TEST_F(ExportTest, NoJoinPutsEachFileOnItsOwnClock) {
    const std::string out = dir_ / "apart.json";
    run({.files = {host_, target_}, .output = out, .no_join = true});
    const nlohmann::json t = load(out);
    std::map<std::string, size_t> views;
    for (const auto& e : t["traceEvents"])
        if (e["ph"] == "X" && e["cat"] == "command")
            views[e["args"]["view"]]++;
    EXPECT_EQ(views["host"], 300u);
    EXPECT_EQ(views["target"], 300u);
    EXPECT_EQ(views["joined"], 0u);
    nest(t["traceEvents"]);
}

TEST_F(ExportTest, NoCompleteCommandsIsOnlyMetadata) {
    const std::string empty = dir_ / "empty.ntr";
    RecordingWriter w = RecordingWriter::open(empty, {});
    w.write_meta(synth::meta_for(o_, true, o_.host_start_ns));
    w.close();
    const std::string out = dir_ / "empty.json";
    const std::string said = run({.files = {empty}, .output = out});
    EXPECT_THAT(said, HasSubstr("no complete commands"));
    const nlohmann::json t = load(out);
    ASSERT_TRUE(t["traceEvents"].is_array());
    ASSERT_FALSE(t["traceEvents"].empty());
    for (const auto& e : t["traceEvents"])
        EXPECT_EQ(e["ph"], "M");
    EXPECT_EQ(t["metadata"]["counts"]["commands"], 0);
}

// A request that failed over (block_rq_complete with no bytes left) is on the
// timeline as such, and the request that sent its bio again says so.
TEST_F(ExportTest, FailedOverRequestIsNamedAndItsRetryCounted) {
    const std::string rec = dir_ / "failover.ntr";
    RecordingWriter w = RecordingWriter::open(rec, {});
    w.write_meta(synth::meta_for(o_, true, o_.host_start_ns));
    std::vector<nvmetrace_rec> recs;
    auto h = [&](uint16_t ev, uint64_t dt, uint16_t tag, uint16_t cid, uint32_t len = 4096) {
        recs.push_back(
            synth::host_record(ev, o_.host_start_ns + 1'000'000 + dt, 64, 1, tag, cid, len));
    };
    h(NVMETRACE_EV_BIO_QUEUE, 0, 0, 0);
    h(NVMETRACE_EV_NVME_SETUP, 1000, 3, 3);
    h(NVMETRACE_EV_RQ_ISSUE, 2000, 3, 3);
    h(NVMETRACE_EV_NVME_COMPLETE, 2'000'000, 3, 3);
    h(NVMETRACE_EV_RQ_COMPLETE, 2'001'000, 3, 3, 0);  // its bio taken back
    h(NVMETRACE_EV_NVME_SETUP, 9'000'000, 5, 5);
    h(NVMETRACE_EV_RQ_ISSUE, 9'001'000, 5, 5);
    h(NVMETRACE_EV_NVME_COMPLETE, 9'050'000, 5, 5);
    h(NVMETRACE_EV_RQ_COMPLETE, 9'051'000, 5, 5);
    w.append(recs);
    w.close();
    const std::string out = dir_ / "failover.json";
    run({.files = {rec}, .output = out});
    const nlohmann::json t = load(out);
    std::vector<nlohmann::json> commands;
    for (const auto& e : t["traceEvents"])
        if (e["ph"] == "X" && e["cat"] == "command")
            commands.push_back(e);
    ASSERT_EQ(commands.size(), 2u);
    EXPECT_THAT(commands[0]["name"].get<std::string>(), HasSubstr("(failed over)"));
    EXPECT_EQ(commands[0]["args"]["failed_over"], true);
    EXPECT_FALSE(commands[1]["args"].contains("failed_over"));
    EXPECT_EQ(commands[1]["args"]["attempts_before"], 1);
    // the I/O is timed from its bio, before the request that failed over
    EXPECT_LT(commands[1]["ts"].get<double>(), commands[0]["ts"].get<double>() + 1);
    nest(t["traceEvents"]);
}

TEST_F(ExportTest, MissingOrBadRecordingNamesTheFileAndWritesNothing) {
    const std::string out = dir_ / "bad.json";
    try {
        run({.files = {dir_ / "nope.ntr"}, .output = out});
        FAIL() << "a missing recording was accepted";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("nope.ntr"));
    }
    const std::string junk = dir_ / "junk.ntr";
    std::ofstream(junk) << "not a recording\n";
    EXPECT_THROW(run({.files = {host_, junk}, .output = out}), Error);
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_FALSE(std::filesystem::exists(out + ".part"));
    EXPECT_THROW(run({.files = {}}), Error);
}

TEST(ExportPath, DefaultIsTheFirstRecordingsName) {
    EXPECT_EQ(default_export_path("/tmp/x/run1.ntr"), "run1.trace.json");
    EXPECT_EQ(default_export_path("run2"), "run2.trace.json");
    EXPECT_EQ(default_export_path("a.b.ntr"), "a.b.trace.json");
}

}  // namespace
}  // namespace nvmetrace
