#!/bin/bash
# self-test: a normal scenario -> PASS
. "$NVMETRACE_SRC/tests/guest/lib.sh"
echo "a file from the guest" >"$RESULTS/written-by-guest.txt"
log "all good"
