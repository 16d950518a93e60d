// nvmetrace script over recordings written here in the real file format: one
// line per record in order, the fields as the record has them, the filters,
// JSON lines, and what a bad filter or a cut-off file says.
#include "cmd/script.h"

#include "format/recfile_helpers.h"
#include "util/error.h"

#include <stdio.h>

#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint32_t kDev0 = 259u << 20;

RecordingMeta meta(const std::string& role) {
    RecordingMeta m = rectest::test_meta();
    m.role = role;
    m.start_monotonic_ns = 1'000'000'000;
    m.devices = nlohmann::json::array({
        {{"kind", "disk"}, {"dev", kDev0}, {"name", "nvme0n1"}, {"lbs", 512}},
        {{"kind", "target_ns"}, {"nsid", 1}, {"device_path", "/dev/nullb0"}, {"lbs", 512}},
    });
    return m;
}

nvmetrace_rec rec(uint64_t ts, uint16_t event, uint64_t lba, uint8_t flags = 0) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.event = event;
    r.lba = lba;
    r.dev = kDev0;
    r.len = 4096;
    r.qid = 3;
    r.cid = 0x1007;
    r.tag = 7;
    r.opcode = 0x02;
    r.flags = flags;
    return r;
}

// Runs script on opts; returns what it printed, lines apart.
std::vector<std::string> run(const ScriptOptions& opts, int* rc = nullptr) {
    char* buf = nullptr;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    int r = run_script(opts, f);
    fclose(f);
    if (rc)
        *rc = r;
    std::vector<std::string> lines;
    std::istringstream in(std::string(buf, len));
    free(buf);
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    return lines;
}

class ScriptTest : public ::testing::Test {
protected:
    void SetUp() override {
        host_ = dir_.path("host.ntr");
        RecordingWriter w = RecordingWriter::open(host_, {});
        w.write_meta(meta("host"));
        recs_ = {
            rec(1'000'100'000, NVMETRACE_EV_BIO_QUEUE, 800),
            rec(1'000'200'000, NVMETRACE_EV_NVME_SETUP, 800,
                NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID),
            rec(2'500'000'000, NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_NO_LBA,
                NVMETRACE_REC_HAS_QID | NVMETRACE_REC_HAS_CID),
        };
        recs_[2].aux = 6;  // a status
        w.append(recs_);
        w.close({});
    }
    rectest::TempDir dir_;
    std::string host_;
    std::vector<nvmetrace_rec> recs_;
};

TEST_F(ScriptTest, OneLinePerRecordInOrder) {
    auto lines = run({.files = {host_}});
    ASSERT_EQ(lines.size(), 5u);  // what the file is, the columns, three records
    EXPECT_THAT(lines[0], HasSubstr("host.ntr: host on"));
    EXPECT_THAT(lines[0], HasSubstr("1 of 16 commands sampled"));
    EXPECT_THAT(lines[1], StartsWith("#"));
    EXPECT_THAT(lines[1], HasSubstr("event"));
    EXPECT_THAT(lines[1], HasSubstr("time (s)   cpu role"));
    // time since the start, role, META's event name, the device's name
    EXPECT_THAT(lines[2], StartsWith("      0.000100000     - host   bio_queue"));
    EXPECT_THAT(lines[2], HasSubstr("nvme0n1"));
    EXPECT_THAT(lines[3], StartsWith("      0.000200000     - host   nvme_setup"));
    EXPECT_THAT(lines[4], StartsWith("      1.500000000     - host   nvme_complete"));
}

TEST_F(ScriptTest, UnknownFieldsAreDashes) {
    auto lines = run({.files = {host_}});
    // bio_queue: no queue id, no command id yet
    EXPECT_THAT(lines[2], HasSubstr("nvme0n1       -      -     7 R            800     4096 0"));
    EXPECT_THAT(lines[3], HasSubstr("nvme0n1       3   4103     7 R            800     4096 0"));
    // a completion without an LBA; its aux is the status
    EXPECT_THAT(lines[4], HasSubstr("3   4103     7 R              -     4096 6"));
}

TEST_F(ScriptTest, FiltersByEventAndWindow) {
    auto lines = run({.files = {host_}, .events = {"nvme_setup", "nvme_complete"}});
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_THAT(lines[2], HasSubstr("nvme_setup"));
    EXPECT_THAT(lines[3], HasSubstr("nvme_complete"));
    lines = run({.files = {host_}, .from_s = 0.00015, .to_s = 1.0});
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_THAT(lines[2], HasSubstr("nvme_setup"));
    lines = run({.files = {host_}, .from_s = 1.0});
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_THAT(lines[2], HasSubstr("nvme_complete"));
}

TEST_F(ScriptTest, FiltersByDevice) {
    nvmetrace_rec other = rec(1'000'300'000, NVMETRACE_EV_BIO_QUEUE, 16);
    other.dev = kDev0 + 1;  // a disk the META does not name
    const std::string path = dir_.path("two.ntr");
    RecordingWriter w = RecordingWriter::open(path, {});
    w.write_meta(meta("host"));
    std::vector<nvmetrace_rec> recs = {recs_[0], other};
    w.append(recs);
    w.close({});
    auto lines = run({.files = {path}});
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_THAT(lines[3], HasSubstr("dev 259:1"));
    lines = run({.files = {path}, .devices = {"nvme0n1"}});
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_THAT(lines[2], HasSubstr("nvme0n1"));
}

TEST_F(ScriptTest, TargetRecordsNameTheirNamespace) {
    const std::string path = dir_.path("target.ntr");
    RecordingWriter w = RecordingWriter::open(path, {});
    w.write_meta(meta("target"));
    nvmetrace_rec r = rec(1'000'000'500, NVMETRACE_EV_NVMET_INIT, 800, NVMETRACE_REC_HAS_QID);
    r.dev = 0;
    r.aux = 1;  // nvmet_req_init's aux is the namespace id
    nvmetrace_rec done = r;
    done.ts += 1000;
    done.event = NVMETRACE_EV_NVMET_COMPLETE;
    done.aux = 0;
    std::vector<nvmetrace_rec> recs = {r, done};
    w.append(recs);
    w.close({});
    auto lines = run({.files = {path}});
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_THAT(lines[2], StartsWith("      0.000000500     - target nvmet_init"));
    EXPECT_THAT(lines[2], HasSubstr("nullb0"));
    // the other target records name no device
    EXPECT_THAT(lines[3], StartsWith("      0.000001500     - target nvmet_complete -"));
    lines = run({.files = {path}, .devices = {"nullb0"}});
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_THAT(lines[2], HasSubstr("nvmet_init"));
}

TEST_F(ScriptTest, EventsOlderMetaDoesNotNameAreNamed) {
    RecordingMeta m = meta("host");
    m.events.erase(NVMETRACE_EV_TCP_CMD_SEND);
    m.events.erase(NVMETRACE_EV_BIO_QUEUE);
    const std::string path = dir_.path("old.ntr");
    RecordingWriter w = RecordingWriter::open(path, {});
    w.write_meta(m);
    std::vector<nvmetrace_rec> recs = {rec(1'000'000'100, NVMETRACE_EV_TCP_CMD_SEND, 8),
                                       rec(1'000'000'200, 250, 8)};
    w.append(recs);
    w.close({});
    auto lines = run({.files = {path}});
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_THAT(lines[2], HasSubstr("host   tcp_cmd_send"));
    EXPECT_THAT(lines[3], HasSubstr("host   event250"));  // one this build does not know
}

TEST_F(ScriptTest, JsonLines) {
    auto lines = run({.files = {host_}, .json = true});
    ASSERT_EQ(lines.size(), 3u);
    const auto a = nlohmann::json::parse(lines[0]);
    EXPECT_EQ(a.at("event"), "bio_queue");
    EXPECT_EQ(a.at("ts"), 1'000'100'000u);
    EXPECT_EQ(a.at("device"), "nvme0n1");
    EXPECT_TRUE(a.at("qid").is_null());
    EXPECT_TRUE(a.at("cid").is_null());
    EXPECT_EQ(a.at("lba"), 800u);
    EXPECT_EQ(a.at("len"), 4096u);
    const auto c = nlohmann::json::parse(lines[2]);
    EXPECT_EQ(c.at("qid"), 3);
    EXPECT_EQ(c.at("cid"), 0x1007);
    EXPECT_TRUE(c.at("lba").is_null());
    EXPECT_EQ(c.at("aux"), 6u);
    EXPECT_EQ(c.at("file"), host_);
    // a recording that does not say which CPU
    EXPECT_TRUE(a.at("cpu").is_null());
}

// Records written with the CPU the recorder drained them from: the column
// after the time, "cpu" in JSON, and --cpu.
TEST_F(ScriptTest, CpuColumnFromTheRecording) {
    const std::string path = dir_.path("cpus.ntr");
    RecordingWriter w = RecordingWriter::open(path, {});
    w.write_meta(meta("host"));
    const std::span<const nvmetrace_rec> all(recs_);
    w.append(3, all.first(2));
    w.append(12, all.subspan(2));
    nvmetrace_rec g{};  // a gap marker, from the ring of CPU 3
    g.event = NVMETRACE_EV_GAP;
    g.ts = 2'600'000'000;
    g.lba = 2'550'000'000;
    g.aux = 9;
    g.dev = 3;
    w.append(3, std::span(&g, 1));
    w.append(all.first(1));  // one whose CPU is not known
    w.close({});

    auto lines = run({.files = {path}});
    ASSERT_EQ(lines.size(), 7u);
    EXPECT_THAT(lines[2], StartsWith("      0.000100000 [003] host   bio_queue"));
    EXPECT_THAT(lines[3], StartsWith("      0.000200000 [003] host   nvme_setup"));
    EXPECT_THAT(lines[4], StartsWith("      1.500000000 [012] host   nvme_complete"));
    EXPECT_EQ(lines[5],
              "      1.600000000 [003] gap cpu 3: 9 records dropped between 1.550000000 and "
              "1.600000000");
    EXPECT_THAT(lines[6], StartsWith("      0.000100000     - host   bio_queue"));

    lines = run({.files = {path}, .json = true});
    ASSERT_EQ(lines.size(), 5u);
    const std::vector<nlohmann::json> want = {3, 3, 12, 3, nullptr};
    for (size_t i = 0; i < lines.size(); i++)
        EXPECT_EQ(nlohmann::json::parse(lines[i]).at("cpu"), want[i]) << i;

    lines = run({.files = {path}, .cpus = {12}});
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_THAT(lines[2], HasSubstr("[012] host   nvme_complete"));
    lines = run({.files = {path}, .cpus = {3, 7}, .json = true});
    ASSERT_EQ(lines.size(), 3u);
    for (const auto& l : lines)
        EXPECT_EQ(nlohmann::json::parse(l).at("cpu"), 3);
    // records of no known CPU match no --cpu
    EXPECT_EQ(run({.files = {host_}, .cpus = {0}}).size(), 2u);
}

TEST(ScriptCpuList, ParsesListsAndRanges) {
    EXPECT_EQ(parse_cpu_list("3"), (std::vector<uint32_t>{3}));
    EXPECT_EQ(parse_cpu_list("8,0-3,2"), (std::vector<uint32_t>{0, 1, 2, 3, 8}));
    for (const char* bad : {"", "a", "1,", "-1", "3-1", "1-2-3", "0-99999999", " 1", "1.5"})
        EXPECT_THROW(parse_cpu_list(bad), Error) << bad;
}

// The ring's GAP marker is said in words, in text and in JSON.
TEST_F(ScriptTest, GapMarkerSaysWhereRecordsWereDropped) {
    const std::string path = dir_.path("gap.ntr");
    RecordingWriter w = RecordingWriter::open(path, {});
    w.write_meta(meta("host"));
    nvmetrace_rec g{};
    g.event = NVMETRACE_EV_GAP;
    g.ts = 1'400'000'000;   // the last dropped record
    g.lba = 1'200'000'000;  // the first
    g.aux = 127;
    g.dev = 3;
    std::vector<nvmetrace_rec> recs = {recs_[0], g, recs_[2]};
    w.append(recs);
    w.close({});

    auto lines = run({.files = {path}});
    ASSERT_EQ(lines.size(), 5u);
    EXPECT_EQ(lines[3],
              "      0.400000000     - gap cpu 3: 127 records dropped between 0.200000000 and "
              "0.400000000");
    EXPECT_THAT(lines[4], HasSubstr("nvme_complete"));
    // the filter knows the event by its META name
    EXPECT_EQ(run({.files = {path}, .events = {"gap"}}).size(), 3u);

    const auto j = nlohmann::json::parse(run({.files = {path}, .json = true})[1]);
    EXPECT_EQ(j.at("event"), "gap");
    EXPECT_EQ(j.at("gap").at("cpu"), 3u);
    EXPECT_EQ(j.at("gap").at("records"), 127u);
    EXPECT_EQ(j.at("gap").at("first_ts"), 1'200'000'000u);
    EXPECT_EQ(j.at("gap").at("last_ts"), 1'400'000'000u);
}

TEST_F(ScriptTest, BadFiltersSayWhatThereIs) {
    try {
        run({.files = {host_}, .events = {"no_such_event"}});
        FAIL() << "an unknown event was accepted";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("no event 'no_such_event'"));
        EXPECT_THAT(e.what(), HasSubstr("bio_queue"));
    }
    try {
        run({.files = {host_}, .devices = {"nvme9n9"}});
        FAIL() << "an unknown device was accepted";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("no device 'nvme9n9'"));
        EXPECT_THAT(e.what(), HasSubstr("nvme0n1"));
    }
    EXPECT_THROW(run({.files = {host_}, .from_s = 2, .to_s = 1}), Error);
    EXPECT_THROW(run({.files = {}}), Error);
}

TEST_F(ScriptTest, CutOffFilePrintsWhatCameBefore) {
    // a recorder killed: no trailer, the last block half written
    std::string data = rectest::slurp(host_);
    const std::string path = dir_.path("cut.ntr");
    auto blocks = rectest::walk_blocks(data);
    ASSERT_GE(blocks.size(), 3u);
    rectest::spit(path, data.substr(0, blocks.back().offset));  // the trailer gone
    int rc = -1;
    auto lines = run({.files = {path}}, &rc);
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(lines.size(), 5u);
}

}  // namespace
}  // namespace nvmetrace
