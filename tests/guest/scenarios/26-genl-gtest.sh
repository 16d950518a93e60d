#!/bin/bash
# 26-genl-gtest: the tool's GoogleTests that need the real module (they skip on a machine
# without it, as in the unit stage) run here with nvmetrace.ko loaded; none may skip.
# nvme_tcp is loaded with no controller, so Genl.ReloadedModule* can load it again while
# recording: with START's identity of its BTF its hooks come back, with another they stay STALE.
# Genl.Admit* grows a recording's devices with ADMIT, and has the module refuse what it must.
# Genl.LayoutGiven* unloads nvme_tcp, starts, loads it and gives its layout with LAYOUT.
# Genl.PoolAndDmaCost* and Genl.OpenBlockDevice* name null_blk's disk by a descriptor.
# lane-timeout: 90
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
# the tests built beside the tool the lane runs (NVMETRACE_BUILD/user), else build/user
bdir=$(dirname "${NVMETRACE_BIN:-$NVMETRACE_SRC/build/user/nvmetrace}")
t=$bdir/tests/genl_test
[ -x "$t" ] || fail "$t not built (cmake --build $bdir)"
modprobe nvme_tcp || fail "cannot load nvme_tcp"
# a block device for POOL_GET and DMA_COST, named by a descriptor open on it
modprobe null_blk nr_devices=1 || fail "cannot load null_blk"
wait_for 10 test -b /dev/nullb0 || fail "/dev/nullb0 did not appear"
insmod "$NVMETRACE_KO" || fail "insmod failed"
NVMETRACE_TEST_BDEV=/dev/nullb0 "$t" --gtest_color=no --gtest_filter='Genl.StartValidates*:Genl.VersionAndStatus*:Genl.*FromTheModule*:Genl.Admit*:Genl.ReloadedModule*:Genl.LayoutGiven*' 2>&1 | tee "$RESULTS/genl_test.log"
rc=${PIPESTATUS[0]}
rmmod nvmetrace || fail "rmmod failed"
modprobe -r nvme_tcp || true
modprobe -r null_blk || true
[ "$rc" -eq 0 ] || fail "genl_test failed with the module loaded"
! grep -q '^\[  SKIPPED \]' "$RESULTS/genl_test.log" || fail "a module test skipped with the module loaded"
grep -q '^\[  PASSED  \] [1-9]' "$RESULTS/genl_test.log" || fail "genl_test ran no test"
