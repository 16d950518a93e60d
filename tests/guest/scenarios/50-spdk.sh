#!/bin/bash
# 50-spdk: SPDK's NVMe-oF target (nvmf_tgt, TCP, a malloc bdev, no hugepages) in the guest,
# with the kernel's nvme-tcp host and with SPDK's own initiator (spdk_nvme_perf) on it.
# - probe --spdk-target finds the running nvmf_tgt, its trace ring, and the tracepoints it
#   needs on: ok for TCP with only those on (-e nvmf_tcp:0x401,bdev:0x3), "off" for RDMA with
#   the -e GROUP:MASK that turns on what it needs;
# - probe -r host --spdk-target checks the kernel host's hooks and SPDK's target together;
# - fio (randrw) on the kernel's nvme-tcp namespace of that target, recorded on both sides:
#   the kernel host by the module, SPDK's target by record --spdk-target from its trace ring;
#   50-spdk.check reports the host alone (every fio I/O a command whose target side is not
#   recorded), SPDK's target alone (its namespace and block size from SPDK's RPC socket), and
#   both joined: every host command matched, SPDK's stages named;
# - record --spdk-target refuses -r host beside it, and a process without a trace ring;
# - SPDK's initiator (spdk_nvme_perf) recorded by record --spdk-host, joined with SPDK's target
#   (both from their rings) and with the kernel's nvmet-tcp target (by the module): every host
#   command matched; spdk_nvme_perf started by record --spdk-host -- ..., its recorded mean within
#   2 % of perf's own average;
# - probe --spdk-host finds spdk_nvme_perf's trace ring while it runs (-y nvme_tcp);
# - probe of a binary with no process running, and of a pid without a trace ring, fail
#   and say how to start the app.
# SPDK is built into the cache on the lane's machine (tools/spdk build); the guest runs it from
# the shared root.
# lane-timeout: 420
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin

NQN=nqn.2024-01.io.nvmetrace:spdk
# one reactor on CPU 0; spdk_nvme_perf polls on CPU 1. Only the tracepoints nvmetrace reads
# are on (by mask: TCP_REQ_NEW, _RDY_TO_COMPLETE; BDEV_IO_START, _DONE)
spdk_target_start "$NQN"
TGT=$SPDK_TGT

# the target alone: no module needed
"$NVMETRACE_BIN" probe --spdk-target "$SPDK/bin/nvmf_tgt" >"$RESULTS/probe-target.txt" 2>&1 ||
	{ cat "$RESULTS/probe-target.txt"; fail "probe --spdk-target failed"; }
cat "$RESULTS/probe-target.txt"
grep -qE "^  process $TGT: trace /dev/shm/nvmf_trace\.pid$TGT: 1 core," "$RESULTS/probe-target.txt" ||
	fail "probe did not find nvmf_tgt's trace ring"
for t in TCP_REQ_NEW TCP_REQ_RDY_TO_COMPLETE BDEV_IO_START BDEV_IO_DONE; do
	grep -qE "^  ok +$t " "$RESULTS/probe-target.txt" || fail "probe: $t is not ok"
done
grep -qE '^  off +RDMA_REQ_NEW +nvmf_rdma +group nvmf_rdma not enabled' "$RESULTS/probe-target.txt" ||
	fail "probe did not say RDMA's tracepoints are off"
grep -q '^  start it with -e nvmf_rdma:0x101 to record over rdma (only the tracepoints nvmetrace reads)$' \
	"$RESULTS/probe-target.txt" ||
	fail "probe did not say which group RDMA needs"
# by pid and by trace file, the same
"$NVMETRACE_BIN" probe -t tcp --spdk-target "$TGT" >"$RESULTS/probe-pid.txt" 2>&1 ||
	{ cat "$RESULTS/probe-pid.txt"; fail "probe --spdk-target PID failed"; }
"$NVMETRACE_BIN" probe -t tcp --spdk-target "/dev/shm/nvmf_trace.pid$TGT" \
	>"$RESULTS/probe-file.txt" 2>&1 || { cat "$RESULTS/probe-file.txt"; fail "probe --spdk-target FILE failed"; }
grep -q RDMA "$RESULTS/probe-pid.txt" && fail "probe -t tcp listed RDMA's tracepoints"
grep -q '^  over ' "$RESULTS/probe-pid.txt" && fail "probe -t tcp headed its one transport"
# without -t both transports are checked, each list whole under its heading: the bdev's
# tracepoints once in each
[ "$(grep -cE '^  (over TCP:|over RDMA:|ok +BDEV_IO_START )' "$RESULTS/probe-target.txt")" = 4 ] ||
	fail "probe without -t: not one TCP and one RDMA list, each with BDEV_IO_START"

# the kernel's nvme-tcp host on SPDK's target, recorded on the host side
insmod "$NVMETRACE_KO" || fail "insmod failed"
dev=$(nvme_tcp_connect "$NQN") || fail "the kernel host did not connect to SPDK's target"
log "kernel host: /dev/$dev on SPDK's $NQN"
"$NVMETRACE_BIN" probe -r host -t tcp --spdk-target "$SPDK/bin/nvmf_tgt" >"$RESULTS/probe-both.txt" 2>&1 ||
	{ cat "$RESULTS/probe-both.txt"; fail "probe -r host --spdk-target failed"; }
grep -q '^host (module nvme_core: loaded)' "$RESULTS/probe-both.txt" || fail "probe left out the kernel host"
[ "$(grep -c '^  load: ok' "$RESULTS/probe-both.txt")" = 2 ] || fail "probe: not both roles ok"
grep -q '^target (module nvmet' "$RESULTS/probe-both.txt" && fail "probe checked nvmet although SPDK is the target"

# what is wrong, said: the kernel host is recorded apart; a process without a trace ring
"$NVMETRACE_BIN" record -r host --spdk-target "$TGT" -o /tmp/x.ntr >"$RESULTS/record-both.txt" 2>&1 &&
	fail "record -r host --spdk-target passed"
grep -q "records SPDK's target alone: record the kernel's host in a recording of its own" "$RESULTS/record-both.txt" ||
	{ cat "$RESULTS/record-both.txt"; fail "record -r host --spdk-target did not say why"; }
"$NVMETRACE_BIN" record --spdk-target $$ -o /tmp/x.ntr >"$RESULTS/record-notrace.txt" 2>&1 &&
	fail "record --spdk-target passed on a process without a trace ring"
grep -q "process $$ has no trace ring: start it with -e" "$RESULTS/record-notrace.txt" ||
	{ cat "$RESULTS/record-notrace.txt"; fail "record --spdk-target did not say the process has no trace ring"; }

# both sides recorded: the kernel host by the module, SPDK's target from its ring (output on
# the guest's tmpfs, copied to the results at the end)
# (SPDK's recorder first: recorder_wait also takes the module's state for a started recorder)
"$NVMETRACE_BIN" record -s 1 --spdk-target "$SPDK/bin/nvmf_tgt" --spdk-rpc "$SPDK_SOCK" -o /tmp/target.ntr \
	>/tmp/record-target.out 2>&1 &
TREC=$!
recorder_wait /tmp/record-target.out "record --spdk-target"
"$NVMETRACE_BIN" record -r host -s 1 -o /tmp/host.ntr >"$RESULTS/record.out" 2>&1 &
REC=$!
recorder_wait "$RESULTS/record.out"
run_fio rd --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randrw --rwmixread=70 \
	--bs=4k --iodepth=2 --time_based --runtime=2 --size=64m || fail "fio on SPDK's namespace failed"
kill -INT $REC $TREC
wait $REC || { cat "$RESULTS/record.out"; fail "record failed"; }
wait $TREC || { cat /tmp/record-target.out; fail "record --spdk-target failed"; }
cp /tmp/host.ntr /tmp/target.ntr /tmp/record-target.out "$RESULTS/" || fail "cannot copy the recordings"
cat "$RESULTS/record-target.out"
grep -qE '^nvmetrace: [1-9][0-9]* commands \([0-9]+ records\) written to /tmp/target.ntr$' \
	"$RESULTS/record-target.out" || fail "record --spdk-target wrote no command"
nvme_disconnect_all

# SPDK's initiator: its trace ring while it runs
PERF_OUT=$RESULTS/perf.txt
# (it runs until it is stopped: -t is only a bound)
"$SPDK/bin/spdk_nvme_perf" --no-huge -s 256 -c 0x2 -q 1 -o 4096 -w randread -t 300 -y nvme_tcp:0x3 \
	-r "trtype:TCP adrfam:IPv4 traddr:$NVMET_ADDR trsvcid:$NVMET_PORT subnqn:$NQN" >"$PERF_OUT" 2>&1 &
PERF=$!
perf_traced() {
	"$NVMETRACE_BIN" probe -t tcp --spdk-host "$SPDK/bin/spdk_nvme_perf" >"$RESULTS/probe-host.txt" 2>&1 &&
		grep -qE '^  ok +NVME_TCP_COMPLETE +nvme_tcp +.*, [1-9][0-9]* hits$' "$RESULTS/probe-host.txt"
}
# spdk_host_recorded NAME PID: record spdk_nvme_perf PID (--spdk-host) for 3 s while the target's
# recorder, started before, runs; then stop the target's (its pid: TREC)
spdk_host_recorded() {
	"$NVMETRACE_BIN" record -s 1 -d 3 --spdk-host "$2" -o "/tmp/$1-host.ntr" >"/tmp/$1-host.out" 2>&1 ||
		{ cat "/tmp/$1-host.out"; fail "$1: record --spdk-host failed"; }
	kill -INT "$TREC"
	wait "$TREC" || { cat "/tmp/$1-target.out"; fail "$1: the target's recorder failed"; }
	grep -qE '^nvmetrace: [1-9][0-9]* commands ' "/tmp/$1-host.out" ||
		{ cat "/tmp/$1-host.out"; fail "$1: record --spdk-host wrote no command"; }
}
wait_for 180 perf_traced || { cat "$RESULTS/probe-host.txt" "$PERF_OUT"; fail "probe --spdk-host did not see spdk_nvme_perf's commands"; }
cat "$RESULTS/probe-host.txt"
grep -qE "^  process $PERF: trace /dev/shm/spdk_nvme_perf_trace\.pid$PERF: " "$RESULTS/probe-host.txt" ||
	fail "probe did not name spdk_nvme_perf's process and trace ring"
# over RDMA, SPDK's initiator has no tracepoints: said, and its uprobes' places named (from the
# running process's binary and libraries; 52-spdk-rdma records with them)
"$NVMETRACE_BIN" probe -t rdma --spdk-host "$PERF" >"$RESULTS/probe-host-rdma.txt" 2>&1 ||
	{ cat "$RESULTS/probe-host-rdma.txt"; fail "probe -t rdma --spdk-host PID failed"; }
grep -q "SPDK's NVMe/RDMA initiator has no tracepoints" "$RESULTS/probe-host-rdma.txt" ||
	{ cat "$RESULTS/probe-host-rdma.txt"; fail "probe -t rdma --spdk-host did not say why uprobes"; }
grep -qE "^  ok +nvme_rdma_req_complete +/.*libspdk_nvme\.so[.0-9]*:0x[0-9a-f]+: " "$RESULTS/probe-host-rdma.txt" ||
	{ cat "$RESULTS/probe-host-rdma.txt"; fail "probe -t rdma --spdk-host did not place the completion's uprobe"; }
# SPDK's initiator and SPDK's target, each recorded from its own ring, joined
"$NVMETRACE_BIN" record -s 1 --spdk-target "$TGT" --spdk-rpc "$SPDK_SOCK" -o /tmp/spdk-spdk-target.ntr \
	>/tmp/spdk-spdk-target.out 2>&1 &
TREC=$!
recorder_wait /tmp/spdk-spdk-target.out "record --spdk-target"
spdk_host_recorded spdk-spdk "$PERF"
kill -INT $PERF; wait $PERF || true
spdk_joined spdk-spdk
jq -e '[.[0].groups[] | select(.view == "joined") | .spdk_target] | length > 0 and all' \
	"$RESULTS/spdk-spdk-report.json" >/dev/null || fail "spdk-spdk: the joined groups are not SPDK's target's"

# accuracy: spdk_nvme_perf started by the recorder (record --spdk-host APP -- APP ARGS), every
# command from its first recorded: the recording's mean against perf's own average, within 2 %
"$NVMETRACE_BIN" record -s 1 --spdk-host "$SPDK/bin/spdk_nvme_perf" -o /tmp/accuracy.ntr -- \
	"$SPDK/bin/spdk_nvme_perf" --no-huge -s 256 -c 0x2 -q 1 -o 4096 -w randread -t 3 -y nvme_tcp:0x3 \
	-r "trtype:TCP adrfam:IPv4 traddr:$NVMET_ADDR trsvcid:$NVMET_PORT subnqn:$NQN" \
	>"$RESULTS/accuracy.out" 2>&1 || { cat "$RESULTS/accuracy.out"; fail "record --spdk-host -- spdk_nvme_perf failed"; }
cp /tmp/accuracy.ntr "$RESULTS/" || fail "cannot copy the recording"
perf_avg=$(sed -nE 's/^Total +: +[0-9.]+ +[0-9.]+ +([0-9.]+) .*/\1/p' "$RESULTS/accuracy.out")
[ -n "$perf_avg" ] || { cat "$RESULTS/accuracy.out"; fail "no average in spdk_nvme_perf's output"; }
"$NVMETRACE_BIN" report --json /tmp/accuracy.ntr >"$RESULTS/accuracy.json" || fail "report of the accuracy run failed"
ours=$(jq '[.[0].groups[] | select(.n > 0)] | if length == 1 then .[0].latency_us.mean else empty end' \
	"$RESULTS/accuracy.json")
[ -n "$ours" ] || fail "the accuracy run's report has not one group: $(jq -c '[.[0].groups[].label]' "$RESULTS/accuracy.json")"
awk -v a="$ours" -v p="$perf_avg" 'BEGIN { d = (a - p) / p; exit !(d <= 0.02 && d >= -0.02) }' ||
	fail "accuracy: the recording's mean $ours us against spdk_nvme_perf's average $perf_avg us: more than 2 % apart"
log "accuracy: spdk_nvme_perf's average $perf_avg us, the recording's mean $ours us"

# what is wrong, said: no process of the binary, a process without a trace ring
# (over TCP: its ring is read live; over RDMA it is recorded from its start, so without -t
# probe passes on RDMA's uprobes alone)
"$NVMETRACE_BIN" probe -t tcp --spdk-host "$SPDK/bin/spdk_nvme_perf" >"$RESULTS/probe-none.txt" 2>&1 &&
	fail "probe -t tcp passed with no spdk_nvme_perf running"
"$NVMETRACE_BIN" probe --spdk-host "$SPDK/bin/spdk_nvme_perf" >"$RESULTS/probe-none-both.txt" 2>&1 ||
	{ cat "$RESULTS/probe-none-both.txt"; fail "probe without -t failed: RDMA's uprobes need no running app"; }
grep -q 'running processes: none: .* (spdk_nvme_perf -y nvme_tcp)' "$RESULTS/probe-none.txt" ||
	{ cat "$RESULTS/probe-none.txt"; fail "probe did not say how to start spdk_nvme_perf"; }
"$NVMETRACE_BIN" probe --spdk-target $$ >"$RESULTS/probe-notrace.txt" 2>&1 &&
	fail "probe passed on a process without a trace ring"
grep -q "process $$: no trace ring" "$RESULTS/probe-notrace.txt" ||
	{ cat "$RESULTS/probe-notrace.txt"; fail "probe did not say the process has no trace ring"; }

kill -INT $TGT; wait $TGT || true

# SPDK's initiator on the kernel's nvmet-tcp target: the target recorded by the module, the
# host from spdk_nvme_perf's ring; joined by the exact key (SPDK names the command id)
KNQN=nqn.2024-01.io.nvmetrace:kernel
need_module null_blk nvmet nvmet_tcp
nvmet_tcp_setup "$KNQN"
"$NVMETRACE_BIN" record -r target -s 1 -o /tmp/spdk-kernel-target.ntr >/tmp/spdk-kernel-target.out 2>&1 &
TREC=$!
recorder_wait /tmp/spdk-kernel-target.out
"$SPDK/bin/spdk_nvme_perf" --no-huge -s 256 -c 0x2 -q 2 -o 4096 -w randrw -M 70 -t 300 -y nvme_tcp:0x3 \
	-r "trtype:TCP adrfam:IPv4 traddr:$NVMET_ADDR trsvcid:$NVMET_PORT subnqn:$KNQN" >"$RESULTS/perf-kernel.txt" 2>&1 &
PERF=$!
wait_for 180 perf_traced || { cat "$RESULTS/probe-host.txt" "$RESULTS/perf-kernel.txt"; fail "spdk_nvme_perf on nvmet made no command"; }
spdk_host_recorded spdk-kernel "$PERF"
kill -INT $PERF; wait $PERF || true
spdk_joined spdk-kernel
nvmet_teardown
rmmod nvmetrace || fail "rmmod failed"
