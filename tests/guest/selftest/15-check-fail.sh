#!/bin/bash
# self-test: the guest passes, its host-side check (15-check-fail.check) fails -> FAIL
. "$NVMETRACE_SRC/tests/guest/lib.sh"
echo 3 >"$RESULTS/count"
log "guest part done"
