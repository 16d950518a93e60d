#!/bin/bash
# self-test: the console shows a captured emulator fault (a stale-int3 oops, from
# consoles/stale-int3.log, written to /dev/kmsg), then the kernel dies (sysrq crash):
# the lane boots it once more with a RETRY line, and as it dies again -> FAIL
# lane-tcg: multi (the fault it stands for happens only there; the retry runs single)
. "$NVMETRACE_SRC/tests/guest/lib.sh"
sed -n '/Oops: int3/,/end trace/{s/^\[ *[0-9.]*\] //;s/^/<2>/;p}' \
	"$NVMETRACE_SRC/tests/guest/selftest/consoles/stale-int3.log" | while IFS= read -r l; do
	printf '%s\n' "$l" >/dev/kmsg
done
log "wrote a captured stale-int3 oops to the kernel log; crashing the kernel"
echo 1 >/proc/sys/kernel/sysrq
echo c >/proc/sysrq-trigger
fail "the kernel survived a sysrq crash"
