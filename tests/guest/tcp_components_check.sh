#!/bin/bash
# tests/guest/tcp_components_check.sh REPORT.json FIO_IOS OP EXPECT...
#
# Checks an `nvmetrace report --json` (one recording) of one fio run over nvme-tcp (host and
# target recorded on one machine): the host-side groups of OP (read|write)
#  - hold exactly FIO_IOS commands (every command sampled: -s 1), or with FIO_IOS given as
#    IOS/N (recorded 1 of N) between 3/4 and 5/4 of IOS/N (the sampling picks by LBA hash),
#  - have no missing boundary, no component negative for any command, and
#    components that sum to end to end,
#  - each have, among their components, every name given as EXPECT (a name
#    prefixed with ! must be absent).
# Prints what it checked; exits 1 on the first failure.
set -euo pipefail
json=$1 ios=$2 op=$3; shift 3

die() { echo "FAIL: $*" >&2; exit 1; }
q() { jq -r "$@" "$json"; }

hosts='[.[0].groups[] | select(.view == "host_only" and .op == "'"$op"'")]'
n=$(q "$hosts | map(.n) | add // 0")
if [[ $ios == */* ]]; then
	awk -v n="$n" -v i="${ios%/*}" -v s="${ios#*/}" \
		'BEGIN { exit !(n > 0 && n >= 0.75 * i / s && n <= 1.25 * i / s) }' ||
		die "$op: $n host commands reported, fio did ${ios%/*} I/Os recorded 1 of ${ios#*/}"
else
	[ "$n" -eq "$ios" ] || die "$op: $n host commands reported, fio did $ios I/Os ($(q "$hosts | map(.label)"))"
fi
groups=$(q "$hosts | length")
for ((g = 0; g < groups; g++)); do
	G="${hosts}[$g]"
	label=$(q "$G.label")
	[ "$(q "$G.missing | length")" -eq 0 ] || die "$label: missing boundaries $(q "$G.missing")"
	neg=$(q "[$G.components[] | select(.depth == 0) | .negative] | add")
	[ "$neg" -eq 0 ] || die "$label: $neg negative component values: $(q -c "[$G.components[] | {name, negative, min_us}]")"
	# sum of the depth-0 components (all but the end-to-end row) against end to end
	sum=$(q "[$G.components[] | select(.depth == 0 and .name != \"end to end\") | .mean_us] | add")
	e2e=$(q "$G.components[] | select(.name == \"end to end\") | .mean_us")
	awk -v s="$sum" -v e="$e2e" 'BEGIN { d = s - e; if (d < 0) d = -d; exit !(d <= 1e-6 * e + 1e-6) }' ||
		die "$label: components sum to $sum us, end to end is $e2e us"
	names=$(q "$G.components[].name")
	for want in "$@"; do
		if [[ $want == !* ]]; then
			! grep -qxF -- "${want#!}" <<<"$names" || die "$label: has component '${want#!}'"
		else
			grep -qxF -- "$want" <<<"$names" || die "$label: no component '$want' (has: $(tr '\n' ';' <<<"$names"))"
		fi
	done
	echo "ok: $label: n=$(q "$G.n"), components sum to end to end ($e2e us), none negative"
done
