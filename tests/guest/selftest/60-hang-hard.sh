#!/bin/bash
# self-test: freezes the guest's userspace (SIGSTOP to every process but init and itself,
# so the guest-side timeout cannot fire and nothing powers off): only the host-side hard
# timeout (QEMU killed) ends it -> FAIL
# lane-timeout: 5
. "$NVMETRACE_SRC/tests/guest/lib.sh"
log "stopping every process, then hanging"
kill -STOP -1 || true
exec sleep 1000
