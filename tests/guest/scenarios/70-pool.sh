#!/bin/bash
# 70-pool: the premapped-buffer test pool.  Loads that cannot have their pool fail with a
# clear line; `nvmetrace pool` shows the numbers; the mmap contract (bad length, offset,
# flags refused; the mapping outlives close(); rmmod refused while mapped); pool buffers
# registered as io_uring fixed buffers for O_DIRECT write_fixed/read_fixed on an nvme-tcp
# namespace with zero fallbacks (pool_io_check), and again on a pool made of smaller folios
# (the fallback path, forced with pool_test_max_order); `nvmetrace dmacost` on nvme-tcp says
# plainly there is no DMA, and refuses a device its caller cannot read; unload after unmap.
# lane-timeout: 300
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
checker=$(dirname "$NVMETRACE_BIN")/tests/pool_io_check
[ -x "$checker" ] || skip "no $checker (build the tool with its tests)"

# ---- loads that cannot have their pool
insmod "$NVMETRACE_KO" pool_nr=1 pool_buf_kb=3 2>/dev/null && fail "pool_buf_kb=3 loaded"
dmesg | grep -q "pool_buf_kb=3: must be a power of two" || fail "no dmesg line for pool_buf_kb=3"
insmod "$NVMETRACE_KO" pool_nr=60000 pool_buf_kb=4096 2>/dev/null && fail "a 234 GiB pool loaded"
dmesg | grep -q "more than half of RAM" || fail "no dmesg line for a pool larger than RAM allows"
[ -e /sys/module/nvmetrace ] && fail "a failed load left the module behind"
log "impossible pools refused: $(dmesg | grep -E 'nvmetrace: pool' | tail -n 2 | tr '\n' ' ')"

# ---- no pool: nothing to map
insmod "$NVMETRACE_KO"
"$NVMETRACE_BIN" pool | tee "$RESULTS/pool-none.txt"
grep -q "^pool .*none" "$RESULTS/pool-none.txt" || fail "pool without pool_nr not reported as none"
grep -q "kernel pool: absent" "$RESULTS/pool-none.txt" || fail "stock kernel's pool not absent"
python3 - <<'PY' || fail "mmap without a pool was not refused with EINVAL"
import errno, mmap, os
fd = os.open("/dev/nvmetrace", os.O_RDWR)
try:
    mmap.mmap(fd, 1 << 21, flags=mmap.MAP_SHARED, offset=1 << 40)
    raise SystemExit("mapped a pool that does not exist")
except OSError as e:
    assert e.errno == errno.EINVAL, e
PY
rmmod nvmetrace

# ---- a pool of 4 x 2 MiB, used over nvme-tcp (null_blk keeping data)
modprobe null_blk memory_backed=1 gb=1 || fail "null_blk memory_backed=1"
nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" pool_buf_kb=2048 pool_nr=4
dmesg | grep "nvmetrace: pool:" | tail -n 1
"$NVMETRACE_BIN" pool | tee "$RESULTS/pool.txt"
"$NVMETRACE_BIN" pool --json >"$RESULTS/pool.json"
jq -e '.nr_bufs == 4 and .allocated == 4 and .buf_size == 2097152 and .bytes == 8388608
	and .order == 9 and .fallbacks == 0 and .min_order == 9 and .folios == 4
	and .mappings == 0 and .mmap_offset == 1099511627776 and .kernel_pool.state == "absent"' \
	"$RESULTS/pool.json" >/dev/null || fail "pool --json: $(cat "$RESULTS/pool.json")"
grep -q "kernel pool: absent" "$RESULTS/pool.txt" || fail "no 'kernel pool: absent' line"

python3 - <<'PY' || fail "the pool's mmap contract"
import errno, mmap, os, subprocess
SIZE, OFF = 4 << 21, 1 << 40
fd = os.open("/dev/nvmetrace", os.O_RDWR)
def refused(what, length, off, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE,
            errnos=(errno.EINVAL,)):
    try:
        mmap.mmap(fd, length, flags=flags, prot=prot, offset=off)
    except OSError as e:
        assert e.errno in errnos, f"{what}: {e}"
        print(f"refused: {what}: {os.strerror(e.errno)}")
        return
    raise SystemExit(f"{what}: mapped")
refused("one page short", SIZE - 4096, OFF)
refused("one page long", SIZE + 4096, OFF)
refused("offset one page in", SIZE - 4096, OFF + 4096)
refused("offset one buffer in", SIZE - (2 << 20), OFF + (2 << 20))
refused("MAP_PRIVATE", SIZE, OFF, flags=mmap.MAP_PRIVATE)
# PROT_EXEC: EINVAL from the module, or EPERM where /dev is mounted noexec
refused("PROT_EXEC", SIZE, OFF, prot=mmap.PROT_READ | mmap.PROT_EXEC,
        errnos=(errno.EINVAL, errno.EPERM))
m = mmap.mmap(fd, SIZE, flags=mmap.MAP_SHARED, offset=OFF)
os.close(fd)                      # the mapping outlives the descriptor
m[0:4] = b"pool"
m[SIZE - 4:SIZE] = b"last"
assert m[0:4] == b"pool" and m[SIZE - 4:SIZE] == b"last"
r = subprocess.run(["rmmod", "nvmetrace"], capture_output=True, text=True)
assert r.returncode != 0, "rmmod succeeded with the pool mapped"
print("rmmod while mapped refused:", r.stderr.strip())
m.close()
PY

"$checker" "/dev/$dev" | tee "$RESULTS/pool_io_check.txt"
[ "${PIPESTATUS[0]}" = 0 ] || fail "pool_io_check failed"
"$NVMETRACE_BIN" pool --json | jq -e '.mappings == 0 and .fallbacks == 0' >/dev/null ||
	fail "mappings not back to 0"

# ---- the fallback path: folios capped at order 2 (pool_test_max_order), as if larger had run out
rmmod nvmetrace || fail "rmmod after unmap"
insmod "$NVMETRACE_KO" pool_buf_kb=256 pool_nr=3 pool_test_max_order=2
"$NVMETRACE_BIN" pool | tee "$RESULTS/pool-fallback.txt"
"$NVMETRACE_BIN" pool --json | jq -e '.allocated == 3 and .fallbacks == 3 and .order == 6
	and .min_order == 2 and .folios == 48 and .bytes == 786432' >/dev/null ||
	fail "fallback pool: $("$NVMETRACE_BIN" pool --json | jq -c .)"
grep -q "48, order 6 asked for, smallest order 2" "$RESULTS/pool-fallback.txt" ||
	fail "pool text does not show the smaller folios"
"$checker" "/dev/$dev" 3 | tee "$RESULTS/pool_io_check-fallback.txt"
[ "${PIPESTATUS[0]}" = 0 ] || fail "pool_io_check on a pool of order-2 folios failed"

# ---- DMA cost on nvme-tcp: there is none, and it says so
"$NVMETRACE_BIN" dmacost "$dev" | tee "$RESULTS/dmacost-tcp.txt"
grep -q "^$dev: no DMA: " "$RESULTS/dmacost-tcp.txt" || fail "dmacost on nvme-tcp did not say 'no DMA'"
"$NVMETRACE_BIN" dmacost --json "$dev" | jq -e '.has_dma == false and (.no_dma_reason | length > 0)' \
	>/dev/null || fail "dmacost --json on nvme-tcp"
"$NVMETRACE_BIN" dmacost /dev/nullb0 | grep -q "no DMA" || fail "dmacost on null_blk did not say 'no DMA'"
if "$NVMETRACE_BIN" dmacost 7:250 2>"$RESULTS/dmacost-bad.err"; then fail "dmacost of a missing device"; fi
grep -q "7:250: no block device 7:250 here" "$RESULTS/dmacost-bad.err" ||
	fail "dmacost of a missing device: $(cat "$RESULTS/dmacost-bad.err")"
# an administrator who may not read the device may not measure it either: root without
# CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, on a node of null_blk's disk with mode 000
node=/dev/nvmetrace-test-nullb0
rm -f "$node"
mknod -m 000 "$node" b $((16#$(stat -c '%t' /dev/nullb0))) $((16#$(stat -c '%T' /dev/nullb0))) ||
	fail "mknod $node"
if setpriv --bounding-set=-dac_override,-dac_read_search --inh-caps=-dac_override,-dac_read_search \
	"$NVMETRACE_BIN" dmacost "$node" 2>"$RESULTS/dmacost-perm.err"; then
	fail "dmacost of a device its caller cannot read"
fi
grep -q "$node: cannot open it for reading: Permission denied" "$RESULTS/dmacost-perm.err" ||
	fail "dmacost of an unreadable device: $(cat "$RESULTS/dmacost-perm.err")"
"$NVMETRACE_BIN" dmacost "$node" | grep -q "no DMA" || fail "dmacost by the same node with DAC override"
rm -f "$node"

rmmod nvmetrace || fail "rmmod after unmap"
nvme_disconnect_all
nvmet_teardown
log "pool: ok"
