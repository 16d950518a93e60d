#!/bin/bash
# 36-uring: fio's io_uring engine on the nvme-tcp namespace (loopback, both roles recorded, every
# command): inline issue at QD1 and QD16, registered files and fixed buffers, IOSQE_ASYNC (the
# io-wq path) and SQPOLL, and NVMe passthrough (fio's io_uring_cmd engine on /dev/ngXnY) at QD1 and
# QD16, and io-wq and passthrough again at 1 of 4. Every fio I/O is one reported command of its
# io_uring path (at 1 of 4, a quarter of them); each
# group says what its end to end spans; the inline and io-wq groups start at the io_uring_enter()
# entry and end where user space took the CQE: the io_uring_enter() return that handed it over,
# or, taken from the mapped CQ ring, the next entry (seen by the ring's head), so an inline job's
# end to end is within 0.9-1.02 of fio's lat at QD1 and QD16 alike; io-wq's queueing is a stage
# of its own, and the SQPOLL group says its reap is not seen. The report's end to end is printed
# beside fio's lat (tests/guest/engine_check.py, run on the lane's machine by 36-uring.check).
# lane-timeout: 600
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"

# (36-uring.check reports and checks each job on the lane's machine, with its FIO-ARGS)
job() { fio_job_recorded "$1" "$dev" --ioengine=io_uring "${@:2}"; }

job uring-randread-4k-qd1 --rw=randread --bs=4k --iodepth=1
job uring-randwrite-32k-qd16 --rw=randwrite --bs=32k --iodepth=16
job uring-randread-4k-qd16-fixed --rw=randread --bs=4k --iodepth=16 --fixedbufs=1 \
	--registerfiles=1
job uring-randread-4k-qd4-async --rw=randread --bs=4k --iodepth=4 --force_async=1
job uring-randread-4k-qd1-sqpoll --rw=randread --bs=4k --iodepth=1 --sqthread_poll=1
# passthrough: no bio, timed from the SQE to the reap as the block path is (a char device: no
# O_DIRECT)
cmd() { fio_job_recorded "$1" "ng${dev#nvme}" --ioengine=io_uring_cmd --cmd_type=nvme --direct=0 "${@:2}"; }
cmd uring-cmd-randread-4k-qd1 --rw=randread --bs=4k --iodepth=1
cmd uring-cmd-randwrite-16k-qd16 --rw=randwrite --bs=16k --iodepth=16
# 1 of 4 at QD1, where fio waits for each CQE in a call of its own, whose return is probed only
# while a sampled command may be in flight: through io-wq (known at the punt) and passthrough
# (known at the SQE); 36-uring.check: a quarter of the I/Os, reaped at that return (a CQE posted
# before fio waits is taken from the ring: at most a quarter of them)
export REC_SAMPLE=4 REC_JOBS=sampled-jobs
job uring-randread-4k-qd1-async-1of4 --rw=randread --bs=4k --iodepth=1 --force_async=1
cmd uring-cmd-randread-4k-qd1-1of4 --rw=randread --bs=4k --iodepth=1
unset REC_SAMPLE REC_JOBS
