#!/bin/bash
# 76-bench-pool: bench with the module's buffer pool registered as io_uring fixed buffers
# (mmap of /dev/nvmetrace at NVMETRACE_POOL_MMAP_OFFSET, geometry from the module parameters
# pool_buf_kb and pool_nr): block and passthrough reads with 0 fallbacks, clear errors when
# the pool is too small, and the premap proof from a pool buffer (refused on stock kernels).
# Without a pool in the module, --buf pool must fail with a clear error (never fall back to
# malloc); the rest then skips.
# lane-timeout: 240
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
B=$NVMETRACE_BIN
CHECK="python3 $NVMETRACE_SRC/tests/guest/bench_check.py"

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
ng=/dev/ng${dev#nvme}
mhs=$(cat /sys/block/$dev/queue/max_hw_sectors_kb)
# buffers big enough for the premap proof (max_hw_sectors_kb + one block) where the device
# has a finite limit (nvmet reports no MDTS: nvme-tcp's is UINT_MAX sectors)
buf_kb=2048
[ "$mhs" -lt 1048576 ] && buf_kb=$(( (mhs / 1024 + 1) * 1024 ))
if ! insmod "$NVMETRACE_KO" pool_buf_kb=$buf_kb pool_nr=8 2>"$RESULTS/insmod.err"; then
	cat "$RESULTS/insmod.err"
	insmod "$NVMETRACE_KO" || fail "insmod failed"
fi
if [ ! -e /sys/module/nvmetrace/parameters/pool_nr ]; then
	if out=$("$B" bench "/dev/$dev" --buf pool -d 0.2 2>&1); then fail "--buf pool ran without a pool: $out"; fi
	grep -q "has no buffer pool" <<<"$out" || fail "--buf pool without a pool: $out"
	echo "$out"
	rmmod nvmetrace
	skip "this nvmetrace module has no buffer pool (pool_buf_kb/pool_nr); --buf pool refuses clearly"
fi
log "pool: $(cat /sys/module/nvmetrace/parameters/pool_nr) x $(cat /sys/module/nvmetrace/parameters/pool_buf_kb) KiB"

"$B" bench "/dev/$dev" --buf pool -p randread -b 4k -q 16 -j 2 -d 1 -o "$RESULTS/pool-blk.csv" ||
	fail "block reads from the pool failed"
$CHECK "$RESULTS/pool-blk.csv" --ok 1 --buf pool --fixed 1 --fallbacks-zero || fail "pool-blk.csv"
"$B" bench "$ng" --buf pool -p randread -b 128k -q 8 -d 1 -o "$RESULTS/pool-ng.csv" ||
	fail "passthrough reads from the pool failed"
$CHECK "$RESULTS/pool-ng.csv" --ok 1 --buf pool --fixed 1 --fallbacks-zero || fail "pool-ng.csv"
"$B" bench "$ng" --buf pool -p randwrite -b 64k -q 4 -d 1 -o "$RESULTS/pool-ngw.csv" ||
	fail "passthrough writes from the pool failed"
$CHECK "$RESULTS/pool-ngw.csv" --ok 1 --fallbacks-zero || fail "pool-ngw.csv"
jq -e ".pool.available and .pool.pool_nr == 8 and .pool.pool_buf_kb == $buf_kb" "$RESULTS/pool-ng.meta" >/dev/null ||
	fail "pool settings missing from the .meta: $(jq .pool "$RESULTS/pool-ng.meta")"

# more buffers than the pool holds: a clear error, not malloc
if out=$("$B" bench "$ng" --buf pool -b "${buf_kb}k" -q 16 -d 0.2 2>&1); then fail "an oversubscribed pool ran"; fi
grep -q "the pool holds" <<<"$out" || fail "oversubscribed pool: $out"

# the premap proof from a pool buffer
if "$B" bench "$ng" --premap-proof >"$RESULTS/premap.out" 2>&1; then
	cat "$RESULTS/premap.out"
	grep -q "PASSED" "$RESULTS/premap.out" || fail "premap proof passed without saying so"
	ls /sys/block/$dev/queue/ | grep -qi 'premap\|iobuf' || fail "premap proof passed on a kernel without a premapped path"
else
	cat "$RESULTS/premap.out"
	grep -q "this kernel has no premapped request path\|no finite ordinary request limit" \
		"$RESULTS/premap.out" || fail "premap proof: no verdict"
fi
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
