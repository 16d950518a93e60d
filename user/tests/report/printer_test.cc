#include "report/printer.h"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);)
        out.push_back(l);
    return out;
}

bool has_line(const std::string& text, const std::string& line) {
    for (const auto& l : lines(text))
        if (l == line)
            return true;
    return false;
}

// The predecessor's live lines, verbatim.
TEST(Report, LiveHeaderMatchesTheSeed) {
    EXPECT_EQ(live_header(10'000'000'000ull, true),
              "every 10 s, per group: sampled commands, rate, latency, and each stage's share of "
              "the mean\n"
              "(*: network and target together; the target's side is not recorded)\n"
              "                                                                          host      "
              "             target\n"
              "    time  group                       n   cmds/s   mean us    p99 us   block  "
              "driver network  driver storage\n");
}

TEST(Report, LiveRowMatchesTheSeed) {
    Interval iv;
    iv.start_s = 0;
    iv.end_s = 10.0;
    IntervalRow r;
    r.label = "read 4KiB spdk-c1n1";
    r.n = 1517;
    r.rate = 15'170;
    r.mean_us = 66.08;
    r.p99_us = 73.53;
    r.share[0] = 0.001;
    r.share[1] = 0.002;
    r.share[2] = 0.997;
    r.marker[2] = '*';
    iv.rows.push_back(r);
    EXPECT_EQ(live_rows(iv),
              "   10.0s  read 4KiB spdk-c1n1      1517    15.2k     66.08     73.53      0%      "
              "0%   100%*\n");
}

GroupSummary seed_group() {
    GroupSummary g;
    g.label = "read 4KiB spdk-c1n1";
    g.n = 2999;
    g.rate = 14'995;
    g.view = View::host_only;
    g.mean_us = 66.17;
    g.p50_us = 62.98;
    g.p99_us = 73.54;
    g.p999_us = 74.13;
    g.stages = {
        {"host driver (SPDK)", StageColumn::host_driver, false, false, 0.11, 0.0017, 0.0016, 0, {}},
        {"host receive path", StageColumn::host_driver, false, false, 0.06, 0.0009, 0.0009, 0, {}},
        {"network and target (not recorded)",
         StageColumn::network,
         true,
         false,
         66.00,
         0.9974,
         0.99,
         0,
         {}}};
    g.components = {{"host block layer, submission", 0, false, 2999, 0, 0, 0, 0},
                    {"data transfer (RDMA, at the target)", 1, false, 2999, 5.39, 0.08, 5.39, 5.48},
                    {"end to end", 0, false, 2999, 66.17, 0.99, 62.98, 73.54}};
    return g;
}

// A slow or short run reads in IOPS and kB/s, not "0.0 kIOPS, 0.0 MB/s".
TEST(Report, SlowThroughputIsNotPrintedAsZero) {
    Summary s;
    s.duration_s = 6.2;
    s.throughput = {{Op::read, 1.6, 6.6e3}, {Op::write, 999.96, 999.96e3}};
    const std::string text = summary_text(s, AssemblyCounts{}, {});
    EXPECT_NE(text.find("read 1.6 IOPS, 6.6 kB/s; write 1.0 kIOPS, 1.0 MB/s"), std::string::npos)
        << text;
}

TEST(Report, SummaryMatchesTheSeed) {
    Summary s;
    s.duration_s = 20.0;
    s.sample_n = 100;
    s.throughput = {{Op::read, 14'995, 61.3e6}};
    s.groups = {seed_group()};
    AssemblyCounts counts;
    counts.records_host = 2999;
    std::string text = summary_text(s, counts, {});
    EXPECT_EQ(text,
              "=== 20.0 s, one command in 100 sampled ===\n"
              "throughput (estimated from the sampled commands): read 15.0 kIOPS, 61.3 MB/s\n"
              "\n"
              "== read 4KiB spdk-c1n1: 2999 commands sampled (from about 15.0k commands/s), host "
              "side only\n"
              "  latency (us): mean 66.17, p50 62.98, p99 73.54, p99.9 74.13\n"
              "  stage                                   mean us  share   avg QD\n"
              "  host driver (SPDK)                         0.11     0%     0.00\n"
              "  host receive path                          0.06     0%     0.00\n"
              "  network and target (not recorded)         66.00   100%     0.99  "
              "########################\n"
              "  largest: network and target (not recorded), 100 % of the latency\n"
              "\n"
              "records: 2999 host\n");
}

TEST(Report, DetailMatchesTheSeed) {
    Summary s;
    s.sample_n = 100;
    s.groups = {seed_group()};
    s.groups[0].view = View::joined;
    s.groups[0].stages[2] = {"storage (SPDK bdev, drive)",
                             StageColumn::storage,
                             false,
                             false,
                             59.27,
                             0.8957,
                             0.89,
                             0,
                             {}};
    AssemblyCounts counts;
    counts.records_host = 2999;
    counts.records_target = 4509;
    ReportOptions opts;
    opts.detail = true;
    opts.recorded_on = "madracks-gnode4 (kernel 5.15.143)";
    std::string text = summary_text(s, counts, opts);
    auto l = lines(text);
    ASSERT_GE(l.size(), 3u);
    EXPECT_EQ(l[0], "recorded on madracks-gnode4 (kernel 5.15.143), one command in 100 sampled");
    EXPECT_EQ(l[2],
              "== read 4KiB spdk-c1n1: 2999 commands sampled (from about 15.0k commands/s), all "
              "with the target's side");
    EXPECT_TRUE(has_line(text,
                         "  storage (SPDK bdev, drive)                59.27    90%     0.89  "
                         "#####################"));
    EXPECT_TRUE(has_line(text, "  largest: storage (SPDK bdev, drive), 90 % of the latency"));
    EXPECT_TRUE(
        has_line(text, "  components, in path order (L: commands in each, by Little's law)"));
    EXPECT_TRUE(has_line(text,
                         "  component                                     n      mean       L     "
                         "  p50       p99   (us)"));
    EXPECT_TRUE(has_line(text,
                         "  host block layer, submission               2999      0.00    0.00     "
                         " 0.00      0.00"));
    EXPECT_TRUE(has_line(text,
                         "    data transfer (RDMA, at the target)      2999      5.39    0.08     "
                         " 5.39      5.48"));
    EXPECT_TRUE(has_line(text,
                         "  end to end                                 2999     66.17    0.99     "
                         "62.98     73.54"));
    EXPECT_EQ(l.back(), "records: 2999 host, 4509 target");
}

TEST(Report, NotesSayWhatWasLeftOut) {
    Summary s;
    s.sample_n = 1;
    s.failed = 2;
    AssemblyCounts c;
    c.records_host = 100;
    c.cut_start = 1;
    c.cut_end = 2;
    c.lost_end = 3;
    c.bios_unmatched = 4;
    ReportOptions o;
    o.lost_host = 7;
    std::string text = summary_text(s, c, o);
    EXPECT_TRUE(has_line(text, "=== 0.0 s, every command sampled ==="));
    EXPECT_TRUE(has_line(text, "records: 100 host"));
    EXPECT_TRUE(has_line(text,
                         "lost: 7 records (the ring was full): their commands are merged or left "
                         "out as said here"));
    EXPECT_TRUE(has_line(text,
                         "incomplete: 6 commands not reported (1 without their first record, 2 "
                         "still running at the end, 3 without their last record)"));
    EXPECT_TRUE(has_line(text, "failed: 2 commands completed with an error, not reported"));
}

// The ring overflows: where, how many records, and how many commands were
// left out for them; the JSON says the same per CPU.
TEST(Report, LostLineLocatesTheOverflows) {
    Summary s;
    s.sample_n = 1;
    AssemblyCounts c;
    c.records_host = 100;
    c.lost_in_gap = 5;
    c.gaps = {
        {.cpu = 1, .first_ts = 13'200'000'000, .last_ts = 13'250'000'000, .records = 100},
        {.cpu = 3, .first_ts = 12'000'000'000, .last_ts = 12'000'400'000, .records = 7},
        {.cpu = 1, .first_ts = 13'300'000'000, .last_ts = 13'400'000'000, .records = 20},
    };
    ReportOptions o;
    o.lost_host = 127;
    o.origin_ns = 10'000'000'000;
    const std::string text = summary_text(s, c, o);
    EXPECT_TRUE(has_line(text,
                         "lost: 127 records in 3 overflows (cpu 1: 2 runs between 3.200 s and "
                         "3.400 s, cpu 3: 1 run between 2.000 s and 2.000 s); 5 commands that "
                         "overlapped them were left out"))
        << text;
    EXPECT_EQ(text.find("the ring was full"), std::string::npos) << "said once";

    const nlohmann::json j = summary_json(s, c, o);
    EXPECT_EQ(j.at("lost").at("records"), 127u);
    EXPECT_EQ(j.at("lost").at("overflows"), 3u);
    EXPECT_EQ(j.at("lost").at("commands_left_out"), 5u);
    ASSERT_EQ(j.at("lost").at("cpus").size(), 2u);
    const auto& cpu1 = j.at("lost").at("cpus")[0];
    EXPECT_EQ(cpu1.at("cpu"), 1u);
    EXPECT_EQ(cpu1.at("runs"), 2u);
    EXPECT_EQ(cpu1.at("records"), 120u);
    EXPECT_EQ(cpu1.at("first_ts"), 13'200'000'000u);
    EXPECT_EQ(cpu1.at("last_ts"), 13'400'000'000u);
    EXPECT_DOUBLE_EQ(cpu1.at("first_s").get<double>(), 3.2);
    EXPECT_EQ(j.at("commands").at("lost_in_gap"), 5u);
}

TEST(Report, CompactRate) {
    EXPECT_EQ(compact_rate(950), "950");
    EXPECT_EQ(compact_rate(15'170), "15.2k");
    EXPECT_EQ(compact_rate(1'250'000), "1.25M");
}

// From records to text: one pipeline, as `nvmetrace report` will run it.
nvmetrace_rec rec(uint16_t ev, uint64_t ts, uint16_t tag, uint64_t lba) {
    nvmetrace_rec r{};
    r.ts = ts;
    r.lba = lba;
    r.dev = 259u << 20;
    r.len = 4096;
    r.event = ev;
    r.qid = ev == NVMETRACE_EV_BIO_QUEUE ? 0 : 2;
    r.tag = ev == NVMETRACE_EV_BIO_QUEUE ? 0 : tag;
    r.opcode = 0x02;
    r.flags = ev == NVMETRACE_EV_BIO_QUEUE ? 0 : NVMETRACE_REC_HAS_QID;
    return r;
}

TEST(Report, EndToEndFromRecords) {
    DeviceTable devices;
    devices.add_disk(259u << 20, "nvme0n1", 512);
    std::vector<std::string> live;
    Stats stats(devices, {.sample_n = 100, .interval_ns = 10'000'000'000ull, .origin_ns = 1},
                [&](const Interval& iv) { live.push_back(live_rows(iv)); });
    Assembler assembler(devices, [&](const Command& c) { stats.add(c); });
    // One read every 10 ms for 20 s: 0.5 + 1.5 + 60 + 0.5 us = 62.5 us.
    uint64_t t = 1;
    for (int i = 0; i < 2000; i++, t += 10'000'000) {
        for (auto r :
             {rec(NVMETRACE_EV_BIO_QUEUE, t, 0, i), rec(NVMETRACE_EV_NVME_SETUP, t + 500, 5, i),
              rec(NVMETRACE_EV_RQ_ISSUE, t + 2000, 5, i),
              rec(NVMETRACE_EV_NVME_COMPLETE, t + 62'000, 5, i),
              rec(NVMETRACE_EV_RQ_COMPLETE, t + 62'500, 5, i)})
            assembler.push(r);
    }
    assembler.finish();
    stats.flush_interval(20'000'000'001ull);
    ASSERT_EQ(live.size(), 2u);
    EXPECT_EQ(live[0],
              "   10.0s  read 4KiB nvme0n1        1000    10.0k     62.50     62.50      2%      "
              "2%    96%*\n");
    Summary s = stats.summary(20'000'000'000ull);
    ReportOptions opts;
    opts.detail = true;
    std::string text = summary_text(s, assembler.counts(), opts);
    EXPECT_EQ(text,
              "=== 20.0 s, one command in 100 sampled ===\n"
              "throughput (estimated from the sampled commands): read 10.0 kIOPS, 41.0 MB/s\n"
              "\n"
              "== read 4KiB nvme0n1: 2000 commands sampled (from about 10.0k commands/s), host "
              "side only\n"
              "  end to end: block_bio_queue to block_rq_complete only, not what user space "
              "waits: the submission above the block layer is not recorded; the completion's "
              "way back to user space is not recorded\n"
              "  latency (us): mean 62.50, p50 62.50, p99 62.50, p99.9 62.50\n"
              "  stage                                   mean us  share   avg QD\n"
              "  host block layer                           1.00     2%     0.01\n"
              "  host driver                                1.50     2%     0.01  #\n"
              "  network and target (not recorded)         60.00    96%     0.60  "
              "#######################\n"
              "  largest: network and target (not recorded), 96 % of the latency\n"
              "  components, in path order (L: commands in each, by Little's law)\n"
              "  component                                     n      mean       L       p50    "
              "   p99   (us)\n"
              "  host block layer, submission               2000      0.50    0.01      0.50      "
              "0.50\n"
              "  host driver, submission                    2000      1.50    0.01      1.50      "
              "1.50\n"
              "  network and target (not recorded)          2000     60.00    0.60     60.00     "
              "60.00\n"
              "  host block layer, completion               2000      0.50    0.01      0.50      "
              "0.50\n"
              "  end to end                                 2000     62.50    0.62     62.50     "
              "62.50\n"
              "  tail above p99: none; no command is more than a bin's width (3.1 %) above the "
              "p99 (62.50 us)\n"
              "  tail above p99.9: none; no command is more than a bin's width (3.1 %) above the "
              "p99.9 (62.50 us)\n"
              "  per queue: end to end (us)\n"
              "  queue                       n      mean       p99\n"
              "  q2                       2000     62.50     62.50\n"
              "\n"
              "records: 10000 host\n");

    nlohmann::json j = summary_json(s, assembler.counts(), {});
    EXPECT_EQ(j["sample_n"], 100);
    EXPECT_EQ(j["groups"][0]["label"], "read 4KiB nvme0n1");
    EXPECT_EQ(j["groups"][0]["n"], 2000);
    EXPECT_DOUBLE_EQ(j["groups"][0]["latency_us"]["mean"].get<double>(), 62.5);
    EXPECT_DOUBLE_EQ(j["groups"][0]["stages"][2]["share"].get<double>(), 0.96);
    EXPECT_EQ(j["groups"][0]["components"].size(), 5u);
    // rows carry their stable ids beside the labels
    EXPECT_EQ(j["groups"][0]["stages"][2]["name"], "network and target (not recorded)");
    EXPECT_EQ(j["groups"][0]["stages"][2]["id"], "net_target.unrecorded");
    EXPECT_EQ(j["groups"][0]["components"][0]["id"], "host.block.submit");
    EXPECT_EQ(j["groups"][0]["components"][4]["id"], "e2e");
    EXPECT_EQ(j["records"]["host"], 10000);
    EXPECT_EQ(j["commands"]["reported"], 2000);
    EXPECT_DOUBLE_EQ(j["throughput"][0]["iops"].get<double>(), 10'000.0);
}

// io_uring commands whose CQE user space took from the mapped ring are a group of their own:
// its span ends at the next io_uring_enter() entry, and its reap line gives the window in
// which the CQE was taken, in the text and in JSON.
TEST(Report, RingReapedCommandsSayTheirWindow) {
    DeviceTable devices;
    devices.add_disk(259u << 20, "nvme0n1", 512);
    Stats stats(devices, {.sample_n = 1});
    auto at = [](Command& c, uint16_t ev, uint64_t ts) {
        int s = event_slot(ev);
        c.ts[s] = ts;
        c.present |= EventMask{1} << s;
    };
    for (int i = 0; i < 4; i++) {
        const uint64_t t = 1'000'000ull * (i + 1);
        Command c;
        c.side = Side::host;
        c.dev = 259u << 20;
        c.size = 4096;
        c.submit_path = SubmitPath::uring;
        at(c, NVMETRACE_EV_SYSCALL_SUBMIT, t);
        at(c, NVMETRACE_EV_FILE_SUBMIT, t + 1000);
        at(c, NVMETRACE_EV_BIO_QUEUE, t + 2000);
        at(c, NVMETRACE_EV_NVME_SETUP, t + 3000);
        at(c, NVMETRACE_EV_RQ_ISSUE, t + 4000);
        at(c, NVMETRACE_EV_NVME_COMPLETE, t + 54'000);
        at(c, NVMETRACE_EV_RQ_COMPLETE, t + 55'000);
        at(c, NVMETRACE_EV_URING_CQE, t + 56'000);
        // two handed over by the call's return 4 us later, two taken from the ring and seen
        // 100 us later, in windows of 20 and 60 us
        c.reap_ring = i >= 2;
        c.reap_window_ns = i == 2 ? 20'000 : i == 3 ? 60'000 : 0;
        at(c, NVMETRACE_EV_URING_REAP, t + (c.reap_ring ? 156'000 : 60'000));
        stats.add(c);
    }
    Summary s = stats.summary(5'000'000);
    ASSERT_EQ(s.groups.size(), 2u);
    const GroupSummary& ring = s.groups[0].span.reap_ring ? s.groups[0] : s.groups[1];
    const GroupSummary& ret = s.groups[0].span.reap_ring ? s.groups[1] : s.groups[0];
    EXPECT_FALSE(ret.span.reap_ring);
    EXPECT_EQ(ring.n, 2u);
    EXPECT_EQ(ret.n, 2u);
    EXPECT_NE(ring.label.find("(reaped from the CQ ring)"), std::string::npos) << ring.label;
    EXPECT_EQ(ret.label.find("reaped from"), std::string::npos) << ret.label;
    EXPECT_DOUBLE_EQ(ring.mean_us, 156.0);
    EXPECT_DOUBLE_EQ(ret.mean_us, 60.0);
    EXPECT_DOUBLE_EQ(ring.reap_window_mean_us, 40.0);
    EXPECT_DOUBLE_EQ(ring.reap_window_max_us, 60.0);
    EXPECT_TRUE(ring.span.user_space);
    const std::string text = summary_text(s, {}, {});
    EXPECT_NE(text.find("that window: mean 40.00 us, at most 60.00\n"), std::string::npos) << text;
    EXPECT_EQ(text.find("reap: "), text.rfind("reap: ")) << "one reap line, the ring's group";
    nlohmann::json j = summary_json(s, {}, {});
    int seen = 0;
    for (const auto& g : j["groups"]) {
        if (!g["span"]["reap_from_ring"].get<bool>()) {
            EXPECT_FALSE(g.contains("reap_window_us"));
            continue;
        }
        seen++;
        EXPECT_DOUBLE_EQ(g["reap_window_us"]["mean"].get<double>(), 40.0);
        EXPECT_DOUBLE_EQ(g["reap_window_us"]["max"].get<double>(), 60.0);
    }
    EXPECT_EQ(seen, 1);
}

// A stage or component name longer than the seed's column widens the column for its whole
// table: the figures of every row stay under their headings.
TEST(Report, DetailShowsTheTailAndTheQueues) {
    GroupSummary g;
    g.label = "read 4KiB nvme0n1";
    g.n = 1000;
    TailSummary t;
    t.q = 0.99;
    t.quantile_us = 2110.5;
    t.threshold_us = 2048;
    t.n = 10;
    t.fraction = 0.01;
    t.mean_us = 2120;
    t.p50_us = 118;
    t.stages = {{"host block layer", "host.block", 5, 5.5, 0.5, 0.00025},
                {"network and target (not recorded)", "net_target.unrecorded", 102, 2101.5, 1999.5,
                 0.99975}};
    t.components = {
        {"network and target (not recorded)", "net_target.unrecorded", 102, 2101.5, 1999.5, 1}};
    g.tails = {t};
    g.queues = {{4, 1, 500, 110.25, 150.5}, {4, 2, 500, 130.75, 2100}};
    Summary s;
    s.groups = {g};
    ReportOptions opts;
    opts.detail = true;
    const std::string text = summary_text(s, AssemblyCounts{}, opts);
    EXPECT_TRUE(has_line(text,
                         "  tail above p99: the 10 commands (1.00 %) at or above 2048.00 us (p99 "
                         "2110.50), mean 2120.00 us against a median of 118.00; beyond each "
                         "median:"))
        << text;
    EXPECT_TRUE(has_line(text,
                         "  network and target (not recorded)         102.00    2101.50   "
                         "+1999.50   100%"))
        << text;
    EXPECT_TRUE(has_line(text, "  cntlid 4 q1               500    110.25    150.50")) << text;
    EXPECT_TRUE(has_line(text, "  cntlid 4 q2               500    130.75   2100.00  highest p99"))
        << text;
    // without --detail, neither
    opts.detail = false;
    EXPECT_EQ(summary_text(s, AssemblyCounts{}, opts).find("tail above"), std::string::npos);
    // the JSON carries the same figures
    const nlohmann::json j = summary_json(s, AssemblyCounts{}, opts);
    const auto& jt = j["groups"][0]["tails"][0];
    EXPECT_EQ(jt["n"], 10);
    EXPECT_DOUBLE_EQ(jt["threshold_us"].get<double>(), 2048);
    EXPECT_EQ(jt["stages"][1]["id"], "net_target.unrecorded");
    EXPECT_DOUBLE_EQ(jt["stages"][1]["beyond_us"].get<double>(), 1999.5);
    EXPECT_EQ(j["groups"][0]["queues"][1]["qid"], 2);
    EXPECT_DOUBLE_EQ(j["groups"][0]["queues"][1]["p99_us"].get<double>(), 2100);
}

TEST(Report, TooFewCommandsForATailIsSaid) {
    GroupSummary g;
    g.label = "read 4KiB nvme0n1";
    g.n = 42;
    Summary s;
    s.groups = {g};
    ReportOptions opts;
    opts.detail = true;
    EXPECT_TRUE(has_line(summary_text(s, AssemblyCounts{}, opts),
                         "  tail: 42 commands, too few for a p99 tail (100 or more)"));
}

TEST(Report, LongNamesKeepTheColumnsAligned) {
    Summary s;
    s.duration_s = 1;
    GroupSummary g;
    g.label = "read 4KiB nvme0n1";
    g.size_label = "4KiB";
    g.device = "nvme0n1";
    g.n = 10;
    g.mean_us = 100;
    auto stage = [](std::string name, double us) {
        StageSummary st;
        st.name = std::move(name);
        st.mean_us = us;
        st.share = us / 100;
        return st;
    };
    g.stages = {stage("syscall and file submission (before the block layer)", 20),
                stage("host block layer", 80)};
    for (const char* name :
         {"syscall: io_submit entry to the file", "handoff to nvme_complete_rq"}) {
        ComponentSummary c;
        c.name = name;
        c.n = 10;
        c.depth = c.name.starts_with("handoff") ? 1 : 0;
        g.components.push_back(c);
    }
    g.components.push_back({.name = std::string(45, 'x'), .n = 10, .mean_us = 1});
    s.groups.push_back(g);
    ReportOptions opts;
    opts.detail = true;
    std::string text = summary_text(s, AssemblyCounts{}, opts);
    std::vector<std::string> lines;
    for (size_t p = 0, e; (e = text.find('\n', p)) != std::string::npos; p = e + 1)
        lines.push_back(text.substr(p, e - p));
    auto at = [&](std::string_view start) {
        auto it = std::find_if(lines.begin(), lines.end(),
                               [&](const std::string& l) { return l.starts_with(start); });
        EXPECT_NE(it, lines.end()) << start;
        return it == lines.end() ? std::string() : *it;
    };
    const std::string head = at("  stage "), wide = at("  syscall and file"),
                      narrow = at("  host block layer ");
    const size_t mean_end = head.find("mean us") + 7;
    EXPECT_EQ(wide.find("20.00") + 5, mean_end) << text;
    EXPECT_EQ(narrow.find("80.00") + 5, mean_end) << text;
    const std::string chead = at("  component "), crow = at("  " + std::string(45, 'x'));
    EXPECT_EQ(crow.find("10") + 2, chead.find(" n ") + 2) << text;
    EXPECT_EQ(at("    handoff to nvme_complete_rq").find("10") + 2, chead.find(" n ") + 2) << text;
}

}  // namespace
}  // namespace nvmetrace
