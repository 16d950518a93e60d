#!/bin/bash
# 21-dkms-load: the nvmetrace.ko that Debian's dkms built for this kernel (tests/dkms-test,
# copied to $NVMETRACE_BUILD/dkms/<release>/) loads, answers a status query over generic
# netlink, and unloads. Skips when tests/dkms-test has not run (tests/run runs it first).
# lane-timeout: 60
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_bin
[ -f "${NVMETRACE_DKMS_KO:-}" ] || skip "no DKMS-built module at ${NVMETRACE_DKMS_KO:-?} (run tests/dkms-test first)"
[ "$(modinfo -F vermagic "$NVMETRACE_DKMS_KO" | cut -d' ' -f1)" = "$KREL" ] ||
	fail "$NVMETRACE_DKMS_KO was built for $(modinfo -F vermagic "$NVMETRACE_DKMS_KO"), not $KREL"
insmod "$NVMETRACE_DKMS_KO" || fail "insmod of the DKMS module failed"
"$NVMETRACE_BIN" status --json >"$RESULTS/status.json" || fail "status query failed"
jq -e '.state == "idle" and .rings > 0' "$RESULTS/status.json" >/dev/null ||
	fail "unexpected status: $(cat "$RESULTS/status.json")"
"$NVMETRACE_BIN" --version | tee "$RESULTS/version.txt"
grep -q "^module $(cat "$NVMETRACE_SRC/VERSION") " "$RESULTS/version.txt" || fail "module version not reported"
rmmod nvmetrace || fail "rmmod failed"
log "DKMS module for $KREL loads, answers, unloads"
