// The program uprobe_sample_test places its uprobe in: two threads call
// nvmetrace_uprobe_target() `n` times each with an item whose fields the
// uprobe reads through a pointer (as record --spdk-host -t rdma reads SPDK's
// request), then it exits.  Usage: uprobe_target N
#include <cstdint>
#include <cstdlib>
#include <thread>

struct UprobeItem {
    uint64_t serial;
    uint32_t thread;
    uint32_t magic;
};

extern "C" __attribute__((noinline, used)) uint64_t nvmetrace_uprobe_target(const UprobeItem* item,
                                                                            uint64_t n) {
    asm volatile("" ::: "memory");
    return item->serial + n;
}

int main(int argc, char** argv) {
    const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100;
    auto work = [n](uint32_t thread) {
        volatile uint64_t sum = 0;
        for (uint64_t i = 0; i < n; i++) {
            const UprobeItem item{i, thread, 0x5eed};
            sum = sum + nvmetrace_uprobe_target(&item, n);
        }
    };
    std::thread t(work, 1);  // a thread started after the exec: the events follow it
    work(0);
    t.join();
    return 0;
}
