// Join speed: `nvmetrace report HOST TARGET` on synthetic recordings of 10 M
// commands each (user/tests/synth.h, the real file format, on clocks an hour
// apart): reading, assembling, joining and aggregating (per-group means of
// every stage, p50/p99), on one core (make bench pins it).  Counters:
// commands/s (host commands joined per second), records/s (host and target
// records read per second), peak RSS of the process and the commands that
// waited for their partner at most.  The files are generated once into
// $NVMETRACE_BENCH_DIR (default build/bench-join) and reused.
//
//   join_bench [--benchmark_filter=...]   NVMETRACE_JOIN_COMMANDS=N (10000000)
#include "analysis/join.h"
#include "synth.h"

#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

namespace {

namespace fs = std::filesystem;
using namespace nvmetrace;

uint64_t commands_wanted() {
    const char* e = std::getenv("NVMETRACE_JOIN_COMMANDS");
    return e ? std::strtoull(e, nullptr, 10) : 10'000'000;
}

// The two recordings, written once per size.
std::pair<std::string, std::string> recordings(uint64_t n) {
    const char* e = std::getenv("NVMETRACE_BENCH_DIR");
    fs::path dir = e ? e : "build/bench-join";
    fs::create_directories(dir);
    std::string h = (dir / fmt::format("host-{}.ntr", n)).string();
    std::string t = (dir / fmt::format("target-{}.ntr", n)).string();
    if (!fs::exists(h) || !fs::exists(t) || fs::file_size(h) == 0) {
        synth::Options o;
        o.commands = n;
        o.queues = 8;
        o.depth = 16;
        o.interval_ns = 2'000;  // 500 k commands/s over 8 queues
        o.block_records = 64 * 1024;
        fmt::print(stderr, "join_bench: writing {} commands to {} and {}\n", n, h, t);
        synth::write(h + ".tmp", t + ".tmp", o);
        fs::rename(h + ".tmp", h);
        fs::rename(t + ".tmp", t);
    }
    return {h, t};
}

double peak_rss_mib() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

void BM_JoinReport(benchmark::State& state) {
    const uint64_t n = commands_wanted();
    auto [h, t] = recordings(n);
    JoinedReport r;
    for (auto _ : state) {
        r = join_files({h, t});
        benchmark::DoNotOptimize(r.summary.groups.data());
    }
    if (r.join.matched != n)
        state.SkipWithError(fmt::format("{} of {} matched", r.join.matched, n).c_str());
    const double iters = static_cast<double>(state.iterations());
    const uint64_t records = r.counts.records_host + r.counts.records_target;
    state.counters["commands/s"] =
        benchmark::Counter(static_cast<double>(r.join.host) * iters, benchmark::Counter::kIsRate);
    state.counters["records/s"] =
        benchmark::Counter(static_cast<double>(records) * iters, benchmark::Counter::kIsRate);
    state.counters["records"] = static_cast<double>(records);
    state.counters["peak_rss_MiB"] = peak_rss_mib();
    state.counters["peak_waiting"] = static_cast<double>(r.join.peak_pending);
}
// Rates over the CPU time of the process: on a shared machine the wall clock
// measures the neighbours.
BENCHMARK(BM_JoinReport)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
