#!/bin/bash
# 42-rdma: nvme-rdma host and nvmet-rdma target over soft-RoCE (rdma_rxe on a veth end) in one
# guest.  `probe -t rdma` reports the nvme-rdma hooks waiting for their module before it is
# loaded and every RDMA hook attached once host and target are up (load: ok).  One recording
# of both roles (1-of-1) while fio runs 4k random reads, 64k random writes (data pulled by the
# target with RDMA READ) and 4k random writes (in-capsule data), with ftrace's nvme/nvmet
# events on; on the lane's machine (42-rdma.check) tests/guest/rdma_check.py then checks the
# join, every RDMA component (present, non-negative, summing to end to end) and, for a
# sample of commands, that nvmetrace's
# events fall in the order of the kernel's own events for the same (qid, cid).
# A kprobe that fires inside another one's handler is skipped by the kprobe core: up to 5 %
# of the commands may lack an RDMA event (see rdma_check.py).
# lane-timeout: 420
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN
T=/sys/kernel/tracing
[ -d "$T/events" ] || mount -t tracefs nodev "$T" 2>/dev/null || true
[ -w "$T/trace_clock" ] || skip "no tracefs"
EVENTS="nvme/nvme_setup_cmd nvme/nvme_complete_rq nvmet/nvmet_req_init nvmet/nvmet_req_complete"
RDMA_HOOKS="nvme_rdma_post_send nvme_rdma_send_done nvme_rdma_recv_done nvme_rdma_complete_rq
	nvmet_rdma_recv_done nvmet_rdma_read_data_done nvmet_rdma_queue_response nvmet_rdma_send_done"

insmod "$NVMETRACE_KO" || fail "insmod failed"
# nvme-rdma not loaded yet: its hooks wait for it, and say so
modprobe -r nvme_rdma 2>/dev/null || true
$NT probe -r host -t rdma | tee "$RESULTS/probe-before.txt" || fail "probe -r host -t rdma failed"
for h in nvme_rdma_post_send nvme_rdma_recv_done; do
	grep -qE "^  wait +$h " "$RESULTS/probe-before.txt" || fail "$h should wait for nvme_rdma"
done
if grep -qE '^  \S+ +nvme_tcp_' "$RESULTS/probe-before.txt"; then
	fail "probe -t rdma lists nvme-tcp hooks"
fi

rxe_setup
nvmet_rdma_setup
dev=$(nvme_rdma_connect)
grep -qx rdma /sys/class/nvme/nvme*/transport || fail "no nvme-rdma controller for $dev"

$NT probe -r host -r target -t rdma | tee "$RESULTS/probe.txt" || fail "probe -t rdma failed"
for h in $RDMA_HOOKS nvme_setup_cmd nvmet_req_init; do
	grep -qE "^  ok +$h +" "$RESULTS/probe.txt" || fail "$h not attached"
done
grep -q 'rdma (module nvme_rdma, BTF layout: ok)' "$RESULTS/probe.txt" || fail "no nvme_rdma layout"
grep -q 'rdma (module nvmet_rdma, BTF layout: ok)' "$RESULTS/probe.txt" || fail "no nvmet_rdma layout"
grep -q '  load: ok' "$RESULTS/probe.txt" || fail "load not ok"

for e in $EVENTS; do
	[ -e "$T/events/$e/enable" ] || skip "no tracepoint $e"
done
echo 0 >"$T/tracing_on"
echo mono >"$T/trace_clock" || fail "trace_clock mono refused"
echo 8192 >"$T/buffer_size_kb"
echo >"$T/trace"
for e in $EVENTS; do echo 1 >"$T/events/$e/enable"; done

"$NT" record -r host -r target -t rdma -s 1 -o "$RESULTS/rec.ntr" >"$RESULTS/record.out" 2>&1 &
rec=$!
# fio starts once the hooks are attached (a loaded machine can take seconds to get there)
wait_for 60 bash -c "\"$NT\" status | grep -qw recording" ||
	{ cat "$RESULTS/record.out"; fail "record did not start"; }
echo 1 >"$T/tracing_on"
fio_args=(--filename="/dev/$dev" --ioengine=libaio --direct=1 --size=64m --time_based)
run_fio read4k "${fio_args[@]}" --rw=randread --bs=4k --iodepth=4 --runtime=2 ||
	fail "fio read4k failed"
run_fio write64k "${fio_args[@]}" --rw=randwrite --bs=64k --iodepth=4 --runtime=2 ||
	fail "fio write64k failed"
run_fio write4k "${fio_args[@]}" --rw=randwrite --bs=4k --iodepth=2 --runtime=1 ||
	fail "fio write4k failed"
echo 0 >"$T/tracing_on"
kill -INT $rec
wait $rec || { cat "$RESULTS/record.out"; fail "record failed"; }
cat "$RESULTS/record.out"
for e in $EVENTS; do echo 0 >"$T/events/$e/enable"; done
cat "$T/trace" >"$RESULTS/ftrace.txt"
echo >"$T/trace"
echo local >"$T/trace_clock"

rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
rdma_teardown
