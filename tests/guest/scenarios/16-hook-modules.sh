#!/bin/bash
# 16-hook-modules: the function-entry hooks go through one shared ftrace ops (not kprobes),
# and one whose module goes away while recording lets go of it and comes back with it. While
# `nvmetrace record -r host` runs: nvme_tcp's functions are in tracefs' enabled_functions and
# not in the kprobe list, and one trampoline (the one ops') calls nvmetrace's callback directly
# for all of them (no ftrace_ops_assist_func in between); after the host disconnects and
# nvme_tcp is removed
# they are gone from both; after nvme_tcp is loaded again and the host reconnects they are
# back (nvme_tcp is the same module: its BTF has the identity START carried with its layout,
# so its hooks are not left STALE, which the recorder would report), and the recording
# survives a fio run. After the recording neither enabled_functions
# nor the kprobe list holds any of them (nor the do_io_getevents and pread/pwrite kretprobes).
# Then a target-only recording whose modules (nvmet_tcp, nvmet) all go away: nothing stays
# hooked (nvmetrace's ftrace ops is unregistered, never left with an empty filter, which
# would trace every function), and the hooks come back when the modules do.
# (Records of the reconnected namespace are not checked: the recording's device list,
# fixed at START, names the old controller's path disk.)
# lane-timeout: 240
# lane-tcg: multi (hooks fire on one vCPU while the other unloads their module)
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN
T=/sys/kernel/tracing
EF=$T/enabled_functions
KL=/sys/kernel/debug/kprobes/list
[ -r $EF ] || fail "no $EF (tracefs not mounted?)"
[ -r $KL ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null || true

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"

# hooked FUNCTION: its line in enabled_functions (empty when not hooked through ftrace)
hooked() { grep -E "^$1( |$)" $EF || true; }
kprobed() { grep -E " $1(\+0x[0-9a-f]+)?( |$)" $KL 2>/dev/null || true; }

# the recorders' output is read while and after they write it: kept on the guest's tmpfs (a
# file on the 9p results share read then may show its first bytes as NULs), copied into the
# results once read (a failure prints it)
ROUT=/tmp/record.out RTOUT=/tmp/record-t.out
"$NT" record -r host -s 1 -o "$RESULTS/rec.ntr" >"$ROUT" 2>&1 &
REC=$!
trap 'kill -INT $REC 2>/dev/null || true' EXIT
recorder_wait "$ROUT"
cp $EF "$RESULTS/enabled-1.txt"
cat $KL >"$RESULTS/kprobes-1.txt" 2>/dev/null || true
SEND=$(tcp_send_hooks)
SEND1=${SEND%% *}
log "nvme-tcp send hooks on this kernel: $SEND"
case " $SEND " in
*" nvme_tcp_try_send "*) ;;
*) [ -z "$(hooked nvme_tcp_try_send)" ] ||
	fail "the stand-in nvme_tcp_try_send is hooked beside $SEND: $(hooked nvme_tcp_try_send)" ;;
esac
for f in $SEND nvme_tcp_recv_skb blkdev_read_iter aio_complete_rw __x64_sys_io_submit; do
	[ -n "$(hooked $f)" ] || fail "$f is not in $EF while recording"
	[ -z "$(kprobed $f)" ] || fail "$f has a kprobe: $(kprobed $f)"
	hooked $f | grep -q -- '->fhook_entry' ||
		fail "$f's trampoline does not call nvmetrace's callback directly: $(hooked $f)"
done
# one ops: every hooked function's call site goes to the same trampoline
tramps=$(grep -E "^(${SEND// /|}|nvme_tcp_recv_skb|blkdev_read_iter|aio_complete_rw|__x64_sys_io_submit) " $EF |
	grep -oE 'tramp: 0x[0-9a-f]+' | sort -u)
[ "$(echo "$tramps" | grep -c .)" = 1 ] || fail "the hooks are not in one ftrace ops: trampolines $(echo $tramps)"
log "hooked through ftrace: $(grep -cE '^(nvme_tcp_|blkdev_|aio_complete_rw|__x64_sys_io_submit)' $EF) functions, one ops (${tramps})"

# the host's transport module goes away while recording
nvme_disconnect_all
modprobe -r nvme_tcp || fail "cannot remove nvme_tcp while recording"
[ ! -d /sys/module/nvme_tcp ] || fail "nvme_tcp still loaded"
cp $EF "$RESULTS/enabled-2.txt"
! grep -q nvme_tcp_ $EF || fail "nvme_tcp functions still in $EF after the module went: $(grep nvme_tcp_ $EF)"
[ -n "$(hooked blkdev_read_iter)" ] || fail "blkdev_read_iter lost its hook with nvme_tcp"
kill -0 $REC || fail "record died when nvme_tcp went away"

# ... and comes back
modprobe nvme_tcp || fail "cannot load nvme_tcp again"
dev=$(nvme_tcp_connect)
wait_for 20 grep -qE "^$SEND1( |$)" $EF || fail "$SEND1 not hooked again after nvme_tcp came back"
cp $EF "$RESULTS/enabled-3.txt"
[ -n "$(hooked nvme_tcp_recv_skb)" ] || fail "nvme_tcp_recv_skb not hooked again"
[ -z "$(kprobed $SEND1)" ] || fail "$SEND1 came back as a kprobe"
[ "$(hooked $SEND1 | grep -oE 'tramp: 0x[0-9a-f]+')" = "$tramps" ] ||
	fail "$SEND1 came back outside the shared ops: $(hooked $SEND1)"
run_fio rd --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
	--iodepth=1 --size=4m --io_size=2m || fail "fio failed"
trap - EXIT
kill -INT $REC
wait $REC || { cat "$ROUT"; fail "record failed"; }
fio_check rd
! grep -q STALE "$ROUT" || fail "hooks left STALE by an unchanged nvme_tcp: $(grep STALE "$ROUT")"

# nothing left behind
cp $EF "$RESULTS/enabled-4.txt"
! grep -qE '^(nvme_tcp_|blkdev_read_iter|blkdev_write_iter|aio_complete_rw|__x64_sys_io_submit)' $EF ||
	fail "hooks left in $EF after the recording: $(cat $EF)"
! grep -qE 'nvme_tcp_|blkdev_read_iter|do_io_getevents|__x64_sys_p(read|write)' $KL 2>/dev/null ||
	fail "kprobes left after the recording: $(cat $KL)"
grep -q 'written to' "$ROUT" || { cat "$ROUT"; fail "record wrote no file"; }
cp "$ROUT" "$RESULTS/record.out"

# a target-only recording whose hooked modules all go away: nvmetrace's ops is unregistered
# before its filter would empty (an empty filter traces every function) and comes back with them
nvme_disconnect_all
"$NT" record -r target -s 1 -o "$RESULTS/rec-t.ntr" >"$RTOUT" 2>&1 &
REC=$!
trap 'kill -INT $REC 2>/dev/null || true' EXIT
recorder_wait "$RTOUT" "target record"
hooked nvmet_bdev_execute_rw | grep -q -- '->fhook_entry' || fail "nvmet_bdev_execute_rw not hooked through ftrace"
nvmet_teardown
[ ! -d /sys/module/nvmet ] || fail "cannot remove nvmet while recording"
cp $EF "$RESULTS/enabled-5.txt"
n=$(grep -c . $EF || true)
[ "$n" -lt 50 ] || fail "$n functions traced once the target's modules went (an empty filter traces everything)"
! grep -q fhook_entry $EF || fail "nvmetrace's ops still traces with no hooked module loaded: $(grep fhook_entry $EF)"
kill -0 $REC || fail "record died when nvmet went away"
nvmet_tcp_setup
wait_for 20 grep -q '^nvmet_tcp_queue_response' $EF || fail "nvmet_tcp_queue_response not hooked again after nvmet_tcp came back"
cp $EF "$RESULTS/enabled-6.txt"
hooked nvmet_bdev_execute_rw | grep -q -- '->fhook_entry' || fail "nvmet_bdev_execute_rw not hooked again through ftrace"
trap - EXIT
kill -INT $REC
wait $REC || { cat "$RTOUT"; fail "target record failed"; }
! grep -q STALE "$RTOUT" || fail "hooks left STALE by unchanged nvmet/nvmet_tcp: $(grep STALE "$RTOUT")"
cp "$RTOUT" "$RESULTS/record-t.out"
! grep -q fhook_entry $EF || fail "hooks left in $EF after the target recording: $(cat $EF)"
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
log "done"
