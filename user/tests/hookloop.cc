// hookloop: one hooked kernel function called in a tight loop from user space, for the cost of
// one hook hit without I/O around it (tools/bench --micro). Each call is a system call that
// fails or returns at once, so all it does is enter the kernel, pass the hook and leave:
//
//   getppid     no hook (the bare system call, the reference)
//   io_submit   io_submit(0, 0, NULL): __x64_sys_io_submit's entry hook (the ftrace ops),
//               then -EINVAL for the context
//   io_getevents io_getevents(0, 0, 0, NULL, NULL): the do_io_getevents kretprobe's entry,
//               then -EINVAL for the context
//   pread       pread(/dev/zero, 1 byte): __x64_sys_pread64's kretprobe entry, which looks the
//               file up and leaves it (not an O_DIRECT block device), then the read
//   uring_nop   one IORING_OP_NOP submitted and waited for in one io_uring_enter(): the
//               __x64_sys_io_uring_enter kretprobe (entry and, with GETEVENTS, return) and the
//               io_uring_complete tracepoint of its CQE
//   uring_submit one IORING_OP_NOP submitted by an io_uring_enter() with GETEVENTS that waits
//               for none (as fio commits its SQEs), its CQE then taken from the mapped ring:
//               the kretprobe's entry (its return only while a sampled CQE is pending) and the
//               tracepoint
//
// usage: hookloop KIND CALLS [REPEATS]
// prints "KIND CALLS ns_per_call" with ns_per_call the least over REPEATS (default 5) loops of
// CALLS calls, on CLOCK_MONOTONIC: in an icount guest (one ns per guest instruction) it is
// instructions per call, and the least of several loops leaves out the ones a timer
// interrupt fell into.
#include "now_ns.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using nvmetrace::test::now_ns;

int usage() {
    std::fprintf(
        stderr,
        "usage: hookloop getppid|io_submit|io_getevents|pread|uring_nop|uring_submit CALLS "
        "[REPEATS]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3 || argc > 4)
        return usage();
    const std::string kind = argv[1];
    char* end = nullptr;
    const long calls = std::strtol(argv[2], &end, 10);
    if (*end || calls <= 0)
        return usage();
    long repeats = 5;
    if (argc == 4) {
        repeats = std::strtol(argv[3], &end, 10);
        if (*end || repeats <= 0)
            return usage();
    }
    enum { kGetppid, kIoSubmit, kIoGetevents, kPread, kUringNop, kUringSubmit } k;
    if (kind == "getppid")
        k = kGetppid;
    else if (kind == "io_submit")
        k = kIoSubmit;
    else if (kind == "io_getevents")
        k = kIoGetevents;
    else if (kind == "pread")
        k = kPread;
    else if (kind == "uring_nop")
        k = kUringNop;
    else if (kind == "uring_submit")
        k = kUringSubmit;
    else
        return usage();
    int fd = -1;
    if (k == kPread) {
        fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            std::fprintf(stderr, "hookloop: /dev/zero: %s\n", std::strerror(errno));
            return 1;
        }
    }
    io_uring ring{};
    const bool uring = k == kUringNop || k == kUringSubmit;
    if (uring) {
        if (const int r = io_uring_queue_init(8, &ring, 0); r < 0) {
            std::fprintf(stderr, "hookloop: io_uring_queue_init: %s\n", std::strerror(-r));
            return 1;
        }
    }
    // each call must do what the table above says: a call that succeeds (or fails otherwise)
    // where it must fail with EINVAL measures another path
    auto one = [&]() -> bool {
        char b;
        switch (k) {
            case kGetppid:
                return syscall(SYS_getppid) > 0;
            case kIoSubmit:
                return syscall(SYS_io_submit, 0UL, 0L, nullptr) < 0 && errno == EINVAL;
            case kIoGetevents:
                return syscall(SYS_io_getevents, 0UL, 0L, 0L, nullptr, nullptr) < 0 &&
                       errno == EINVAL;
            case kPread:
                return pread(fd, &b, 1, 0) == 1;
            case kUringNop:
            case kUringSubmit: {
                io_uring_sqe* sqe = io_uring_get_sqe(&ring);
                io_uring_cqe* cqe = nullptr;
                if (!sqe)
                    return false;
                io_uring_prep_nop(sqe);
                // uring_submit: to_submit 1, min_complete 0, IORING_ENTER_GETEVENTS; the NOP
                // completes inline, so its CQE is in the ring when the call returns
                const int n = k == kUringNop ? io_uring_submit_and_wait(&ring, 1)
                                             : io_uring_submit_and_get_events(&ring);
                if (n != 1 || io_uring_peek_cqe(&ring, &cqe))
                    return false;
                const bool ok = cqe->res == 0;
                io_uring_cqe_seen(&ring, cqe);
                return ok;
            }
        }
        return false;
    };
    if (!one()) {
        std::fprintf(stderr, "hookloop: %s did not return as it must: %s\n", kind.c_str(),
                     std::strerror(errno));
        return 1;
    }
    uint64_t best = UINT64_MAX;
    for (long r = 0; r < repeats; r++) {
        const uint64_t t0 = now_ns();
        for (long i = 0; i < calls; i++)
            if (!one()) {
                std::fprintf(stderr, "hookloop: %s call %ld failed: %s\n", kind.c_str(), i,
                             std::strerror(errno));
                return 1;
            }
        const uint64_t t = now_ns() - t0;
        if (t < best)
            best = t;
    }
    std::printf("%s %ld %.1f\n", kind.c_str(), calls, static_cast<double>(best) / calls);
    if (fd >= 0)
        close(fd);
    if (uring)
        io_uring_queue_exit(&ring);
    return 0;
}
