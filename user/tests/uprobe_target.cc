// The program uprobe_sample_test places its uprobe in: two threads call
// nvmetrace_uprobe_target() `n` times each with an item whose fields the
// uprobe reads through a pointer (as record --spdk-host -t rdma reads SPDK's
// request), then it exits.  Given a FIFO, both threads wait until a line is
// written to it (a sampler attaches to the running process meanwhile).
// Usage: uprobe_target N [FIFO]
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
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
    std::mutex m;
    std::condition_variable cv;
    bool go = argc <= 2;
    auto work = [&](uint32_t thread) {
        {
            std::unique_lock<std::mutex> l(m);
            cv.wait(l, [&] { return go; });
        }
        volatile uint64_t sum = 0;
        for (uint64_t i = 0; i < n; i++) {
            const UprobeItem item{i, thread, 0x5eed};
            sum = sum + nvmetrace_uprobe_target(&item, n);
        }
    };
    std::thread t(work, 1);
    if (!go) {
        std::ifstream fifo(argv[2]);  // blocks until a writer opens it
        std::string line;
        std::getline(fifo, line);
        {
            std::lock_guard<std::mutex> l(m);
            go = true;
        }
        cv.notify_all();
    }
    work(0);
    t.join();
    return 0;
}
