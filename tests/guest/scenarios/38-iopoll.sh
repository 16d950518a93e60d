#!/bin/bash
# 38-iopoll: fio's io_uring engine with --hipri (IORING_SETUP_IOPOLL) on an nvme-rdma namespace
# (soft-RoCE on a veth pair, both roles recorded, every command), the controller connected with
# a poll queue: the task finds its completions by polling that queue inside io_uring_enter(),
# where the CQE is posted and handed over. Every fio I/O is one reported command of the io_uring
# path, on the poll queue, from the io_uring_enter() entry to where user space took the CQE,
# within 0.9-1.02 of fio's lat (tests/guest/engine_check.py, run by 38-iopoll.check).
# nvme-tcp is not used: its poll takes the socket lock inside iocb_bio_iopoll()'s RCU read-side
# section, and every Debian line warns of it with nvmetrace not loaded.
# lane-timeout: 600
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin

rxe_setup
nvmet_rdma_setup
# two I/O queues and a poll queue
dev=$(nvme_rdma_connect "$NVMET_NQN" "$POLL_QUEUE_OPTS")
poll_queue_note "$dev"
insmod "$NVMETRACE_KO" || fail "insmod failed"

# (38-iopoll.check reports and checks each job on the lane's machine, with its FIO-ARGS)
job() { fio_job_recorded "$1" "$dev" --ioengine=io_uring --hipri=1 --lat_percentiles=1 "${@:2}"; }

job iopoll-randread-4k-qd1 --rw=randread --bs=4k --iodepth=1
job iopoll-randwrite-16k-qd1 --rw=randwrite --bs=16k --iodepth=1
log "IOPOLL jobs recorded: $(wc -l <"$RESULTS/jobs")"
nvme_disconnect_all
rdma_teardown
