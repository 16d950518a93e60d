#!/bin/bash
# 52-spdk-rdma: SPDK over RDMA on soft-RoCE. SPDK's nvmf_tgt serves a namespace on an RDMA
# listener of the rxe device (CPU 0, its RDMA tracepoints on); the kernel's nvme-rdma host
# connects to it and fio reads; SPDK's own initiator (spdk_nvme_perf) reads over RDMA too,
# as the control arm of nvmetrace bench on the kernel's passthrough node of that namespace.
# Asserts here: fio sees no error; probe -t rdma --spdk-target finds the target's RDMA
# tracepoints on, and each counted at least one hit per command fio completed; the control
# arm's rows (bench_check.py --control) have IOPS and no failed command, and its trid is the
# RDMA one bench read from the kernel host's controller.
# lane-timeout: 600
. "$NVMETRACE_SRC/tests/guest/lib.sh"
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

run_fio rd --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
	--iodepth=4 --time_based --runtime=2 --size=32m || fail "fio over RDMA on SPDK's target failed"
fio_check rd
ios=$(fio_ios rd)
log "fio: $ios reads over RDMA"

# SPDK's target over RDMA, seen by probe: the transport's tracepoints are on and counted
"$NVMETRACE_BIN" probe -t rdma --spdk-target "$SPDK/bin/nvmf_tgt" >"$RESULTS/probe.txt" 2>&1 ||
	{ cat "$RESULTS/probe.txt"; fail "probe -t rdma --spdk-target failed"; }
cat "$RESULTS/probe.txt"
for t in RDMA_REQ_NEW RDMA_REQ_EXECUTING RDMA_REQ_COMPLETED BDEV_IO_START BDEV_IO_DONE; do
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
rdma_teardown
