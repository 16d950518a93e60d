/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every kernel-version difference nvmetrace has to bridge.
 *
 * The rest of the module has no kernel-version test: it calls the
 * nvmetrace_* wrappers below.  Each wrapper cites the upstream commit that
 * made it necessary.  An interface that changed is probed by kmod/Kbuild in
 * the headers being built against (NVMETRACE_HAVE_*), since a distribution
 * kernel may have backported it; only a change of behaviour that no header
 * shows is told by the version.  Built and tested: Debian's 6.1, 6.12, 7.2
 * and 7.3 kernels, each of which builds only with every probe right (a wrong
 * one leaves a symbol undeclared or writes a const field).
 *
 * Checked and needing no wrapper (keep it that way when editing):
 *  - generic netlink: the module uses only struct genl_ops (.doit/.dumpit,
 *    .flags), a family-wide .policy/.maxattr and genl_info's attrs, extack
 *    and genlhdr, which are the same in 6.1 and 6.12.  It leaves
 *    .resv_start_op at zero ("new families should leave this field at zero"
 *    in both kernels: every command is strictly validated), and has no
 *    .pre_doit/.post_doit, whose first argument became a struct
 *    genl_split_ops in commit 20b0b53aca43 ("genetlink: introduce split op
 *    representation"), v6.2.  struct genl_info has no .userhdr in 6.12
 *    (genl_info_userhdr() instead): not used either.
 *  - vmap(), VM_USERMAP, remap_vmalloc_range() and misc devices.
 */
#ifndef NVMETRACE_COMPAT_H
#define NVMETRACE_COMPAT_H

#include <linux/blkdev.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/version.h>

/*
 * commit bc292ab00f6c ("mm: introduce vma->vm_flags wrapper functions"),
 * v6.3: vma->vm_flags became read-only; flags change through vm_flags_*().
 * Called from ->mmap, with the mmap lock held for writing.
 */
static inline void nvmetrace_vm_flags_mod(struct vm_area_struct *vma,
					  vm_flags_t set, vm_flags_t clear)
{
#ifdef NVMETRACE_HAVE_VM_FLAGS_MOD
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

/*
 * io_uring of v6.1 refuses to register fixed buffers in a file-backed
 * mapping other than shmem or hugetlbfs (io_pin_pages(): "don't support
 * file backed memory"), so the pool mapping, whose vm_file is
 * /dev/nvmetrace, would get -EOPNOTSUPP.  Upstream commit "io_uring: rsrc:
 * delegate VMA file-backed check to GUP" (v6.5) left that check to
 * GUP, which allows a device's pages.  Before v6.5 the pool mapping gives
 * up its file, as /dev/zero's MAP_SHARED mmap replaces it (shmem_zero_setup();
 * mmap_region() copes with ->mmap changing vm_file).  The pool's vm_ops hold
 * the module instead (pool.c).  Called at the end of ->mmap, mmap lock held
 * for writing; the caller of mmap still holds the file.  A change inside
 * io_uring that no header shows: told by the version.
 */
static inline void nvmetrace_pool_drop_vm_file(struct vm_area_struct *vma)
{
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 5, 0)
	fput(vma->vm_file);
	vma->vm_file = NULL;
#endif
}

/*
 * NVMETRACE_HAVE_IOMAP_DIO_READ_SIMPLE: iomap's fast path of a small
 * O_DIRECT read, __iomap_dio_read_simple() (declared in <linux/iomap.h> of
 * Debian's 7.3, not of 7.2), whose bio is a member of a struct
 * iomap_dio_simple beside its kiocb, not an iomap_dio's.  Hooked where the
 * header declares it (probes/aio.c); the struct's offsets come from BTF.
 */

/*
 * Opening a block device by dev_t for a moment (DMA_COST, POOL_GET), read
 * only, not exclusively.  Upstream commit "block: replace fmode_t with
 * a block-specific type for block open flags" (v6.5) and the holder ops of
 * that release changed blkdev_get_by_dev()/blkdev_put(); "bdev: open block
 * device as files" (v6.9) replaced them with bdev_file_open_by_dev(), and
 * blkdev_get_by_dev() is gone from 6.12.  Process context, may sleep.
 */
struct nvmetrace_bdev {
	struct block_device *bdev;
#ifdef NVMETRACE_HAVE_BDEV_FILE
	struct file *file;
#endif
};

static inline int nvmetrace_bdev_open(dev_t dev, struct nvmetrace_bdev *b)
{
#ifdef NVMETRACE_HAVE_BDEV_FILE
	struct file *f = bdev_file_open_by_dev(dev, BLK_OPEN_READ, NULL, NULL);

	if (IS_ERR(f))
		return PTR_ERR(f);
	b->file = f;
	b->bdev = file_bdev(f);
#else
	struct block_device *bdev;

#ifdef NVMETRACE_HAVE_BLK_OPEN_MODE
	bdev = blkdev_get_by_dev(dev, BLK_OPEN_READ, NULL, NULL);
#else
	bdev = blkdev_get_by_dev(dev, FMODE_READ, NULL);
#endif
	if (IS_ERR(bdev))
		return PTR_ERR(bdev);
	b->bdev = bdev;
#endif
	return 0;
}

static inline void nvmetrace_bdev_close(struct nvmetrace_bdev *b)
{
#ifdef NVMETRACE_HAVE_BDEV_FILE
	fput(b->file);
#elif defined(NVMETRACE_HAVE_BLK_OPEN_MODE)
	blkdev_put(b->bdev, NULL);
#else
	blkdev_put(b->bdev, FMODE_READ);
#endif
}

#endif /* NVMETRACE_COMPAT_H */
