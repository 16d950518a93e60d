#!/bin/bash
# 30-record-tcp: record host and target of an nvme-tcp loopback run with fio, then report.
# lane-timeout: 180
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"
"$NVMETRACE_BIN" --version
"$NVMETRACE_BIN" status || fail "status failed"

"$NVMETRACE_BIN" record -r host -r target -s 1 -i 1 -o "$RESULTS/rec.ntr" >"$RESULTS/record.out" 2>&1 &
REC=$!
sleep 1
run_fio rd --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
	--iodepth=1 --time_based --runtime=3 || fail "fio failed"
kill -INT $REC
wait $REC || { cat "$RESULTS/record.out"; fail "record failed"; }
cat "$RESULTS/record.out"
fio_check rd
"$NVMETRACE_BIN" report --detail "$RESULTS/rec.ntr" || fail "report failed"
"$NVMETRACE_BIN" report --json "$RESULTS/rec.ntr" >"$RESULTS/report.json" || fail "report --json failed"
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
