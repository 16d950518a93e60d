#!/bin/bash
# 75-bench: nvmetrace bench over nvme-tcp loopback through the block device (O_DIRECT) and the
# /dev/ng passthrough node: reads and writes with 0 failed commands, CSV + .meta schema
# (bench_check.py), the scaled-down KV and AISIO profiles (512 B cells skipped on a 4 KiB
# namespace, with the reason), the premap proof refused on this stock kernel with its errno,
# and clear errors for bad input.
# lane-timeout: 360
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_bin
B=$NVMETRACE_BIN
CHECK="python3 $NVMETRACE_SRC/tests/guest/bench_check.py"

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
ng=/dev/ng${dev#nvme}
wait_for 5 test -c "$ng" || fail "no passthrough node $ng for $dev"
log "block device /dev/$dev, passthrough $ng"

# block path: random reads, then sequential writes with registered (fixed) malloc buffers
"$B" bench "/dev/$dev" -p randread -b 4k -q 8 -d 0.5 -o "$RESULTS/blk.csv" || fail "block randread failed"
$CHECK "$RESULTS/blk.csv" --cells 1 --ok 1 --engine block --buf malloc --fixed 0 || fail "blk.csv"
"$B" bench "/dev/$dev" -p write -b 64k -q 4 -j 2 --fixed -d 0.5 -o "$RESULTS/blkw.csv" ||
	fail "block write failed"
$CHECK "$RESULTS/blkw.csv" --cells 1 --ok 1 --fixed 1 --fallbacks-zero || fail "blkw.csv"

# passthrough: reads, random writes with fixed buffers (IORING_URING_CMD_FIXED), a count of I/Os
"$B" bench "$ng" -p randread -b 4k -q 8 -d 0.5 -o "$RESULTS/ng.csv" || fail "passthrough randread failed"
$CHECK "$RESULTS/ng.csv" --cells 1 --ok 1 --engine passthru || fail "ng.csv"
"$B" bench "$ng" -p randwrite -b 8k -q 4 --fixed -n 2000 -o "$RESULTS/ngw.csv" ||
	fail "passthrough randwrite failed"
$CHECK "$RESULTS/ngw.csv" --cells 1 --ok 1 --engine passthru --fixed 1 --fallbacks-zero || fail "ngw.csv"
ios=$(awk -F, 'NR==2 {print $14}' "$RESULTS/ngw.csv")
[ "$ios" -ge 2000 ] || fail "-n 2000 measured $ios I/Os"

# the KV crossover, scaled down, through passthrough; 2 repetitions, warm-up
"$B" bench "$ng" --profile kv --sizes 4k,128k --qds 1,16 --reps 2 --warmup 0.2 --ramp 0.1 -d 0.3 \
	-o "$RESULTS/kv.csv" || fail "kv profile failed"
$CHECK "$RESULTS/kv.csv" --cells 8 --ok 8 --engine passthru || fail "kv.csv"
jq -e '.profile == "kv" and .reps == 2 and .device.engine == "passthru"' "$RESULTS/kv.meta" >/dev/null ||
	fail "kv.meta: $(cat "$RESULTS/kv.meta")"

# AISIO, scaled down: on this 512-byte-block namespace the 512 B cells run ...
lba=$(cat /sys/block/$dev/queue/logical_block_size)
[ "$lba" = 512 ] || fail "null_blk namespace has $lba-byte blocks, expected 512"
"$B" bench "/dev/$dev" --profile aisio --qds 16 --thread-list 1,2 -d 0.3 -o "$RESULTS/aisio.csv" ||
	fail "aisio profile failed"
$CHECK "$RESULTS/aisio.csv" --cells 6 --ok 6 || fail "aisio.csv"
# ... and on a 4 KiB-block null_blk device they are rows that say why they were skipped
nb=/sys/kernel/config/nullb/nullb4k
mkdir "$nb" && echo 4096 >"$nb/blocksize" && echo 256 >"$nb/size" && echo 1 >"$nb/power" ||
	fail "cannot create a 4 KiB null_blk device"
wait_for 5 test -b /dev/nullb4k || fail "no /dev/nullb4k"
"$B" bench /dev/nullb4k --profile aisio --qds 16 --thread-list 1 -d 0.3 -o "$RESULTS/aisio4k.csv" ||
	fail "aisio on a 4 KiB device failed"
$CHECK "$RESULTS/aisio4k.csv" --cells 3 --ok 2 --skipped 1 || fail "aisio4k.csv"
grep -q '^1,aisio,.*,512,.*,skipped,.*4096-byte logical blocks' "$RESULTS/aisio4k.csv" ||
	fail "no 512 B skip row with its reason: $(cat "$RESULTS/aisio4k.csv")"

# --json: the same figures for scripts
"$B" bench /dev/nullb4k -p read -b 8k -q 2 -n 500 --json >"$RESULTS/single.json" || fail "--json run failed"
jq -e 'length == 1 and .[0].status == "ok" and .[0].ios >= 500 and .[0].failed == 0 and .[0].iops > 0
	and .[0].lat_p50_us > 0 and .[0].engine == "block"' "$RESULTS/single.json" >/dev/null ||
	fail "--json: $(cat "$RESULTS/single.json")"

# the premap proof: a read one block over max_hw_sectors_kb.  nvmet reports no MDTS, so over
# nvme-tcp the limit is UINT_MAX sectors and there is nothing to cross: the proof says so
# (with a finite limit, a stock kernel refuses the read and the proof names the errno).
mhs=$(cat /sys/block/$dev/queue/max_hw_sectors_kb)
if "$B" bench "$ng" --premap-proof --buf malloc >"$RESULTS/premap.out" 2>&1; then
	cat "$RESULTS/premap.out"; fail "the premap proof passed on a stock kernel (max_hw_sectors_kb=$mhs)"
fi
cat "$RESULTS/premap.out"
if [ "$mhs" -ge 1048576 ]; then
	grep -q "no finite ordinary request limit (max_hw_sectors_kb $mhs" "$RESULTS/premap.out" ||
		fail "premap proof: no verdict for an unlimited device"
else
	grep -q "this kernel has no premapped request path.*max_hw_sectors_kb=$mhs was refused: .*E[A-Z]* (" \
		"$RESULTS/premap.out" || fail "premap proof: no verdict, limit or errno"
fi

# clear errors
expect_error() { # expect_error PATTERN ARGS...
	local pat=$1 out; shift
	if out=$("$B" bench "$@" 2>&1); then fail "bench $* succeeded"; fi
	echo "$out"
	grep -q -- "$pat" <<<"$out" || fail "bench $*: expected '$pat', got: $out"
}
expect_error "no such device" /dev/nvme99n9 -d 1
expect_error "not an NVMe generic device" /dev/null -d 1
expect_error "passthrough command" "/dev/$dev" --premap-proof --buf malloc
expect_error "not a multiple of .* logical block size (4096" /dev/nullb4k -b 512 -d 1
expect_error "huge pages" "/dev/$dev" --buf hugepage -d 1
# with huge pages reserved, they are used (and registered with --fixed)
echo 4 >/proc/sys/vm/nr_hugepages
"$B" bench "$ng" --buf hugepage --fixed -b 16k -q 4 -d 0.5 -o "$RESULTS/huge.csv" || fail "hugepage buffers failed"
$CHECK "$RESULTS/huge.csv" --ok 1 --buf hugepage --fixed 1 --fallbacks-zero || fail "huge.csv"
echo 0 >/proc/sys/vm/nr_hugepages
expect_error "nvmetrace module is not loaded" "/dev/$dev" --buf pool -d 1
expect_error "oltp not in {aisio,kv}" "/dev/$dev" --profile oltp -d 1
expect_error "go with --profile" "/dev/$dev" --qds 1,2 -d 1
expect_error "cannot pin" "/dev/$dev" --cpus 63 -d 1

rmdir "$nb"
nvme_disconnect_all
nvmet_teardown
