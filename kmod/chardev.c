// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/nvmetrace, the data channel.
 *
 * The device does one thing: mmap() of one CPU's ring, at file offset
 * cpu * map_size, exactly map_size bytes, shared, never executable; or, at
 * NVMETRACE_POOL_MMAP_OFFSET, of the whole test pool (pool.c).  No read,
 * write or ioctl: control goes through generic netlink (netlink.c).
 *
 * Lifetime: the fops below are owned by this module, so every open file pins
 * it; every mapping holds its file (vma->vm_file), so a mapping that outlives
 * close() still pins the module, and the rings (freed only at unload) stay.
 * VM_DONTCOPY keeps mappings out of fork()ed children, VM_DONTEXPAND stops
 * mremap() from growing one past its ring.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/cpumask.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/vmalloc.h>

#include "compat.h"
#include "nvmetrace.h"

static int nvmetrace_chardev_open(struct inode *inode, struct file *file)
{
	/* the node is 0600 root; this also holds if someone chmods it */
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	return 0;
}

/* mmap lock held for writing; may sleep. */
static int nvmetrace_chardev_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long map_pages = nvmetrace_dev.map_size >> PAGE_SHIFT;
	unsigned long cpu;

	if (vma->vm_pgoff >= NVMETRACE_POOL_MMAP_OFFSET >> PAGE_SHIFT)
		return nvmetrace_pool_mmap(file, vma);

	/* the consumer writes tail: a private (COW) copy would never reach us */
	if (!(vma->vm_flags & VM_SHARED) || (vma->vm_flags & VM_EXEC))
		return -EINVAL;
	if (vma->vm_end - vma->vm_start != nvmetrace_dev.map_size)
		return -EINVAL;
	/* in pages, so a huge offset cannot overflow */
	if (vma->vm_pgoff % map_pages)
		return -EINVAL;
	cpu = vma->vm_pgoff / map_pages;
	if (cpu >= nr_cpu_ids || !cpu_possible(cpu))
		return -EINVAL;

	nvmetrace_vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTCOPY, VM_MAYEXEC);
	/* pgoff 0: the file offset selected the ring, the ring is mapped whole */
	return remap_vmalloc_range(vma, nvmetrace_ring_base(cpu), 0);
}

static const struct file_operations nvmetrace_chardev_fops = {
	.owner		= THIS_MODULE,
	.open		= nvmetrace_chardev_open,
	.mmap		= nvmetrace_chardev_mmap,
};

static struct miscdevice nvmetrace_chardev = {
	.minor		= MISC_DYNAMIC_MINOR,
	.name		= NVMETRACE_DEVICE_NAME,
	.fops		= &nvmetrace_chardev_fops,
	.mode		= 0600,
};

/* At load, after the rings exist. */
int nvmetrace_chardev_init(void)
{
	int err = misc_register(&nvmetrace_chardev);

	if (err)
		pr_err("cannot register /dev/%s: %d\n", NVMETRACE_DEVICE_NAME, err);
	return err;
}

/* At unload: no file can be open (each one pins the module). */
void nvmetrace_chardev_exit(void)
{
	misc_deregister(&nvmetrace_chardev);
}
