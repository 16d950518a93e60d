/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every kernel-version difference nvmetrace has to bridge.
 *
 * The rest of the module has no LINUX_VERSION_CODE test: it calls the
 * nvmetrace_* wrappers below.  Each wrapper cites the upstream commit that
 * made it necessary.  Supported: Debian's 6.1 and 6.12 kernels.
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
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

#endif /* NVMETRACE_COMPAT_H */
