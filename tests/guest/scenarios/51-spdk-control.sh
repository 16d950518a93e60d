#!/bin/bash
# 51-spdk-control: the KVTide control arm.  SPDK's nvmf_tgt is the target (CPU 0, as KVTide
# puts it on its own cores); the kernel's nvme-tcp host connects to it, and nvmetrace bench
# runs a scaled-down KV matrix through the passthrough node (io_uring_cmd on /dev/ngXnY) with
# SPDK's user-space initiator (spdk_nvme_perf) on every cell as the control arm: both on CPU 1,
# one CSV + .meta (bench_check.py --control: two rows a cell, the same cell on both, 0 failed
# commands, SPDK's polling workers counted in busy_cores outside the target's CPU).
# Bad input is said and loses nothing: a spdk_nvme_perf that is not there, a duration
# spdk_nvme_perf cannot run, a control arm that cannot reach its target (its row fails with
# spdk_nvme_perf's own words, the kernel's row stands).
# lane-timeout: 600
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_bin
B=$NVMETRACE_BIN
CHECK="python3 $NVMETRACE_SRC/tests/guest/bench_check.py"

NQN=nqn.2024-01.io.nvmetrace:control
spdk_target_start "$NQN" bdev:0x0
dev=$(nvme_tcp_connect "$NQN") || fail "the kernel host did not connect to SPDK's target"
ng=/dev/ng${dev#nvme}
wait_for 5 test -c "$ng" || fail "no passthrough node $ng for $dev"
log "kernel host: $ng on SPDK's $NQN"
PERF=$SPDK/bin/spdk_nvme_perf
# no hugepages in the guest: SPDK's initiator takes its memory as nvmf_tgt does
ARGS="--no-huge -s 256"

"$B" bench "$ng" --profile kv --sizes 4k --qds 1,4 -d 2 --cpus 1 --target-cpus 0 \
	--spdk-perf "$PERF" --spdk-args "$ARGS" -o "$RESULTS/control.csv" >"$RESULTS/control.out" 2>&1 ||
	{ cat "$RESULTS/control.out"; fail "bench with the control arm failed"; }
cat "$RESULTS/control.out" "$RESULTS/control.csv"
$CHECK "$RESULTS/control.csv" --control --cells 4 --ok 4 || fail "control.csv"
# the kernel's rows are passthrough on the ng node; SPDK's name the controller bench found
awk -F, 'NR > 1 && $4 == "passthru" {k++} NR > 1 && $4 == "spdk_nvme_perf" {s++}
	END {exit !(k == 2 && s == 2)}' "$RESULTS/control.csv" || fail "not 2 rows of each arm"
# the command line kept as a shell reads it back: --spdk-args' value one quoted word
jq -e --arg a "$NVMET_ADDR" --arg n "$NQN" --arg cl "--spdk-args '$ARGS'" '.pin_cpus == "1" and
	.target_cpus == "0" and
	(.control.trid | contains("trtype:TCP") and contains("traddr:" + $a) and contains("subnqn:" + $n))
	and .control.args == "--no-huge -s 256" and (.command_line | contains($cl))' \
	"$RESULTS/control.meta" >/dev/null ||
	fail "control.meta: $(cat "$RESULTS/control.meta")"

# what is wrong, said before anything runs
"$B" bench "$ng" -d 2 --spdk-perf /nonexistent/spdk_nvme_perf >"$RESULTS/absent.out" 2>&1 &&
	fail "bench ran with a spdk_nvme_perf that is not there"
grep -q "/nonexistent/spdk_nvme_perf" "$RESULTS/absent.out" || { cat "$RESULTS/absent.out"; fail "no reason for the absent binary"; }
"$B" bench "$ng" -d 0.5 --spdk-perf "$PERF" >"$RESULTS/half.out" 2>&1 && fail "bench ran -d 0.5 with spdk_nvme_perf"
grep -q "spdk_nvme_perf measures whole seconds: give -d as a whole number" "$RESULTS/half.out" ||
	{ cat "$RESULTS/half.out"; fail "no reason for -d 0.5"; }
# a control arm that reaches no target: its row fails with spdk_nvme_perf's words, the
# kernel's row is measured, bench says how many rows failed
"$B" bench "$ng" -d 1 --cpus 1 --spdk-perf "$PERF" --spdk-args "$ARGS" \
	--spdk-trid "trtype:TCP adrfam:IPv4 traddr:$NVMET_ADDR trsvcid:4999 subnqn:$NQN" \
	-o "$RESULTS/unreachable.csv" >"$RESULTS/unreachable.out" 2>&1 &&
	fail "bench passed with an unreachable control arm"
cat "$RESULTS/unreachable.out"
grep -q "1 of 2 rows failed" "$RESULTS/unreachable.out" || fail "bench did not count the failed row"
$CHECK "$RESULTS/unreachable.csv" --cells 2 --ok 1 --failed 1 || fail "unreachable.csv"
grep -qE '^1,single,1,spdk_nvme_perf,.*,failed,.*spdk_nvme_perf printed no results' "$RESULTS/unreachable.csv" ||
	fail "the control row does not say why it failed"

nvme_disconnect_all
kill -INT "$SPDK_TGT"; wait "$SPDK_TGT" || true
