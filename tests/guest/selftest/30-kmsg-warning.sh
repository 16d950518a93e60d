#!/bin/bash
# self-test: exits 0 but puts a WARNING: line into the kernel log via /dev/kmsg -> FAIL
. "$NVMETRACE_SRC/tests/guest/lib.sh"
echo "WARNING: CPU: 0 PID: $$ at lane-selftest injected via /dev/kmsg" >/dev/kmsg
log "injected a WARNING line; exiting 0"
