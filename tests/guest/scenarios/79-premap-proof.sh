#!/bin/bash
# 79-premap-proof: the premap proof on a device that has an ordinary request limit (an
# emulated PCI NVMe controller: its MDTS gives max_hw_sectors_kb). A passthrough read of
# exactly the limit from a pool buffer completes (the path works); the proof — one block
# more, from a pool buffer — is refused on a stock kernel, and the run says plainly that
# this kernel has no premapped request path (exit 1, never PASSED, never split). On 6.1 every
# passthrough read from a pool buffer on this emulated PCI controller is refused with EINVAL
# (over nvme-tcp the same reads work, see 76-bench-pool): there is no control read there,
# only the proof's verdict is checked.
# lane-qemu: -drive file=null-co://,if=none,id=nvmetrace_nvm,format=raw -device nvme,serial=nvmetrace1,drive=nvmetrace_nvm
# lane-timeout: 200
. "$NVMETRACE_SRC/tests/guest/lib.sh"
. "$NVMETRACE_SRC/tests/guest/dmacost_check.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN
dev=$(pci_nvme_namespace)
ng=/dev/${dev/#nvme/ng}
[ -c "$ng" ] || fail "no generic char device $ng for $dev"
max_kb=$(cat "/sys/block/$dev/queue/max_hw_sectors_kb")
log "$dev: max_hw_sectors_kb $max_kb"
[ "$max_kb" -lt 2048 ] || fail "max_hw_sectors_kb $max_kb: the emulated controller should report an MDTS"
insmod "$NVMETRACE_KO" pool_buf_kb=2048 pool_nr=2 || fail "insmod with a pool failed"

# the path works from a pool buffer at the limit itself (not on 6.1, see above)
if [ "$LANE_KERNEL" != 6.1 ]; then
	"$NT" bench "$ng" -p read -b "${max_kb}k" -q 1 -n 4 --buf pool >"$RESULTS/at-limit.txt" 2>&1 ||
		{ cat "$RESULTS/at-limit.txt"; fail "a passthrough read of ${max_kb} KiB from the pool failed"; }
	grep -q 'failed 0, fallbacks 0' "$RESULTS/at-limit.txt" ||
		{ cat "$RESULTS/at-limit.txt"; fail "the read at the limit had failures or fallbacks"; }
fi

# one block over it: refused, and said so
rc=0
"$NT" bench "$ng" --premap-proof >"$RESULTS/proof.txt" 2>&1 || rc=$?
cat "$RESULTS/proof.txt"
[ "$rc" = 1 ] || fail "the premap proof exited $rc on a stock kernel (expected 1)"
grep -q 'PASSED' "$RESULTS/proof.txt" && fail "the premap proof claims PASSED on a stock kernel"
grep -q 'this kernel has no premapped request path' "$RESULTS/proof.txt" ||
	fail "the proof does not say that this kernel has no premapped path"
rmmod nvmetrace || fail "rmmod failed"
log "premap proof refused as expected above ${max_kb} KiB"
