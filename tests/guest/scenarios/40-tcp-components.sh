#!/bin/bash
# 40-tcp-components: nvme-tcp transport hooks.  Records host and target of fio runs over
# nvme-tcp loopback (4k and 128k reads, 4k writes with in-capsule data, 64k writes with
# R2T, and reads that complete on the C2H SUCCESS flag with disable_sqflow; 4k reads, 64k
# writes and reads on the SUCCESS flag again at 1 command in 4 and QD 4); the lane's
# machine then reports each and checks the host's components with
# tests/guest/tcp_components_check.sh, and that the target holds the same commands with their
# backend stage (40-tcp-components.check).
# lane-timeout: 300
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin

nvmet_tcp_setup
# In-capsule data up to 16 KiB (nvmet-tcp's default, set here so the test does not
# depend on it): 4k writes go in the capsule, 64k ones wait for an R2T.
nvmet_port_param 1 inline_data_size 16384

# connect OPTIONS: nvme_tcp_connect with extra fabrics options
connect() { nvme_tcp_connect "$NVMET_NQN" "$1"; }

need_module nvme_tcp
insmod "$NVMETRACE_KO" || fail "insmod failed"

# run NAME -- FIO-ARGS...: record one fio run (40-tcp-components.check reports and checks
# it on the lane's machine, with what each run must show), every command, or 1 of N with
# SAMPLE=N
run() {
	local name=$1 rec
	shift 2
	"$NVMETRACE_BIN" record -r host -r target -s "${SAMPLE:-1}" -o "$RESULTS/$name.ntr" \
		>"$RESULTS/$name.record.out" 2>&1 &
	rec=$!
	recorder_wait "$RESULTS/$name.record.out" "$name"
	run_fio "$name" --filename="/dev/$dev" --ioengine=libaio --direct=1 --iodepth=1 \
		--time_based --runtime=2 "$@" || fail "fio $name failed"
	kill -INT $rec
	wait $rec || { cat "$RESULTS/$name.record.out"; fail "record $name failed"; }
	grep 'nvmetrace: hook' "$RESULTS/$name.record.out" || true
	echo "$name" >>"$RESULTS/runs"
}

dev=$(connect "")
run rr4k -- --rw=randread --bs=4k
run rr128k -- --rw=randread --bs=128k
run rw4k-inline -- --rw=randwrite --bs=4k	# in-capsule data
run rw64k-r2t -- --rw=randwrite --bs=64k	# data after an R2T
# 1 command in 4: a queue's received PDUs are parsed only while a sampled command of it is in
# flight (nvme_tcp_recv_skb's gate), at QD 4 so that sampled and other commands interleave
SAMPLE=4 run rr4k-1of4 -- --rw=randread --bs=4k --iodepth=4
SAMPLE=4 run rw64k-r2t-1of4 -- --rw=randwrite --bs=64k --iodepth=4
nvme_disconnect_all

# Without SQ flow control the target sends reads' C2H data with the SUCCESS flag and no
# response capsule (nvmet_setup_c2h_data_pdu(): sqhd_disabled).
dev=$(connect ",disable_sqflow")
run rr4k-success -- --rw=randread --bs=4k
SAMPLE=4 run rr4k-success-1of4 -- --rw=randread --bs=4k --iodepth=4
nvme_disconnect_all

rmmod nvmetrace || fail "rmmod failed"
nvmet_teardown
