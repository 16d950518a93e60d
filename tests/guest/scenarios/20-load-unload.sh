#!/bin/bash
# 20-load-unload: insmod/rmmod nvmetrace.ko 20 times (LOOPS; tests/check-debug runs 100)
# while fio runs on the nvme-tcp namespace (QD2, rate-limited to 1500 IOPS so the module
# loads are not starved of the two emulated CPUs); asserts every insmod/rmmod succeeded,
# each with a read completed while the module was in, and fio had no errors.
# SKIPs (77) when the lane has no nvmetrace.ko for this kernel.
# lane-timeout: 150
# lane-tcg: multi (the module unloads while I/O runs on the other vCPU at the same time)
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
LOOPS=${LOOPS:-20}

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
mod=$(modinfo -F name "$NVMETRACE_KO" 2>/dev/null || basename "$NVMETRACE_KO" .ko)
log "namespace /dev/$dev, module $mod ($NVMETRACE_KO)"

run_fio_bg load-unload --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread \
	--bs=4k --iodepth=2 --rate_iops=1500 --time_based --runtime=600
trap 'kill -TERM $FIO_PID 2>/dev/null || true' EXIT
io_flowing "$dev" || fail "fio did no I/O on /dev/$dev: $(tail -n 5 "$RESULTS/load-unload.log")"
kill -0 "$FIO_PID" 2>/dev/null || fail "fio died at start: $(tail -n 5 "$RESULTS/load-unload.log")"

t0=$(cut -d' ' -f1 /proc/uptime)
for i in $(seq 1 "$LOOPS"); do
	insmod "$NVMETRACE_KO" || fail "insmod #$i failed"
	# a read completes while the module is in: it goes out under I/O
	io_flowing "$dev" 30 || fail "no read completed on /dev/$dev within 30 s of insmod #$i"
	rmmod "$mod" || fail "rmmod #$i failed"
	kill -0 "$FIO_PID" 2>/dev/null || fail "fio stopped during load/unload #$i"
done
t1=$(cut -d' ' -f1 /proc/uptime)
log "$LOOPS insmod/rmmod cycles OK ($(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", (b-a)}')s)"
trap - EXIT
fio_stop
fio_check load-unload
nvme_disconnect_all
nvmet_teardown
log "done"
