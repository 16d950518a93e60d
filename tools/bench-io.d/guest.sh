#!/bin/bash
# tools/bench-io.d/guest.sh — guest half of tools/bench-io (run by `tools/lane exec`).
#
#   guest.sh SECONDS RAMP ROUNDS "CELLS"
#
# One guest, one nvme-tcp loopback namespace on null_blk. CELLS is a list of PATH:SIZE:QD
# (PATH block = /dev/nvmeXnY with O_DIRECT, passthru = /dev/ngXnY). For every round and cell,
# fio (ioengine io_uring, or io_uring_cmd with cmd_type=nvme for passthru) and nvmetrace bench
# run the same random reads (same device, size, QD, 1 thread, malloc buffers not registered,
# SECONDS after RAMP seconds of ramp), one after the other; the order alternates per round.
# Output: $RESULTS/raw.csv (one row per run) and $RESULTS/guest.meta; fio JSON and bench CSVs
# under $RESULTS/runs/.
. "$NVMETRACE_SRC/tests/guest/lib.sh"
SECS=$1 RAMP=$2 ROUNDS=$3 CELLS=$4
need_bin
NT=/tmp/nvmetrace
cp "$NVMETRACE_BIN" "$NT" || fail "cannot copy the tool"
mkdir -p "$RESULTS/runs"
CSV=$RESULTS/raw.csv

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
ng=/dev/ng${dev#nvme}
wait_for 5 test -c "$ng" || fail "no $ng"
{
	echo "kernel_release=$(uname -r)"
	echo "tool_version=$("$NT" --version 2>&1 | head -n1)"
	echo "fio=$(fio --version)"
	echo "guest_cpus=$(nproc)"
	echo "nvme_dev=$dev"
	echo "ng_dev=$ng"
	echo "lba_size=$(cat /sys/block/$dev/queue/logical_block_size)"
} >"$RESULTS/guest.meta"
echo "round,path,size,qd,tool,iops,ios,lat_mean_us,failed" >"$CSV"

fio_cell() { # fio_cell NAME PATH SIZE QD
	local name=$1 path=$2 size=$3 qd=$4 args
	if [ "$path" = passthru ]; then
		args=(--filename="$ng" --ioengine=io_uring_cmd --cmd_type=nvme)
	else
		args=(--filename="/dev/$dev" --ioengine=io_uring --direct=1)
	fi
	fio --name="$name" --output-format=json --output="$RESULTS/runs/$name.json" "${args[@]}" \
		--rw=randread --bs="$size" --iodepth="$qd" --numjobs=1 --time_based \
		--runtime="$SECS" --ramp_time="$RAMP" --randrepeat=0 --norandommap \
		>"$RESULTS/runs/$name.log" 2>&1 || fail "fio $name failed: $(tail -n 3 "$RESULTS/runs/$name.log")"
	sed -n '/^{/,$p' "$RESULTS/runs/$name.json" |
		jq -r '.jobs[0] | [.read.iops, .read.total_ios, .read.lat_ns.mean / 1000, .error] | @csv'
}
bench_cell() { # bench_cell NAME PATH SIZE QD
	local name=$1 path=$2 size=$3 qd=$4 target=/dev/$dev
	[ "$path" = passthru ] && target=$ng
	"$NT" bench "$target" -p randread -b "$size" -q "$qd" -d "$SECS" --ramp "$RAMP" \
		-o "$RESULTS/runs/$name.csv" >"$RESULTS/runs/$name.log" 2>&1 ||
		fail "bench $name failed: $(tail -n 3 "$RESULTS/runs/$name.log")"
	awk -F, 'NR == 2 { print $18 "," $14 "," $20 "," $15 }' "$RESULTS/runs/$name.csv"
}

for r in $(seq 1 "$ROUNDS"); do
	for cell in $CELLS; do
		IFS=: read -r path size qd <<<"$cell"
		order="fio bench"
		[ $((r % 2)) = 0 ] && order="bench fio"
		for tool in $order; do
			name=r$r-$path-$size-qd$qd-$tool
			if [ $tool = fio ]; then res=$(fio_cell "$name" "$path" "$size" "$qd")
			else res=$(bench_cell "$name" "$path" "$size" "$qd"); fi
			echo "$r,$path,$size,$qd,$tool,$res" >>"$CSV"
			log "$name: $(cut -d, -f1 <<<"$res" | cut -d. -f1) IOPS"
		done
	done
done
nvme_disconnect_all
nvmet_teardown
