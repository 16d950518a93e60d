// The recorder's user-space cost per record: `nvmetrace record`'s loop
// (RecordLoop: ring drain -> Reorderer -> RecordingWriter, and with live
// lines Assembler -> Stats) over rings in a memfd laid out like
// /dev/nvmetrace, fed with what a host+target recording of fio 4k randread
// QD1 on nvme-tcp loopback drains (synth::TcpLoopback, 16 records a
// command, one CPU's ring).  The producer's side (the module's) is outside
// the measurement.
//
//   record_bench [--benchmark_filter=...]     Google Benchmark, records/s per
//       variant: zstd level of the blocks (99: what `record -s 1` uses, 0:
//       raw) and live (0: records only go to the file, the default; 1: -i,
//       the Assembler and Stats run as records arrive)
//   record_bench --count LEVEL LIVE [COMMANDS]
//       runs the loop once over COMMANDS (100000) commands and prints the
//       records; under valgrind --tool=callgrind --collect-atstart=no only
//       the recorder's side is counted, so Ir / records = instructions per
//       record (tools/bench-record runs it).
//
// NVMETRACE_RECORD_BENCH_OUT=FILE writes the recording there (default
// /dev/null: the file system's cost is the kernel's, not the recorder's).
#include "analysis/assembler.h"
#include "analysis/stats.h"
#include "cmd/record.h"
#include "format/recfile.h"
#include "kernel/devices.h"
#include "kernel/memfd_rings.h"
#include "kernel/ring_reader.h"
#include "report/printer.h"
#include "synth.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <valgrind/callgrind.h>

namespace {

using namespace nvmetrace;

// Records the loop drains per wake-up: ~10 ms of the guest benchmark's rec1
// (about 13 k I/O/s, 16 records each).
constexpr uint32_t kCommandsPerWake = 128;
// The zstd level argument that means: as `record -s 1` writes.
constexpr int kAsRecorded = 99;

// One ring (the guest has one vCPU) in a memfd, as the module maps it.
class FakeRings : public MemfdRings {
public:
    explicit FakeRings(uint32_t nr_recs) : MemfdRings(1, nr_recs, "record_bench") {}

    // The module's side: commits recs to the ring.
    void produce(std::span<const nvmetrace_rec> recs) {
        for (const auto& r : recs)
            if (!MemfdRings::produce(0, r))
                throw std::runtime_error("record_bench: ring full");
    }
};

std::string out_path() {
    const char* e = std::getenv("NVMETRACE_RECORD_BENCH_OUT");
    return e ? e : "/dev/null";
}

// Everything run_record() sets up around its loop, as it does it.
struct Recorder {
    Recorder(int zstd_level, bool live)
        : rings(1u << 16),
          reader(rings.fd(), rings.geo()),
          writer(open_writer(zstd_level)),
          stats(table, {.sample_n = 1, .interval_ns = live ? 1'000'000'000ull : 0},
                [this](const Interval& iv) { live_chars += live_rows(iv).size(); }),
          assembler(table, [this](const Command& c) { stats.add(c); }),
          loop(reader, &writer, live ? &assembler : nullptr) {
        devices_from_json(synth::TcpLoopback::devices(), table);
        interval = live;
    }

    // kAsRecorded: record -s 1's options (recorder_writer_options()), else
    // those with this zstd level
    static RecordingWriter open_writer(int zstd_level) {
        RecordingWriterOptions o = recorder_writer_options(1);
        if (zstd_level != kAsRecorded)
            o.zstd_level = zstd_level;
        RecordingWriter w = RecordingWriter::open(out_path(), o);
        RecordingMeta m = make_recording_meta();
        m.role = "host+target";
        m.devices = synth::TcpLoopback::devices();
        w.write_meta(m);
        return w;
    }

    // One wake-up: drain, release up to the newest record's time, live lines.
    void wake(uint64_t now) {
        loop.drain();
        loop.release(now, false);
        if (interval)
            stats.advance(now > 100'000'000 ? now - 100'000'000 : 0);
        writer.flush_if_due();
    }

    FakeRings rings;
    RingReader reader;
    RecordingWriter writer;
    DeviceTable table;
    Stats stats;
    Assembler assembler;
    RecordLoop loop;
    bool interval = false;
    size_t live_chars = 0;
};

// The stream, made once: pre-generated batches of kCommandsPerWake commands.
const std::vector<std::vector<nvmetrace_rec>>& batches() {
    static const auto all = [] {
        std::vector<std::vector<nvmetrace_rec>> b(256);
        synth::TcpLoopback gen;
        gen.time_scale = 0.21;  // ~13 k commands/s, as in the icount guest
        for (auto& batch : b)
            for (uint32_t i = 0; i < kCommandsPerWake; i++)
                gen.command(batch);
        return b;
    }();
    return all;
}

// Later passes over the batches continue the clock and the sequence.
void shift(std::vector<nvmetrace_rec>& batch, uint64_t dt, uint32_t dseq) {
    for (auto& r : batch) {
        r.ts += dt;
        r.seq += dseq;
        if (r.event == NVMETRACE_EV_TCPT_CMD_RECV)
            r.aux += dt;
    }
}

struct Feeder {
    size_t i = 0;
    uint64_t dt = 0;
    uint32_t dseq = 0;
    std::vector<nvmetrace_rec> cur;
    // The next batch; its newest timestamp in *now.
    std::span<const nvmetrace_rec> next(uint64_t* now) {
        const auto& b = batches();
        if (i == b.size()) {
            i = 0;
            dt += b.back().back().ts + 1'000'000 - b.front().front().ts;
            dseq += b.back().back().seq + 1 - b.front().front().seq;
        }
        cur = b[i++];
        if (dt)
            shift(cur, dt, dseq);
        *now = cur.back().ts;
        return cur;
    }
};

void BM_RecordLoop(benchmark::State& state) {
    const int level = static_cast<int>(state.range(0));
    const bool live = state.range(1) != 0;
    Recorder rec(level, live);
    Feeder feed;
    uint64_t records = 0;
    for (auto _ : state) {
        state.PauseTiming();
        uint64_t now = 0;
        auto b = feed.next(&now);
        rec.rings.produce(b);
        records += b.size();
        state.ResumeTiming();
        rec.wake(now);
    }
    state.counters["records/s"] =
        benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsRate);
    state.counters["written"] = static_cast<double>(rec.writer.records_written());
}
// Rates over CPU time: on a shared machine the wall clock measures the neighbours.
BENCHMARK(BM_RecordLoop)
    ->ArgNames({"zstd", "live"})
    ->Args({kAsRecorded, 0})
    ->Args({-5, 0})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({kAsRecorded, 1})
    ->Args({-5, 1})
    ->MinTime(0.5);

// One pass for callgrind: only the recorder's side is collected.
int count_main(int level, bool live, uint64_t commands) {
    Recorder rec(level, live);
    Feeder feed;
    uint64_t records = 0;
    const uint64_t wakes = (commands + kCommandsPerWake - 1) / kCommandsPerWake;
    uint64_t now = 0;
    for (uint64_t w = 0; w < wakes; w++) {
        auto b = feed.next(&now);
        rec.rings.produce(b);
        records += b.size();
        CALLGRIND_TOGGLE_COLLECT;
        rec.wake(now);
        CALLGRIND_TOGGLE_COLLECT;
    }
    CALLGRIND_TOGGLE_COLLECT;
    rec.loop.drain();
    rec.loop.release(now, true);
    rec.writer.flush();
    CALLGRIND_TOGGLE_COLLECT;
    fmt::print("records {} written {} bytes {} ({:.1f} a record) commands {} live_chars {}\n",
               records, rec.writer.records_written(), rec.writer.bytes_written(),
               static_cast<double>(rec.writer.bytes_written()) / static_cast<double>(records),
               rec.assembler.counts().complete, rec.live_chars);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 4 && std::string(argv[1]) == "--count")
        return count_main(std::atoi(argv[2]), std::atoi(argv[3]) != 0,
                          argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 100'000);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
