#!/bin/bash
# 78-bench-record: nvmetrace bench --record stores one readable nvmetrace recording per matrix
# cell, named in the CSV; each holds at least the cell's measured commands, and report reads it,
# for the block path and for passthrough (/dev/ngXnY, io_uring_cmd) alike.
# lane-timeout: 300
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
B=$NVMETRACE_BIN

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
ng=/dev/ng${dev#nvme}
insmod "$NVMETRACE_KO" || fail "insmod failed"

expect_record_error() {
	local out
	if out=$("$B" bench "/dev/$dev" --record -d 0.2 2>&1); then fail "--record without -o succeeded"; fi
	grep -q -- "--record needs -o" <<<"$out" || fail "--record without -o: $out"
}
expect_record_error

for path in "/dev/$dev" "$ng"; do
	name=rec-$(basename "$path")
	sizes=4k,32k cells=2
	[ "$path" = "$ng" ] && sizes=4k cells=1
	"$B" bench "$path" --profile kv --sizes $sizes --qds 4 -d 0.5 --record -o "$RESULTS/$name.csv" ||
		fail "bench --record on $path failed"
	python3 "$NVMETRACE_SRC/tests/guest/bench_check.py" "$RESULTS/$name.csv" --cells $cells --ok $cells \
		--recordings || fail "$name.csv"
	tail -n +2 "$RESULTS/$name.csv" | while IFS=, read -r cell _ _ _ _ _ size _ _ _ _ _ _ ios _ _ _ _ _ _ _ _ _ _ rec _; do
		"$B" report --json "$RESULTS/$rec" >"$RESULTS/$rec.json" || fail "report of $rec failed"
		records=$(sed -n 's/^nvmetrace: [0-9]* commands (\([0-9]*\) records) written to .*/\1/p' "$RESULTS/$rec.log")
		n=$(jq --arg d "$dev" '[.[0].groups[] | select(.device == $d) | .n] | add // 0' "$RESULTS/$rec.json")
		sizes=$(jq -r --arg d "$dev" '[.[0].groups[] | select(.device == $d) | .size] | unique | join(" ")' "$RESULTS/$rec.json")
		log "$path cell $cell ($size bytes): $ios I/Os measured; $rec: $records records, $n commands of sizes '$sizes'"
		[ "${records:-0}" -ge "$ios" ] || fail "cell $cell: recording $rec has ${records:-no} records, the cell measured $ios I/Os"
		# every cell command by command: passthrough commands too (no bio; their op and LBA
		# come from the NVMe command), in groups of their own marked as such
		[ "$n" -ge "$ios" ] || fail "cell $cell: recording $rec has $n commands, the cell measured $ios"
		[ "$sizes" = "$size" ] || fail "cell $cell: recording $rec holds sizes '$sizes', the cell's is $size"
		want=false
		[ "$path" = "$ng" ] && want=true
		marks=$(jq -r --arg d "$dev" '[.[0].groups[] | select(.device == $d) | .passthrough] | unique | join(" ")' "$RESULTS/$rec.json")
		[ "$marks" = "$want" ] || fail "cell $cell on $path: groups marked passthrough '$marks', expected $want"
		if $want; then
			jq -e --arg d "$dev" '[.[0].groups[] | select(.device == $d) | .label | contains("(passthrough)")] | all' \
				"$RESULTS/$rec.json" >/dev/null || fail "cell $cell: a passthrough group's label does not say so"
			"$B" report "$RESULTS/$rec" | tee "$RESULTS/$rec.txt"
		fi
	done
done
"$B" status --json | jq -e '.state == "idle"' >/dev/null || fail "the module still records"
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
