#!/bin/bash
# 77-bench-cpu: bench's busy_cores counts /proc/stat busy time on every CPU outside
# --target-cpus: a busy loop pinned to a CPU inside the target mask is left out, one outside
# it is counted (each CPU counts its busy share of its own ticks).  Needs 2+ vCPUs (the lane's default LANE_QEMU_SMP=2).
# lane-timeout: 240
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_bin
B=$NVMETRACE_BIN
[ "$(nproc)" -ge 2 ] || skip "needs 2 vCPUs (LANE_QEMU_SMP=2), have $(nproc)"

nvmet_tcp_setup
dev=$(nvme_tcp_connect)

taskset -c 1 bash -c 'while :; do :; done' &
LOOP=$!
trap 'kill $LOOP 2>/dev/null || true' EXIT
# loop_spinning: the loop (taskset has exec'd bash) is on CPU 1, running, and has spun for
# 10 ticks there at least
loop_spinning() {
	local s f
	s=$(cat "/proc/$LOOP/stat") || return 1
	[[ $s == *" (bash) "* ]] || return 1
	read -ra f <<<"${s##*) }" # f[0]: state (field 3), f[11]+f[12]: utime+stime, f[36]: CPU
	[ "${f[0]}" = R ] && [ "${f[36]}" = 1 ] && [ $((f[11] + f[12])) -ge 10 ]
}
wait_for 60 loop_spinning || fail "the busy loop is not spinning on CPU 1: $(cat "/proc/$LOOP/stat" 2>&1)"

busy() { # busy NAME TARGET-CPUS: bench pinned to CPU 0, QD1, busy_cores from its CSV
	local mask=()
	[ -n "$2" ] && mask=(--target-cpus "$2")
	"$B" bench "/dev/$dev" -p randread -b 4k -q 1 --cpus 0 -d 1.5 "${mask[@]}" -o "$RESULTS/$1.csv" \
		>&2 || fail "bench $1 failed"
	python3 "$NVMETRACE_SRC/tests/guest/bench_check.py" "$RESULTS/$1.csv" --ok 1 >&2 || fail "$1.csv"
	awk -F, 'NR==2 {print $24}' "$RESULTS/$1.csv"
}
inside=$(busy loop-inside 1)    # the loop's CPU is the target's: left out
outside=$(busy loop-outside 0)  # the loop's CPU is outside the target mask: counted
all=$(busy all "")              # no target mask: everything
log "busy cores: loop inside the target mask $inside, outside $outside, no mask $all"
# busy_cores sums each counted CPU's busy share (at most 1 per CPU): counting only CPU 0
# gives at most 1 whatever CPU 1 does; the loop keeps CPU 1 fully busy.
python3 - "$inside" "$outside" "$all" <<'PY' || fail "CPU accounting"
import sys
inside, outside, all_ = map(float, sys.argv[1:])
ok = True
if inside > 1.0:
    print(f"the busy loop inside the target mask is counted: {inside} > 1 core with only CPU 0 counted"); ok = False
if outside < 0.85:
    print(f"the busy loop outside the target mask is not counted: {outside} < 0.85"); ok = False
if all_ < 1.05 or all_ < outside:
    print(f"without a mask the loop and the bench are not both counted: {all_}"); ok = False
sys.exit(0 if ok else 1)
PY
kill $LOOP
nvme_disconnect_all
nvmet_teardown
