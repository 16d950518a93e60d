#!/bin/bash
# 45-ftrace-order: nvmetrace against the kernel's own tracefs events. While nvmetrace records
# both roles of an nvme-tcp loopback, ftrace records nvme:nvme_setup_cmd, nvme:nvme_complete_rq,
# nvmet:nvmet_req_init and nvmet:nvmet_req_complete with trace_clock mono (nvmetrace's clock).
# For a sample of commands, found in both by (qid, cid, and the LBA where the event has it),
# the order of the four events is the same in both, and each nvmetrace timestamp is within a
# tolerance of ftrace's (ftrace prints microseconds). nvmetrace's nvmet-tcp events of those
# commands (the command's arrival on the target's socket, R2T, in-capsule and H2C data; the
# workload mixes 4k writes in the capsule and 64k writes after an R2T) fall where they must
# against ftrace's nvmet_req_init and nvmet_req_complete: the arrival before nvmet_req_init,
# the others between the two. Under load either ring may lose events: only commands complete
# on both sides and in ftrace are compared, and at least 50 of them must be.
# lane-timeout: 240
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN
T=/sys/kernel/tracing
[ -d "$T/events" ] || mount -t tracefs nodev "$T" 2>/dev/null || true
[ -w "$T/trace_clock" ] || skip "no tracefs"

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"
for e in nvme/nvme_setup_cmd nvme/nvme_complete_rq nvmet/nvmet_req_init nvmet/nvmet_req_complete; do
	[ -e "$T/events/$e/enable" ] || skip "no tracepoint $e"
done

echo 0 >"$T/tracing_on"
echo mono >"$T/trace_clock" || fail "trace_clock mono refused"
echo 8192 >"$T/buffer_size_kb"
echo >"$T/trace"
for e in nvme/nvme_setup_cmd nvme/nvme_complete_rq nvmet/nvmet_req_init nvmet/nvmet_req_complete; do
	echo 1 >"$T/events/$e/enable"
done
"$NT" record -r host -r target -s 1 -o "$RESULTS/rec.ntr" >"$RESULTS/record.out" 2>&1 &
rec=$!
recorder_wait "$RESULTS/record.out"
echo 1 >"$T/tracing_on"
run_fio rd --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randrw --bssplit=4k/70:64k/30 \
	--iodepth=4 --size=64m --time_based --runtime=2 || fail "fio failed"
echo 0 >"$T/tracing_on"
kill -INT $rec
wait $rec || { cat "$RESULTS/record.out"; fail "record failed"; }
for e in nvme/nvme_setup_cmd nvme/nvme_complete_rq nvmet/nvmet_req_init nvmet/nvmet_req_complete; do
	echo 0 >"$T/events/$e/enable"
done
cat "$T/trace" >"$RESULTS/ftrace.txt"
echo >"$T/trace"
echo local >"$T/trace_clock"
# ftrace's ring may overrun under load: say so (those commands are then left out below)
grep -H 'overrun' "$T"/per_cpu/cpu*/stats 2>/dev/null || true
# the comparison with ftrace's events is 45-ftrace-order.check's, on the lane's machine
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
