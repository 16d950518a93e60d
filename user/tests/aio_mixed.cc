// aio_mixed: io_submit() batches whose block device reads come after iocbs that are not
// block device reads, to check that a recording follows each block read to its own reap
// (tests/guest/scenarios/30-record-tcp.sh).  Each batch is: two buffered reads of a regular
// file (they complete inside io_submit(), never reaching the block device's file
// operations), then two O_DIRECT reads of DEVICE.  The file reads' events are reaped first,
// one io_getevents() call each; the two device reads' together, in one call returning 2.
// So every device read's AIO_REAP must say 2 events returned: a reap matched by the n-th
// file submission of the call to the n-th iocb of the array would take a file read's.
//
// usage: aio_mixed DEVICE FILE COUNT
// FILE is created (8 KiB).  Prints one line per device read: "lba LBA" in the device's
// logical blocks; exits 1 if the kernel did not hand the events back in that order.
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr uint64_t kSize = 4096;

int fail(const char* what) {
    std::fprintf(stderr, "aio_mixed: %s: %s\n", what, std::strerror(errno));
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: aio_mixed DEVICE FILE COUNT\n");
        return 2;
    }
    const long count = std::strtol(argv[3], nullptr, 0);
    const int dev = open(argv[1], O_RDONLY | O_DIRECT);
    if (dev < 0)
        return fail(argv[1]);
    int lbs = 0;
    if (ioctl(dev, BLKSSZGET, &lbs) != 0 || lbs <= 0)
        return fail("BLKSSZGET");
    const int reg = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (reg < 0)
        return fail(argv[2]);
    static char fill[2 * kSize];
    std::memset(fill, 0x5a, sizeof(fill));
    if (write(reg, fill, sizeof(fill)) != static_cast<ssize_t>(sizeof(fill)))
        return fail("write");
    aio_context_t ctx = 0;
    if (syscall(SYS_io_setup, 8, &ctx) != 0)
        return fail("io_setup");
    void* bufs[4];
    for (void*& b : bufs)
        if (posix_memalign(&b, 4096, kSize) != 0)
            return 1;

    for (long i = 0; i < count; i++) {
        iocb cb[4]{};
        iocb* cbs[4];
        for (int k = 0; k < 4; k++) {
            const bool blk = k >= 2;
            cb[k].aio_lio_opcode = IOCB_CMD_PREAD;
            cb[k].aio_fildes = static_cast<uint32_t>(blk ? dev : reg);
            cb[k].aio_buf = reinterpret_cast<uint64_t>(bufs[k]);
            cb[k].aio_nbytes = kSize;
            // the device reads: distinct 4 KiB blocks, apart so that the block layer does not
            // merge them, so each LBA is one read and one command
            cb[k].aio_offset =
                static_cast<int64_t>(blk ? (4 * i + 2 * (k - 2)) * kSize : k * kSize);
            cbs[k] = &cb[k];
        }
        if (syscall(SYS_io_submit, ctx, 4, cbs) != 4)
            return fail("io_submit");
        io_event ev[2]{};
        for (int k = 0; k < 2; k++) {
            if (syscall(SYS_io_getevents, ctx, 1, 1, ev, nullptr) != 1)
                return fail("io_getevents");
            if (ev[0].obj != reinterpret_cast<uint64_t>(&cb[k])) {
                std::fprintf(stderr, "aio_mixed: the file read %d was not reaped %s\n", k,
                             k ? "second" : "first");
                return 1;
            }
        }
        if (syscall(SYS_io_getevents, ctx, 2, 2, ev, nullptr) != 2)
            return fail("io_getevents of the device reads");
        for (const io_event& e : ev)
            if (e.res != static_cast<int64_t>(kSize)) {
                std::fprintf(stderr, "aio_mixed: a device read returned %lld\n",
                             static_cast<long long>(e.res));
                return 1;
            }
        for (int k = 2; k < 4; k++)
            std::printf("lba %llu\n", static_cast<unsigned long long>(cb[k].aio_offset /
                                                                      static_cast<int64_t>(lbs)));
    }
    syscall(SYS_io_destroy, ctx);
    return 0;
}
