#!/bin/bash
# 41-tcp-target: the nvmet-tcp target hooks and the joined component table. Host and target
# of one guest are recorded together (-r host -r target -s 1) over nvme-tcp loopback for:
# 4k reads; 4k writes with their data in the capsule (the port's param_inline_data_size is
# 16 KiB); 64k writes after an R2T (nvmet-tcp sends one R2T for all of a write's data, and
# the host cuts H2C data PDUs at the target's MAXH2CDATA, 4 MiB, which is also the largest
# command nvmet_tcp_map_data() accepts: one R2T and one H2C data PDU per command); and 4k
# reads that complete on the C2H SUCCESS flag (host option disable_sqflow). For each case,
# reported on the lane's machine (41-tcp-target.check) and checked by
# tests/guest/tcp_target_check.py:
#  - per command (report --commands): exactly the nvme-tcp and nvmet-tcp events the case has;
#  - per joined group (report --json): no missing boundary, no component negative, the
#    components summing to end to end, and the seed's rows present.
# lane-timeout: 360
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
need_module nvmet_tcp

nvmet_tcp_setup
# In-capsule data up to 16 KiB, set here so the test does not depend on nvmet-tcp's default
nvmet_port_param 1 inline_data_size 16384

need_module nvme_tcp
insmod "$NVMETRACE_KO" || fail "insmod failed"
"$NVMETRACE_BIN" probe -r target | tee "$RESULTS/probe.txt"
for h in nvmet_tcp_data_ready nvmet_tcp_map_data nvmet_tcp_queue_response nvmet_tcp_build_pdu_iovec; do
	grep -qE "^  ok +$h " "$RESULTS/probe.txt" || fail "probe: hook $h not ok"
done

# run NAME CASE FIO-ARGS...: record one fio run of both roles (41-tcp-target.check reports
# and checks it as CASE on the lane's machine)
run() {
	local name=$1 case=$2 rec
	shift 2
	"$NVMETRACE_BIN" record -r host -r target -s 1 -o "$RESULTS/$name.ntr" \
		>"$RESULTS/$name.record.out" 2>&1 &
	rec=$!
	recorder_wait "$RESULTS/$name.record.out" "$name"
	run_fio "$name" --filename="/dev/$dev" --ioengine=libaio --direct=1 --iodepth=1 \
		--time_based --runtime=1 "$@" || fail "fio $name failed"
	kill -INT $rec
	wait $rec || { cat "$RESULTS/$name.record.out"; fail "record $name failed"; }
	if grep 'nvmetrace: hook\|transport hooks off' "$RESULTS/$name.record.out"; then
		fail "$name: a hook did not run"
	fi
	echo "$name $case" >>"$RESULTS/runs"
}

dev=$(nvme_tcp_connect "$NVMET_NQN")
# A 4 MiB write is not one command: the block layer splits it at the queue's max_sectors_kb
# (below 4 MiB here), so the host and target command counts are a multiple of fio's I/Os
# and one 4 MiB R2T is never seen; the case is left out.
log "$dev: max_sectors_kb $(cat "/sys/block/$dev/queue/max_sectors_kb"), max_hw_sectors_kb $(cat "/sys/block/$dev/queue/max_hw_sectors_kb")"
run rr4k read --rw=randread --bs=4k
run rw4k-inline write-incapsule --rw=randwrite --bs=4k
run rw64k-r2t write-r2t --rw=randwrite --bs=64k
nvme_disconnect_all

# Without SQ flow control nvmet-tcp sets SUCCESS on a read's last C2H data PDU and sends no
# response capsule (nvmet_setup_c2h_data_pdu(): sqhd_disabled).
dev=$(nvme_tcp_connect "$NVMET_NQN" ",disable_sqflow")
run rr4k-success read-success --rw=randread --bs=4k
nvme_disconnect_all

rmmod nvmetrace || fail "rmmod failed"
nvmet_teardown
