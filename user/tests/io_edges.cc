// io_edges: QD1 I/O through one of fio's engines' system calls, timing each I/O in user space
// with CLOCK_MONOTONIC, the clock of the module's timestamps, so that each I/O can be joined
// with its recorded command (tests/guest/edges.py): the time from user space to the first
// host hook of the command's span (the submitting system call's entry) and from its last hook
// (the reaping system call's return) back to user space is what a kernel hook cannot see of a
// latency that an application measures around its system calls
// (tests/guest/scenarios/35-accuracy.sh).
//
// usage: io_edges ENGINE DEVICE read|write SIZE COUNT [SPAN_BYTES [SEED]]
// ENGINE, as fio's:
//   libaio        io_submit() then io_getevents() (the raw aio system calls)
//   io_uring      a ring set up as fio's (COOP_TASKRUN, SINGLE_ISSUER, DEFER_TASKRUN where the
//                 kernel has them); io_uring_enter() submitting one SQE with
//                 IORING_ENTER_GETEVENTS (as fio does), then, when its CQE is not in the ring
//                 yet, io_uring_enter() waiting for it (liburing's submit-and-get-events and
//                 wait)
//   io_uring_cmd  the same with an NVMe read or write (IORING_OP_URING_CMD) on /dev/ngXnY
//   psync         pread() / pwrite()
//   pvsync2       preadv2() / pwritev2() of one vector, no flags
// The block device is opened with O_DIRECT (the char device of io_uring_cmd without).
// Prints "# engine ENGINE", then one line per I/O: "op offset t0 t1 t2" (ns), t0 before the
// submitting call, t1 after it returned, t2 after the I/O was reaped (a synchronous call's
// t1 and t2 are both its return); then a summary line starting with '#'.
#include "bench/bench_io.h"
#include "now_ns.h"

#include <fcntl.h>
#include <liburing.h>
#include <linux/aio_abi.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using nvmetrace::test::now_ns;

int usage() {
    std::fprintf(stderr,
                 "usage: io_edges libaio|io_uring|io_uring_cmd|psync|pvsync2 DEVICE read|write "
                 "SIZE COUNT [SPAN_BYTES [SEED]]\n");
    return 2;
}

struct Io {
    uint64_t off, t0, t1, t2;
};

int fail(const char* what) {
    std::fprintf(stderr, "io_edges: %s: %s\n", what, std::strerror(errno));
    return 1;
}

// One I/O of an engine: fills io's times, returns the I/O's result (bytes, or -errno).
using DoIo = std::function<int64_t(Io&)>;

}  // namespace

int main(int argc, char** argv) {
    if (argc < 6)
        return usage();
    const std::string engine = argv[1], dev = argv[2], op = argv[3];
    if (op != "read" && op != "write")
        return usage();
    const uint64_t size = std::strtoull(argv[4], nullptr, 0);
    const long count = std::strtol(argv[5], nullptr, 0);
    const uint64_t span = argc > 6 ? std::strtoull(argv[6], nullptr, 0) : 256ULL << 20;
    const uint64_t seed = argc > 7 ? std::strtoull(argv[7], nullptr, 0) : 1;
    if (size == 0 || size % 512 || count <= 0 || span < size)
        return usage();

    const bool write = op == "write";
    const bool passthru = engine == "io_uring_cmd";
    const int fd = open(dev.c_str(), (write ? O_RDWR : O_RDONLY) | (passthru ? 0 : O_DIRECT));
    if (fd < 0)
        return fail(dev.c_str());
    void* buf = nullptr;
    if (posix_memalign(&buf, 4096, size) != 0)
        return 1;
    std::memset(buf, 0x5a, size);

    DoIo one;
    aio_context_t ctx = 0;
    io_uring ring{};
    uint32_t nsid = 0, lba_size = 512;
    iovec iov{buf, size};
    if (engine == "libaio") {
        if (syscall(SYS_io_setup, 1, &ctx) != 0)
            return fail("io_setup");
        one = [&](Io& io) -> int64_t {
            iocb cb{};
            iocb* cbs[1] = {&cb};
            io_event ev{};
            cb.aio_lio_opcode = write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
            cb.aio_fildes = static_cast<uint32_t>(fd);
            cb.aio_buf = reinterpret_cast<uint64_t>(buf);
            cb.aio_nbytes = size;
            cb.aio_offset = static_cast<int64_t>(io.off);
            io.t0 = now_ns();
            if (syscall(SYS_io_submit, ctx, 1, cbs) != 1)
                return -errno;
            io.t1 = now_ns();
            if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, nullptr) != 1)
                return -errno;
            io.t2 = now_ns();
            return ev.res;
        };
    } else if (engine == "io_uring" || passthru) {
        if (passthru) {
            const int id = ioctl(fd, NVME_IOCTL_ID);
            if (id <= 0)
                return fail("NVME_IOCTL_ID (not an NVMe generic char device?)");
            nsid = static_cast<uint32_t>(id);
            try {
                lba_size = nvmetrace::bench::inspect_device(dev).lba_size;
            } catch (const std::exception& e) {
                std::fprintf(stderr, "io_edges: %s\n", e.what());
                return 1;
            }
        }
        // the ring as fio sets it up: completions' task work deferred to the call that reaps
        // (DEFER_TASKRUN, one issuer), no IPI for it (COOP_TASKRUN), and those dropped one by
        // one where the kernel refuses them
        unsigned flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER |
                         IORING_SETUP_DEFER_TASKRUN |
                         (passthru ? IORING_SETUP_SQE128 | IORING_SETUP_CQE32 : 0);
        int r;
        for (;;) {
            io_uring_params p{};
            p.flags = flags;
            r = io_uring_queue_init_params(4, &ring, &p);
            if (r != -EINVAL)
                break;
            if (flags & IORING_SETUP_DEFER_TASKRUN)
                flags &= ~(IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER);
            else if (flags & IORING_SETUP_COOP_TASKRUN)
                flags &= ~IORING_SETUP_COOP_TASKRUN;
            else
                break;
        }
        if (r < 0) {
            errno = -r;
            return fail("io_uring_queue_init_params");
        }
        one = [&](Io& io) -> int64_t {
            io_uring_sqe* sqe = io_uring_get_sqe(&ring);
            if (!sqe)
                return -EBUSY;
            if (passthru) {
                std::memset(sqe, 0, 2 * sizeof(*sqe));
                nvmetrace::bench::prep_passthru(sqe, fd, write, nsid, lba_size, buf, size, io.off);
            } else if (write) {
                io_uring_prep_write(sqe, fd, buf, static_cast<unsigned>(size), io.off);
            } else {
                io_uring_prep_read(sqe, fd, buf, static_cast<unsigned>(size), io.off);
            }
            io.t0 = now_ns();
            // as fio: the submitting call asks for completions too (IORING_ENTER_GETEVENTS,
            // waiting for none), so a CQE posted while it ran is handed over at its return
            int ret = io_uring_submit_and_get_events(&ring);
            if (ret != 1)
                return ret < 0 ? ret : -EIO;
            io.t1 = now_ns();
            io_uring_cqe* cqe = nullptr;
            ret = io_uring_wait_cqe(&ring, &cqe);
            if (ret < 0)
                return ret;
            io.t2 = now_ns();
            // a passthrough command's result is its NVMe status (0: done, all of it)
            const int64_t res = passthru && cqe->res == 0 ? static_cast<int64_t>(size) : cqe->res;
            io_uring_cqe_seen(&ring, cqe);
            return res;
        };
    } else if (engine == "psync" || engine == "pvsync2") {
        const bool v2 = engine == "pvsync2";
        one = [&, v2](Io& io) -> int64_t {
            const auto off = static_cast<off_t>(io.off);
            io.t0 = now_ns();
            const ssize_t n =
                v2 ? (write ? pwritev2(fd, &iov, 1, off, 0) : preadv2(fd, &iov, 1, off, 0))
                   : (write ? pwrite(fd, buf, size, off) : pread(fd, buf, size, off));
            io.t1 = io.t2 = now_ns();
            return n < 0 ? -errno : n;
        };
    } else {
        return usage();
    }

    std::mt19937_64 rng(seed);
    const uint64_t blocks = span / size;
    std::vector<Io> ios(static_cast<size_t>(count));
    for (Io& io : ios) {
        io.off = (rng() % blocks) * size;
        const int64_t res = one(io);
        if (res != static_cast<int64_t>(size)) {
            std::fprintf(stderr, "io_edges: %s %s at %llu: result %lld%s%s\n", engine.c_str(),
                         op.c_str(), static_cast<unsigned long long>(io.off),
                         static_cast<long long>(res), res < 0 ? ", " : "",
                         res < 0 ? std::strerror(static_cast<int>(-res)) : "");
            return 1;
        }
    }
    // the cost of one clock read, which each edge carries about half of
    uint64_t clk = 0;
    for (int i = 0; i < 1000; i++) {
        const uint64_t a = now_ns();
        clk += now_ns() - a;
    }
    std::printf("# engine %s\n", engine.c_str());
    uint64_t total = 0;
    for (const Io& io : ios) {
        std::printf("%s %llu %llu %llu %llu\n", op.c_str(), static_cast<unsigned long long>(io.off),
                    static_cast<unsigned long long>(io.t0), static_cast<unsigned long long>(io.t1),
                    static_cast<unsigned long long>(io.t2));
        total += io.t2 - io.t0;
    }
    std::printf("# %ld %s of %llu bytes by %s at QD1: mean %.2f us; a clock read %.3f us\n", count,
                op.c_str(), static_cast<unsigned long long>(size), engine.c_str(),
                static_cast<double>(total) / 1e3 / static_cast<double>(count),
                static_cast<double>(clk) / 1e3 / 1000);
    if (ctx)
        syscall(SYS_io_destroy, ctx);
    if (ring.ring_fd > 0)
        io_uring_queue_exit(&ring);
    close(fd);
    return 0;
}
