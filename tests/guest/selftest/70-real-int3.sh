#!/bin/bash
# self-test: a real stray int3 kills the kernel (0xcc still in memory) -> FAIL, not retried
# as an emulator fault (tools/guest/emulator-fault)
. "$NVMETRACE_SRC/tests/guest/lib.sh"
ko=${NVMETRACE_TESTMOD_DIR:-}/splat/splat.ko
[ -f "$ko" ] || fail "splat.ko was not built ($ko)"
log "loading splat.ko int3=1: the kernel dies now"
insmod "$ko" int3=1
fail "the kernel survived an unhandled int3"
