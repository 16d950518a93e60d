// <linux/nvmetrace.h> as C++ sees it, pinned: sizes, offsets, and every
// number that crosses the user/kernel boundary.  Changing any of these
// breaks the ABI; bump NVMETRACE_ABI_VERSION (or the ring version) instead.
#include "uapi_c_layout.h"

#include <linux/nvmetrace.h>

#include <cstddef>
#include <type_traits>

#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

using Ctrl = nvmetrace_ring_ctrl;
using Rec = nvmetrace_rec;

static_assert(std::is_standard_layout_v<Ctrl> && std::is_trivially_copyable_v<Ctrl>);
static_assert(std::is_standard_layout_v<Rec> && std::is_trivially_copyable_v<Rec>);

// The control page: line 0 description, line 1 producer, line 2 consumer.
static_assert(sizeof(Ctrl) == NVMETRACE_RING_CTRL_SIZE && NVMETRACE_RING_CTRL_SIZE == 4096);
static_assert(offsetof(Ctrl, magic) == 0);
static_assert(offsetof(Ctrl, version) == 4);
static_assert(offsetof(Ctrl, compat_version) == 6);
static_assert(offsetof(Ctrl, size) == 8);
static_assert(offsetof(Ctrl, rec_size) == 12);
static_assert(offsetof(Ctrl, nr_recs) == 16);
static_assert(offsetof(Ctrl, cpu) == 20);
static_assert(offsetof(Ctrl, data_offset) == 24);
static_assert(offsetof(Ctrl, map_size) == 32);
static_assert(offsetof(Ctrl, head) == 64);
static_assert(offsetof(Ctrl, lost) == 72);
static_assert(offsetof(Ctrl, gap_recs) == 80);
static_assert(offsetof(Ctrl, gap_first) == 88);
static_assert(offsetof(Ctrl, gap_last) == 96);
static_assert(offsetof(Ctrl, tail) == 128);
static_assert(offsetof(Ctrl, __reserved) == 192);
static_assert(offsetof(Ctrl, head) / NVMETRACE_CACHELINE !=
                  offsetof(Ctrl, tail) / NVMETRACE_CACHELINE,
              "head and tail must not share a cache line");
static_assert(offsetof(Ctrl, map_size) + sizeof(Ctrl::map_size) <= NVMETRACE_CACHELINE,
              "line 0 fits one cache line");

// One record: 48 bytes, no implicit padding.
static_assert(sizeof(Rec) == 48 && alignof(Rec) == 8);
static_assert(offsetof(Rec, ts) == 0);
static_assert(offsetof(Rec, lba) == 8);
static_assert(offsetof(Rec, aux) == 16);
static_assert(offsetof(Rec, dev) == 24);
static_assert(offsetof(Rec, len) == 28);
static_assert(offsetof(Rec, event) == 32);
static_assert(offsetof(Rec, qid) == 34);
static_assert(offsetof(Rec, cid) == 36);
static_assert(offsetof(Rec, tag) == 38);
static_assert(offsetof(Rec, cntlid) == 40);
static_assert(offsetof(Rec, opcode) == 42);
static_assert(offsetof(Rec, flags) == 43);
static_assert(offsetof(Rec, seq) == 44);

TEST(Uapi, CAndCppAgreeOnTheLayout) {
    const uapi_c_layout& c = uapi_c_values;
    EXPECT_EQ(c.ctrl_size, sizeof(Ctrl));
    EXPECT_EQ(c.ctrl_align, alignof(Ctrl));
    EXPECT_EQ(c.ctrl_magic, offsetof(Ctrl, magic));
    EXPECT_EQ(c.ctrl_version, offsetof(Ctrl, version));
    EXPECT_EQ(c.ctrl_compat_version, offsetof(Ctrl, compat_version));
    EXPECT_EQ(c.ctrl_size_field, offsetof(Ctrl, size));
    EXPECT_EQ(c.ctrl_rec_size, offsetof(Ctrl, rec_size));
    EXPECT_EQ(c.ctrl_nr_recs, offsetof(Ctrl, nr_recs));
    EXPECT_EQ(c.ctrl_cpu, offsetof(Ctrl, cpu));
    EXPECT_EQ(c.ctrl_data_offset, offsetof(Ctrl, data_offset));
    EXPECT_EQ(c.ctrl_map_size, offsetof(Ctrl, map_size));
    EXPECT_EQ(c.ctrl_head, offsetof(Ctrl, head));
    EXPECT_EQ(c.ctrl_lost, offsetof(Ctrl, lost));
    EXPECT_EQ(c.ctrl_gap_recs, offsetof(Ctrl, gap_recs));
    EXPECT_EQ(c.ctrl_gap_first, offsetof(Ctrl, gap_first));
    EXPECT_EQ(c.ctrl_gap_last, offsetof(Ctrl, gap_last));
    EXPECT_EQ(c.ctrl_tail, offsetof(Ctrl, tail));
    EXPECT_EQ(c.ctrl_reserved, offsetof(Ctrl, __reserved));
    EXPECT_EQ(c.rec_size, sizeof(Rec));
    EXPECT_EQ(c.rec_align, alignof(Rec));
    EXPECT_EQ(c.rec_ts, offsetof(Rec, ts));
    EXPECT_EQ(c.rec_lba, offsetof(Rec, lba));
    EXPECT_EQ(c.rec_aux, offsetof(Rec, aux));
    EXPECT_EQ(c.rec_dev, offsetof(Rec, dev));
    EXPECT_EQ(c.rec_len, offsetof(Rec, len));
    EXPECT_EQ(c.rec_event, offsetof(Rec, event));
    EXPECT_EQ(c.rec_qid, offsetof(Rec, qid));
    EXPECT_EQ(c.rec_cid, offsetof(Rec, cid));
    EXPECT_EQ(c.rec_tag, offsetof(Rec, tag));
    EXPECT_EQ(c.rec_cntlid, offsetof(Rec, cntlid));
    EXPECT_EQ(c.rec_opcode, offsetof(Rec, opcode));
    EXPECT_EQ(c.rec_flags, offsetof(Rec, flags));
    EXPECT_EQ(c.rec_seq, offsetof(Rec, seq));
}

// Numbers on the wire.  Attributes and commands are positional in their
// enums, so inserting one in the middle renumbers the rest: these catch it.
TEST(Uapi, NetlinkNumbersArePinned) {
    EXPECT_STREQ(NVMETRACE_GENL_NAME, "nvmetrace");
    EXPECT_EQ(NVMETRACE_GENL_VERSION, 1);
    // 2: hook states INLINED and SPARE; layout fields NVMETRACE_L_TCP_REQ_QUEUE
    // and the nvme_request.genctr of the nvme-tcp and nvme-rdma groups
    // 3: hook state STALE; the modules' BTF identities NVMETRACE_L_BTF_*
    // 4: the vmlinux group NVMETRACE_L_AIO_KIOCB_* (the aio iocb identity)
    // 5: NVMETRACE_CMD_ADMIT and START's NVMETRACE_START_DEV_FILTER
    // 6: NVMETRACE_CMD_LAYOUT (a transport's layout while recording)
    // 7: NVMETRACE_A_FD: POOL_GET and DMA_COST take a device by a descriptor open on it
    // 8: the group NVMETRACE_L_DIO_SIMPLE_* (iomap's fast path of a small O_DIRECT read)
    EXPECT_EQ(NVMETRACE_ABI_VERSION, 8);

    EXPECT_EQ(NVMETRACE_CMD_GET_VERSION, 1);
    EXPECT_EQ(NVMETRACE_CMD_GET_STATUS, 2);
    EXPECT_EQ(NVMETRACE_CMD_START, 3);
    EXPECT_EQ(NVMETRACE_CMD_STOP, 4);
    EXPECT_EQ(NVMETRACE_CMD_GET_HOOKS, 5);
    EXPECT_EQ(NVMETRACE_CMD_POOL_GET, 6);
    EXPECT_EQ(NVMETRACE_CMD_DMA_COST, 7);
    EXPECT_EQ(NVMETRACE_CMD_ADMIT, 8);
    EXPECT_EQ(NVMETRACE_CMD_LAYOUT, 9);
    EXPECT_EQ(NVMETRACE_CMD_MAX, 9);
    EXPECT_EQ(NVMETRACE_START_DEV_FILTER, 1u);
    EXPECT_EQ(NVMETRACE_MAX_DEVS, 64);

    const int attrs[] = {
        NVMETRACE_A_UNSPEC,       NVMETRACE_A_ABI_VERSION,   NVMETRACE_A_MODULE_VERSION,
        NVMETRACE_A_RING_VERSION, NVMETRACE_A_STATE,         NVMETRACE_A_NR_RINGS,
        NVMETRACE_A_RING_RECS,    NVMETRACE_A_RING_MAP_SIZE, NVMETRACE_A_REC_SIZE,
        NVMETRACE_A_RECORDS,      NVMETRACE_A_LOST,          NVMETRACE_A_ROLE,
        NVMETRACE_A_SAMPLE,       NVMETRACE_A_SEED,          NVMETRACE_A_DEVS,
        NVMETRACE_A_DEV,          NVMETRACE_A_HOOK,          NVMETRACE_A_HOOK_NAME,
        NVMETRACE_A_HOOK_KIND,    NVMETRACE_A_HOOK_STATE,    NVMETRACE_A_HOOK_ERROR,
        NVMETRACE_A_HOOK_HITS,    NVMETRACE_A_FLAGS,         NVMETRACE_A_PAD,
        NVMETRACE_A_LAYOUT,       NVMETRACE_A_POOL,          NVMETRACE_A_DMA,
        NVMETRACE_A_FD,
    };
    for (int i = 0; i < static_cast<int>(std::size(attrs)); i++)
        EXPECT_EQ(attrs[i], i) << "attribute #" << i << " moved";
    // New attributes go at the end (A_MAX grows); the ones above never move.
    EXPECT_GE(NVMETRACE_A_MAX, 27);
    EXPECT_EQ(NVMETRACE_L_NVMET_TCP_BASE, 64);
    EXPECT_EQ(NVMETRACE_L_NVME_RDMA_BASE, 96);
    EXPECT_EQ(NVMETRACE_L_NVMET_RDMA_BASE, 128);

    EXPECT_EQ(NVMETRACE_STATE_IDLE, 0);
    EXPECT_EQ(NVMETRACE_STATE_RECORDING, 1);
    EXPECT_EQ(NVMETRACE_ROLE_HOST, 1u);
    EXPECT_EQ(NVMETRACE_ROLE_TARGET, 2u);
    EXPECT_EQ(NVMETRACE_HOOK_TRACEPOINT, 1);
    EXPECT_EQ(NVMETRACE_HOOK_KPROBE, 2);
    EXPECT_EQ(NVMETRACE_HOOK_FAILED, 4);
    EXPECT_EQ(NVMETRACE_HOOK_INLINED, 5);
    EXPECT_EQ(NVMETRACE_HOOK_SPARE, 6);
    EXPECT_EQ(NVMETRACE_HOOK_STALE, 7);
    // one identity per module of a layout group, after the last group
    EXPECT_EQ(NVMETRACE_L_BTF_BASE, 144);
    EXPECT_EQ(NVMETRACE_L_BTF_NVMET, 144);
    EXPECT_EQ(NVMETRACE_L_BTF_NVME_TCP, 145);
    EXPECT_EQ(NVMETRACE_L_BTF_NVMET_TCP, 146);
    EXPECT_EQ(NVMETRACE_L_BTF_NVME_RDMA, 147);
    EXPECT_EQ(NVMETRACE_L_BTF_NVMET_RDMA, 148);
    EXPECT_EQ(NVMETRACE_L_BTF_LAST, 148);
    EXPECT_LT(NVMETRACE_L_RDMAT_RSP_REQ, NVMETRACE_L_BTF_BASE);
    EXPECT_LT(NVMETRACE_L_BTF_LAST, NVMETRACE_L_MAX);
    // the kernel's own group, after the identities (it has none)
    EXPECT_EQ(NVMETRACE_L_VMLINUX_BASE, 152);
    EXPECT_EQ(NVMETRACE_L_AIO_KIOCB_RW, 152);
    EXPECT_EQ(NVMETRACE_L_AIO_KIOCB_RES, 153);
    EXPECT_EQ(NVMETRACE_L_VMLINUX_LAST, 153);
    EXPECT_EQ(NVMETRACE_L_DIO_SIMPLE_BASE, 154);
    EXPECT_EQ(NVMETRACE_L_DIO_SIMPLE_IOCB, 154);
    EXPECT_EQ(NVMETRACE_L_DIO_SIMPLE_BIO, 155);
    EXPECT_EQ(NVMETRACE_L_DIO_SIMPLE_LAST, 155);
    EXPECT_LE(NVMETRACE_L_DIO_SIMPLE_LAST, NVMETRACE_L_MAX);
    EXPECT_LT(NVMETRACE_L_BTF_LAST, NVMETRACE_L_VMLINUX_BASE);
    EXPECT_LE(NVMETRACE_L_VMLINUX_LAST, NVMETRACE_L_MAX);
    EXPECT_EQ(NVMETRACE_L_MAX, 159);
    // the nvme-tcp group grows at its end, below the next group's base
    EXPECT_EQ(NVMETRACE_L_TCP_REQ_OFFSET + 1, NVMETRACE_L_TCP_REQ_QUEUE);
    EXPECT_EQ(NVMETRACE_L_TCP_REQ_QUEUE + 1, NVMETRACE_L_TCP_NVME_REQ_GENCTR);
    EXPECT_EQ(NVMETRACE_L_TCP_LAST, NVMETRACE_L_TCP_NVME_REQ_GENCTR);
    EXPECT_LT(NVMETRACE_L_TCP_LAST, NVMETRACE_L_NVMET_TCP_BASE);
    EXPECT_EQ(NVMETRACE_L_RDMA_CTRL_TAG_SET + 1, NVMETRACE_L_RDMA_NVME_REQ_GENCTR);
    EXPECT_EQ(NVMETRACE_L_RDMA_LAST, NVMETRACE_L_RDMA_NVME_REQ_GENCTR);
    EXPECT_LT(NVMETRACE_L_RDMA_LAST, NVMETRACE_L_NVMET_RDMA_BASE);
}

TEST(Uapi, RingAndRecordNumbersArePinned) {
    EXPECT_EQ(NVMETRACE_RING_MAGIC, 0x4e565452u);
    // 2: GAP markers, and the open drop run in the control page
    EXPECT_EQ(NVMETRACE_RING_VERSION, 2);
    EXPECT_EQ(NVMETRACE_RING_COMPAT_VERSION, 2);
    EXPECT_EQ(NVMETRACE_CACHELINE, 64);
    EXPECT_EQ(NVMETRACE_EV_BIO_QUEUE, 1);
    EXPECT_EQ(NVMETRACE_EV_RQ_COMPLETE, 6);
    EXPECT_EQ(NVMETRACE_EV_NVMET_INIT, 32);
    EXPECT_EQ(NVMETRACE_EV_NVMET_COMPLETE, 35);
    EXPECT_EQ(NVMETRACE_EV_RDMAT_SEND_DONE, 163);
    EXPECT_EQ(NVMETRACE_EV_GAP, 192);
    EXPECT_EQ(NVMETRACE_EV_MAX, 255);
    EXPECT_EQ(NVMETRACE_REC_WRITE, 1u);
    EXPECT_EQ(NVMETRACE_REC_HAS_CID, 2u);
    EXPECT_EQ(NVMETRACE_REC_HAS_QID, 4u);
    EXPECT_EQ(NVMETRACE_NO_LBA, ~0ull);
}

}  // namespace
}  // namespace nvmetrace
