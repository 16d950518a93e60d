#!/bin/bash
# 71-dmacost-pci: `nvmetrace dmacost` on an emulated PCI NVMe namespace without an IOMMU:
# the DMA device is the controller's PCI function, no IOMMU translates, every size from
# 4 KiB to 2 MiB is measured (map+unmap and premapped medians), and the table is kept.
# lane-qemu: -drive file=null-co://,if=none,id=nvmetrace_nvm,format=raw -device nvme,serial=nvmetrace0,drive=nvmetrace_nvm
# lane-timeout: 200
. "$NVMETRACE_SRC/tests/guest/lib.sh"
. "$NVMETRACE_SRC/tests/guest/dmacost_check.sh"
need_ko
need_bin
dev=$(pci_nvme_namespace)
insmod "$NVMETRACE_KO"
dmacost_check "$dev" none
rmmod nvmetrace
