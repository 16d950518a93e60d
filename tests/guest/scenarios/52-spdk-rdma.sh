#!/bin/bash
# 52-spdk-rdma: SPDK over RDMA on soft-RoCE. SPDK's nvmf_tgt serves a namespace on an RDMA
# listener of the rxe device (CPU 0, its RDMA tracepoints on); the kernel's nvme-rdma host
# connects to it and fio reads; SPDK's own initiator (spdk_nvme_perf) reads over RDMA too,
# as the control arm of nvmetrace bench on the kernel's passthrough node of that namespace.
# fio is recorded on both sides (the kernel host by the module, SPDK's target by record
# --spdk-target): joined, every host command matched, SPDK's stages named.
# SPDK's own initiator (spdk_nvme_perf over RDMA, recorded by uprobes: record --spdk-host -- perf)
# with SPDK's target: joined, every host command matched, its mean within 2 % of perf's average;
# and, attached to a running perf, with the kernel's nvmet-rdma target (recorded by the
# module): joined by the exact key.
# Asserts here: fio sees no error; probe -t rdma --spdk-target finds the target's RDMA
# tracepoints on, and each counted at least one hit per command fio completed; the control
# arm's rows (bench_check.py --control) have IOPS and no failed command, and its trid is the
# RDMA one bench read from the kernel host's controller.
# lane-timeout: 600
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
CHECK="python3 $NVMETRACE_SRC/tests/guest/bench_check.py"

rxe_setup
# SPDK is a user-space RDMA consumer: it needs the verbs and RDMA CM character devices
# (the kernel's nvme-rdma host and nvmet-rdma do not)
need_module ib_uverbs rdma_ucm
wait_for 10 test -c /dev/infiniband/rdma_cm || fail "no /dev/infiniband/rdma_cm after loading rdma_ucm"
wait_for 10 bash -c 'ls /dev/infiniband/uverbs* >/dev/null' ||
	fail "no /dev/infiniband/uverbs* for the rxe device after loading ib_uverbs"
NQN=nqn.2024-01.io.nvmetrace:spdk-rdma
spdk_target_start "$NQN" "" rdma
dev=$(nvme_rdma_connect "$NQN") || fail "the kernel's nvme-rdma host did not connect to SPDK's target"
log "kernel host: /dev/$dev on SPDK's $NQN over RDMA"
[ "$(cat "/sys/class/nvme/${dev%n*}/transport")" = rdma ] || fail "$dev is not on an rdma controller"

# both sides recorded while fio reads: SPDK's target from its trace ring, the kernel's
# nvme-rdma host by the module (outputs on the guest's tmpfs, copied to the results after)
"$NVMETRACE_BIN" record -s 1 --spdk-target "$SPDK/bin/nvmf_tgt" --spdk-rpc "$SPDK_SOCK" \
	-o /tmp/target.ntr >/tmp/record-target.out 2>&1 &
TREC=$!
recorder_wait /tmp/record-target.out "record --spdk-target"
insmod "$NVMETRACE_KO" || fail "insmod failed"
"$NVMETRACE_BIN" record -r host -s 1 -o /tmp/host.ntr >/tmp/record.out 2>&1 &
REC=$!
recorder_wait /tmp/record.out
run_fio rd --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
	--iodepth=4 --time_based --runtime=2 --size=32m || fail "fio over RDMA on SPDK's target failed"
kill -INT $REC $TREC
wait $REC || { cat /tmp/record.out; fail "record failed"; }
wait $TREC || { cat /tmp/record-target.out; fail "record --spdk-target failed"; }
cp /tmp/host.ntr /tmp/target.ntr /tmp/record.out /tmp/record-target.out "$RESULTS/" ||
	fail "cannot copy the recordings"
fio_check rd
ios=$(fio_ios rd)
log "fio: $ios reads over RDMA"
# joined: every host command meets its SPDK target command, by LBA and time alone (SPDK's RDMA
# entries name no queue)
"$NVMETRACE_BIN" report --detail /tmp/host.ntr /tmp/target.ntr | tee "$RESULTS/report-joined.txt" ||
	fail "joined report failed"
"$NVMETRACE_BIN" report --json /tmp/host.ntr /tmp/target.ntr >"$RESULTS/report-joined.json" ||
	fail "joined report --json failed"
jq -e --argjson n "$ios" '.[0].join | .host == $n and .matched == $n and .negative_network == 0' \
	"$RESULTS/report-joined.json" >/dev/null ||
	fail "joined over RDMA: not every one of $ios host commands matched: $(jq -c '.[0].join' "$RESULTS/report-joined.json")"
jq -e '[.[0].groups[] | select(.view == "joined") | [.stages[].name] |
	(index("target driver (SPDK)") != null and index("storage (SPDK bdev, drive)") != null)] |
	length > 0 and all' "$RESULTS/report-joined.json" >/dev/null ||
	fail "joined over RDMA: SPDK's stages are not named"
grep -q "commands without a queue id" "$RESULTS/record-target.out" ||
	fail "record --spdk-target over RDMA did not say its commands have no queue id"

# SPDK's initiator over RDMA with SPDK's target (the seed's part 5 over RDMA): spdk_nvme_perf has
# no tracepoints on RDMA, so record --spdk-host starts it with two uprobes (probe names them);
# the target is recorded from its ring. Joined, every host command matched. Accuracy: the
# uprobes slow each command by two hits, about one of them outside the recorded span; record
# measures a hit of each on itself after the run. The recording's mean is at most 5 % above
# perf's average of the same run and at most 8 % and the two hits below it: the windows outside
# the span (a trap, perf's own code) also collect the time the guest's vCPU is descheduled on a
# loaded machine (-4.9 % on 6.12 beside another lane and a CI run, at 15.1 ms a command); once
# the recording came out 3.3 % above perf over the same 375 commands (perf's times are TSC
# ticks at DPDK's estimate of the TSC's rate, the recording's CLOCK_MONOTONIC: not verified).
"$NVMETRACE_BIN" probe -t rdma --spdk-host "$SPDK/bin/spdk_nvme_perf" >"$RESULTS/probe-host.txt" 2>&1 ||
	{ cat "$RESULTS/probe-host.txt"; fail "probe -t rdma --spdk-host failed"; }
cat "$RESULTS/probe-host.txt"
for f in spdk_rdma_provider_qp_queue_send_wrs nvme_rdma_req_complete "struct spdk_nvme_rdma_req" "uprobe events"; do
	grep -qE "^  ok +$f " "$RESULTS/probe-host.txt" || fail "probe -t rdma --spdk-host: $f is not ok"
done
"$NVMETRACE_BIN" record -s 1 --spdk-target "$SPDK/bin/nvmf_tgt" --spdk-rpc "$SPDK_SOCK" \
	-o /tmp/spdk-spdk-target.ntr >/tmp/spdk-spdk-target.out 2>&1 &
TREC=$!
recorder_wait /tmp/spdk-spdk-target.out "record --spdk-target"
"$NVMETRACE_BIN" record -s 1 --spdk-host "$SPDK/bin/spdk_nvme_perf" -o /tmp/spdk-spdk-host.ntr -- \
	"$SPDK/bin/spdk_nvme_perf" --no-huge -s 256 -c 0x2 -q 1 -o 4096 -w randread -t 3 \
	-r "trtype:RDMA adrfam:IPv4 traddr:$RDMA_ADDR trsvcid:$NVMET_PORT subnqn:$NQN" \
	>/tmp/spdk-spdk-host.out 2>&1 ||
	{ cat /tmp/spdk-spdk-host.out; fail "record --spdk-host -- spdk_nvme_perf over RDMA failed"; }
kill -INT $TREC
wait $TREC || { cat /tmp/spdk-spdk-target.out; fail "record --spdk-target failed"; }
spdk_joined spdk-spdk
cat "$RESULTS/spdk-spdk-host.out"
grep -q "uprobes on spdk_rdma_provider_qp_queue_send_wrs and nvme_rdma_req_complete" \
	"$RESULTS/spdk-spdk-host.out" || fail "record --spdk-host over RDMA did not say it uses uprobes"
grep -qE "^nvmetrace: [1-9][0-9]* commands " "$RESULTS/spdk-spdk-host.out" ||
	fail "record --spdk-host over RDMA wrote no command"
jq -e '[.[0].groups[] | select(.view == "joined") | .spdk_target] | length > 0 and all' \
	"$RESULTS/spdk-spdk-report.json" >/dev/null || fail "SPDK over RDMA: the joined groups are not SPDK's target's"
perf_avg=$(sed -nE 's/^Total +: +[0-9.]+ +[0-9.]+ +([0-9.]+) .*/\1/p' "$RESULTS/spdk-spdk-host.out")
[ -n "$perf_avg" ] || fail "no average in spdk_nvme_perf's output"
# the two hits' cost, submission's and completion's, as record measured them
hits=$(sed -nE 's/.* two uprobes, about ([0-9.]+) us \(submission\) and ([0-9.]+) us \(completion\) a hit here .*/\1 \2/p' \
	"$RESULTS/spdk-spdk-host.out" | awk '{ print $1 + $2 }')
[ -n "$hits" ] || fail "record --spdk-host over RDMA did not say what its uprobes cost"
"$NVMETRACE_BIN" report --json /tmp/spdk-spdk-host.ntr >"$RESULTS/spdk-host-report.json" ||
	fail "report of SPDK's host over RDMA failed"
ours=$(jq '[.[0].groups[] | select(.n > 0)] | if length == 1 then .[0].latency_us.mean else empty end' \
	"$RESULTS/spdk-host-report.json")
[ -n "$ours" ] || fail "SPDK's host over RDMA: not one group: $(jq -c '[.[0].groups[].label]' "$RESULTS/spdk-host-report.json")"
awk -v a="$ours" -v p="$perf_avg" -v h="$hits" 'BEGIN { exit !(a <= p * 1.05 && a >= p * 0.92 - h) }' ||
	fail "accuracy over RDMA: the recording's mean $ours us against spdk_nvme_perf's average $perf_avg us: more than 5 % above, or more than 8 % and the two uprobe hits ($hits us) below"
log "accuracy over RDMA: spdk_nvme_perf's average $perf_avg us, the recording's mean $ours us, the two uprobe hits $hits us"
# no uprobe event is left behind
grep -q nvmetrace_ /sys/kernel/tracing/uprobe_events && fail "record left its uprobe events: $(cat /sys/kernel/tracing/uprobe_events)"

# SPDK's target over RDMA, seen by probe: the transport's tracepoints are on and counted
"$NVMETRACE_BIN" probe -t rdma --spdk-target "$SPDK/bin/nvmf_tgt" >"$RESULTS/probe.txt" 2>&1 ||
	{ cat "$RESULTS/probe.txt"; fail "probe -t rdma --spdk-target failed"; }
cat "$RESULTS/probe.txt"
for t in RDMA_REQ_NEW RDMA_REQ_RDY_TO_COMPL BDEV_IO_START BDEV_IO_DONE; do
	hits=$(sed -nE "s/^  ok +$t +[a-z_]+ +.*, ([0-9]+) hits$/\1/p" "$RESULTS/probe.txt")
	[ -n "$hits" ] || fail "probe: $t is not ok"
	[ "$hits" -ge "$ios" ] || fail "probe: $t counted $hits hits for $ios reads"
done

# SPDK's initiator over RDMA: the control arm beside io_uring_cmd on the ng node (CPU 1)
ng=/dev/ng${dev#nvme}
wait_for 5 test -c "$ng" || fail "no passthrough node $ng for $dev"
"$NVMETRACE_BIN" bench "$ng" --profile kv --sizes 4k --qds 1 -d 2 --cpus 1 --target-cpus 0 \
	--spdk-perf "$SPDK/bin/spdk_nvme_perf" --spdk-args "--no-huge -s 256" \
	-o "$RESULTS/control.csv" >"$RESULTS/control.out" 2>&1 ||
	{ cat "$RESULTS/control.out"; fail "bench with the control arm over RDMA failed"; }
cat "$RESULTS/control.out" "$RESULTS/control.csv"
$CHECK "$RESULTS/control.csv" --control --cells 2 --ok 2 || fail "control.csv"
jq -e --arg a "$RDMA_ADDR" --arg n "$NQN" '.control.trid | contains("trtype:RDMA") and
	contains("traddr:" + $a) and contains("subnqn:" + $n)' "$RESULTS/control.meta" >/dev/null ||
	fail "control.meta has no RDMA trid: $(cat "$RESULTS/control.meta")"

nvme_disconnect_all
kill -INT "$SPDK_TGT"; wait "$SPDK_TGT" || true

# SPDK's initiator over RDMA on the kernel's nvmet-rdma target (SPDK's target gone, its port
# free), as the seed records it: perf running, record --spdk-host attached to it for 3 s (its
# threads followed from then); the target recorded by the module; joined by the exact key
# (the command id from the capsule, the queue id through the request)
KNQN=nqn.2024-01.io.nvmetrace:kernel-rdma
nvmet_rdma_setup "$KNQN"
"$NVMETRACE_BIN" record -r target -s 1 -o /tmp/spdk-kernel-target.ntr >/tmp/spdk-kernel-target.out 2>&1 &
TREC=$!
recorder_wait /tmp/spdk-kernel-target.out
# (its output line-buffered: its "Launching workers" says its I/O has started; polled on the
# guest's tmpfs, not on the 9p results share, where a file read while it is written has lost
# that very line to NUL bytes (7.3; see recorder_started), and copied there once perf ends)
stdbuf -oL "$SPDK/bin/spdk_nvme_perf" --no-huge -s 256 -c 0x2 -q 2 -o 4096 -w randrw -M 70 -t 300 \
	-r "trtype:RDMA adrfam:IPv4 traddr:$RDMA_ADDR trsvcid:$NVMET_PORT subnqn:$KNQN" \
	>/tmp/perf-kernel.txt 2>&1 &
PERF=$!
wait_for 180 grep -q "Launching workers" /tmp/perf-kernel.txt ||
	{ cat /tmp/perf-kernel.txt; fail "spdk_nvme_perf on nvmet-rdma did not start its workers"; }
"$NVMETRACE_BIN" record -s 1 -d 3 --spdk-host "$PERF" -o /tmp/spdk-kernel-host.ntr \
	>/tmp/spdk-kernel-host.out 2>&1 || { cat /tmp/spdk-kernel-host.out; fail "record --spdk-host PID on nvmet-rdma failed"; }
kill -INT $PERF; wait $PERF || true
cp /tmp/perf-kernel.txt "$RESULTS/perf-kernel.txt"
kill -INT $TREC
wait $TREC || { cat /tmp/spdk-kernel-target.out; fail "record -r target failed"; }
spdk_joined spdk-kernel
# its span ends at SPDK's own completion (not at the target's posted response)
jq -e '[.[0].groups[] | select(.view == "joined") | .span.to | test("nvme_rdma_req_complete")] |
	length > 0 and all' "$RESULTS/spdk-kernel-report.json" >/dev/null ||
	fail "SPDK host on nvmet-rdma: the joined span does not end at SPDK's completion: $(jq -c '[.[0].groups[] | .span.to]' "$RESULTS/spdk-kernel-report.json")"
# both directions of the mix, each joined
jq -e '[.[0].groups[] | select(.view == "joined") | .label] | (map(test("^read")) | any) and (map(test("^write")) | any)' \
	"$RESULTS/spdk-kernel-report.json" >/dev/null ||
	fail "SPDK host on nvmet-rdma: not a joined read and write group: $(jq -c '[.[0].groups[] | [.view, .label]]' "$RESULTS/spdk-kernel-report.json")"
nvmet_teardown
rmmod nvmetrace || fail "rmmod failed"
rdma_teardown
