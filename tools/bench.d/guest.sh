#!/bin/bash
# tools/bench.d/guest.sh — guest half of tools/bench (run by `tools/lane exec`).
#
#   guest.sh MODE SECONDS RAMP ROUNDS "QDS" "CASES"
#
# One guest, one nvme-tcp loopback namespace on null_blk; every case runs in the same guest,
# in interleaved rounds (round 1: every case, then round 2: every case, ...) so slow drift
# cancels out. Cases:
#   none     nvmetrace not loaded, no tracing                 (a)
#   idle     nvmetrace.ko loaded, not recording               (b)
#   rec100   nvmetrace record -r host -r target -s 100        (c)
#   rec1     nvmetrace record -r host -r target -s 1          (d)
#   ftrace   tracefs events nvme_setup_cmd, nvme_complete_rq, nvmet_req_init,
#            nvmet_req_complete, block_rq_issue, block_rq_complete into the ring buffer,
#            nothing reading it (module not loaded)               (e)
# Per (round, case, QD) one fio run: randread 4k libaio direct, time_based SECONDS after
# RAMP seconds of ramp. A recording is started before and stopped after each fio run, its
# file goes to the guest's tmpfs (not to the 9p results share) and is deleted.
# Output: $RESULTS/raw.csv (one row per fio run) and $RESULTS/guest.meta; fio JSON and the
# recorder's output per run under $RESULTS/runs/.
. "$NVMETRACE_SRC/tests/guest/lib.sh"
MODE=$1 SECONDS_RUN=$2 RAMP=$3 ROUNDS=$4 QDS=$5 CASES=$6
need_ko
need_bin
NT=$NVMETRACE_BIN
T=/sys/kernel/tracing
FTRACE_EVENTS="nvme/nvme_setup_cmd nvme/nvme_complete_rq nvmet/nvmet_req_init nvmet/nvmet_req_complete block/block_rq_issue block/block_rq_complete"
mkdir -p "$RESULTS/runs"
CSV=$RESULTS/raw.csv

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
[ -d $T/events ] || fail "tracefs not mounted at $T"

# module version and metadata, once
insmod "$NVMETRACE_KO" || fail "insmod $NVMETRACE_KO failed"
{
	echo "kernel_release=$(uname -r)"
	echo "module_version=$(cat /sys/module/nvmetrace/version 2>/dev/null || "$NT" status --json | jq -r .module_version)"
	echo "tool_version=$("$NT" --version 2>&1 | head -n1)"
	echo "guest_cpus=$(nproc)"
	echo "guest_mem_kb=$(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo)"
	echo "nvme_dev=$dev"
	echo "ring=$("$NT" status --json | jq -c '{rings, ring_records, record_size}')"
	echo "ftrace_buffer_size_kb=$(cat $T/buffer_size_kb)"
	echo "fio=$(fio --version)"
} >"$RESULTS/guest.meta"
rmmod nvmetrace || fail "rmmod nvmetrace failed"
echo "mode,round,case,qd,iops,ios,lat_mean_ns,runtime_ms,records,lost,guest_s" >"$CSV"

loaded() { [ -d /sys/module/nvmetrace ]; }
st() { "$NT" status --json | jq -r ".$1"; }

ftrace_on() {
	local e
	echo 0 >$T/tracing_on
	echo >$T/trace
	for e in $FTRACE_EVENTS; do
		[ -d $T/events/$e ] || fail "no trace event $e"
		echo 1 >$T/events/$e/enable
	done
	echo 1 >$T/tracing_on
}
ftrace_off() { # prints "EVENTS OVERRUN": events the ring buffer took (entries + overruns)
	local e
	echo 0 >$T/tracing_on
	for e in $FTRACE_EVENTS; do echo 0 >$T/events/$e/enable; done
	cat $T/per_cpu/cpu*/stats | awk '/^entries:/ {n+=$2} /^overrun:/ {n+=$2; o+=$2} END {print n+0, o+0}'
	echo >$T/trace
	echo 1 >$T/tracing_on
}

# one_run ROUND CASE QD
one_run() {
	local round=$1 c=$2 qd=$3 name="r$1-$2-qd$3" rec="" r0=0 l0=0 recs="" lost="" t0 t1 out n
	case $c in
	none|ftrace) ! loaded || rmmod nvmetrace || fail "rmmod failed" ;;
	*) loaded || insmod "$NVMETRACE_KO" || fail "insmod failed" ;;
	esac
	case $c in
	rec100|rec1)
		r0=$(st records) l0=$(st lost)
		out=$RESULTS/runs/$name.record
		"$NT" record -r host -r target -s "${c#rec}" -o "/tmp/$name.ntr" >"$out" 2>&1 &
		rec=$!
		wait_for 60 grep -q 'profiling as' "$out" || { cat "$out"; fail "$name: record did not start"; }
		;;
	ftrace) ftrace_on ;;
	esac
	t0=$(cut -d' ' -f1 /proc/uptime)
	run_fio "runs/$name" --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
		--iodepth="$qd" --time_based --runtime="$SECONDS_RUN" --ramp_time="$RAMP" ||
		fail "$name: fio failed ($(tail -n 3 "$RESULTS/runs/$name.log"))"
	t1=$(cut -d' ' -f1 /proc/uptime)
	case $c in
	rec100|rec1)
		kill -INT $rec
		wait $rec || { cat "$out"; fail "$name: nvmetrace record failed"; }
		recs=$(( $(st records) - r0 )) lost=$(( $(st lost) - l0 ))
		n=$(sed -n 's/.*(\([0-9]*\) records) written.*/\1/p' "$out")
		log "$name: module wrote $recs records ($lost lost); file has ${n:-?}"
		rm -f "/tmp/$name.ntr"
		;;
	ftrace) read -r recs lost < <(ftrace_off) ;;
	esac
	fio_check "runs/$name"
	fio_json "runs/$name" | jq -r --arg pre "$MODE,$round,$c,$qd" --arg recs "$recs" --arg lost "$lost" \
		--arg gs "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')" \
		'.jobs[0] | "\($pre),\(.read.iops),\(.read.total_ios),\(.read.lat_ns.mean),\(.read.runtime),\($recs),\($lost),\($gs)"' >>"$CSV"
}

for round in $(seq 1 "$ROUNDS"); do
	for c in $CASES; do
		for qd in $QDS; do one_run "$round" "$c" "$qd"; done
	done
done
! loaded || rmmod nvmetrace
nvme_disconnect_all
nvmet_teardown
log "bench done: $(($(wc -l <"$CSV") - 1)) runs"
