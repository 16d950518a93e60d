#!/bin/bash
# self-test: a host+target pair whose host guest dies of a (captured) emulator fault, as in
# 80-emulator-fault, while the target exits 0: the lane boots the pair once more with a
# RETRY line, and as the host dies again -> FAIL
# lane-pair: host=line target=line
# lane-timeout: 30
. "$NVMETRACE_SRC/tests/guest/lib.sh"
if [ "${LANE_PAIR_ROLE:-}" = target ]; then
	log "target: exiting 0"
	exit 0
fi
exec bash "$NVMETRACE_SRC/tests/guest/selftest/80-emulator-fault.sh"
