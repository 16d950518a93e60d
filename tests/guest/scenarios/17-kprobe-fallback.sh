#!/bin/bash
# 17-kprobe-fallback: the path a function-entry hook takes where ftrace cannot attach to its
# function (each hook a kprobe of its own), forced on every such hook with the module
# parameter hook_kprobes=1, since on these kernels ftrace attaches to them all. `probe` reports
# them as kprobes; while recording both roles of an nvme-tcp loopback they are in the kprobe
# list and nvmetrace's shared ftrace callback is on no function; the recording's commands have
# every event, host (from io_submit() to io_getevents()) and target, as with ftrace; after the
# recording no kprobe of nvmetrace's is left; and the module unloads while fio runs.
# lane-timeout: 240
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN
EF=/sys/kernel/tracing/enabled_functions
KL=/sys/kernel/debug/kprobes/list
[ -r $KL ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
[ -r $KL ] || skip "no $KL (debugfs)"

# function-entry hooks of a host and an nvme-tcp target recording (hooks.c, kind FTRACE)
FNS="__x64_sys_io_submit blkdev_read_iter blkdev_write_iter aio_complete_rw
nvme_tcp_recv_skb nvmet_bdev_execute_rw nvmet_bio_done nvmet_tcp_data_ready nvmet_tcp_map_data
nvmet_tcp_queue_response nvmet_tcp_build_pdu_iovec"
kprobed() { grep -E " $1(\+0x[0-9a-f]+)?( |$)" $KL || true; }

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" hook_kprobes=1 || fail "insmod hook_kprobes=1 failed"
FNS="$FNS $(tcp_send_hooks)"

"$NT" probe -r host -r target | tee "$RESULTS/probe.txt" || fail "probe failed"
for f in $FNS; do
	grep -qE "^  ok +$f +kprobe" "$RESULTS/probe.txt" || fail "probe does not report $f as an attached kprobe"
done

"$NT" record -r host -r target -s 1 -o "$RESULTS/rec.ntr" >"$RESULTS/record.out" 2>&1 &
rec=$!
recorder_wait "$RESULTS/record.out"
cat $KL >"$RESULTS/kprobes-recording.txt"
for f in $FNS; do
	[ -n "$(kprobed $f)" ] || fail "$f has no kprobe while recording"
done
! grep -q fhook_entry $EF 2>/dev/null || fail "nvmetrace's ftrace callback is on: $(grep fhook_entry $EF)"
# reads, in-capsule writes (4k) and writes after an R2T (64k)
run_fio mix --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randrw --bssplit=4k/60:64k/40 \
	--iodepth=4 --size=256m --time_based --runtime=3 || fail "fio failed"
fio_check mix
kill -INT $rec
wait $rec || { cat "$RESULTS/record.out"; fail "record failed"; }
cat "$RESULTS/record.out"
for f in $FNS do_io_getevents __x64_sys_pread64 __x64_sys_pwritev2; do
	[ -z "$(kprobed $f)" ] || fail "$f still has a kprobe after the recording: $(kprobed $f)"
done

# every hook fired through its kprobe: 17-kprobe-fallback.check reports the recording on
# the lane's machine

# unload while I/O runs (the recorder is gone: the module is idle, its kprobes unregistered)
run_fio_bg bg --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
	--iodepth=8 --size=256m --time_based --runtime=30
io_flowing "$dev" || fail "fio did no I/O on /dev/$dev: $(tail -n 5 "$RESULTS/bg.log")"
rmmod nvmetrace || fail "rmmod under load failed"
fio_stop
fio_check bg
nvme_disconnect_all
nvmet_teardown
log "every function-entry hook attached, recorded and detached as a kprobe"
