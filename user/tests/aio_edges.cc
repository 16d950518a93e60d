// aio_edges: QD1 libaio-style I/O through the raw aio syscalls, timing each I/O in user space
// with CLOCK_MONOTONIC, the clock of the module's timestamps, so that each I/O can be joined
// with its recorded command (tests/guest/accuracy.py --edges): the time from user space to
// the io_submit() entry hook, and from the io_getevents() return hook back to user space, is
// what a kernel hook cannot see of a latency that an application measures around its
// syscalls (tests/guest/scenarios/35-accuracy.sh).
//
// usage: aio_edges DEVICE read|write SIZE COUNT [SPAN_BYTES [SEED]]
// prints one line per I/O: "op offset t0 t1 t2" (ns), t0 before io_submit(), t1 after it
// returned, t2 after io_getevents() returned; then a summary line starting with '#'.
#include "now_ns.h"

#include <fcntl.h>
#include <linux/aio_abi.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using nvmetrace::test::now_ns;

int usage() {
    std::fprintf(stderr, "usage: aio_edges DEVICE read|write SIZE COUNT [SPAN_BYTES [SEED]]\n");
    return 2;
}

struct Io {
    uint64_t off, t0, t1, t2;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5)
        return usage();
    const std::string dev = argv[1], op = argv[2];
    if (op != "read" && op != "write")
        return usage();
    const uint64_t size = std::strtoull(argv[3], nullptr, 0);
    const long count = std::strtol(argv[4], nullptr, 0);
    const uint64_t span = argc > 5 ? std::strtoull(argv[5], nullptr, 0) : 256ULL << 20;
    const uint64_t seed = argc > 6 ? std::strtoull(argv[6], nullptr, 0) : 1;
    if (size == 0 || size % 512 || count <= 0 || span < size)
        return usage();

    const bool write = op == "write";
    const int fd = open(dev.c_str(), (write ? O_WRONLY : O_RDONLY) | O_DIRECT);
    if (fd < 0) {
        std::fprintf(stderr, "aio_edges: %s: %s\n", dev.c_str(), std::strerror(errno));
        return 1;
    }
    aio_context_t ctx = 0;
    if (syscall(SYS_io_setup, 1, &ctx) != 0) {
        std::fprintf(stderr, "aio_edges: io_setup: %s\n", std::strerror(errno));
        return 1;
    }
    void* buf = nullptr;
    if (posix_memalign(&buf, 4096, size) != 0)
        return 1;
    std::memset(buf, 0x5a, size);

    std::mt19937_64 rng(seed);
    const uint64_t blocks = span / size;
    std::vector<Io> ios(static_cast<size_t>(count));
    for (Io& io : ios) {
        iocb cb{};
        iocb* cbs[1] = {&cb};
        io_event ev{};
        io.off = (rng() % blocks) * size;
        cb.aio_lio_opcode = write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
        cb.aio_fildes = static_cast<uint32_t>(fd);
        cb.aio_buf = reinterpret_cast<uint64_t>(buf);
        cb.aio_nbytes = size;
        cb.aio_offset = static_cast<int64_t>(io.off);
        io.t0 = now_ns();
        if (syscall(SYS_io_submit, ctx, 1, cbs) != 1) {
            std::fprintf(stderr, "aio_edges: io_submit: %s\n", std::strerror(errno));
            return 1;
        }
        io.t1 = now_ns();
        if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, nullptr) != 1) {
            std::fprintf(stderr, "aio_edges: io_getevents: %s\n", std::strerror(errno));
            return 1;
        }
        io.t2 = now_ns();
        if (ev.res != static_cast<int64_t>(size)) {
            std::fprintf(stderr, "aio_edges: %s at %llu: result %lld\n", op.c_str(),
                         static_cast<unsigned long long>(io.off), static_cast<long long>(ev.res));
            return 1;
        }
    }
    // the cost of one clock read, which each edge carries about half of
    uint64_t clk = 0;
    for (int i = 0; i < 1000; i++) {
        const uint64_t a = now_ns();
        clk += now_ns() - a;
    }
    uint64_t total = 0;
    for (const Io& io : ios) {
        std::printf("%s %llu %llu %llu %llu\n", op.c_str(), static_cast<unsigned long long>(io.off),
                    static_cast<unsigned long long>(io.t0), static_cast<unsigned long long>(io.t1),
                    static_cast<unsigned long long>(io.t2));
        total += io.t2 - io.t0;
    }
    std::printf("# %ld %s of %llu bytes at QD1: mean %.2f us; a clock read %.3f us\n", count,
                op.c_str(), static_cast<unsigned long long>(size),
                static_cast<double>(total) / 1e3 / static_cast<double>(count),
                static_cast<double>(clk) / 1e3 / 1000);
    syscall(SYS_io_destroy, ctx);
    close(fd);
    return 0;
}
