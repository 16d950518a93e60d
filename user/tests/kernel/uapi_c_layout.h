/*
 * The layout of the UAPI structs as the C compiler sees it
 * (tests/kernel/uapi_c_test.c), compared with C++'s in tests/kernel/uapi_test.cc.
 */
#ifndef NVMETRACE_UAPI_C_LAYOUT_H
#define NVMETRACE_UAPI_C_LAYOUT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct uapi_c_layout {
    size_t ctrl_size, ctrl_align;
    size_t ctrl_magic, ctrl_version, ctrl_compat_version, ctrl_size_field, ctrl_rec_size;
    size_t ctrl_nr_recs, ctrl_cpu, ctrl_data_offset, ctrl_map_size;
    size_t ctrl_head, ctrl_lost, ctrl_gap_recs, ctrl_gap_first, ctrl_gap_last, ctrl_tail,
        ctrl_reserved;
    size_t rec_size, rec_align;
    size_t rec_ts, rec_lba, rec_aux, rec_dev, rec_len, rec_event, rec_qid, rec_cid, rec_tag;
    size_t rec_cntlid, rec_opcode, rec_flags, rec_seq;
};

extern const struct uapi_c_layout uapi_c_values;

#ifdef __cplusplus
}
#endif

#endif /* NVMETRACE_UAPI_C_LAYOUT_H */
