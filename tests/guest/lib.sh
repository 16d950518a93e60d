# shellcheck shell=bash
# tests/guest/lib.sh — helpers for guest scenarios (tests/guest/scenarios/NN-name.sh).
# Sourced by a scenario running inside a lane guest (Debian userland from the host root,
# guest kernel $KREL). Environment set by the lane: NVMETRACE_SRC, NVMETRACE_KO,
# NVMETRACE_BIN, NVMETRACE_TESTMOD_DIR, RESULTS, KREL, LANE_KERNEL.
#
#   skip, fail, log, fio_json, fio_ios, fio_errors, fio_check, need_results: see
#                             tests/guest/lib-check.sh (what a host-side NN-name.check uses)
#   need_module MOD...        modprobe each module, skip if it does not exist in this kernel
#   need_ko                   skip unless NVMETRACE_KO points at a built nvmetrace.ko
#   need_bin                  skip unless NVMETRACE_BIN points at the built user tool
#   nvmet_tcp_setup [NQN]     null_blk-backed nvmet subsystem NQN (default $NVMET_NQN) on a
#                             TCP port at $NVMET_ADDR:$NVMET_PORT (127.0.0.1:4420)
#   nvme_tcp_connect [NQN] [OPTIONS]  connect the nvme-tcp host to it; prints the block
#                             device (e.g. nvme0n1) once /dev/<name> exists
#   nvme_fabrics_connect TRANSPORT ADDR [NQN] [OPTIONS]  the same, to any fabrics target
#   rxe_setup                 soft-RoCE: rdma_rxe on one end of a veth pair, address
#                             $RDMA_ADDR (10.99.0.1): host and target both use it
#   nvmet_rdma_setup [NQN]    like nvmet_tcp_setup, on an RDMA port at $RDMA_ADDR:$NVMET_PORT
#   nvme_rdma_connect [NQN] [OPTIONS]  connect nvme-rdma to it; prints the block device
#   rdma_teardown             remove the rxe link and the veth pair
#   nvme_disconnect_all       delete every NVMe fabrics controller
#   nvmet_port_param PORT-ID NAME VALUE  set the port's param_NAME (e.g. inline_data_size)
#   nvmet_teardown            remove the ports, subsystems and namespaces set up above
#   io_flowing DEV [SECS [N]] wait until DEV completes N (default 1) more reads
#   recorder_wait OUT [WHAT [SECS]]  wait until `nvmetrace record >OUT` records, or fail
#   run_fio NAME FIO-ARGS...  run fio with JSON output into $RESULTS/NAME.json (+ NAME.log)
#   run_fio_bg NAME ARGS...   same, in the background (pid in FIO_PID); fio_stop ends it
set -euo pipefail

: "${RESULTS:?RESULTS not set: scenarios run inside the lane (tools/lane run)}"
NVMET_NQN=${NVMET_NQN:-nqn.2024-01.io.nvmetrace:lane}
NVMET_ADDR=${NVMET_ADDR:-127.0.0.1}
NVMET_PORT=${NVMET_PORT:-4420}
NVMET_CFG=/sys/kernel/config/nvmet
# Soft-RoCE: rxe on lo comes up but cannot resolve routes; on one end of a veth
# pair it works, with host and target on the same address (the guest has no
# other network: nothing leaves it).
RDMA_ADDR=${RDMA_ADDR:-10.99.0.1}
RDMA_NETDEV=ntrdma0
RDMA_LINK=ntrxe0

# skip, fail, log and the fio_* readers (also what a host-side check uses)
. "$NVMETRACE_SRC/tests/guest/lib-check.sh"

need_module() {
	local m
	for m in "$@"; do
		modprobe -n "$m" 2>/dev/null || skip "module $m not available in $KREL"
		modprobe "$m" || fail "modprobe $m failed"
	done
}
need_ko() {
	[ -n "${NVMETRACE_KO:-}" ] || skip "no nvmetrace.ko for $KREL (kmod/Kbuild missing or not built)"
	[ -f "$NVMETRACE_KO" ] || fail "NVMETRACE_KO=$NVMETRACE_KO does not exist"
}
need_bin() {
	[ -n "${NVMETRACE_BIN:-}" ] && [ -x "$NVMETRACE_BIN" ] || skip "no user tool (build/user/nvmetrace)"
}

# wait_for TIMEOUT_SECS CMD... : poll CMD every 0.1 s
wait_for() {
	local n=$(( $1 * 10 )); shift
	while ! "$@" 2>/dev/null; do
		n=$((n - 1)); [ $n -gt 0 ] || return 1
		sleep 0.1
	done
}

# dev_reads DEV: reads completed on DEV, counted where every kernel counts them: on the
# controller's path disk (nvmeXcYnZ) under native multipath, as 6.1 leaves the head's stat at 0
dev_reads() {
	local stat=/sys/block/$1/stat p
	for p in /sys/block/"${1%n*}"c*n"${1##*n}"; do
		[ -e "$p/stat" ] && { stat=$p/stat; break; }
	done
	awk '{print $1}' "$stat"
}
dev_reads_above() { [ "$(dev_reads "$1")" -gt "$2" ]; }
# io_flowing DEV [SECS [N]]: wait (default 120 s) until DEV completes N (default 1) reads
# from now on: a workload started in the background is doing I/O (fio takes seconds to
# start under TCG). Fails as soon as the background fio ($FIO_PID, when it runs at the
# call) has ended short of them: no wait for reads that can no longer come.
io_flowing() {
	local r0 pid=
	r0=$(dev_reads "$1") || return 1
	[ -n "${FIO_PID:-}" ] && kill -0 "$FIO_PID" 2>/dev/null && pid=$FIO_PID
	wait_for "${2:-120}" reads_or_ended "$1" $((r0 + ${3:-1} - 1)) "$pid" || return 1
	dev_reads_above "$1" $((r0 + ${3:-1} - 1))
}
reads_or_ended() { dev_reads_above "$1" "$2" || { [ -n "$3" ] && ! kill -0 "$3" 2>/dev/null; }; }

# recorder_started OUT [SECS]: wait (default 120 s) until an `nvmetrace record` writing to OUT
# says it records, or the module says a recording is on (its hooks are attached then);
# attaching takes seconds under TCG on a busy machine, so a workload starts only after this.
# The module is asked too because OUT lies on the 9p results share, where a guest that polls
# a file while another process writes it has been seen to lose the writer's first line (6.12:
# the file then begins with NUL bytes); a scenario that greps such a file while it is written
# keeps it on the guest's tmpfs (/tmp) and copies it into RESULTS at the end
recorder_started() { wait_for "${2:-120}" recorder_on "$1"; }
recorder_on() {
	grep -aq 'profiling as' "$1" ||
		"${NVMETRACE_BIN:-nvmetrace}" status 2>/dev/null | grep -q '^state *recording'
}
# recorder_wait OUT [WHAT [SECS]]: recorder_started, or fail with what the recorder printed
recorder_wait() { recorder_started "$1" "${3:-120}" || { cat "$1"; fail "${2:+$2: }the recorder did not start"; }; }

# nvmet_setup TRTYPE ADDR PORT-ID [NQN]: a null_blk-backed subsystem NQN on a port of the
# transport at ADDR:$NVMET_PORT (the modules: null_blk, nvmet, nvmet_TRTYPE)
nvmet_setup() {
	local tr=$1 addr=$2 pid=$3 nqn=${4:-$NVMET_NQN} s p
	need_module null_blk nvmet "nvmet_$tr"
	[ -b /dev/nullb0 ] || wait_for 5 test -b /dev/nullb0 || fail "/dev/nullb0 did not appear"
	[ -d $NVMET_CFG ] || fail "$NVMET_CFG missing (configfs not mounted?)"
	s=$NVMET_CFG/subsystems/$nqn
	mkdir "$s"
	echo 1 >"$s/attr_allow_any_host"
	mkdir "$s/namespaces/1"
	echo -n /dev/nullb0 >"$s/namespaces/1/device_path"
	echo 1 >"$s/namespaces/1/enable"
	p=$NVMET_CFG/ports/$pid
	mkdir "$p"
	echo "$tr" >"$p/addr_trtype"
	echo ipv4 >"$p/addr_adrfam"
	echo "$addr" >"$p/addr_traddr"
	echo "$NVMET_PORT" >"$p/addr_trsvcid"
	ln -s "$s" "$p/subsystems/$nqn" || fail "nvmet-$tr port on $addr:$NVMET_PORT refused"
	log "nvmet: $nqn on $tr $addr:$NVMET_PORT backed by /dev/nullb0"
}

nvmet_tcp_setup() { nvmet_setup tcp "$NVMET_ADDR" 1 "$@"; }

# nvmet_port_param PORT-ID NAME VALUE [NQN]: set a port's param_NAME; the port takes it only
# while no subsystem is linked to it, so NQN's link is taken away and put back around it
nvmet_port_param() {
	local p=$NVMET_CFG/ports/$1 nqn=${4:-$NVMET_NQN}
	rm "$p/subsystems/$nqn"
	echo "$3" >"$p/param_$2" || fail "nvmet port $1: param_$2 refused $3"
	ln -s "$NVMET_CFG/subsystems/$nqn" "$p/subsystems/$nqn"
	[ "$(cat "$p/param_$2")" = "$3" ] || fail "nvmet port $1: param_$2 not taken"
}

# the block device (nvmeXnY) of subsystem NQN, if any
nvme_bdev_of() {
	local nqn=$1 b n
	for b in /sys/block/nvme*n*; do
		[ -e "$b" ] || continue
		n=${b##*/}
		[[ $n =~ ^nvme[0-9]+n[0-9]+$ ]] || continue
		[ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$nqn" ] || continue
		[ -b "/dev/$n" ] && { echo "$n"; return 0; }
	done
	return 1
}

# nvme_fabrics_connect TRANSPORT ADDR [NQN] [OPTIONS]: connect to NQN (default $NVMET_NQN) at
# ADDR:$NVMET_PORT through /dev/nvme-fabrics and print its block device (nvmeXnY); OPTIONS
# are extra fabrics options, e.g. ",disable_sqflow"
nvme_fabrics_connect() {
	local tr=$1 addr=$2 nqn=${3:-$NVMET_NQN} opts=${4:-} reply
	need_module "nvme_$tr"
	[ -c /dev/nvme-fabrics ] || wait_for 5 test -c /dev/nvme-fabrics || fail "/dev/nvme-fabrics missing"
	exec 9<>/dev/nvme-fabrics
	echo "transport=$tr,traddr=$addr,trsvcid=$NVMET_PORT,nqn=$nqn$opts" >&9 ||
		{ exec 9<&-; fail "nvme-$tr connect to $addr:$NVMET_PORT ($nqn$opts) failed"; }
	read -r reply <&9 || true
	exec 9<&-
	log "nvme-$tr: connected$opts ($reply)" >&2
	wait_for 10 nvme_bdev_of "$nqn" >/dev/null || fail "no block device for $nqn after connect"
	nvme_bdev_of "$nqn"
}
# nvme_tcp_connect [NQN] [OPTIONS] / nvme_rdma_connect [NQN] [OPTIONS]: to this guest's target
# The nvme-tcp send functions nvmetrace hooks on this kernel, nvme_tcp loaded
# (kmod/probes/nvme_tcp.c): nvme_tcp_try_send_cmd_pdu and _data_pdu where the
# module has them as functions, and their stand-in nvme_tcp_try_send where one
# of them is inlined.
tcp_send_hooks() {
	local f out="" standin=0
	for f in nvme_tcp_try_send_cmd_pdu nvme_tcp_try_send_data_pdu; do
		if grep -qE "^[0-9a-f]+ [tT] $f\s+\[nvme_tcp\]" /proc/kallsyms; then
			out="$out $f"
		else
			standin=1
		fi
	done
	[ $standin = 0 ] || out="$out nvme_tcp_try_send"
	echo $out
}
nvme_tcp_connect() { nvme_fabrics_connect tcp "$NVMET_ADDR" "$@"; }
nvme_rdma_connect() { nvme_fabrics_connect rdma "$RDMA_ADDR" "$@"; }
# POLL_QUEUE_OPTS: connect options for two I/O queues and a poll queue; poll_queue_note DEV: check
# that DEV polls and write its poll queue's qid to $RESULTS/poll-qid (nvme-tcp and nvme-rdma
# order their queues default, read, poll: the poll queue is the last)
POLL_QUEUE_OPTS=",nr_io_queues=2,nr_poll_queues=1"
poll_queue_note() {
	local dev=$1 qc
	qc=$(cat /sys/class/nvme/"${dev%n*}"/queue_count) || fail "no queue_count for ${dev%n*}"
	[ "$(cat /sys/block/"$dev"/queue/io_poll)" = 1 ] ||
		fail "$dev: io_poll is not 1 with a poll queue"
	echo $((qc - 1)) >"$RESULTS/poll-qid"
	log "$dev: $((qc - 1)) I/O queues, qid $((qc - 1)) polled"
}

rxe_setup() {
	local m
	# rdma_rxe needs crc32 (its ICRC): without it "rdma link add" fails with ENOENT
	modprobe crc32_generic 2>/dev/null || true
	modprobe crc32-pclmul 2>/dev/null || true
	for m in veth rdma_rxe; do need_module $m; done
	ip link add $RDMA_NETDEV type veth peer name ${RDMA_NETDEV}p || fail "cannot create the veth pair"
	ip addr add "$RDMA_ADDR/24" dev $RDMA_NETDEV
	ip link set ${RDMA_NETDEV}p up
	ip link set $RDMA_NETDEV up
	rdma link add $RDMA_LINK type rxe netdev $RDMA_NETDEV || fail "rdma link add (rxe on $RDMA_NETDEV) failed"
	wait_for 10 bash -c "rdma link show $RDMA_LINK/1 | grep -q 'state ACTIVE'" ||
		fail "rxe link $RDMA_LINK not active: $(rdma link show 2>&1)"
	log "soft-RoCE: $RDMA_LINK on $RDMA_NETDEV, $RDMA_ADDR"
}

nvmet_rdma_setup() { nvmet_setup rdma "$RDMA_ADDR" 2 "$@"; }

rdma_teardown() {
	modprobe -r nvme_rdma nvmet_rdma 2>/dev/null || true
	rdma link delete $RDMA_LINK 2>/dev/null || true
	ip link del $RDMA_NETDEV 2>/dev/null || true
}

nvme_disconnect_all() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/delete_controller" ] || continue
		[ "$(cat "$c/transport" 2>/dev/null)" = pcie ] && continue
		echo 1 >"$c/delete_controller" 2>/dev/null || true
	done
	wait_for 10 bash -c '! ls -d /sys/class/nvme/nvme* >/dev/null 2>&1' || true
}

nvmet_teardown() {
	local l s
	[ -d $NVMET_CFG ] || return 0
	for l in $NVMET_CFG/ports/*/subsystems/*; do [ -L "$l" ] && rm -f "$l"; done
	for s in $NVMET_CFG/ports/*; do [ -d "$s" ] && rmdir "$s"; done
	for s in $NVMET_CFG/subsystems/*; do
		[ -d "$s" ] || continue
		for l in "$s"/namespaces/*; do
			[ -d "$l" ] || continue
			echo 0 >"$l/enable"; rmdir "$l"
		done
		rmdir "$s"
	done
	modprobe -r nvmet_tcp nvmet null_blk 2>/dev/null || true
}

# modules_snapshot: /proc/modules, with each module's address, into $RESULTS/modules.txt;
# taken while the scenario's modules are loaded, it lets kmemleak_judge put the bare
# addresses a module leaves in a leak's backtrace once unloaded back to that module
modules_snapshot() { cat /proc/modules >"$RESULTS/modules.txt"; }
# kmemleak_judge [--expect ID]: where the kernel has kmemleak, scan (after the teardown) and
# judge each unreferenced object (tests/guest/kmemleak.py, into kmemleak-judged.txt): fail
# on one of nvmetrace's or one that is no known kernel leak (tests/guest/kernel-leaks);
# the lane lets kmemleak's report line pass when every object it reported is known.
# --expect ID (a control): fail unless the kernel shows leak ID.
kmemleak_judge() {
	local KML=/sys/kernel/debug/kmemleak rc=0
	[ -e $KML ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
	[ -w $KML ] || return 0
	[ -s "$RESULTS/modules.txt" ] || fail "kmemleak_judge: no modules_snapshot taken"
	# an object is reported once a scan found it unreferenced and old enough: two scans
	echo scan >$KML
	sleep 1
	echo scan >$KML
	cat $KML >"$RESULTS/kmemleak.txt"
	python3 "$NVMETRACE_SRC/tests/guest/kmemleak.py" "$RESULTS/modules.txt" "$RESULTS/kmemleak.txt" \
		"$NVMETRACE_SRC/tests/guest/kernel-leaks" --release "$(uname -r)" "$@" \
		>"$RESULTS/kmemleak-judged.txt" 2>&1 || rc=$?
	log "$(tail -n 1 "$RESULTS/kmemleak-judged.txt")"
	[ $rc -eq 0 ] || { cat "$RESULTS/kmemleak-judged.txt"; fail "kmemleak: see kmemleak-judged.txt"; }
}

# run_fio NAME FIO-ARGS... (returns fio's exit status; JSON in $RESULTS/NAME.json)
run_fio() {
	local name=$1; shift
	log "fio $name: $*"
	fio --name="$name" --output-format=json --output="$RESULTS/$name.json" "$@" \
		>"$RESULTS/$name.log" 2>&1
}
# fio_job_recorded NAME DEV FIO-ARGS...: one recording (both roles, every command; REC_SAMPLE=N:
# 1 of N) of one 2-second fio job on /dev/DEV (O_DIRECT) into $RESULTS/NAME/rec.ntr; the job's
# FIO-ARGS go to $RESULTS/NAME/fio-args and NAME to $RESULTS/jobs (REC_JOBS: another list), for
# the scenario's host-side check
fio_job_recorded() {
	local name=$1 dev=$2 d=$RESULTS/$1 rec
	shift 2
	mkdir -p "$d"
	"$NVMETRACE_BIN" record -r host -r target -s "${REC_SAMPLE:-1}" -o "$d/rec.ntr" \
		>"$d/record.out" 2>&1 &
	rec=$!
	recorder_wait "$d/record.out" "$name"
	run_fio "$name" --filename="/dev/$dev" --direct=1 --time_based --runtime=2 --size=256m "$@" ||
		fail "$name: fio failed"
	kill -INT $rec
	wait $rec || { cat "$d/record.out"; fail "$name: record failed"; }
	printf '%s\n' "$@" >"$d/fio-args"
	echo "$name" >>"$RESULTS/${REC_JOBS:-jobs}"
}
# run_fio_bg NAME FIO-ARGS...: start fio in the background, its pid in FIO_PID;
# fio_stop: SIGTERM it (fio finishes cleanly and writes its JSON), return its exit status
run_fio_bg() {
	local name=$1; shift
	log "fio $name (background): $*"
	fio --name="$name" --output-format=json --output="$RESULTS/$name.json" "$@" \
		>"$RESULTS/$name.log" 2>&1 &
	FIO_PID=$!
}
fio_stop() { # fio exits 1 after a signal even when all went well: only its JSON counts
	kill -TERM "$FIO_PID" 2>/dev/null || true
	wait "$FIO_PID" || true
}

# spdk_joined NAME: the joined report of /tmp/NAME-host.ntr and /tmp/NAME-target.ntr (copied to
# the results): every host command matched, none with a negative computed network
spdk_joined() {
	local n=$1
	cp "/tmp/$n-host.ntr" "/tmp/$n-target.ntr" "/tmp/$n-host.out" "/tmp/$n-target.out" "$RESULTS/" ||
		fail "$n: cannot copy the recordings"
	"$NVMETRACE_BIN" report --detail "/tmp/$n-host.ntr" "/tmp/$n-target.ntr" | tee "$RESULTS/$n-report.txt" ||
		fail "$n: joined report failed"
	"$NVMETRACE_BIN" report --json "/tmp/$n-host.ntr" "/tmp/$n-target.ntr" >"$RESULTS/$n-report.json" ||
		fail "$n: joined report --json failed"
	jq -e '.[0].join | .host > 0 and .matched == .host and .negative_network == 0' \
		"$RESULTS/$n-report.json" >/dev/null ||
		fail "$n: not every host command matched: $(jq -c '.[0].join' "$RESULTS/$n-report.json")"
	log "$n: $(jq -r '.[0].join | "\(.matched) of \(.host) host commands matched"' "$RESULTS/$n-report.json")"
}

# spdk_target_start NQN [TRACE-GROUPS [TRANSPORT]]: SPDK's NVMe-oF target (nvmf_tgt, built into
# the cache by tools/spdk) on CPU 0 without hugepages, a 64 MiB malloc bdev with 512-byte blocks
# as NQN's namespace, listening on tcp $NVMET_ADDR:$NVMET_PORT, or with TRANSPORT rdma on
# $RDMA_ADDR:$NVMET_PORT (rxe_setup first).  TRACE-GROUPS is its -e (default: only the
# tracepoints nvmetrace reads on that transport).  Sets SPDK (the build), SPDK_TGT (its pid),
# SPDK_SOCK (its RPC socket) and SPDK_RPC.
spdk_target_start() {
	local nqn=$1 tr=${3:-tcp} groups addr
	case $tr in
	tcp) groups=${2:-nvmf_tcp:0x401,bdev:0x3} addr=$NVMET_ADDR ;;
	rdma) groups=${2:-nvmf_rdma:0x101,bdev:0x3} addr=$RDMA_ADDR ;;
	*) fail "spdk_target_start: transport tcp or rdma, not $tr" ;;
	esac
	SPDK=$("$NVMETRACE_SRC/tools/spdk" path) ||
		fail "SPDK is not built: tools/spdk build (the test command's spdk stage builds it)"
	# the RPC socket on the guest's own /tmp: the machine's /var/tmp is shared with the guests
	SPDK_SOCK=/tmp/spdk.sock
	SPDK_RPC=("$SPDK/scripts/rpc.py" -s "$SPDK_SOCK" -t 60)
	mkdir -p /var/run /tmp/spdk
	"$SPDK/bin/nvmf_tgt" --no-huge -s 512 -m 0x1 -r "$SPDK_SOCK" -e "$groups" \
		>"$RESULTS/nvmf_tgt.log" 2>&1 &
	SPDK_TGT=$!
	# the RPC socket, then the setup in one rpc.py run (each run starts a Python: seconds
	# under TCG)
	wait_for 180 test -S "$SPDK_SOCK" ||
		{ cat "$RESULTS/nvmf_tgt.log"; fail "nvmf_tgt made no RPC socket"; }
	"${SPDK_RPC[@]}" >"$RESULTS/rpc.out" 2>&1 <<RPC || { cat "$RESULTS/rpc.out" "$RESULTS/nvmf_tgt.log"; fail "the SPDK target's setup failed"; }
nvmf_create_transport -t ${tr^^}
bdev_malloc_create -b Malloc0 64 512
nvmf_create_subsystem $nqn -a -s NVMETRACE0001
nvmf_subsystem_add_ns $nqn Malloc0
nvmf_subsystem_add_listener $nqn -t $tr -a $addr -s $NVMET_PORT
RPC
	log "SPDK nvmf_tgt (pid $SPDK_TGT): $nqn on $tr $addr:$NVMET_PORT, a 64 MiB malloc bdev"
}
