#!/bin/bash
# tools/ab.d/workload.sh — one side of an A/B run: the same fio matrix, each cell recorded
# by nvmetrace, written as results.csv + results.meta + one recording per cell.
# Runs inside a lane guest (tools/ab) and on kdevops baseline/dev nodes (the nvmetrace
# role) alike; needs root, fio, jq and the nvmetrace tool and module.
#
#   workload.sh --out DIR [--label NAME] [--device /dev/nvmeXnY] [--matrix CELLS]
#               [--runtime SECS] [--sample N] [--ko PATH]
#
#   --out DIR       results folder (created)
#   --label NAME    baseline, dev, ... (goes into results.meta)
#   --device DEV    an NVMe-oF namespace to use as it is (host role only); default: set up a
#                   null_blk-backed nvmet-tcp target on 127.0.0.1 and connect to it (host and
#                   target roles both recorded, joined in the report)
#   --matrix CELLS  space-separated rw:bs:qd cells (default below)
#   --runtime SECS  per cell (default 3)
#   --sample N      record 1-of-N commands (default 1)
#   --ko PATH       insmod this nvmetrace.ko (default: modprobe nvmetrace, unless loaded)
#
# results.csv columns (one row per cell; a failed cell has status=failed and why):
#   cell,rw,bs,qd,status,runtime_s,ios,iops,mib_s,lat_mean_us,lat_p50_us,lat_p99_us,
#   cpu_usr_pct,cpu_sys_pct,errors,recording,report,why
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# in a lane guest NVMETRACE_KO names the module built for its kernel
OUT="" LABEL=run DEVICE="" RUNTIME=3 SAMPLE=1 KO=${NVMETRACE_KO:-}
MATRIX="randread:4k:1 randread:4k:16 randwrite:4k:1 randwrite:64k:4"
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit "${1:-0}"; }
die() { echo "workload.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--out) OUT=$2; shift 2 ;;
	--label) LABEL=$2; shift 2 ;;
	--device) DEVICE=$2; shift 2 ;;
	--matrix) MATRIX=$2; shift 2 ;;
	--runtime) RUNTIME=$2; shift 2 ;;
	--sample) SAMPLE=$2; shift 2 ;;
	--ko) KO=$2; shift 2 ;;
	-h|--help) usage ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
done
[ -n "$OUT" ] || die "--out DIR is required"
[[ $RUNTIME =~ ^[1-9][0-9]*$ ]] || die "--runtime must be a whole number of seconds"
[[ $SAMPLE =~ ^[1-9][0-9]*$ ]] || die "--sample must be a positive integer"
for cell in $MATRIX; do
	[[ $cell =~ ^(randread|randwrite|read|write):[0-9]+[kKmM]?:[1-9][0-9]*$ ]] ||
		die "matrix cell '$cell' is not rw:bs:qd (e.g. randread:4k:16)"
done
NT=${NVMETRACE_BIN:-$(command -v nvmetrace || echo "$SRC/build/user/nvmetrace")}
[ -x "$NT" ] || die "no nvmetrace tool (looked for $NT); build it or set NVMETRACE_BIN"
command -v fio >/dev/null || die "fio not found"
command -v jq >/dev/null || die "jq not found"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export RESULTS=$OUT
# shellcheck source=../../tests/guest/lib.sh
. "$SRC/tests/guest/lib.sh"

roles=(-r host)
if [ -z "$DEVICE" ]; then
	nvmet_tcp_setup
	DEVICE=/dev/$(nvme_tcp_connect)
	roles+=(-r target)
fi
[ -b "$DEVICE" ] || die "$DEVICE is not a block device"
if [ -n "$KO" ]; then
	insmod "$KO" || die "insmod $KO failed"
elif [ ! -d /sys/module/nvmetrace ]; then
	modprobe nvmetrace || die "modprobe nvmetrace failed (install it with DKMS, or pass --ko)"
fi

dname=${DEVICE##*/}
ctrl=$(basename "$(readlink -f "/sys/block/$dname/device")")
{
	echo "label=$LABEL"
	echo "kernel_release=$(uname -r)"
	echo "kernel_version=$(uname -v)"
	echo "module_version=$(cat /sys/module/nvmetrace/version 2>/dev/null || echo unknown)"
	echo "tool_version=$("$NT" --version 2>/dev/null | head -n1)"
	echo "nvmetrace_commit=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)"
	echo "kernel_source=${NVMETRACE_KERNEL_SOURCE:-debian}"
	echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "hostname=$(hostname)"
	echo "command=$0 $(printf '%q ' "$@")"
	echo "device=$DEVICE"
	echo "device_model=$(cat "/sys/block/$dname/device/model" 2>/dev/null | xargs)"
	echo "device_subsysnqn=$(cat "/sys/block/$dname/device/subsysnqn" 2>/dev/null)"
	echo "device_transport=$(cat "/sys/class/nvme/$ctrl/transport" 2>/dev/null)"
	echo "device_lba_bytes=$(cat "/sys/block/$dname/queue/logical_block_size")"
	echo "device_max_hw_sectors_kb=$(cat "/sys/block/$dname/queue/max_hw_sectors_kb")"
	echo "roles=${roles[*]}"
	echo "sample=$SAMPLE"
	echo "runtime_s=$RUNTIME"
	echo "matrix=$MATRIX"
} >"$OUT/results.meta"

csv=$OUT/results.csv
echo "cell,rw,bs,qd,status,runtime_s,ios,iops,mib_s,lat_mean_us,lat_p50_us,lat_p99_us,cpu_usr_pct,cpu_sys_pct,errors,recording,report,why" >"$csv"
for cell in $MATRIX; do
	IFS=: read -r rw bs qd <<<"$cell"
	name=$rw-$bs-qd$qd
	rec=$OUT/$name.ntr
	"$NT" record "${roles[@]}" -s "$SAMPLE" -o "$rec" >"$OUT/$name.record.out" 2>&1 &
	rpid=$!
	why=""
	# the workload starts once every hook is attached (seconds under TCG): a fixed pause
	# here once let a whole 1 s cell run before the recorder had attached
	if ! recorder_started "$OUT/$name.record.out"; then
		kill -INT $rpid 2>/dev/null || true
		wait $rpid || true
		why="the recorder did not start within 120 s: $(tail -n1 "$OUT/$name.record.out" | tr ',' ';')"
		echo "$name,$rw,$bs,$qd,failed,$RUNTIME,,,,,,,,,,,,$why" >>"$csv"
		log "cell $name FAILED: $why"
		continue
	fi
	run_fio "$name" --filename="$DEVICE" --ioengine=libaio --direct=1 --rw="$rw" --bs="$bs" \
		--iodepth="$qd" --size=256m --time_based --runtime="$RUNTIME" --randrepeat=0 --lat_percentiles=1 ||
		why="fio failed: $(tail -n1 "$OUT/$name.log" | tr ',' ';')"
	kill -INT $rpid 2>/dev/null || true
	wait $rpid || why="${why:+$why; }record failed: $(tail -n1 "$OUT/$name.record.out" | tr ',' ';')"
	if [ -z "$why" ]; then
		"$NT" report --json "$rec" >"$OUT/$name.report.json" 2>"$OUT/$name.report.err" ||
			why="report failed: $(tail -n1 "$OUT/$name.report.err" | tr ',' ';')"
	fi
	if [ -z "$why" ] && [ "$(jq '[.[].commands.reported] | add // 0' "$OUT/$name.report.json")" = 0 ]; then
		why="the recording holds no commands (see $name.record.out)"
	fi
	if [ -n "$why" ]; then
		echo "$name,$rw,$bs,$qd,failed,$RUNTIME,,,,,,,,,,,,$why" >>"$csv"
		log "cell $name FAILED: $why"
		continue
	fi
	jq -r --arg n "$name" --arg rw "$rw" --arg bs "$bs" --arg qd "$qd" --arg rt "$RUNTIME" \
		--arg rec "${rec##*/}" --arg rep "$name.report.json" '
		.jobs[0] as $j
		| ($j.read.total_ios + $j.write.total_ios) as $ios
		| (if $j.read.total_ios > 0 then $j.read else $j.write end) as $d
		| [$n, $rw, $bs, $qd, "ok", $rt, $ios, ($j.read.iops + $j.write.iops),
		   (($j.read.bw_bytes + $j.write.bw_bytes) / 1048576),
		   ($d.lat_ns.mean / 1000), ($d.lat_ns.percentile["50.000000"] // 0) / 1000,
		   ($d.lat_ns.percentile["99.000000"] // 0) / 1000,
		   $j.usr_cpu, $j.sys_cpu, $j.error, $rec, $rep, ""] | @csv' \
		"$OUT/$name.json" | tr -d '"' >>"$csv"
	log "cell $name: $(tail -n1 "$csv")"
done
log "results: $csv"
