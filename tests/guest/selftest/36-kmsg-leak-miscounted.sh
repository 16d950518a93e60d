#!/bin/bash
# self-test: kmemleak reports 3 objects, the judgement accounts for 2 -> FAIL
. "$NVMETRACE_SRC/tests/guest/lib.sh"
echo "kmemleak: 1 new suspected memory leaks (see /sys/kernel/debug/kmemleak)" >/dev/kmsg
echo "kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)" >/dev/kmsg
echo "kmemleak: 2 objects: 2 known kernel leaks, 0 unknown, 0 nvmetrace's" >"$RESULTS/kmemleak-judged.txt"
log "injected kmemleak report lines for 3 objects, judged 2; exiting 0"
