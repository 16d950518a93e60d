#!/bin/bash
# self-test: kmemleak's report line, with a judgement that the scenario's objects are all
# known kernel leaks, as many as reported -> PASS (with the lane's note)
. "$NVMETRACE_SRC/tests/guest/lib.sh"
echo "kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)" >/dev/kmsg
echo "kmemleak: 2 objects: 2 known kernel leaks, 0 unknown, 0 nvmetrace's" >"$RESULTS/kmemleak-judged.txt"
log "injected a kmemleak report line, judged known; exiting 0"
