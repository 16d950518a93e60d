#!/bin/bash
# self-test: hangs past its timeout (killed by the guest-side timeout) -> FAIL
# lane-timeout: 5
. "$NVMETRACE_SRC/tests/guest/lib.sh"
log "hanging"
sleep 1000
