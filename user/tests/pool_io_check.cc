// pool_io_check DEVICE [FALLBACKS]: the module's test pool used as io_uring
// fixed buffers; the pool must have exactly FALLBACKS (default 0) buffers made
// of smaller folios.
//
// Maps the whole pool through /dev/nvmetrace, checks the module counts the
// mapping, writes and reads every buffer through the mapping, registers one
// fixed buffer per pool buffer with io_uring, writes buffer 0's pattern to
// DEVICE with O_DIRECT write_fixed and reads it back into buffer 1 with
// read_fixed (DEVICE must keep data: null_blk memory_backed=1 behind nvmet),
// then unregisters, unmaps and checks the mapping count is back to 0.
// Run by tests/guest/scenarios/70-pool.sh as root with the module loaded with
// a pool.  Exit 0 = pass, 1 = fail, 77 = skip (no pool).
#include "kernel/genl.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/nvmetrace.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace {

[[noreturn]] void fail(const std::string& what) {
    fmt::print(stderr, "FAIL: {}\n", what);
    exit(1);
}

uint64_t read_param(const char* name) {
    std::ifstream in(fmt::format("/sys/module/nvmetrace/parameters/{}", name));
    uint64_t v = 0;
    if (!(in >> v))
        fail(fmt::format("cannot read module parameter {}", name));
    return v;
}

uint8_t pattern(size_t buf, size_t off) {
    return static_cast<uint8_t>((buf * 131 + off * 7 + (off >> 12)) & 0xff);
}

// Submit one fixed-buffer read or write and wait for it; returns cqe->res.
int rw_fixed(io_uring* ring, bool write, int fd, void* buf, unsigned len, int index) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (!sqe)
        fail("no SQE");
    if (write)
        io_uring_prep_write_fixed(sqe, fd, buf, len, 0, index);
    else
        io_uring_prep_read_fixed(sqe, fd, buf, len, 0, index);
    int ret = io_uring_submit(ring);
    if (ret != 1)
        fail(fmt::format("io_uring_submit: {}", strerror(-ret)));
    io_uring_cqe* cqe = nullptr;
    ret = io_uring_wait_cqe(ring, &cqe);
    if (ret < 0)
        fail(fmt::format("io_uring_wait_cqe: {}", strerror(-ret)));
    int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return res;
}

int run(const char* device, uint32_t want_fallbacks) {
    const uint64_t nr = read_param("pool_nr");
    const uint64_t size = read_param("pool_buf_kb") * 1024;
    if (nr < 2) {
        fmt::print("SKIP: the module has no pool of at least 2 buffers (pool_nr={})\n", nr);
        return 77;
    }
    const uint64_t total = nr * size;

    nvmetrace::GenlClient client;
    nvmetrace::PoolInfo before = client.pool_get();
    if (before.allocated != nr || before.buf_size != size || before.bytes != total)
        fail(fmt::format("POOL_GET says {} x {} ({} bytes), parameters say {} x {}",
                         before.allocated, before.buf_size, before.bytes, nr, size));
    if (before.fallbacks != want_fallbacks)
        fail(fmt::format("{} buffers fell back to smaller folios, expected {}", before.fallbacks,
                         want_fallbacks));

    int fd = open("/dev/nvmetrace", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        fail(fmt::format("open /dev/nvmetrace: {}", strerror(errno)));
    void* map = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                     static_cast<off_t>(NVMETRACE_POOL_MMAP_OFFSET));
    if (map == MAP_FAILED)
        fail(fmt::format("mmap of the pool: {}", strerror(errno)));
    close(fd);  // the mapping outlives the descriptor
    auto* base = static_cast<uint8_t*>(map);
    if (client.pool_get().mappings != before.mappings + 1)
        fail("the module does not count the mapping");

    // Every byte of every buffer, through the mapping.
    for (size_t b = 0; b < nr; b++)
        for (size_t off = 0; off < size; off++)
            base[b * size + off] = pattern(b, off);
    for (size_t b = 0; b < nr; b++)
        for (size_t off = 0; off < size; off++)
            if (base[b * size + off] != pattern(b, off))
                fail(fmt::format("buffer {} byte {} does not read back", b, off));

    io_uring ring;
    int ret = io_uring_queue_init(4, &ring, 0);
    if (ret < 0)
        fail(fmt::format("io_uring_queue_init: {}", strerror(-ret)));
    std::vector<iovec> iov(nr);
    for (size_t b = 0; b < nr; b++)
        iov[b] = {.iov_base = base + b * size, .iov_len = size};
    ret = io_uring_register_buffers(&ring, iov.data(), static_cast<unsigned>(nr));
    if (ret < 0)
        fail(fmt::format("io_uring_register_buffers of the pool: {}", strerror(-ret)));
    fmt::print("registered {} pool buffers of {} bytes as io_uring fixed buffers\n", nr, size);

    int dev = open(device, O_RDWR | O_DIRECT | O_CLOEXEC);
    if (dev < 0)
        fail(fmt::format("open {} O_DIRECT: {}", device, strerror(errno)));
    const auto len = static_cast<unsigned>(size);
    ret = rw_fixed(&ring, true, dev, base, len, 0);
    if (ret != static_cast<int>(len))
        fail(fmt::format("write_fixed from buffer 0: {}", ret < 0 ? strerror(-ret) : "short"));
    memset(base + size, 0x5a, size);
    ret = rw_fixed(&ring, false, dev, base + size, len, 1);
    if (ret != static_cast<int>(len))
        fail(fmt::format("read_fixed into buffer 1: {}", ret < 0 ? strerror(-ret) : "short"));
    if (memcmp(base, base + size, size) != 0)
        fail("read_fixed into buffer 1 did not bring back what buffer 0 wrote");
    fmt::print(
        "O_DIRECT write_fixed from buffer 0 and read_fixed into buffer 1 of {}: {} bytes "
        "match\n",
        device, size);
    close(dev);

    io_uring_unregister_buffers(&ring);
    io_uring_queue_exit(&ring);
    if (munmap(map, total) != 0)
        fail(fmt::format("munmap: {}", strerror(errno)));
    nvmetrace::PoolInfo after = client.pool_get();
    if (after.mappings != before.mappings)
        fail(fmt::format("{} mappings left after munmap", after.mappings));
    fmt::print("pool: {} x {} bytes, {} folios, {} fallbacks, mappings back to {}\n",
               after.allocated, after.buf_size, after.folios, after.fallbacks, after.mappings);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2 && argc != 3) {
        fmt::print(stderr, "usage: pool_io_check DEVICE [FALLBACKS]\n");
        return 2;
    }
    try {
        return run(argv[1], argc == 3 ? static_cast<uint32_t>(std::stoul(argv[2])) : 0);
    } catch (const std::exception& e) {
        fail(e.what());
    }
}
