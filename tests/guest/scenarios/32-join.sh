#!/bin/bash
# 32-join: one guest holds both roles of an nvme-tcp loopback; a recording of both is reported
# joined (host and target commands matched by qid, command id, LBA and op). At 1-of-1 and
# 1-of-10, for reads and writes: 100 % of the host's commands are matched, the computed network
# is >= 0 for every one, and the joined end to end is the host's own (from the command dump).
# `export` of the recording is a valid, nested trace with every matched command's target part
# (tests/guest/trace_check.py). Its `report --html` page holds `report --json`'s JSON as it
# is and loads nothing from elsewhere (the html_browser ctest checks a page in a browser).
# The guest records; the reports and their checks are 32-join.check's, run on the lane's
# machine over the recordings (tools/lane: host-side check).
# lane-timeout: 300
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"

for rw in randread randwrite; do
	for s in 1 10; do
		label="$rw-1of$s"
		d=$RESULTS/$label
		mkdir -p "$d"
		"$NT" record -r host -r target -s "$s" -o "$d/rec.ntr" >"$d/record.out" 2>&1 &
		rec=$!
		recorder_wait "$d/record.out" "$label"
		run_fio "$label" --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw="$rw" \
			--bs=4k --iodepth=4 --size=64m --time_based --runtime=2 || fail "$label: fio failed"
		kill -INT $rec
		wait $rec || { cat "$d/record.out"; fail "$label: record failed"; }
	done
done
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
