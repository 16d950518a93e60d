// Cost of ring_core.h's halves in user space: reserve+commit per record (the
// hook's cost, minus the kernel's irq save/restore) and consume per batch.
#include "kernel/ring_barrier.h"

#include <stdlib.h>
#include <string.h>

#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

namespace nvmetrace {
namespace {

struct BenchRing {
    explicit BenchRing(uint32_t n)
        : nr_recs(n),
          mem(static_cast<char*>(calloc(1, NVMETRACE_RING_CTRL_SIZE + n * sizeof(nvmetrace_rec))),
              free) {
        nvmetrace_ring_init(&prod, ctrl(), data(), n, 0, 0);
    }
    nvmetrace_ring_ctrl* ctrl() { return reinterpret_cast<nvmetrace_ring_ctrl*>(mem.get()); }
    nvmetrace_rec* data() {
        return reinterpret_cast<nvmetrace_rec*>(mem.get() + NVMETRACE_RING_CTRL_SIZE);
    }

    uint32_t nr_recs;
    std::unique_ptr<char, decltype(&free)> mem;
    nvmetrace_ring_prod prod{};
};

void BM_ReserveCommit(benchmark::State& state) {
    BenchRing ring(4096);
    std::vector<nvmetrace_rec> out(ring.nr_recs);
    uint64_t k = 0;
    for (auto _ : state) {
        nvmetrace_rec* r = nvmetrace_ring_reserve(&ring.prod);
        if (!r) {
            state.PauseTiming();
            nvmetrace_ring_consume(ring.ctrl(), ring.data(), ring.nr_recs, out.data(),
                                   ring.nr_recs);
            state.ResumeTiming();
            continue;
        }
        r->ts = k++;
        nvmetrace_ring_commit(&ring.prod, r);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReserveCommit);

void BM_Consume(benchmark::State& state) {
    const auto batch = static_cast<uint32_t>(state.range(0));
    BenchRing ring(4096);
    std::vector<nvmetrace_rec> out(batch);
    for (auto _ : state) {
        state.PauseTiming();
        for (uint32_t i = 0; i < batch; i++)
            nvmetrace_ring_commit(&ring.prod, nvmetrace_ring_reserve(&ring.prod));
        state.ResumeTiming();
        benchmark::DoNotOptimize(
            nvmetrace_ring_consume(ring.ctrl(), ring.data(), ring.nr_recs, out.data(), batch));
    }
    state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_Consume)->Arg(1)->Arg(64)->Arg(4096);

}  // namespace
}  // namespace nvmetrace
