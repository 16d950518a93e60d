#!/bin/bash
# 00-boot: the guest kernel boots, Debian's modprobe finds its modules, fio/nvme/ip/rdma run.
# lane-timeout: 60
. "$NVMETRACE_SRC/tests/guest/lib.sh"

log "kernel $(uname -r), expected $KREL"
[ "$(uname -r)" = "$KREL" ] || fail "uname -r is $(uname -r), expected $KREL"
[ -d "/lib/modules/$KREL/kernel" ] || fail "/lib/modules/$KREL not visible in the guest"
modprobe null_blk nr_devices=1 || fail "modprobe null_blk failed"
wait_for 5 test -b /dev/nullb0 || fail "/dev/nullb0 did not appear"
lsmod | grep -q '^null_blk' || fail "null_blk not in lsmod"
modprobe -r null_blk || fail "modprobe -r null_blk failed"
fio --version || fail "fio does not run"
nvme version || fail "nvme-cli does not run"
ip -br addr show lo | grep -q 127.0.0.1 || fail "lo has no 127.0.0.1"
rdma --version >/dev/null 2>&1 || rdma -V || fail "rdma (iproute2) does not run"
for d in /sys/kernel/debug /sys/kernel/tracing /sys/kernel/config; do
	mountpoint -q "$d" || fail "$d not mounted"
done
echo ok >"$RESULTS/boot-ok" || fail "results share not writable"
log "guest OK"
