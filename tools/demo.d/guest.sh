#!/bin/bash
# The guest half of tools/demo: target + host over loopback, fio, nvmetrace record, report.
. "$1"
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN

echo "== NVMe/TCP target: nvmet on null_blk, 127.0.0.1:4420"
nvmet_tcp_setup
dev=$(nvme_tcp_connect)
echo "== host: /dev/$dev ($(cat /sys/block/$dev/device/transport 2>/dev/null || echo tcp))"
insmod "$NVMETRACE_KO"
$NT --version
echo
echo "\$ nvmetrace record -r host -r target -s $DEMO_SAMPLE -i 4 -o demo.ntr   (Ctrl-C after fio)"
# the recorder's lines on the terminal as they come, and in a file to wait on: in the
# guest's /run, not on the 9p results share (see recorder_started in lib.sh)
recout=/run/demo-record.out
exec 3> >(tee "$recout")
tee_pid=$!
$NT record -r host -r target -s "$DEMO_SAMPLE" -i 4 -o "$RESULTS/demo.ntr" >&3 2>&1 &
rec=$!
exec 3>&-
recorder_wait "$recout" "nvmetrace record"
fio --name=demo --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw="$DEMO_RW" \
	--bs="$DEMO_BS" --iodepth="$DEMO_IODEPTH" --time_based --runtime="$DEMO_SECONDS" \
	--output-format=json --output="$RESULTS/fio.json" >/dev/null 2>&1 || fail "fio failed"
# no wait: every record of a command is in the rings before fio sees it complete (over
# nvme-tcp the target's last, nvmet_req_complete, comes before its response is sent), and
# record drains the rings once the module has stopped
kill -INT $rec
wait $rec || fail "nvmetrace record failed"
wait "$tee_pid" || true # the recorder's last lines before what follows
echo
echo "fio (for comparison): $(fio_json fio | jq -r '.jobs[0] | (if .read.total_ios > 0 then .read else .write end) |
	"\(.total_ios) I/Os, \(.iops | floor) IOPS, latency mean \(.lat_ns.mean / 1000 | . * 100 | floor / 100) us (slat+clat)"')"
echo
echo "\$ nvmetrace report --detail demo.ntr"
$NT report --detail "$RESULTS/demo.ntr"
echo
echo "(emulated machine: absolute figures are slow; the recording is in $RESULTS/demo.ntr)"
rmmod nvmetrace
nvme_disconnect_all
nvmet_teardown
