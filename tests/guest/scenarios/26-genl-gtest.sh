#!/bin/bash
# 26-genl-gtest: the tool's GoogleTests that need the real module (they skip on a machine
# without it, as in the unit stage) run here with nvmetrace.ko loaded; none may skip.
# lane-timeout: 60
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
t=$NVMETRACE_SRC/build/user/tests/genl_test
[ -x "$t" ] || fail "$t not built (cmake --build build/user)"
insmod "$NVMETRACE_KO" || fail "insmod failed"
"$t" --gtest_color=no --gtest_filter='Genl.StartValidates*:Genl.VersionAndStatus*:Genl.*FromTheModule*' 2>&1 | tee "$RESULTS/genl_test.log"
rc=${PIPESTATUS[0]}
rmmod nvmetrace || fail "rmmod failed"
[ "$rc" -eq 0 ] || fail "genl_test failed with the module loaded"
! grep -q '^\[  SKIPPED \]' "$RESULTS/genl_test.log" || fail "a module test skipped with the module loaded"
grep -q '^\[  PASSED  \] [1-9]' "$RESULTS/genl_test.log" || fail "genl_test ran no test"
