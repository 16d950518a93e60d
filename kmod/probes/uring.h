/* SPDX-License-Identifier: GPL-2.0 */
/*
 * uring.h — what the block device file's submission (probes/aio.c) asks of
 * the io_uring probes (probes/uring.c).
 */
#ifndef NVMETRACE_PROBES_URING_H
#define NVMETRACE_PROBES_URING_H

#include <linux/fs.h>
#include <linux/types.h>

/*
 * Whether iocb is an io_uring request's, submitted by the current task or
 * taken from io-wq by it: then *since gets the nanoseconds since the kernel
 * took its SQE and *path its NVMETRACE_URING_* path; for a request from
 * io-wq *wq_queued gets when it was queued there (else 0), for the caller's
 * URING_WQ record after its FILE_SUBMIT.
 */
bool nvmetrace_uring_origin(const struct kiocb *iocb, u64 *since, u16 *path,
			    u64 *wq_queued);

/*
 * nvme_setup_cmd of a sampled passthrough read or write whose request's
 * end_io_data is ioucmd: if that is an io_uring passthrough command
 * (IORING_OP_URING_CMD) whose SQE the io_uring probes saw taken, record its
 * FILE_SUBMIT (the SQE's time in aux) and keep the command for its CQE;
 * false: not one.
 */
bool nvmetrace_uring_pt_setup(const void *ioucmd, u64 lba, u32 dev, u32 len, u8 op);

/*
 * The first sampled bio of a file's read or write that io_uring request req
 * issued (probes/aio.c): its command, kept for the request's CQE.
 */
void nvmetrace_uring_fs_keep(const void *req, u64 lba, u32 dev, u8 op);

/*
 * An async read of a file that missed the page cache (probes/aio.c): if req
 * is the current task's io_uring request, it may be sampled later (its
 * bios submitted from task work, while the task waits in io_uring_enter()).
 */
void nvmetrace_uring_file_miss(const void *req);

#endif
