#!/bin/bash
# self-test: exits 1 -> FAIL
. "$NVMETRACE_SRC/tests/guest/lib.sh"
log "about to fail on purpose"
fail "selftest failure marker"
