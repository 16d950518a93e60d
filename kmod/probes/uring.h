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

#endif
