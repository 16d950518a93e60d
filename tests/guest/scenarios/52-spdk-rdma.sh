#!/bin/bash
# 52-spdk-rdma: SPDK over RDMA on soft-RoCE. SPDK's nvmf_tgt serves a namespace on an RDMA
# listener of the rxe device (CPU 0, its RDMA tracepoints on); the kernel's nvme-rdma host
# connects to it and fio reads; SPDK's own initiator (spdk_nvme_perf) reads over RDMA too,
# as the control arm of nvmetrace bench on the kernel's passthrough node of that namespace.
# fio is recorded on both sides (the kernel host by the module, SPDK's target by record
# --spdk-target): joined, every host command matched, SPDK's stages named.
# Asserts here: fio sees no error; probe -t rdma --spdk-target finds the target's RDMA
# tracepoints on, and each counted at least one hit per command fio completed; the control
# arm's rows (bench_check.py --control) have IOPS and no failed command, and its trid is the
# RDMA one bench read from the kernel host's controller.
# lane-timeout: 600
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
CHECK="python3 $NVMETRACE_SRC/tests/guest/bench_check.py"

rxe_setup
# SPDK is a user-space RDMA consumer: it needs the verbs and RDMA CM character devices
# (the kernel's nvme-rdma host and nvmet-rdma do not)
need_module ib_uverbs rdma_ucm
wait_for 10 test -c /dev/infiniband/rdma_cm || fail "no /dev/infiniband/rdma_cm after loading rdma_ucm"
wait_for 10 bash -c 'ls /dev/infiniband/uverbs* >/dev/null' ||
	fail "no /dev/infiniband/uverbs* for the rxe device after loading ib_uverbs"
NQN=nqn.2024-01.io.nvmetrace:spdk-rdma
spdk_target_start "$NQN" "" rdma
dev=$(nvme_rdma_connect "$NQN") || fail "the kernel's nvme-rdma host did not connect to SPDK's target"
log "kernel host: /dev/$dev on SPDK's $NQN over RDMA"
[ "$(cat "/sys/class/nvme/${dev%n*}/transport")" = rdma ] || fail "$dev is not on an rdma controller"

# both sides recorded while fio reads: SPDK's target from its trace ring, the kernel's
# nvme-rdma host by the module (outputs on the guest's tmpfs, copied to the results after)
"$NVMETRACE_BIN" record -s 1 --spdk-target "$SPDK/bin/nvmf_tgt" --spdk-rpc "$SPDK_SOCK" \
	-o /tmp/target.ntr >/tmp/record-target.out 2>&1 &
TREC=$!
recorder_wait /tmp/record-target.out "record --spdk-target"
insmod "$NVMETRACE_KO" || fail "insmod failed"
"$NVMETRACE_BIN" record -r host -s 1 -o /tmp/host.ntr >/tmp/record.out 2>&1 &
REC=$!
recorder_wait /tmp/record.out
run_fio rd --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
	--iodepth=4 --time_based --runtime=2 --size=32m || fail "fio over RDMA on SPDK's target failed"
kill -INT $REC $TREC
wait $REC || { cat /tmp/record.out; fail "record failed"; }
wait $TREC || { cat /tmp/record-target.out; fail "record --spdk-target failed"; }
cp /tmp/host.ntr /tmp/target.ntr /tmp/record.out /tmp/record-target.out "$RESULTS/" ||
	fail "cannot copy the recordings"
fio_check rd
ios=$(fio_ios rd)
log "fio: $ios reads over RDMA"
# joined: every host command meets its SPDK target command, by LBA and time alone (SPDK's RDMA
# entries name no queue)
"$NVMETRACE_BIN" report --detail /tmp/host.ntr /tmp/target.ntr | tee "$RESULTS/report-joined.txt" ||
	fail "joined report failed"
"$NVMETRACE_BIN" report --json /tmp/host.ntr /tmp/target.ntr >"$RESULTS/report-joined.json" ||
	fail "joined report --json failed"
jq -e --argjson n "$ios" '.[0].join | .host == $n and .matched == $n and .negative_network == 0' \
	"$RESULTS/report-joined.json" >/dev/null ||
	fail "joined over RDMA: not every one of $ios host commands matched: $(jq -c '.[0].join' "$RESULTS/report-joined.json")"
jq -e '[.[0].groups[] | select(.view == "joined") | [.stages[].name] |
	(index("target driver (SPDK)") != null and index("storage (SPDK bdev, drive)") != null)] |
	length > 0 and all' "$RESULTS/report-joined.json" >/dev/null ||
	fail "joined over RDMA: SPDK's stages are not named"
grep -q "commands without a queue id" "$RESULTS/record-target.out" ||
	fail "record --spdk-target over RDMA did not say its commands have no queue id"

# SPDK's target over RDMA, seen by probe: the transport's tracepoints are on and counted
"$NVMETRACE_BIN" probe -t rdma --spdk-target "$SPDK/bin/nvmf_tgt" >"$RESULTS/probe.txt" 2>&1 ||
	{ cat "$RESULTS/probe.txt"; fail "probe -t rdma --spdk-target failed"; }
cat "$RESULTS/probe.txt"
for t in RDMA_REQ_NEW RDMA_REQ_RDY_TO_COMPL BDEV_IO_START BDEV_IO_DONE; do
	hits=$(sed -nE "s/^  ok +$t +[a-z_]+ +.*, ([0-9]+) hits$/\1/p" "$RESULTS/probe.txt")
	[ -n "$hits" ] || fail "probe: $t is not ok"
	[ "$hits" -ge "$ios" ] || fail "probe: $t counted $hits hits for $ios reads"
done

# SPDK's initiator over RDMA: the control arm beside io_uring_cmd on the ng node (CPU 1)
ng=/dev/ng${dev#nvme}
wait_for 5 test -c "$ng" || fail "no passthrough node $ng for $dev"
"$NVMETRACE_BIN" bench "$ng" --profile kv --sizes 4k --qds 1 -d 2 --cpus 1 --target-cpus 0 \
	--spdk-perf "$SPDK/bin/spdk_nvme_perf" --spdk-args "--no-huge -s 256" \
	-o "$RESULTS/control.csv" >"$RESULTS/control.out" 2>&1 ||
	{ cat "$RESULTS/control.out"; fail "bench with the control arm over RDMA failed"; }
cat "$RESULTS/control.out" "$RESULTS/control.csv"
$CHECK "$RESULTS/control.csv" --control --cells 2 --ok 2 || fail "control.csv"
jq -e --arg a "$RDMA_ADDR" --arg n "$NQN" '.control.trid | contains("trtype:RDMA") and
	contains("traddr:" + $a) and contains("subnqn:" + $n)' "$RESULTS/control.meta" >/dev/null ||
	fail "control.meta has no RDMA trid: $(cat "$RESULTS/control.meta")"

nvme_disconnect_all
kill -INT "$SPDK_TGT"; wait "$SPDK_TGT" || true
rmmod nvmetrace || fail "rmmod failed"
rdma_teardown
