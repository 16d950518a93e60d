#include "analysis/stats.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

constexpr uint32_t kNvme0n1 = 259u << 20 | 0;
constexpr uint32_t kNvme1n1 = 259u << 20 | 1;

void set(Command& c, uint16_t ev, uint64_t ts) {
    int s = event_slot(ev);
    c.ts[s] = ts;
    c.present |= EventMask{1} << s;
}

// A host command: bio at t0, then the block layer, driver, network+target
// and completion gaps (ns).
Command host_cmd(uint64_t t0, uint64_t block, uint64_t driver, uint64_t net, uint64_t compl_,
                 Op op = Op::read, uint64_t size = 4096, uint32_t dev = kNvme0n1) {
    Command c;
    c.side = Side::host;
    c.op = op;
    c.size = size;
    c.dev = dev;
    set(c, NVMETRACE_EV_BIO_QUEUE, t0);
    set(c, NVMETRACE_EV_NVME_SETUP, t0 + block);
    set(c, NVMETRACE_EV_RQ_ISSUE, t0 + block + driver);
    set(c, NVMETRACE_EV_NVME_COMPLETE, t0 + block + driver + net);
    set(c, NVMETRACE_EV_RQ_COMPLETE, t0 + block + driver + net + compl_);
    return c;
}

struct StatsTest : ::testing::Test {
    DeviceTable devices;
    StatsTest() {
        devices.add_disk(kNvme0n1, "nvme0n1");
        devices.add_disk(kNvme1n1, "nvme1n1");
    }
};

// Exact nearest-rank quantile of `v`.
double exact_quantile(std::vector<int64_t> v, double q) {
    std::sort(v.begin(), v.end());
    auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()) - 1e-9));
    rank = std::clamp<size_t>(rank, 1, v.size());
    return static_cast<double>(v[rank - 1]);
}

TEST(Histogram, ExactBelowTheLinearLimit) {
    Histogram h;
    for (int64_t v = 1; v <= 1000; v++)
        h.add(v);
    EXPECT_EQ(h.quantile(0.5), 500.0);
    EXPECT_EQ(h.quantile(0.99), 990.0);
    EXPECT_EQ(h.quantile(0.999), 999.0);
    EXPECT_EQ(h.quantile(1.0), 1000.0);
    EXPECT_EQ(h.quantile(0.0), 1.0);
    EXPECT_EQ(h.count(), 1000u);
}

TEST(Histogram, EmptyAndNegative) {
    Histogram h;
    EXPECT_EQ(h.quantile(0.5), 0.0);
    h.add(-5);  // clock skew across CPUs: counted as 0 in the buckets
    EXPECT_EQ(h.count(), 1u);
    EXPECT_EQ(h.min(), -5);
}

// The documented bound, on three distributions spanning ns to seconds.
TEST(Histogram, RelativeErrorIsBounded) {
    std::mt19937_64 rng(7);
    std::lognormal_distribution<double> lognormal(std::log(60'000.0), 0.8);
    std::uniform_int_distribution<int64_t> uniform(1, 10'000'000);
    std::exponential_distribution<double> expo(1.0 / 2e6);
    for (int dist = 0; dist < 3; dist++) {
        Histogram h;
        std::vector<int64_t> v;
        for (int i = 0; i < 200'000; i++) {
            int64_t x = dist == 0   ? static_cast<int64_t>(lognormal(rng))
                        : dist == 1 ? uniform(rng)
                                    : static_cast<int64_t>(expo(rng)) + 1;
            v.push_back(x);
            h.add(x);
        }
        for (double q : {0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0}) {
            double exact = exact_quantile(v, q);
            EXPECT_LE(std::abs(h.quantile(q) - exact), exact * Histogram::kMaxRelativeError)
                << "dist " << dist << " q " << q;
        }
    }
}

TEST(Histogram, MergeEqualsAddingBoth) {
    Histogram a, b, both;
    for (int64_t v = 1; v < 100'000; v += 7) {
        (v % 2 ? a : b).add(v * 13);
        both.add(v * 13);
    }
    a.merge(b);
    for (double q : {0.5, 0.99})
        EXPECT_EQ(a.quantile(q), both.quantile(q));
    EXPECT_EQ(a.count(), both.count());
}

TEST_F(StatsTest, ExactStageMeans) {
    Stats st(devices, {.sample_n = 1});
    // Two commands: block 1000+500 / 3000+1500, driver 2000 / 4000,
    // network 50000 / 70000 ns.
    st.add(host_cmd(1'000'000, 1000, 2000, 50'000, 500));
    st.add(host_cmd(2'000'000, 3000, 4000, 70'000, 1500));
    Summary s = st.summary(1'000'000'000);
    ASSERT_EQ(s.groups.size(), 1u);
    const GroupSummary& g = s.groups[0];
    EXPECT_EQ(g.label, "read 4KiB nvme0n1");
    EXPECT_EQ(g.n, 2u);
    EXPECT_DOUBLE_EQ(g.mean_us, (53.5 + 78.5) / 2);
    ASSERT_EQ(g.stages.size(), 3u);
    EXPECT_EQ(g.stages[0].name, "host block layer");
    EXPECT_DOUBLE_EQ(g.stages[0].mean_us, 3.0);
    EXPECT_DOUBLE_EQ(g.stages[1].mean_us, 3.0);
    EXPECT_DOUBLE_EQ(g.stages[2].mean_us, 60.0);
    EXPECT_DOUBLE_EQ(g.stages[2].share, 60.0 / 66.0);
    ASSERT_EQ(g.components.size(), 5u);
    EXPECT_EQ(g.components[0].name, "host block layer, submission");
    EXPECT_DOUBLE_EQ(g.components[0].mean_us, 2.0);
    EXPECT_DOUBLE_EQ(g.components[3].mean_us, 1.0);
    EXPECT_EQ(g.components[4].name, "end to end");
    EXPECT_DOUBLE_EQ(g.components[4].mean_us, 66.0);
}

TEST_F(StatsTest, StagesAndComponentsSumToEndToEnd) {
    std::mt19937_64 rng(3);
    Stats st(devices, {.sample_n = 10});
    for (int i = 0; i < 10'000; i++)
        st.add(host_cmd(1000 + i * 10'000ull, rng() % 5000, rng() % 9000, 10'000 + rng() % 90'000,
                        rng() % 3000));
    Summary s = st.summary(1'000'000'000);
    const GroupSummary& g = s.groups.at(0);
    double stages = 0, shares = 0, comps = 0;
    for (const auto& x : g.stages) {
        stages += x.mean_us;
        shares += x.share;
    }
    for (const auto& c : g.components)
        if (c.name != "end to end" && c.depth == 0)
            comps += c.mean_us;
    EXPECT_NEAR(stages, g.mean_us, 1e-9);
    EXPECT_NEAR(comps, g.mean_us, 1e-9);
    EXPECT_NEAR(shares, 1.0, 1e-12);
}

TEST_F(StatsTest, PercentilesOfAKnownDistribution) {
    Stats st(devices, {.sample_n = 1});
    // End to end 1..1000 us, shuffled.
    std::vector<uint64_t> us(1000);
    for (size_t i = 0; i < us.size(); i++)
        us[i] = i + 1;
    std::shuffle(us.begin(), us.end(), std::mt19937_64(5));
    uint64_t t = 0;
    for (uint64_t u : us) {
        st.add(host_cmd(t, 0, 0, u * 1000, 0));
        t += 1'000'000;
    }
    const GroupSummary g = st.summary(t).groups.at(0);
    auto near = [](double got, double want) {
        EXPECT_LE(std::abs(got - want), want * Histogram::kMaxRelativeError)
            << got << " vs " << want;
    };
    near(g.p50_us, 500);
    near(g.p99_us, 990);
    near(g.p999_us, 999);
    EXPECT_DOUBLE_EQ(g.mean_us, 500.5);
}

TEST_F(StatsTest, RatesAndLittlesLaw) {
    // 1 of 100 sampled; 1000 sampled commands in 10 s: about 10k commands/s;
    // each 66 us end to end: 0.66 commands in flight on average.
    Stats st(devices, {.sample_n = 100});
    for (int i = 0; i < 1000; i++)
        st.add(host_cmd(i * 10'000'000ull, 0, 6000, 60'000, 0));
    Summary s = st.summary(10'000'000'000ull);
    const GroupSummary& g = s.groups.at(0);
    EXPECT_DOUBLE_EQ(g.rate, 10'000.0);
    EXPECT_NEAR(g.avg_qd, 0.66, 1e-12);
    EXPECT_NEAR(g.stages[2].avg_qd, 0.60, 1e-12);  // network and target
    EXPECT_NEAR(g.stages[1].avg_qd, 0.06, 1e-12);  // driver
    EXPECT_NEAR(g.components.back().avg_qd, 0.66, 1e-12);
    ASSERT_EQ(s.throughput.size(), 1u);
    EXPECT_DOUBLE_EQ(s.throughput[0].iops, 10'000.0);
    EXPECT_DOUBLE_EQ(s.throughput[0].bytes_per_s, 10'000.0 * 4096);
    EXPECT_DOUBLE_EQ(s.duration_s, 10.0);
}

TEST_F(StatsTest, Grouping) {
    Stats st(devices, {.sample_n = 1});
    st.add(host_cmd(0, 1, 1, 10, 1, Op::write, 8192, kNvme0n1));
    st.add(host_cmd(100, 1, 1, 10, 1, Op::read, 4096, kNvme1n1));
    st.add(host_cmd(200, 1, 1, 10, 1, Op::read, 4096, kNvme0n1));
    st.add(host_cmd(300, 1, 1, 10, 1, Op::read, 4096, kNvme0n1));
    st.add(host_cmd(400, 1, 1, 10, 1, Op::read, 131072, kNvme0n1));
    st.add(host_cmd(500, 1, 1, 10, 1, Op::read, 4096, 259u << 20 | 9));
    Summary s = st.summary(1'000'000'000);
    std::vector<std::string> labels;
    for (const auto& g : s.groups)
        labels.push_back(g.label + " " + std::to_string(g.n));
    EXPECT_EQ(labels, (std::vector<std::string>{"read 4KiB nvme0n1 2", "read 4KiB nvme1n1 1",
                                                "read 4KiB dev 259:9 1", "read 128KiB nvme0n1 1",
                                                "write 8KiB nvme0n1 1"}));
    ASSERT_EQ(s.throughput.size(), 2u);
    EXPECT_EQ(s.throughput[0].op, Op::read);
    EXPECT_DOUBLE_EQ(s.throughput[0].iops, 5.0);
    EXPECT_DOUBLE_EQ(s.throughput[1].bytes_per_s, 8192.0);
}

TEST_F(StatsTest, MissingBoundaryIsItsOwnGroupWithMergedComponents) {
    Stats st(devices, {.sample_n = 1});
    st.add(host_cmd(0, 1000, 2000, 50'000, 500));
    Command c = host_cmd(100'000, 1000, 2000, 50'000, 500);
    c.present &= ~(EventMask{1} << event_slot(NVMETRACE_EV_NVME_SETUP));
    st.add(c);
    Summary s = st.summary(1'000'000);
    ASSERT_EQ(s.groups.size(), 2u);
    EXPECT_EQ(s.groups[0].label, "read 4KiB nvme0n1");
    const GroupSummary& m = s.groups[1];
    EXPECT_EQ(m.label, "read 4KiB nvme0n1 (no nvme_setup_cmd)");
    ASSERT_EQ(m.stages.size(), 2u);
    EXPECT_EQ(m.stages[0].name, "host block layer + host driver");
    EXPECT_DOUBLE_EQ(m.stages[0].mean_us, 3.5);  // 1 + 2 + 0.5, never split
    EXPECT_TRUE(m.stages[0].merged);
    EXPECT_EQ(m.components[0].name, "host block layer, submission + host driver, submission");
    EXPECT_DOUBLE_EQ(m.components[0].mean_us, 3.0);
    EXPECT_TRUE(m.components[0].merged);
}

TEST_F(StatsTest, FailedCommandsAreCountedNotReported) {
    Stats st(devices, {.sample_n = 1});
    st.add(host_cmd(0, 1000, 2000, 50'000, 500));
    Command bad = host_cmd(100'000, 1000, 2000, 30'000'000, 500);
    bad.status = 10;  // BLK_STS_IOERR
    st.add(bad);
    Summary s = st.summary(1'000'000'000);
    EXPECT_EQ(s.failed, 1u);
    ASSERT_EQ(s.groups.size(), 1u);
    EXPECT_EQ(s.groups[0].n, 1u);
}

// A failed-over request is not an I/O of its own: counted apart; the I/O its
// bios made again is grouped apart from the others and says so.
TEST_F(StatsTest, FailedOverRequestsAreCountedAndTheirRetriesGroupedApart) {
    Stats st(devices, {.sample_n = 1});
    st.add(host_cmd(0, 1000, 2000, 50'000, 500));
    Command attempt = host_cmd(100'000, 1000, 2000, 800'000, 500);
    attempt.failed_over = true;
    st.add(attempt);
    Command again = host_cmd(100'000, 30'000'000, 2000, 50'000, 500);
    again.attempts_before = 1;
    st.add(again);
    Summary s = st.summary(1'000'000'000);
    EXPECT_EQ(s.failed_over, 1u);
    EXPECT_EQ(s.failed, 0u);
    ASSERT_EQ(s.groups.size(), 2u);
    EXPECT_EQ(s.groups[0].n, 1u);
    EXPECT_FALSE(s.groups[0].resent);
    EXPECT_EQ(s.groups[1].n, 1u);
    EXPECT_TRUE(s.groups[1].resent);
    EXPECT_EQ(s.groups[1].label, "read 4KiB nvme0n1 (failed over, sent again)");
}

TEST_F(StatsTest, IntervalSnapshots) {
    std::vector<Interval> ivs;
    Stats st(devices, {.sample_n = 100, .interval_ns = 10'000'000'000ull, .origin_ns = 1},
             [&](const Interval& iv) { ivs.push_back(iv); });
    // 3 commands in [0, 10 s), 2 in [10, 20 s), none in [20, 30 s), 1 after.
    for (uint64_t t : {1'000ull, 2'000'000'000ull, 9'000'000'000ull})
        st.add(host_cmd(t, 1000, 1000, 98'000, 0));
    for (uint64_t t : {11'000'000'000ull, 12'000'000'000ull})
        st.add(host_cmd(t, 0, 0, 200'000, 0));
    st.add(host_cmd(35'000'000'000ull, 0, 0, 10'000, 0));
    ASSERT_EQ(ivs.size(), 3u);
    ASSERT_EQ(ivs[0].rows.size(), 1u);
    EXPECT_DOUBLE_EQ(ivs[0].end_s, 10.0);
    EXPECT_EQ(ivs[0].rows[0].n, 3u);
    EXPECT_DOUBLE_EQ(ivs[0].rows[0].rate, 30.0);  // 3 * 100 / 10 s
    EXPECT_DOUBLE_EQ(ivs[0].rows[0].mean_us, 100.0);
    EXPECT_DOUBLE_EQ(*ivs[0].rows[0].share[static_cast<size_t>(StageColumn::network)], 0.98);
    EXPECT_EQ(ivs[0].rows[0].marker[static_cast<size_t>(StageColumn::network)], '*');
    EXPECT_EQ(ivs[1].rows.at(0).n, 2u);
    EXPECT_DOUBLE_EQ(ivs[1].rows[0].mean_us, 200.0);
    EXPECT_TRUE(ivs[2].rows.empty());
    st.flush_interval(36'000'000'001ull);
    ASSERT_EQ(ivs.size(), 4u);
    EXPECT_EQ(ivs[3].rows.at(0).n, 1u);
    EXPECT_DOUBLE_EQ(ivs[3].start_s, 30.0);
    // The whole run is still in the summary.
    EXPECT_EQ(st.summary(36'000'000'000ull).groups.at(0).n, 6u);
}

TEST_F(StatsTest, TargetOnlyGroups) {
    devices.add_target_namespace(1, "nvmet-ns1", 512);
    Stats st(devices, {.sample_n = 1});
    Command c;
    c.side = Side::target;
    c.op = Op::read;
    c.size = 4096;
    c.nsid = 1;
    set(c, NVMETRACE_EV_NVMET_INIT, 1000);
    set(c, NVMETRACE_EV_NVMET_EXEC, 2000);
    set(c, NVMETRACE_EV_NVMET_BIO_DONE, 62'000);
    set(c, NVMETRACE_EV_NVMET_COMPLETE, 62'500);
    st.add(c);
    const GroupSummary g = st.summary(1'000'000).groups.at(0);
    EXPECT_EQ(g.label, "read 4KiB nvmet-ns1");
    EXPECT_EQ(g.view, View::target_only);
    ASSERT_EQ(g.stages.size(), 2u);
    EXPECT_DOUBLE_EQ(g.stages[0].mean_us, 1.5);   // target driver
    EXPECT_DOUBLE_EQ(g.stages[1].mean_us, 60.0);  // storage
}

// A later hook adds a detail row without code changes: reported where its
// events are present, not summed into the stages.
TEST_F(StatsTest, DetailRowsFromTheTable) {
    static constexpr ComponentDef table[] = {
        {"block", NVMETRACE_EV_BIO_QUEUE, NVMETRACE_EV_NVME_SETUP, "host block layer", kHost, 0},
        {"driver", NVMETRACE_EV_NVME_SETUP, NVMETRACE_EV_RQ_ISSUE, "host driver", kHost, 0},
        {"wire", NVMETRACE_EV_RQ_ISSUE, NVMETRACE_EV_NVME_COMPLETE,
         "network and target (not recorded)", kHost, 0},
        {"issue to insert?", NVMETRACE_EV_RQ_INSERT, NVMETRACE_EV_RQ_ISSUE, "host driver", kHost,
         1},
        {"completion", NVMETRACE_EV_NVME_COMPLETE, NVMETRACE_EV_RQ_COMPLETE, "host block layer",
         kHost, 0},
    };
    Stats st(devices, {.sample_n = 1, .table = table});
    Command c = host_cmd(0, 1000, 2000, 50'000, 500);
    set(c, NVMETRACE_EV_RQ_INSERT, 500);
    st.add(c);
    st.add(host_cmd(100'000, 1000, 2000, 50'000, 500));
    const GroupSummary g = st.summary(1'000'000).groups.at(0);
    ASSERT_EQ(g.components.size(), 6u);
    EXPECT_EQ(g.components[3].name, "issue to insert?");
    EXPECT_EQ(g.components[3].depth, 1);
    EXPECT_EQ(g.components[3].n, 1u);
    EXPECT_DOUBLE_EQ(g.components[3].mean_us, 2.5);
    EXPECT_EQ(g.stages.size(), 3u);
    EXPECT_DOUBLE_EQ(g.stages[1].mean_us, 2.0);
}

// 990 commands of ~120 us and 10 whose network and target took 2 ms more:
// the p99 tail is the 10 slow ones, and its excess is the network's.
TEST_F(StatsTest, TailIsAttributedToTheStageThatMadeIt) {
    Stats st(devices, {.sample_n = 1});
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<uint64_t> jitter(0, 4000);
    std::vector<int64_t> e2e;
    uint64_t t = 0;
    for (int i = 0; i < 1000; i++) {
        const bool slow = i % 100 == 50;
        const uint64_t block = 2000 + jitter(rng), driver = 8000 + jitter(rng);
        const uint64_t net = 100'000 + jitter(rng) + (slow ? 2'000'000 : 0), done = 3000;
        st.add(host_cmd(t, block, driver, net, done));
        e2e.push_back(static_cast<int64_t>(block + driver + net + done));
        t += 3'000'000;
    }
    const GroupSummary g = st.summary().groups.at(0);
    ASSERT_EQ(g.tails.size(), 2u);
    const TailSummary& p99 = g.tails[0];
    EXPECT_DOUBLE_EQ(p99.q, 0.99);
    // exactly the commands at or above the threshold, and their mean
    uint64_t n = 0;
    double sum = 0;
    for (int64_t v : e2e)
        if (static_cast<double>(v) >= p99.threshold_us * 1e3) {
            n++;
            sum += static_cast<double>(v);
        }
    EXPECT_EQ(p99.n, n);
    EXPECT_EQ(p99.n, 10u);  // the slow ones: the fast ones are 2 ms below them
    EXPECT_NEAR(p99.mean_us, sum / static_cast<double>(n) / 1e3, 1e-6);
    EXPECT_DOUBLE_EQ(p99.fraction, 0.01);
    // the stages of the tail add up to its end to end; the network has the excess
    double stages = 0, shares = 0;
    for (const auto& r : p99.stages) {
        stages += r.tail_mean_us;
        shares += r.share;
    }
    EXPECT_NEAR(stages, p99.mean_us, 1e-6);
    EXPECT_NEAR(shares, 1.0, 1e-9);
    const auto net = std::find_if(p99.stages.begin(), p99.stages.end(),
                                  [](const TailRow& r) { return r.id == "net_target.unrecorded"; });
    ASSERT_NE(net, p99.stages.end());
    EXPECT_GT(net->share, 0.99);
    EXPECT_NEAR(net->beyond_us, 2000, 5);
    ASSERT_EQ(p99.components.size(), 4u);
    EXPECT_EQ(p99.components[2].id, "net_target.unrecorded");
    EXPECT_GT(p99.components[2].share, 0.99);
    // p99.9 of 1000: above the bin of the second slowest, so 0 or 1 command
    EXPECT_LE(g.tails[1].n, 1u);
    if (g.tails[1].n) {
        EXPECT_GT(g.tails[1].threshold_us, p99.threshold_us);
    }
}

TEST_F(StatsTest, TooFewCommandsForATail) {
    Stats st(devices, {.sample_n = 1});
    for (int i = 0; i < 99; i++)
        st.add(host_cmd(i * 1'000'000ull, 1000, 2000, 50'000 + i * 100, 500));
    EXPECT_TRUE(st.summary().groups.at(0).tails.empty());
    st.add(host_cmd(200'000'000, 1000, 2000, 900'000, 500));
    const GroupSummary g = st.summary().groups.at(0);
    ASSERT_EQ(g.tails.size(), 1u);  // 100 commands: a p99 tail, not yet a p99.9
    EXPECT_EQ(g.tails[0].n, 1u);
    EXPECT_NEAR(g.tails[0].mean_us, 903.5, 1e-9);
}

TEST_F(StatsTest, PerQueueEndToEnd) {
    Stats st(devices, {.sample_n = 1});
    uint64_t t = 0;
    for (int i = 0; i < 300; i++) {
        Command c = host_cmd(t, 1000, 2000, i % 3 == 2 ? 400'000 : 50'000, 500);
        c.qid = static_cast<uint16_t>(i % 3 + 1);
        c.cntlid = 4;
        st.add(c);
        t += 1'000'000;
    }
    Command none = host_cmd(t, 1000, 2000, 50'000, 500);  // no queue id: in no queue's row
    st.add(none);
    const GroupSummary g = st.summary().groups.at(0);
    ASSERT_EQ(g.queues.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
        EXPECT_EQ(g.queues[i].cntlid, 4u);
        EXPECT_EQ(g.queues[i].qid, i + 1);
        EXPECT_EQ(g.queues[i].n, 100u);
    }
    EXPECT_DOUBLE_EQ(g.queues[0].mean_us, 53.5);
    EXPECT_DOUBLE_EQ(g.queues[2].mean_us, 403.5);
    EXPECT_NEAR(g.queues[2].p99_us, 403.5, 403.5 * CoarseHistogram::kMaxRelativeError);
}

// The same op, size and device through two paths: two groups, two labels.
TEST_F(StatsTest, GroupsOfOneLabelSayWhatTheyLack) {
    Stats st(devices, {.sample_n = 1});
    Command sent = host_cmd(0, 1000, 2000, 50'000, 500);
    set(sent, NVMETRACE_EV_TCP_CMD_SEND, 3500);
    st.add(sent);
    st.add(host_cmd(100'000, 1000, 2000, 50'000, 500));
    const Summary s = st.summary();
    ASSERT_EQ(s.groups.size(), 2u);
    std::vector<std::string> labels = {s.groups[0].label, s.groups[1].label};
    std::sort(labels.begin(), labels.end());
    const std::string send(
        kEvents[static_cast<size_t>(event_slot(NVMETRACE_EV_TCP_CMD_SEND))].name);
    EXPECT_EQ(labels, (std::vector<std::string>{"read 4KiB nvme0n1",
                                                "read 4KiB nvme0n1 (without " + send + ")"}));
}

TEST(SizeLabel, Units) {
    EXPECT_EQ(size_label(512), "512B");
    EXPECT_EQ(size_label(4096), "4KiB");
    EXPECT_EQ(size_label(131072), "128KiB");
    EXPECT_EQ(size_label(1 << 20), "1MiB");
    EXPECT_EQ(size_label(6000), "6000B");
}

}  // namespace
}  // namespace nvmetrace
