#!/bin/bash
# tools/bench.d/guest.sh — guest half of tools/bench (run by `tools/lane exec`).
#
#   guest.sh MODE SECONDS RAMP ROUNDS "QDS" "CASES" ["ENGINES"]
#
# ENGINES micro (tools/bench --micro): no fio; per round and case, tests/hookloop's system calls
# in a loop (micro_run), into $RESULTS/micro.csv.
#
# One guest, one nvme-tcp loopback namespace on null_blk; every case runs in the same guest,
# in interleaved rounds (round 1: every case, then round 2: every case, ...) so slow drift
# cancels out. Cases:
#   none     nvmetrace not loaded, no tracing                 (a)
#   idle     nvmetrace.ko loaded, not recording               (b)
#   rec100   nvmetrace record -r host -r target -s 100        (c)
#   rec1     nvmetrace record -r host -r target -s 1          (d)
#   rec<N>h, rec<N>t: record -r host (h) or -r target (t) only, -s N   (to split a cost)
#   rec<N>[h|t]-notcp: the same with nvme_tcp's BTF hidden: no nvme-tcp transport hooks
#   rec<N>[h|t]@HOOK[+HOOK...]: the same with only the named hooks attached (the module's
#            bench_hooks parameter): what one hook site costs, beside rec<N> with them all
#   rec<N>[h|t]-nop[@HOOK...]: the same with the hooks' handlers doing nothing (the module's
#            bench_nop parameter): what the attach mechanism alone costs
#   rec<N>[h|t]-base: the same with the module built from tools/bench --base-kmod REV
#            ($NVMETRACE_KO_BASE), recorded by the same tool: the module's cost, before
#            and after, in one guest
#   ftrace   tracefs events nvme_setup_cmd, nvme_complete_rq, nvmet_req_init,
#            nvmet_req_complete, block_rq_issue, block_rq_complete into the ring buffer,
#            nothing reading it (module not loaded)               (e)
#   bpftrace a bpftrace per-command tracer on the same six tracepoints (percmd.bt): each
#            command's start kept in a map, one line per command and layer at its
#            completion, into a file on the guest's tmpfs (module not loaded)  (f)
#   bpftrace-ev  the same tracepoints, every event printed (perevent.bt)  (g)
# Per (round, case, engine, QD) one fio run: randread 4k direct with each of fio's ENGINES
# (libaio unless given; psync and pvsync2 run at QD 1 only), time_based SECONDS after
# RAMP seconds of ramp. A recording is started before and stopped after each fio run, its
# file goes to the guest's tmpfs (not to the 9p results share) and is deleted.
# Output: $RESULTS/raw.csv (one row per fio run) and $RESULTS/guest.meta; fio JSON and the
# recorder's output per run under $RESULTS/runs/.
. "$NVMETRACE_SRC/tests/guest/lib.sh"
MODE=$1 SECONDS_RUN=$2 RAMP=$3 ROUNDS=$4 QDS=$5 CASES=$6 ENGINES=${7:-libaio}
need_ko
need_bin
# private copies: the lane may rebuild build/kmod-<release>/ and build/user/ (another run,
# edited sources) while this guest still loads the module once per round
KO=/tmp/nvmetrace.ko NT=/tmp/nvmetrace KO_BASE=/tmp/nvmetrace-base.ko
cp "$NVMETRACE_KO" "$KO" && cp "$NVMETRACE_BIN" "$NT" || fail "cannot copy the module or the tool"
if [[ " $6 " =~ -base[\ -] ]]; then
	[ -f "${NVMETRACE_KO_BASE:-}" ] || fail "a -base case without a base module (tools/bench --base-kmod REV)"
	cp "$NVMETRACE_KO_BASE" "$KO_BASE" || fail "cannot copy the base module"
fi
T=/sys/kernel/tracing
FTRACE_EVENTS="nvme/nvme_setup_cmd nvme/nvme_complete_rq nvmet/nvmet_req_init nvmet/nvmet_req_complete block/block_rq_issue block/block_rq_complete"
mkdir -p "$RESULTS/runs"
CSV=$RESULTS/raw.csv

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
# Reads completed, counted where both kernels count them: on the controller's path disk
# (nvmeXcYnZ) under native multipath. 6.1 does not account I/O on the multipath head
# (nvmeXnZ: its stat stays 0); 6.12 does, on both.
STAT=/sys/block/$dev/stat
for p in /sys/block/"${dev%n*}"c*n"${dev##*n}"; do
	[ -e "$p/stat" ] && { STAT=$p/stat; break; }
done
[ -d $T/events ] || fail "tracefs not mounted at $T"

# module version and metadata, once
insmod "$KO" || fail "insmod $KO failed"
{
	echo "kernel_release=$(uname -r)"
	echo "module_sha256=$(sha256sum "$KO" | cut -d' ' -f1)"
	[ ! -f "$KO_BASE" ] || echo "module_base_sha256=$(sha256sum "$KO_BASE" | cut -d' ' -f1)"
	echo "module_version=$(cat /sys/module/nvmetrace/version 2>/dev/null || "$NT" status --json | jq -r .module_version)"
	echo "tool_version=$("$NT" --version 2>&1 | head -n1)"
	echo "guest_cpus=$(nproc)"
	echo "guest_mem_kb=$(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo)"
	echo "nvme_dev=$dev"
	echo "stat=$STAT"
	echo "ring=$("$NT" status --json | jq -c '{rings, ring_records, record_size}')"
	echo "ftrace_buffer_size_kb=$(cat $T/buffer_size_kb)"
	echo "fio=$(fio --version)"
} >"$RESULTS/guest.meta"
rmmod nvmetrace || fail "rmmod nvmetrace failed"
echo "mode,round,case,engine,qd,iops,ios,lat_mean_ns,runtime_ms,records,lost,win_ios,win_ns,win_tool_ns" >"$CSV"

loaded() { [ -d /sys/module/nvmetrace ]; }
# the module a case runs: the base one for a -base case; swapped when the other is loaded
# load_ko KO [PARAM...]: KO loaded with those parameters (reloaded when it was not)
LOADED_KO=""
load_ko() {
	if loaded && [ "$LOADED_KO" != "$*" ]; then rmmod nvmetrace || fail "rmmod failed"; fi
	loaded || insmod "$@" || fail "insmod $* failed"
	LOADED_KO=$*
}
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

# bpftrace_on NAME SCRIPT: start a bpftrace tracer (BT = its pid, BT_OUT its output file) and
# wait until its probes are attached (bpftrace takes 10-20 s to start under emulation)
bpftrace_on() {
	BT_OUT=/tmp/$1.bt
	bpftrace -o "$BT_OUT" "$NVMETRACE_SRC/tools/bench.d/$2" >"$RESULTS/runs/$1.bpftrace" 2>&1 &
	BT=$!
	bt_attached() { grep -q '^Attaching [0-9]* probes' "$BT_OUT" 2>/dev/null || ! kill -0 $BT 2>/dev/null; }
	wait_for 180 bt_attached || fail "$1: bpftrace did not attach its probes in 180 s"
	kill -0 $BT 2>/dev/null ||
		fail "$1: bpftrace failed: $(cat "$RESULTS/runs/$1.bpftrace" "$BT_OUT" 2>/dev/null | tail -n 5)"
}
# bpftrace_off NAME: stop it; BT_EVENTS: the lines it wrote (a command's or an event's), BT_LOST:
# the events it said it lost (its perf buffer full)
bpftrace_off() {
	kill -INT $BT
	wait $BT || fail "$1: bpftrace exited with an error: $(tail -n 5 "$RESULTS/runs/$1.bpftrace")"
	read -r BT_EVENTS BT_LOST < <(awk '/^(host|target|block) / || /^[0-9]+ [a-z]+ / {n++}
		/^Lost [0-9]+ events/ {l += $2} END {print n+0, l+0}' "$BT_OUT")
	rm -f "$BT_OUT"
}

# Steady-state window inside each fio run, measured with bash builtins only (no fork that
# would itself cost guest time): from RAMP seconds after the device's first completed read
# to WINDOW seconds later, the guest clock ($EPOCHREALTIME), the device's completed reads
# (/sys/block/DEV/stat) and the recorder's CPU time (/proc/PID/task/*/schedstat, ns; in icount
# mode one ns is one guest instruction).
exec {NAPFD}<> <(:)
nap() { read -rt "$1" -u $NAPFD _ || true; }
# sample [PID]: sets S_READS, S_NS (guest clock, ns), S_CPU (CPU ns of PID's threads, 0 without)
sample() {
	local t v
	read -r S_READS _ <"$STAT"
	S_NS=${EPOCHREALTIME/./}000 S_CPU=0
	[ -n "${1:-}" ] || return 0
	for t in /proc/$1/task/*/schedstat; do read -r v _ <"$t" 2>/dev/null && S_CPU=$((S_CPU + v)); done
}
WINDOW=$(awk -v s="$SECONDS_RUN" 'BEGIN{w=s-0.5; if (w<0.5) w=s/2; print w}')

# case_start ROUND CASE NAME-SUFFIX: the module loaded as CASE asks, and its recorder or tracer
# started; sets NAME (the run's name in file names), REC (the recorder's or tracer's pid, "" for
# none), and for a recording R0/L0 (the module's counters) and OUT (its output file)
case_start() {
	local round=$1 c=$2 tag=$2 roles
	# a case's tag in file names: a long @HOOK list is named by a digest of the case (a file
	# name has at most 255 bytes)
	[ ${#tag} -le 96 ] || tag="${c%%@*}@$(sha1sum <<<"$c" | cut -c1-12)"
	NAME="r$round-$tag$3" REC="" R0=0 L0=0 OUT=""
	local params=()
	[[ $c != *@* ]] || params+=("bench_hooks=$(tr + , <<<"${c#*@}")")
	[[ $c != *-nop* ]] || params+=(bench_nop=1)
	case $c in
	none|ftrace|bpftrace|bpftrace-ev) ! loaded || rmmod nvmetrace || fail "rmmod failed" ;;
	*-base|*-base-*|*-base@*) load_ko "$KO_BASE" "${params[@]}" ;;
	*) load_ko "$KO" "${params[@]}" ;;
	esac
	case $c in
	rec*)
		[[ $c =~ ^rec([0-9]+)([ht]?)(-notcp)?(-base)?(-nop)?(-z(-?[0-9]+))?(@[a-z0-9_+]+)?$ ]] || fail "unknown case $c"
		local zstd=()
		# -zN: the records compressed at zstd level N (record --zstd N)
		[ -z "${BASH_REMATCH[7]}" ] || zstd=(--zstd "${BASH_REMATCH[7]}")
		# -notcp: nvme_tcp's BTF hidden from the tool, so it leaves the transport hooks off
		[ -z "${BASH_REMATCH[3]}" ] || mount --bind /dev/null /sys/kernel/btf/nvme_tcp ||
			fail "cannot hide /sys/kernel/btf/nvme_tcp"
		case ${BASH_REMATCH[2]} in
		h) roles=(-r host) ;;
		t) roles=(-r target) ;;
		*) roles=(-r host -r target) ;;
		esac
		R0=$(st records) L0=$(st lost)
		OUT=$RESULTS/runs/$NAME.record
		"$NT" record "${roles[@]}" -s "${BASH_REMATCH[1]}" "${zstd[@]}" -o "/tmp/$NAME.ntr" >"$OUT" 2>&1 &
		REC=$!
		recorder_wait "$OUT" "$NAME"
		! mountpoint -q /sys/kernel/btf/nvme_tcp || umount /sys/kernel/btf/nvme_tcp
		# what is attached while recording (once per case)
		[ -f "$RESULTS/hooks-$tag.txt" ] || {
			echo "# kprobes (/sys/kernel/debug/kprobes/list)"
			cat /sys/kernel/debug/kprobes/list 2>&1
			echo "# ftrace-hooked functions ($T/enabled_functions)"
			cat $T/enabled_functions 2>&1
			echo "# nvmetrace status"
			"$NT" status 2>&1
		} >"$RESULTS/hooks-$tag.txt"
		;;
	ftrace) ftrace_on ;;
	bpftrace) bpftrace_on "$NAME" percmd.bt; REC=$BT ;;
	bpftrace-ev) bpftrace_on "$NAME" perevent.bt; REC=$BT ;;
	none|idle) ;;
	*) fail "unknown case $c" ;;
	esac
}

# case_stop CASE: its recorder or tracer stopped; sets RECS and LOST (records or events written
# and lost while it ran; "" for a case without)
case_stop() {
	local n
	RECS="" LOST=""
	case $1 in
	rec*)
		kill -INT "$REC"
		wait "$REC" || { cat "$OUT"; fail "$NAME: nvmetrace record failed"; }
		RECS=$(( $(st records) - R0 )) LOST=$(( $(st lost) - L0 ))
		n=$(sed -n 's/.*(\([0-9]*\) records) written.*/\1/p' "$OUT")
		log "$NAME: module wrote $RECS records ($LOST lost); file has ${n:-?}"
		rm -f "/tmp/$NAME.ntr"
		;;
	ftrace) read -r RECS LOST < <(ftrace_off) ;;
	bpftrace|bpftrace-ev) bpftrace_off "$NAME"; RECS=$BT_EVENTS LOST=$BT_LOST ;;
	esac
}

# one_run ROUND CASE ENGINE QD
one_run() {
	local round=$1 c=$2 engine=$3 qd=$4 n name
	local d0 u0 c0 d1 u1 c1
	case_start "$round" "$c" "-$engine-qd$qd"
	name=$NAME
	sample
	d0=$S_READS
	run_fio_bg "runs/$name" --filename="/dev/$dev" --ioengine="$engine" --direct=1 --rw=randread --bs=4k \
		--iodepth="$qd" --time_based --runtime="$SECONDS_RUN" --ramp_time="$RAMP"
	n=0
	while sample && [ "$S_READS" = "$d0" ]; do
		n=$((n + 1)); [ $n -lt 6000 ] || fail "$name: no read completed within 60 s of starting fio"
		nap 0.01
	done
	nap "$RAMP"
	sample "$REC"; d0=$S_READS u0=$S_NS c0=$S_CPU
	nap "$WINDOW"
	sample "$REC"; d1=$S_READS u1=$S_NS c1=$S_CPU
	wait "$FIO_PID" || fail "$name: fio failed ($(tail -n 3 "$RESULTS/runs/$name.log"))"
	case_stop "$c"
	fio_check "runs/$name"
	# window: reads completed, guest ns, recorder CPU ns
	fio_json "runs/$name" | jq -r --arg pre "$MODE,$round,$c,$engine,$qd" --arg recs "$RECS" --arg lost "$LOST" \
		--arg win "$((d1 - d0)),$((u1 - u0)),$((c1 - c0))" \
		'.jobs[0] | "\($pre),\(.read.iops),\(.read.total_ios),\(.read.lat_ns.mean),\(.read.runtime),\($recs),\($lost),\($win)"' >>"$CSV"
}

# micro_run ROUND CASE: each system call of tests/hookloop in a loop (HOOKLOOP_CALLS calls, the
# least of 5 loops) with CASE set up as for a fio run: the cost of one hook hit, no I/O around
# it; one row of $RESULTS/micro.csv per call kind
micro_run() {
	local round=$1 c=$2 k line
	case_start "$round" "$c" "-micro"
	for k in getppid io_submit io_getevents pread uring_nop uring_submit; do
		line=$("$HOOKLOOP" "$k" "$HOOKLOOP_CALLS") || fail "$NAME: hookloop $k failed"
		log "$NAME: $line"
		echo "$MODE,$round,$c,${line// /,}" >>"$RESULTS/micro.csv"
	done
	case_stop "$c"
}

if [ "$ENGINES" = micro ]; then
	HOOKLOOP=$(dirname "$NVMETRACE_BIN")/tests/hookloop HOOKLOOP_CALLS=${HOOKLOOP_CALLS:-20000}
	[ -x "$HOOKLOOP" ] || fail "no $HOOKLOOP (build the tool's tests)"
	echo "mode,round,case,kind,calls,ns_per_call" >"$RESULTS/micro.csv"
	for round in $(seq 1 "$ROUNDS"); do
		for c in $CASES; do micro_run "$round" "$c"; done
	done
else
	for round in $(seq 1 "$ROUNDS"); do
		for c in $CASES; do
			for engine in $ENGINES; do
				qds=$QDS
				case $engine in psync|pvsync2) qds=1 ;; esac	# one I/O at a time
				for qd in $qds; do one_run "$round" "$c" "$engine" "$qd"; done
			done
		done
	done
fi
! loaded || rmmod nvmetrace
nvme_disconnect_all
nvmet_teardown
log "bench done: $(($(wc -l <"$CSV") - 1)) runs"
