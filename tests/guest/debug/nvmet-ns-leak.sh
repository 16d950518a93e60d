#!/bin/bash
# nvmet-ns-leak: a control for a known kernel leak (tests/guest/kernel-leaks:
# nvmet-ns-disabled-under-io), run by tests/check-debug on the kmemleak kernel. With no
# nvmetrace loaded at any time: nvmet-tcp target and host, fio reading from the namespace,
# the target disables the namespace under it (the host removes its disk), enables it again
# (the host finds it again), then everything is torn down and nvmet unloaded. Asserts that
# kmemleak then finds exactly the known leak (its namespace and device_path), and nothing
# else: the leak 22-reset-overflow meets is the kernel's. When a kernel no longer leaks,
# this fails and says to take the entry out.
# lane-timeout: 300
. "$NVMETRACE_SRC/tests/guest/lib.sh"
[ -e /sys/kernel/debug/kmemleak ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
[ -w /sys/kernel/debug/kmemleak ] || skip "this kernel has no kmemleak"
lsmod | grep -q '^nvmetrace ' && fail "nvmetrace is loaded: this control runs without it"

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
nsd=$NVMET_CFG/subsystems/$NVMET_NQN/namespaces/1
run_fio_bg nsgone --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
	--iodepth=8 --time_based --runtime=600
io_flowing "$dev" 120 100 || fail "no 100 reads on /dev/$dev: $(tail -n 5 "$RESULTS/nsgone.log")"
echo 0 >"$nsd/enable" || fail "the target refused to disable namespace 1"
log "namespace 1 disabled on the target under fio"
wait_for 60 bash -c "[ ! -e /sys/block/$dev ]" || fail "/dev/$dev still there 60 s after its namespace went away"
fio_stop
echo 1 >"$nsd/enable" || fail "the target refused to enable namespace 1 again"
wait_for 60 nvme_bdev_of "$NVMET_NQN" >/dev/null || fail "the namespace did not come back on the host"
log "namespace back on the host as $(nvme_bdev_of "$NVMET_NQN")"
modules_snapshot
nvme_disconnect_all
nvmet_teardown
lsmod | grep -qE '^nvmet ' && fail "nvmet still loaded after the teardown"
kmemleak_judge --expect nvmet-ns-disabled-under-io
log "ok"
