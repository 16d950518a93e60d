# shellcheck shell=bash
# tests/guest/lib-check.sh — helpers that only read a scenario's results: sourced by
# tests/guest/lib.sh in the guest and by a scenario's host-side check (NN-name.check, run by
# tools/lane on this machine after the guest powered off, over the guest's results folder).
# Nothing here touches the machine it runs on.
#
#   skip REASON...            exit 77 (SKIP) with a reason
#   fail REASON...            exit 1 (FAIL) with a reason
#   log MSG...                timestamped message on stdout
#   fio_json NAME             the JSON document of $RESULTS/NAME.json
#   fio_ios NAME              total completed I/Os (read+write+trim) in $RESULTS/NAME.json
#   fio_errors NAME           sum of per-job error codes / error counts in NAME.json
#   fio_check NAME            fail unless NAME.json shows >0 I/Os and 0 errors
#   need_results FILE...      fail unless the guest left each FILE (relative to $RESULTS)
#   need_tool                 NT=the nvmetrace tool the guest ran ($NVMETRACE_BIN); fail
#                             without it (a check reads recordings: nothing to skip to)
set -euo pipefail

: "${RESULTS:?RESULTS not set: scenarios and their checks run from tools/lane run}"

log()  { printf '[%8s] %s\n' "$(cut -d' ' -f1 /proc/uptime)" "$*"; }
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# the JSON document of NAME.json (fio may put lines such as "fio: terminating on signal 15"
# in front of it)
fio_json() { sed -n '/^{/,$p' "$RESULTS/$1.json"; }
fio_ios() {
	fio_json "$1" | jq '[.jobs[] | (.read.total_ios + .write.total_ios + .trim.total_ios)] | add // 0'
}
fio_errors() {
	fio_json "$1" | jq '[.jobs[] | (.error + (.total_err // 0))] | add // 0'
}
fio_check() {
	local name=$1 ios errs
	[ -s "$RESULTS/$name.json" ] || fail "fio $name wrote no JSON ($(tail -n 5 "$RESULTS/$name.log" 2>/dev/null))"
	ios=$(fio_ios "$name") || fail "cannot parse $RESULTS/$name.json"
	errs=$(fio_errors "$name")
	log "fio $name: $ios I/Os, $errs errors, $(fio_json "$name" | jq -r '[.jobs[].read.iops] | add | floor') read IOPS"
	[ "$ios" -gt 0 ] || fail "fio $name completed no I/O"
	[ "$errs" -eq 0 ] || fail "fio $name reported errors ($errs)"
}
need_results() {
	local f
	for f in "$@"; do
		[ -s "$RESULTS/$f" ] || fail "the guest left no $f in $RESULTS (see output.log)"
	done
}
need_tool() {
	NT=${NVMETRACE_BIN:-}
	[ -x "$NT" ] || fail "no nvmetrace tool (NVMETRACE_BIN=$NT)"
}
