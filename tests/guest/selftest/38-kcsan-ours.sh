#!/bin/bash
# self-test: a KCSAN report with a frame of nvmetrace's in one access -> FAIL
. "$NVMETRACE_SRC/tests/guest/lib.sh"
while IFS= read -r l; do echo "$l" >/dev/kmsg; done <<'REPORT'
==================================================================
BUG: KCSAN: data-race in blk_mq_start_request / probe_rq_issue
write to 0xffff88800a1b2c30 of 4 bytes by task 1 on cpu 1:
 blk_mq_start_request+0x5c/0x2b0
 nvme_tcp_queue_rq+0x1a/0x300 [nvme_tcp]
read to 0xffff88800a1b2c30 of 4 bytes by task 2 on cpu 0:
 probe_rq_issue+0x33/0x120 [nvmetrace]
 __traceiter_block_rq_issue+0x33/0x60
Reported by Kernel Concurrency Sanitizer on:
==================================================================
REPORT
log "injected a KCSAN report with an nvmetrace frame; exiting 0"
