#!/bin/bash
# 10-nvme-tcp: nvmet (null_blk) target + nvme-tcp host over 127.0.0.1, fio 2 s randread 4k
# QD1 on the namespace; asserts fio completed >0 I/Os with 0 errors.
# lane-timeout: 90
. "$NVMETRACE_SRC/tests/guest/lib.sh"

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
log "namespace /dev/$dev"
run_fio randread-qd1 --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread \
	--bs=4k --iodepth=1 --time_based --runtime=2 || fail "fio exited non-zero: $(tail -n 5 "$RESULTS/randread-qd1.log")"
fio_check randread-qd1
nvme_disconnect_all
nvmet_teardown
log "done"
