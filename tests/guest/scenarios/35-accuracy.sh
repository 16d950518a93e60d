#!/bin/bash
# 35-accuracy: nvmetrace against fio on nvme-tcp (loopback, null_blk target), one guest
# holding both roles, for each of fio's engines: libaio (randread and randwrite, 4 KiB and 64
# KiB, QD1 and QD8, recorded at 1-of-1 and 1-of-10); io_uring (QD1 and QD16, with and without
# registered files and fixed buffers; reads at QD1 at 1-of-10 too), psync, pvsync2 and NVMe
# passthrough (io_uring_cmd on /dev/ngXnY) at 4 KiB, every command; and O_DIRECT reads of a
# file on XFS (libaio at QD1 and QD8, psync), on a second, memory-backed namespace, the
# file's offsets mapped to the disk's (tests/guest/fiemap.py). The sampled commands are
# exactly fio's I/Os that the sampling predicate picks (checked against fio's per-I/O latency
# log), host and target
# sampled the same commands, every command has all its events in order (from the submitting
# system call's entry to the reaping call's return), the stages add up to end to end, and the
# end-to-end mean agrees with fio's total latency (lat) within 2 % once the two parts of lat
# no kernel hook sees are added, each measured apart and printed as a figure of its own: the
# syscall edges (user space to the submitting call's hook and the reaping call's hook back to
# user space: io_edges, our QD1 client of the same engine, timed per command on the module's
# clock, tests/guest/edges.py) and fio's own time in user space (in a QD1 recording of its
# own: fio's time outside the span per I/O, less io_edges' edges in the same recording). An
# io_uring command reaped from the mapped CQ ring is timed to the next io_uring_enter() entry,
# after fio's reap: nothing is added to it. Both are CPU work measured at the machine speed of
# then: at QD1 they are scaled by the cell's speed against it (fio's median lat of hooked
# I/Os), and a cell more than a third off (twofold on the last of 3 tries) has them measured
# again and is taken again, up to 3 times; one that never comes within reach fails. A
# measurement of fio's own time during which the speed moved (its run's parts apart:
# edges.py's speed_spread) is taken again, up to 3 runs, the steadiest serving. See
# tests/guest/accuracy.py.
# lane-timeout: 2400
# lane-alone: it compares with figures measured seconds before; tests/run runs it with no lane beside
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN
SECS=${ACCURACY_SECS:-2}
SEED=12345

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
lbs=$(cat "/sys/block/$dev/queue/logical_block_size")
insmod "$NVMETRACE_KO" || fail "insmod failed"
log "namespace /dev/$dev (logical block $lbs); ${SECS}s per run"

n=0
bad=0
edges=$(dirname "$NVMETRACE_BIN")/tests/io_edges
[ -x "$edges" ] || fail "no $edges (build the tool's tests)"
ng=ng${dev#nvme}

# rec_start DIR WHAT RECORD-ARGS...: `nvmetrace record` into DIR/rec.ntr (its output in
# DIR/record.out), in the background (pid in rec); returns once every hook is attached
rec_start() {
	local d=$1 what=$2
	shift 2
	"$NT" record "$@" --seed "$SEED" -o "$d/rec.ntr" >"$d/record.out" 2>&1 &
	rec=$!
	recorder_wait "$d/record.out" "$what" 180
}
# rec_stop DIR WHAT: stop it, and dump its commands into DIR/commands.jsonl
rec_stop() {
	kill -INT $rec
	wait $rec || { cat "$1/record.out"; fail "$2: record failed"; }
	"$NT" report --commands "$1/rec.ntr" >"$1/commands.jsonl" || fail "$2: report --commands failed"
}
# Where the I/O goes: the namespace's first SPAN bytes for the cells and io_edges, fio's own
# time measured at OWN_AT (OWN_SIZE bytes), apart; FSFILE, once set (fs_setup), a file of a
# file system instead of the device, whose offsets are mapped to the disk's (fs_map)
SPAN=256m
OWN_AT=1g
OWN_SIZE=256m
FSFILE=
# engine_dev ENGINE: the device fio and io_edges use with ENGINE (passthrough: the char device)
engine_dev() {
	if [ -n "$FSFILE" ]; then
		echo "$FSFILE"
	elif [ "$1" = io_uring_cmd ]; then
		echo "/dev/$ng"
	else
		echo "/dev/$dev"
	fi
}
# fs_map fio|edges LOG...: the file's offsets in LOGs (fio's latency log, io_edges' output of
# I/O of $b bytes) made the disk's, so that the I/Os name their commands by LBA; nothing on
# a device
fs_map() {
	local kind=$1
	shift
	[ -n "$FSFILE" ] || return 0
	if [ "$kind" = edges ]; then
		set -- "$b" "$@"
	fi
	python3 "$NVMETRACE_SRC/tests/guest/fiemap.py" "$FSFILE" "$kind" "$@" ||
		fail "$FSFILE: its offsets not mapped to the disk's"
}
# fio_engine ENGINE: fio's options for ENGINE
fio_engine() {
	if [ "$1" = io_uring_cmd ]; then
		echo "--ioengine=io_uring_cmd --cmd_type=nvme --direct=0"
	else
		echo "--ioengine=$1 --direct=1"
	fi
}
# own_run ENGINE RW BS BYTES K D: fio's own time per I/O into D/own.json: the part of its lat
# spent in fio's loop and its engine in user space. One host recording (every command) of fio
# at QD1 (same engine, op and size, LBAs from 1 GiB on) between two runs of our minimal client
# of the same engine (io_edges: timestamps around its system calls only, LBAs below 256 MiB):
# fio's time outside the span per I/O, less io_edges' syscall edges. Those edges are the
# 1-of-1 edges below.
own_run() {
	local engine=$1 rw=$2 bs=$3 b=$4 k=$5 d=$6 edev
	edev=$(engine_dev "$engine")
	mkdir -p "$d"
	rec_start "$d" "fio's own time $tag" -r host --dev "${FSDEV:-$dev}" -s 1
	"$edges" "$engine" "$edev" "${rw#rand}" "$b" "$k" "$(numfmt --from=iec "${SPAN^^}")" 1 \
		>"$d/io_edges-1.out" ||
		fail "io_edges $tag failed"
	# shellcheck disable=SC2046 # fio_engine's words are options
	fio --name=own --filename="$edev" $(fio_engine "$engine") --rw="$rw" --bs="$bs" \
		--iodepth=1 --offset="$OWN_AT" --size="$OWN_SIZE" --time_based --runtime="$SECS" \
		--write_lat_log="$d/fio" --log_offset=1 --output-format=json \
		--output="$d/fio.json" >"$d/fio.log" 2>&1 || fail "fio's own time $tag: fio failed"
	"$edges" "$engine" "$edev" "${rw#rand}" "$b" "$k" "$(numfmt --from=iec "${SPAN^^}")" 2 \
		>"$d/io_edges-2.out" ||
		fail "io_edges $tag failed"
	rec_stop "$d" "fio's own time $tag"
	fs_map edges "$d/io_edges-1.out" "$d/io_edges-2.out"
	fs_map fio "$d/fio_lat.1.log"
	cat "$d/io_edges-1.out" "$d/io_edges-2.out" >"$d/io_edges.out"
	python3 "$NVMETRACE_SRC/tests/guest/edges.py" --own "$d/fio.json" "$d/fio_lat.1.log" \
		"$d/commands.jsonl" "$lbs" "$d/io_edges-1.out" "$d/io_edges-2.out" >"$d/own.json" ||
		fail "fio's own time $tag: $(cat "$d/own.json")"
	log "fio's own time $tag: $(cat "$d/own.json")"
}

# own_spread D: D/own.json's speed_spread (edges.py: how far the machine's speed moved during
# fio's run) and whether it is within edges.py's SPEED_SPREAD: "2.01 unsteady", "1.10 steady"
# or "unknown steady" (too few I/Os to tell: taken as it is)
own_spread() {
	python3 -c 'import json, sys
sys.path.insert(0, sys.argv[2])
import edges
s = json.load(open(sys.argv[1]))["speed_spread"]
print("unknown steady" if s is None else
      "%.2f %s" % (s, "unsteady" if s > edges.SPEED_SPREAD else "steady"))' \
		"$1/own.json" "$NVMETRACE_SRC/tests/guest"
}

OWN_RUNS=3	# fio's own time is measured at most this often for one calibration
# calibrate ENGINE RW BS BYTES SAMPLINGS: fio's own time and the syscall edges for ENGINE's
# RW at BS, measured anew, all at one machine speed (an earlier measurement's folders are
# kept as *.tryN, tries counts them), the edges at each of SAMPLINGS (1 of N); sets own (its
# JSON) and tag (the folders' name: RW-BS, ENGINE-RW-BS for engines other than libaio).
# fio's own time is a mean over its run, scaled to a cell's speed by one factor: a run in
# which the machine's speed moved (a CPU slowed for a part of it: one such run gave twice the
# usual own time and failed a cell) is measured again, up to OWN_RUNS times, and the steadiest
# run serves (the others kept as own-TAG.runN).
calibrate() {
	local engine=$1 rw=$2 bs=$3 b=$4 samplings=$5 d s k=5000 edev run spread steady best bestspread
	edev=$(engine_dev "$engine")
	tag=$rw-$bs
	[ "$engine" = libaio ] || { tag=$engine-$tag; k=3000; }
	[ -z "$FSFILE" ] || tag=xfs-$tag
	tries=$((tries + 1))
	for d in "$RESULTS/own-$tag" "$RESULTS/own-$tag".run? "$RESULTS/edges-$tag"-1of*; do
		[ ! -d "$d" ] || mv "$d" "$d.try$tries"
	done
	mkdir -p "$RESULTS/edges-$tag-1of1"
	d=$RESULTS/own-$tag
	best=
	for run in $(seq "$OWN_RUNS"); do
		own_run "$engine" "$rw" "$bs" "$b" "$k" "$d.run$run"
		spread=$(own_spread "$d.run$run") || fail "fio's own time $tag: no speed spread"
		read -r spread steady <<<"$spread"
		if [ "$steady" = steady ]; then
			best=$run bestspread=$spread
			break
		fi
		if [ -z "$best" ] || awk -v a="$spread" -v b="$bestspread" 'BEGIN { exit !(a < b) }'; then
			best=$run bestspread=$spread
		fi
		log "fio's own time $tag: the machine's speed moved during its run (speed spread" \
			"$spread, run $run of at most $OWN_RUNS)"
	done
	mv "$d.run$best" "$d"
	own=$d/own.json
	log "fio's own time $tag: run $best serves (speed spread $bestspread)"
	# the syscall edges: what an application timing around its system calls sees beyond
	# the first and last host hook (user space to the submitting call's entry, the reaping
	# call's return back to user space), per command, with our QD1 client and the same
	# clock. Every command: the recording above; 1 of N: one of its own.
	for s in $samplings; do
		d=$RESULTS/edges-$tag-1of$s
		mkdir -p "$d"
		if [ "$s" = 1 ]; then
			ln -sf "../own-$tag/io_edges.out" "$d/io_edges.out"
			ln -sf "../own-$tag/commands.jsonl" "$d/commands.jsonl"
		else
			rec_start "$d" "edges $tag 1-of-$s" -r host -s "$s"
			"$edges" "$engine" "$edev" "${rw#rand}" "$b" $((500 * s)) \
				"$(numfmt --from=iec "${SPAN^^}")" "$s" \
				>"$d/io_edges.out" || fail "io_edges $tag failed"
			fs_map edges "$d/io_edges.out"
			rec_stop "$d" "edges $tag 1-of-$s"
		fi
		python3 "$NVMETRACE_SRC/tests/guest/edges.py" "$d/io_edges.out" "$d/commands.jsonl" \
			"$lbs" --json-out="$d/edges.json" >"$d/edges.txt" ||
			{ cat "$d/edges.txt"; fail "edges $tag: no join"; }
		log "edges $tag 1-of-$s: $(cat "$d/edges.txt")"
	done
}

# cell ENGINE RW BS QD S LABEL [FIO-ARGS...]: one recording of fio (both roles, 1 of S) checked
# by accuracy.py; returns its exit code (3: UNSTEADY, the machine's speed is not the
# calibration's)
cell() {
	local engine=$1 rw=$2 bs=$3 qd=$4 s=$5 label=$6 d=$RESULTS/$6 rc
	shift 6
	[ ! -d "$d" ] || mv "$d" "$d.try$tries"
	mkdir -p "$d"
	rec_start "$d" "$label" -r host -r target -s "$s"
	# shellcheck disable=SC2046 # fio_engine's words are options
	fio --name="$label" --filename="$(engine_dev "$engine")" $(fio_engine "$engine") "$@" \
		--rw="$rw" --bs="$bs" --iodepth="$qd" --size="$SPAN" --time_based \
		--runtime="$SECS" --write_lat_log="$d/fio" --log_offset=1 --output-format=json \
		--output="$d/fio.json" >"$d/fio.log" 2>&1 || fail "$label: fio failed"
	# every event of a command is in a ring before fio sees it complete, and record drains
	# the rings once it has stopped: nothing to wait for
	rec_stop "$d" "$label"
	fs_map fio "$d/fio_lat.1.log"
	"$NT" report --json "$d/rec.ntr" >"$d/report.json" || fail "$label: report failed"
	# the last try may bridge a larger change of the machine's speed (accuracy.py: STEADY)
	ACCURACY_LAST_TRY=$((try >= TRIES)) python3 "$NVMETRACE_SRC/tests/guest/accuracy.py" \
		"$label" "$d/fio.json" "$d/report.json" "$d/commands.jsonl" "$s" "$SEED" "$lbs" \
		"$d/fio_lat.1.log" "$own" "$RESULTS/edges-$tag-1of$s/edges.json" >"$d/accuracy.out"
	rc=$?
	cat "$d/accuracy.out"
	return $rc
}

# fs_setup: XFS on a second namespace of the subsystem, a memory-backed null_blk of 512 MiB
# (XFS needs 300) made through configfs (a file system reads back what it wrote; the first
# namespace is not memory-backed, so that the device's cells cost no memory), with a file of
# 160 MiB written through, then frozen: the file system's own workers write nothing (XFS covers
# its log and writes its superblock when idle: commands no system call made) and reads go on.
# The cells after it read that file (FSFILE), fio's own time measured in its last 64 MiB
fs_setup() {
	local nb=/sys/kernel/config/nullb/nullb1 mnt=$RESULTS/mnt
	local ns=$NVMET_CFG/subsystems/$NVMET_NQN/namespaces/2
	need_module xfs
	[ -d "${nb%/*}" ] || fail "null_blk has no configfs directory ${nb%/*}"
	mkdir "$nb" || fail "null_blk: nullb1 not made in configfs"
	{ echo 512 >"$nb/size" && echo 1 >"$nb/memory_backed" && echo 1 >"$nb/power"; } ||
		fail "null_blk: nullb1 not powered on"
	wait_for 10 test -b /dev/nullb1 || fail "/dev/nullb1 did not appear"
	{ mkdir "$ns" && echo -n /dev/nullb1 >"$ns/device_path" && echo 1 >"$ns/enable"; } ||
		fail "nvmet: namespace 2 not enabled"
	FSDEV=${dev%n1}n2
	# the controller hears of the namespace from the target's notice, or from a rescan
	wait_for 10 test -b "/dev/$FSDEV" ||
		{ nvme ns-rescan "/dev/${dev%n1}" && wait_for 20 test -b "/dev/$FSDEV"; } ||
		fail "/dev/$FSDEV did not appear"
	[ "$(cat "/sys/block/$FSDEV/queue/logical_block_size")" = "$lbs" ] ||
		fail "/dev/$FSDEV has another logical block than /dev/$dev"
	mkfs.xfs -q -f "/dev/$FSDEV" || fail "mkfs.xfs failed"
	mkdir -p "$mnt"
	mount -t xfs -o noatime "/dev/$FSDEV" "$mnt" || fail "mount xfs failed"
	dd if=/dev/zero of="$mnt/file" bs=1M count=160 oflag=direct status=none || fail "dd failed"
	fsfreeze -f "$mnt" || fail "fsfreeze failed"
	FSFILE=$mnt/file
	SPAN=96m
	OWN_AT=96m
	OWN_SIZE=64m
	log "XFS on /dev/$FSDEV: the cells from here on read $FSFILE (O_DIRECT)"
}

# The cells, "ENGINE RW BS QD S [FIO-ARGS...]"; those of one engine, op and size follow each
# other (one calibration serves them). Each engine of fio's but libaio at 4 KiB, every command:
# io_uring at QD1 and QD16, with and without registered files and fixed buffers (and its QD1
# reads at 1 of 10: the waiting call's return probed only while a sampled command is in
# flight); the synchronous engines; NVMe passthrough. libaio at 4 and 64 KiB, QD1 and QD8,
# every command and 1 of 10. Last, "xfs:ENGINE": O_DIRECT reads of a file on XFS (fs_setup)
# with libaio at QD1 and QD8 and psync, every command.
CELLS=("io_uring randread 4k 1 1" "io_uring randread 4k 1 1 --fixedbufs=1 --registerfiles=1"
	"io_uring randread 4k 1 10" "io_uring randread 4k 16 1"
	"io_uring randread 4k 16 1 --fixedbufs=1 --registerfiles=1"
	"io_uring randwrite 4k 1 1" "io_uring randwrite 4k 16 1"
	"psync randread 4k 1 1" "psync randwrite 4k 1 1" "pvsync2 randread 4k 1 1"
	"io_uring_cmd randread 4k 1 1" "io_uring_cmd randwrite 4k 16 1")
for rw in randread randwrite; do
	for bs in 4k 64k; do
		for qd in 1 8; do
			CELLS+=("libaio $rw $bs $qd 1" "libaio $rw $bs $qd 10")
		done
	done
done
CELLS+=("xfs:libaio randread 4k 1 1" "xfs:libaio randread 4k 8 1" "xfs:psync randread 4k 1 1")

TRIES=3		# a cell is taken at most this often, each time after measuring them anew
retaken=0
calibrated=
for c in "${CELLS[@]}"; do
	read -r engine rw bs qd s extra <<<"$c"
	if [ "${engine#xfs:}" != "$engine" ]; then
		engine=${engine#xfs:}
		[ -n "$FSFILE" ] || fs_setup
	fi
	b=$(numfmt --from=iec "${bs^^}")
	samplings=1
	# the edges at 1 of 10 too where a cell of these records at 1 of 10
	case "$engine $rw" in libaio\ *|"io_uring randread") samplings="1 10" ;; esac
	if [ "$calibrated" != "$FSFILE$engine $rw $bs" ]; then
		tries=0
		calibrate "$engine" "$rw" "$bs" "$b" "$samplings"
		calibrated="$FSFILE$engine $rw $bs"
	fi
	label="$rw-$bs-qd$qd"
	[ "$engine" = libaio ] || label=$engine-$label
	[ -z "$extra" ] || label=$label-fixed
	[ -z "$FSFILE" ] || label=xfs-$label
	label=$label-1of$s
	try=1
	while :; do
		rc=0
		# shellcheck disable=SC2086 # extra: fio's options, word by word
		cell "$engine" "$rw" "$bs" "$qd" "$s" "$label" $extra || rc=$?
		if [ "$rc" != 3 ] || [ "$try" -ge "$TRIES" ]; then
			break
		fi
		# the machine's speed changed since the calibration: measure anew
		try=$((try + 1))
		retaken=$((retaken + 1))
		log "$label: the machine's speed changed since fio's own time and the" \
			"edges were measured: measuring them again (try $try of $TRIES)"
		calibrate "$engine" "$rw" "$bs" "$b" "$samplings"
	done
	cat "$RESULTS/$label/accuracy.out" >>"$RESULTS/accuracy.txt"
	if [ "$rc" = 3 ]; then
		echo "FAIL: $label: the machine's speed kept changing: $TRIES measurements" \
			"of fio's own time and the edges, none at this cell's speed" |
			tee -a "$RESULTS/accuracy.txt"
	fi
	[ "$rc" = 0 ] || bad=$((bad + 1))
	n=$((n + 1))
done
rmmod nvmetrace || fail "rmmod failed"
if [ -n "$FSFILE" ]; then
	fsfreeze -u "$RESULTS/mnt" || fail "fsfreeze -u failed"
	umount "$RESULTS/mnt" || fail "umount failed"
fi
nvme_disconnect_all
nvmet_teardown
[ "$bad" = 0 ] || fail "$bad of $n recordings disagree with fio (FAIL lines above)"
log "$n recordings agree with fio within 2 % ($retaken taken again after the machine's speed changed)"
