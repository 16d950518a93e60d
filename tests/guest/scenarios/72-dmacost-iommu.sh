#!/bin/bash
# 72-dmacost-iommu: `nvmetrace dmacost` on an emulated PCI NVMe namespace behind an
# emulated Intel IOMMU in translating mode: the IOMMU is reported translating, and every
# size is measured.
# lane-qemu: -device intel-iommu,intremap=off
# lane-qemu: -drive file=null-co://,if=none,id=nvmetrace_nvm,format=raw -device nvme,serial=nvmetrace0,drive=nvmetrace_nvm
# lane-append: intel_iommu=on iommu.passthrough=0
# lane-timeout: 200
. "$NVMETRACE_SRC/tests/guest/lib.sh"
. "$NVMETRACE_SRC/tests/guest/dmacost_check.sh"
need_ko
need_bin
dev=$(pci_nvme_namespace)
insmod "$NVMETRACE_KO"
dmacost_check "$dev" translating
rmmod nvmetrace
