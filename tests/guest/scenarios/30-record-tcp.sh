#!/bin/bash
# 30-record-tcp: record host and target of an nvme-tcp loopback run with fio, then report:
# live lines and a summary; the sampled commands match fio's I/O count; a recording killed
# with SIGKILL mid-run still reports what it holds and says where the file ended; script prints
# every record of the recording once; record -- fio records for fio's lifetime and exits
# with its status, keeps the previous nvmetrace.ntr as .old, and ends a command at -d; an
# io_submit() batch of file reads before device reads has each device read reaped as its own.
# The guest records; the reports of the recordings are 30-record-tcp.check's, on the lane's
# machine.
# lane-timeout: 240
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"
"$NVMETRACE_BIN" --version
"$NVMETRACE_BIN" status || fail "status failed"

# polled while record writes it: on the guest's tmpfs, not the 9p share (see recorder_started)
ROUT=/tmp/record.out
"$NVMETRACE_BIN" record -r host -r target -s 1 -i 1 -o "$RESULTS/rec.ntr" >"$ROUT" 2>&1 &
REC=$!
recorder_wait "$ROUT"
run_fio rd --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
	--iodepth=1 --time_based --runtime=3 || fail "fio failed"
kill -INT $REC
wait $REC || { cat "$ROUT"; fail "record failed"; }
cat "$ROUT"
cp "$ROUT" "$RESULTS/record.out"
grep -q 'profiling as host+target' "$ROUT" || fail "no start line"
grep -qE '^ +[0-9.]+s  read 4KiB nvme' "$ROUT" || fail "no live line"

# the exact aio iocb: io_submit() batches of two regular-file reads, then two device reads;
# each device read's reap is its own (the call that returned both), never a file read's
mixed=$(dirname "$NVMETRACE_BIN")/tests/aio_mixed
"$NVMETRACE_BIN" record -r host -s 1 -o "$RESULTS/mixed.ntr" >"$RESULTS/mixed.rec" 2>&1 &
REC=$!
recorder_wait "$RESULTS/mixed.rec"
"$mixed" "/dev/$dev" /tmp/aio-mixed.dat 50 >"$RESULTS/mixed.out" || fail "aio_mixed failed"
kill -INT $REC
wait $REC || { cat "$RESULTS/mixed.rec"; fail "record of aio_mixed failed"; }
grep 'aio iocbs not followed' "$RESULTS/mixed.rec" && fail "no aio iocb layout"
rm -f /tmp/aio-mixed.dat

# A kernel without BTF, as the tool sees it: /sys/kernel/btf hidden under an empty tmpfs in a
# mount namespace of record's own. The hooks that read private layouts are refused and say
# so, aio iocbs are not followed to their reap (record says it); 30-record-tcp.check finds
# every fio I/O a command, in groups whose span says it does not reach user space.
unshare -m bash -c 'mount -t tmpfs nobtf /sys/kernel/btf && exec "$@"' nobtf \
	"$NVMETRACE_BIN" record -r host -s 1 -o "$RESULTS/nobtf.ntr" -- fio --name=nobtf \
	--output-format=json --output="$RESULTS/nobtf.json" --filename="/dev/$dev" \
	--ioengine=libaio --direct=1 --rw=randread --bs=4k --iodepth=2 --time_based --runtime=2 \
	>"$RESULTS/nobtf.out" 2>&1 || { cat "$RESULTS/nobtf.out"; fail "record without BTF failed"; }
cat "$RESULTS/nobtf.out"
[ -e /sys/kernel/btf/vmlinux ] || fail "the kernel's BTF is gone outside record's namespace"
grep -q 'aio iocbs not followed to their reap' "$RESULTS/nobtf.out" ||
	fail "record without BTF did not say that aio iocbs are not followed"

# SIGKILL mid-recording: the file stays readable up to its last flushed block
"$NVMETRACE_BIN" record -r host -r target -s 1 -o "$RESULTS/killed.ntr" >"$RESULTS/killed.out" 2>&1 &
REC=$!
# killed before it records (a slow kernel: a debug build takes long to attach), it would hold nothing
recorder_wait "$RESULTS/killed.out"
run_fio rd2 --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
	--iodepth=1 --time_based --runtime=3 || fail "fio failed"
kill -KILL $REC; wait $REC || true
"$NVMETRACE_BIN" status
# the recording belonged to the killed recorder's netlink socket: the module stopped it
wait_for 5 bash -c "'$NVMETRACE_BIN' status --json | jq -e '.state == \"idle\"' >/dev/null" ||
	fail "the module still records after its recorder was killed"

# record -- fio: starts recording, runs fio, stops when it exits, exits with its status;
# without -o the recording is nvmetrace.ntr in the current folder; without -r the role is
# what the machine has (here both: a connected namespace and the loopback's subsystem)
(cd "$RESULTS" && "$NVMETRACE_BIN" record -s 1 -- fio --name=cmd --output-format=json \
	--output="$RESULTS/cmd.json" --filename="/dev/$dev" --ioengine=libaio --direct=1 \
	--rw=randread --bs=4k --iodepth=1 --time_based --runtime=2) >"$RESULTS/cmd.out" 2>&1 &&
	rc=0 || rc=$?
cat "$RESULTS/cmd.out"
[ "$rc" = 0 ] || fail "record -- fio exited $rc, fio 0"
grep -qE 'recording as host\+target: this machine has [0-9]+ NVMe-oF namespaces? and [0-9]+ nvmet subsystems?' \
	"$RESULTS/cmd.out" || fail "record without -r did not say it took host+target from the machine"
[ -s "$RESULTS/nvmetrace.ntr" ] || fail "record -- fio left no nvmetrace.ntr"
# a command's failure is record's status; the first recording is kept as .old
(cd "$RESULTS" && "$NVMETRACE_BIN" record -r host -- sh -c 'exit 3') >"$RESULTS/cmd3.out" 2>&1 &&
	rc=0 || rc=$?
[ "$rc" = 3 ] || { cat "$RESULTS/cmd3.out"; fail "record -- sh -c 'exit 3' exited $rc"; }
grep -q 'nvmetrace.ntr exists: moved to nvmetrace.ntr.old' "$RESULTS/cmd3.out" ||
	fail "record did not say it kept the earlier recording: $(cat "$RESULTS/cmd3.out")"
[ -s "$RESULTS/nvmetrace.ntr" ] || fail "record -- sh left no nvmetrace.ntr"
# --realtime: the drain (record's main thread) at SCHED_FIFO, none of what it starts: the
# command, and the second stage's thread (-i 1 starts it)
"$NVMETRACE_BIN" record -r host -s 100 -i 1 --realtime 7 -o "$RESULTS/rt.ntr" -- sh -c \
	'n=0; while [ "$(ls /proc/$PPID/task | wc -l)" -lt 2 ] && [ $n -lt 300 ]; do n=$((n + 1)); sleep 0.1; done
	echo "recorder $PPID"; for t in /proc/$PPID/task/*; do echo "task ${t##*/} $(chrt -p ${t##*/} | tr "\n" " ")"; done; chrt -p $$' \
	>"$RESULTS/rt.out" 2>&1 || { cat "$RESULTS/rt.out"; fail "record --realtime 7 failed"; }
cat "$RESULTS/rt.out"
rpid=$(awk '$1 == "recorder" { print $2 }' "$RESULTS/rt.out")
[ -n "$rpid" ] || fail "record --realtime: the command did not run"
grep -q "^task $rpid .*SCHED_FIFO|SCHED_RESET_ON_FORK.*priority: 7" "$RESULTS/rt.out" ||
	fail "record --realtime 7: the recorder's main thread is not SCHED_FIFO 7"
[ "$(grep -c '^task ' "$RESULTS/rt.out")" -ge 2 ] || fail "record -i 1 has no second thread"
grep '^task ' "$RESULTS/rt.out" | grep -v "^task $rpid " | grep -q 'SCHED_FIFO' &&
	fail "record --realtime: a thread other than the drain runs SCHED_FIFO"
grep -q "^pid [0-9]*'s current scheduling policy: SCHED_OTHER" "$RESULTS/rt.out" ||
	fail "record --realtime: the command does not run SCHED_OTHER"
# -d bounds the command: it gets SIGTERM, record exits 128 + 15
start=$(date +%s)
"$NVMETRACE_BIN" record -r host -d 1 -o "$RESULTS/bounded.ntr" -- sleep 60 >"$RESULTS/bounded.out" 2>&1 &&
	rc=0 || rc=$?
[ "$rc" = 143 ] || { cat "$RESULTS/bounded.out"; fail "record -d 1 -- sleep 60 exited $rc, not 143"; }
[ $(($(date +%s) - start)) -lt 50 ] || fail "record -d 1 -- sleep 60 waited for sleep"
grep -q 'sending SIGTERM to sleep' "$RESULTS/bounded.out" || fail "record -d did not say it ended sleep"
"$NVMETRACE_BIN" stop || fail "stop while idle failed"
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
