#!/bin/bash
# self-test: exits 0 after a real kernel WARN_ON (tests/guest/selftest/splat) -> FAIL
. "$NVMETRACE_SRC/tests/guest/lib.sh"
ko=${NVMETRACE_TESTMOD_DIR:-}/splat/splat.ko
[ -f "$ko" ] || fail "splat.ko was not built ($ko)"
insmod "$ko" || fail "insmod splat.ko failed"
rmmod splat || true
log "loaded splat.ko (WARN_ON(1) in its init); exiting 0"
