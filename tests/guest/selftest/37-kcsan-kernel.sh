#!/bin/bash
# self-test: a KCSAN report whose two accesses are both the kernel's own code (no frame
# of nvmetrace's) -> PASS, with the lane's note that the race is the kernel's
. "$NVMETRACE_SRC/tests/guest/lib.sh"
while IFS= read -r l; do echo "$l" >/dev/kmsg; done <<'REPORT'
==================================================================
BUG: KCSAN: data-race in tcp_poll / tcp_sendmsg_locked
write to 0xffff88800a1b2c30 of 4 bytes by task 1 on cpu 1:
 tcp_sendmsg_locked+0x6c1/0x1a30
 tcp_sendmsg+0x2c/0x50
read to 0xffff88800a1b2c30 of 4 bytes by task 2 on cpu 0:
 tcp_poll+0x2d6/0x6f0
 sock_poll+0x9b/0x1d0
value changed: 0x00010000 -> 0x00020000
Reported by Kernel Concurrency Sanitizer on:
==================================================================
REPORT
log "injected a KCSAN report of the kernel's own code; exiting 0"
