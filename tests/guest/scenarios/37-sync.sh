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
# two I/O queues and a poll queue, the last (nvme-tcp orders them default, read, poll)
dev=$(nvme_tcp_connect "$NVMET_NQN" ",nr_io_queues=2,nr_poll_queues=1")
qc=$(cat /sys/class/nvme/"${dev%n*}"/queue_count) || fail "no queue_count for ${dev%n*}"
[ "$(cat /sys/block/"$dev"/queue/io_poll)" = 1 ] || fail "$dev: io_poll is not 1 with a poll queue"
echo $((qc - 1)) >"$RESULTS/poll-qid"
log "$dev: $((qc - 1)) I/O queues, qid $((qc - 1)) polled"
insmod "$NVMETRACE_KO" || fail "insmod failed"

# (37-sync.check reports and checks each job on the lane's machine, with its FIO-ARGS)
job() { fio_job_recorded "$1" "$dev" --lat_percentiles=1 "${@:2}"; }

job psync-randread-16k --ioengine=psync --rw=randread --bs=16k
job psync-randwrite-4k --ioengine=psync --rw=randwrite --bs=4k
job pvsync2-randread-4k --ioengine=pvsync2 --rw=randread --bs=4k
job pvsync2-randwrite-8k --ioengine=pvsync2 --rw=randwrite --bs=8k
job pvsync2-randread-4k-hipri --ioengine=pvsync2 --rw=randread --bs=4k --hipri=1
log "synchronous jobs recorded: $(wc -l <"$RESULTS/jobs")"
