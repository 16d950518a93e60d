/*
 * <linux/nvmetrace.h> seen by a strict C11 compiler (built with -std=c11
 * -Werror): the header must come first and stand alone, its own
 * _Static_asserts run, and the layout is exported for uapi_test.cc to
 * compare with what C++ sees.
 */
#include <linux/nvmetrace.h>

#include <stddef.h>

#include "uapi_c_layout.h"

#define OFF(type, field) offsetof(struct type, field)

/* head, lost and tail on their own cache lines, as Documentation/ring.md says. */
_Static_assert(OFF(nvmetrace_ring_ctrl, head) == 1 * NVMETRACE_CACHELINE, "head on line 1");
_Static_assert(OFF(nvmetrace_ring_ctrl, lost) == 1 * NVMETRACE_CACHELINE + 8, "lost on line 1");
_Static_assert(OFF(nvmetrace_ring_ctrl, tail) == 2 * NVMETRACE_CACHELINE, "tail on line 2");
_Static_assert(OFF(nvmetrace_ring_ctrl, __reserved) == 3 * NVMETRACE_CACHELINE, "reserved");
_Static_assert(sizeof(struct nvmetrace_ring_ctrl) == NVMETRACE_RING_CTRL_SIZE, "ctrl size");
_Static_assert(sizeof(struct nvmetrace_rec) == 48, "rec size");
_Static_assert(OFF(nvmetrace_rec, seq) == 44, "seq last");

const struct uapi_c_layout uapi_c_values = {
	.ctrl_size = sizeof(struct nvmetrace_ring_ctrl),
	.ctrl_align = _Alignof(struct nvmetrace_ring_ctrl),
	.ctrl_magic = OFF(nvmetrace_ring_ctrl, magic),
	.ctrl_version = OFF(nvmetrace_ring_ctrl, version),
	.ctrl_compat_version = OFF(nvmetrace_ring_ctrl, compat_version),
	.ctrl_size_field = OFF(nvmetrace_ring_ctrl, size),
	.ctrl_rec_size = OFF(nvmetrace_ring_ctrl, rec_size),
	.ctrl_nr_recs = OFF(nvmetrace_ring_ctrl, nr_recs),
	.ctrl_cpu = OFF(nvmetrace_ring_ctrl, cpu),
	.ctrl_data_offset = OFF(nvmetrace_ring_ctrl, data_offset),
	.ctrl_map_size = OFF(nvmetrace_ring_ctrl, map_size),
	.ctrl_head = OFF(nvmetrace_ring_ctrl, head),
	.ctrl_lost = OFF(nvmetrace_ring_ctrl, lost),
	.ctrl_gap_recs = OFF(nvmetrace_ring_ctrl, gap_recs),
	.ctrl_gap_first = OFF(nvmetrace_ring_ctrl, gap_first),
	.ctrl_gap_last = OFF(nvmetrace_ring_ctrl, gap_last),
	.ctrl_tail = OFF(nvmetrace_ring_ctrl, tail),
	.ctrl_reserved = OFF(nvmetrace_ring_ctrl, __reserved),
	.rec_size = sizeof(struct nvmetrace_rec),
	.rec_align = _Alignof(struct nvmetrace_rec),
	.rec_ts = OFF(nvmetrace_rec, ts),
	.rec_lba = OFF(nvmetrace_rec, lba),
	.rec_aux = OFF(nvmetrace_rec, aux),
	.rec_dev = OFF(nvmetrace_rec, dev),
	.rec_len = OFF(nvmetrace_rec, len),
	.rec_event = OFF(nvmetrace_rec, event),
	.rec_qid = OFF(nvmetrace_rec, qid),
	.rec_cid = OFF(nvmetrace_rec, cid),
	.rec_tag = OFF(nvmetrace_rec, tag),
	.rec_cntlid = OFF(nvmetrace_rec, cntlid),
	.rec_opcode = OFF(nvmetrace_rec, opcode),
	.rec_flags = OFF(nvmetrace_rec, flags),
	.rec_seq = OFF(nvmetrace_rec, seq),
};
