#!/bin/bash
# 37-sync: fio's synchronous engines on the nvme-tcp namespace (loopback, both roles recorded,
# every command): psync (pread64/pwrite64) and pvsync2 (preadv2/pwritev2), reads and writes,
# with O_DIRECT, and pvsync2 with RWF_HIPRI on a controller with a poll queue (the kernel
# polls only asynchronous direct I/O of a block device, so RWF_HIPRI on a synchronous call
# takes the interrupt-driven queues; no job uses the poll queue). Every fio I/O is one reported command of the pread/pwrite path, from the
# system call's entry to its return; the report's mean end to end is at most 1.02 of fio's
# mean lat and its median at least 0.9 of fio's (fio's lat percentiles: a few stalls of the
# emulated CPU while fio is in user space move fio's mean, not its median)
# (tests/guest/engine_check.py, run on the lane's machine by 37-sync.check).
# lane-timeout: 600
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin

nvmet_tcp_setup
# two I/O queues and a poll queue
dev=$(nvme_tcp_connect "$NVMET_NQN" "$POLL_QUEUE_OPTS")
poll_queue_note "$dev"
insmod "$NVMETRACE_KO" || fail "insmod failed"

# (37-sync.check reports and checks each job on the lane's machine, with its FIO-ARGS)
job() { fio_job_recorded "$1" "$dev" --lat_percentiles=1 "${@:2}"; }

job psync-randread-16k --ioengine=psync --rw=randread --bs=16k
job psync-randwrite-4k --ioengine=psync --rw=randwrite --bs=4k
job pvsync2-randread-4k --ioengine=pvsync2 --rw=randread --bs=4k
job pvsync2-randwrite-8k --ioengine=pvsync2 --rw=randwrite --bs=8k
job pvsync2-randread-4k-hipri --ioengine=pvsync2 --rw=randread --bs=4k --hipri=1
log "synchronous jobs recorded: $(wc -l <"$RESULTS/jobs")"
