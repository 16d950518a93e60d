#!/bin/bash
# 39-fs: files on a file system made on the nvme-tcp namespace (loopback, host recorded, every
# command). ext4: buffered writes made durable by sync(2), whose write-back a kernel thread (the
# flusher) queues, in a group of its own that says no system call starts it; and O_DIRECT reads
# of a file (fio psync), from pread64()'s entry through the file system (iomap) to its return.
# XFS: O_DIRECT reads and writes of files with each engine of fio that reaches a file (psync,
# pvsync2, libaio, io_uring at QD1 and QD8): every I/O of fio is a command whose span starts at
# its engine's system call (or SQE), goes through the file system's direct I/O to the bio and
# ends where user space got it; its end to end is within fio's latency (QD1 and libaio:
# (0.85, 1.02) of fio's mean lat, the rest being the system call's way in and out and fio's own
# time). Then buffered random reads (ext4: psync; XFS: psync, pvsync2, libaio, io_uring) that
# miss the page cache: each from its system call (or SQE) through the page cache to the bio and
# to where user space got it, its mean at most 1.02 of fio's and its median at least 0.85 of
# fio's.
# lane-timeout: 900
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
command -v mkfs.xfs >/dev/null || fail "no mkfs.xfs (xfsprogs) on the host"

# a namespace that keeps what is written: a file system reads back its own metadata
modprobe null_blk memory_backed=1 gb=1 || fail "modprobe null_blk memory_backed=1 failed"
need_module ext4 xfs
nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"
mnt=$RESULTS/mnt
mkdir -p "$mnt"

# record_start DIR WHAT: the host recorded (every command) into DIR/rec.ntr, in the background
record_start() {
	mkdir -p "$1"
	"$NVMETRACE_BIN" record -r host -s 1 -o "$1/rec.ntr" >"$1/record.out" 2>&1 &
	rec=$!
	recorder_wait "$1/record.out" "$2"
}
# record_stop DIR: stop it, and write DIR/report.txt and DIR/report.json
record_stop() {
	kill -INT $rec
	wait $rec || { cat "$1/record.out"; fail "record failed"; }
	"$NVMETRACE_BIN" report "$1/rec.ntr" >"$1/report.txt" || fail "report failed"
	"$NVMETRACE_BIN" report --json "$1/rec.ntr" >"$1/report.json" || fail "report --json failed"
	cat "$1/report.txt"
}

# buffered reads that miss the page cache: fio's random reads (it advises POSIX_FADV_RANDOM: no
# read-ahead) of files whose pages are not cached, each read one miss whose bio the call waits for;
# a recording per file system and engine (psync and pvsync2 are both reported under pread/pwrite).
# libaio reads inside io_submit(); io_uring from the task that takes the SQE (an async buffered
# read, woken when the page is read) or from io-wq. buffered_reads FS ENGINE, with FS mounted on
# $mnt
buffered_reads() {
	local fs=$1 j=$2 d
	dd if=/dev/zero of="$mnt/buffered-$j" bs=1M count=16 oflag=direct status=none || fail "dd $j failed"
	echo 3 >/proc/sys/vm/drop_caches
	d=$RESULTS/$fs-buffered-$j
	record_start "$d" "$fs-buffered-$j"
	run_fio "$fs-buffered-$j" --filename="$mnt/buffered-$j" --direct=0 --ioengine="$j" \
		--rw=randread --bs=4k --size=16m --io_size=1m --lat_percentiles=1 ||
		fail "fio buffered $j on $fs failed"
	record_stop "$d"
	python3 - "$d/report.json" "$dev" "$RESULTS/$fs-buffered-$j.json" "$j" <<'EOF' || fail "$fs: buffered reads ($j) are not reported from their system call"
import json, sys
rep = json.load(open(sys.argv[1]))[0]
dev = sys.argv[2]
groups = [g for g in rep["groups"] if g["view"] != "target" and g["device"] == dev]
for g in groups:
    sp = g["span"]
    print(f"{g['label']}: n {g['n']}; {sp['interface'] or '-'}; {sp['from']} to {sp['to']}; "
          f"mean {g['latency_us']['mean']:.1f} us; {'user space' if sp['user_space'] else sp['note']}")
fio = json.load(open(sys.argv[3]))["jobs"][0]["read"]
# the interface each engine's commands are reported under, and the component from its system
# call (or SQE) to the page cache
iface, to_pc = {"psync": ("pread/pwrite", "host.sync.to_pagecache"),
                "pvsync2": ("pread/pwrite", "host.sync.to_pagecache"),
                "libaio": ("aio", "host.syscall.to_pagecache"),
                "io_uring": ("io_uring", "host.uring.to_pagecache")}[sys.argv[4]]
bad = []
mine = [g for g in groups if g["op"] == "read" and g["span"]["interface"].startswith(iface)]
n = sum(g["n"] for g in mine)
# every read missed: one command from its call through the page cache to its return
if n != fio["total_ios"]:
    bad.append(f"{n} reads reported from the system call, fio read {fio['total_ios']} blocks the page cache did not hold")
if len(mine) != 1 and iface != "io_uring":
    bad.append(f"{len(mine)} groups of reads from the system call, not one")
# io_uring: a CQE posted while fio is outside io_uring_enter() is taken from the mapped ring and
# ends at the task's next entry, after fio's reap; the job's last such CQE has no next entry
ring = [g for g in mine if "reaped from the CQ ring" in g["label"]]
unreaped = [g for g in mine if not g["span"]["user_space"]]
if iface == "io_uring" and sum(g["n"] for g in unreaped) <= 1 and \
        all("reap is not recorded" in g["span"]["note"] for g in unreaped):
    for g in unreaped:
        print(f"{g['label']}: {g['n']} CQE without a reap seen (at most one allowed: the job's last, "
              "taken from the ring with no io_uring_enter() after it)")
        mine.remove(g)
for g in mine:
    ids = {c["id"]: c for c in g["components"]}
    if not g["span"]["user_space"]:
        bad.append(f"{g['label']} does not reach user space: {g['span']['note']}")
    if ids.get("host.pagecache.submit", {}).get("n") != g["n"]:
        bad.append(f"{g['label']}: the page cache stage on {ids.get('host.pagecache.submit', {}).get('n', 0)} of {g['n']} ({sorted(ids)})")
    # io-wq takes an io_uring read to the page cache when the inline issue would block
    if to_pc not in ids and "host.uring.iowq" not in ids:
        bad.append(f"{g['label']} has no {to_pc} ({sorted(ids)})")
    if "host.fs.submit" in ids:
        bad.append(f"{g['label']}: a buffered read reported as direct I/O")
# inside fio's lat: the mean at most 1.02 of fio's, the median at least 0.85 of fio's (a stall of
# fio's own between its clock and the call moves the mean, not the median)
waited = [g for g in mine if g not in ring]
if ring:
    print(f"{sum(g['n'] for g in ring)} CQEs taken from the ring: end to end not compared with fio's lat")
if waited and sum(g["n"] for g in waited) >= 0.9 * n:
    lat = sum(g["n"] * g["latency_us"]["mean"] for g in waited) / sum(g["n"] for g in waited)
    mean = lat / (fio["lat_ns"]["mean"] / 1000)
    print(f"buffered {sys.argv[4]}: {n} commands, end to end / fio's lat: mean {mean:.3f} "
          f"(of the {sum(g['n'] for g in waited)} reaped by a system call)")
    if mean > 1.02:
        bad.append(f"end to end {mean:.3f} of fio's mean lat, not at most 1.02")
    if len(waited) == 1:
        p50 = waited[0]["latency_us"]["p50"] / (fio["lat_ns"]["percentile"]["50.000000"] / 1000)
        print(f"buffered {sys.argv[4]}: median {p50:.3f} of fio's")
        if p50 < 0.85:
            bad.append(f"end to end's median {p50:.3f} of fio's, not at least 0.85")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
}

# ---------------------------------------------------------------- ext4
mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "/dev/$dev" || fail "mkfs.ext4 failed"
mount -t ext4 "/dev/$dev" "$mnt" || fail "mount ext4 failed"
# the file fio reads, written before the recording
dd if=/dev/zero of="$mnt/direct" bs=1M count=8 oflag=direct status=none || fail "dd failed"
d=$RESULTS/fs
record_start "$d" ext4
# buffered: the page cache takes the writes; sync(2) hands them to the flusher and waits
# (the mapping of inodes to the flusher's work may leave some to the caller's own task)
dd if=/dev/urandom of="$mnt/buffered" bs=64k count=32 status=none || fail "dd failed"
sync
run_fio fs-psync-read --filename="$mnt/direct" --direct=1 --ioengine=psync --rw=randread \
	--bs=4k --size=8m --io_size=2m || fail "fio on the file failed"
record_stop "$d"
umount "$mnt"
python3 - "$d/report.json" "$dev" <<'EOF' || fail "ext4's commands are not reported as they went"
import json, sys
rep = json.load(open(sys.argv[1]))[0]
groups = [g for g in rep["groups"] if g["view"] != "target" and g["device"] == sys.argv[2]]
bad = []
for g in groups:
    sp = g["span"]
    print(f"{g['label']}: n {g['n']}; {sp['from']} to {sp['to']}; "
          f"{'user space' if sp['user_space'] else sp['note']}")
    if not sp["user_space"] and not sp["note"]:
        bad.append(f"{g['label']}: does not reach user space and does not say why")
wb = [g for g in groups if g["span"]["interface"] == "kernel thread" and g["op"] == "write"]
n_wb = sum(g["n"] for g in wb)
b_wb = sum(g["n"] * g["size"] for g in wb)
print(f"write-back (kernel thread): {n_wb} writes, {b_wb} bytes")
# the flusher writes most of the 2 MiB (1.3 MiB on 6.1 and 6.12, where sync(2) queues the rest
# from its own task; all of it on 7.2)
if b_wb < 1 << 19:
    bad.append(f"{b_wb} bytes written by a kernel thread, not at least a quarter of the 2 MiB sync(2) wrote")
for g in wb:
    if "write-back" not in g["span"]["note"]:
        bad.append(f"{g['label']}: a kernel thread's write does not say it is write-back")
    if g["span"]["user_space"]:
        bad.append(f"{g['label']}: a write-back command says it reaches user space")
# fio's O_DIRECT reads: pread64() entry, ext4's direct I/O, its return
fs = [g for g in groups if g["op"] == "read" and g["span"]["interface"] == "pread/pwrite"]
reads = sum(g["n"] for g in fs)
print(f"O_DIRECT reads of the file from pread64() to its return: {reads}")
if reads != 512:
    bad.append(f"{reads} reads of the file reported from pread64(), fio read 512 blocks of 4k")
for g in fs:
    ids = {c["id"] for c in g["components"]}
    if not g["span"]["user_space"] or "host.fs.submit" not in ids or "host.sync.to_fs" not in ids:
        bad.append(f"{g['label']}: no pread64() to the file system to the bio ({sorted(ids)})")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
mount -t ext4 "/dev/$dev" "$mnt" || fail "mount ext4 failed"
buffered_reads ext4 psync
umount "$mnt"
log "ext4: write-back and a file's O_DIRECT reads reported with their spans"

# ---------------------------------------------------------------- XFS
mkfs.xfs -q -f "/dev/$dev" || fail "mkfs.xfs failed"
mount -t xfs "/dev/$dev" "$mnt" || fail "mount xfs failed"
# one file per job, written before the recording: a read of an unwritten extent is no I/O
JOBS="psync-randread-1 pvsync2-randwrite-1 libaio-randread-4 io_uring-randwrite-1 io_uring-randread-8"
for j in $JOBS; do
	dd if=/dev/zero of="$mnt/$j" bs=1M count=16 oflag=direct status=none || fail "dd $j failed"
done
d=$RESULTS/xfs
record_start "$d" xfs
for j in $JOBS; do
	IFS=- read -r engine rw qd <<<"$j"
	run_fio "xfs-$j" --filename="$mnt/$j" --direct=1 --ioengine="$engine" --rw="$rw" \
		--bs=4k --iodepth="$qd" --size=16m --io_size=2m || fail "fio $j on XFS failed"
done
record_stop "$d"
python3 - "$d/report.json" "$dev" "$RESULTS" $JOBS <<'EOF' || fail "XFS's O_DIRECT commands are not reported as they went"
import json, sys
rep = json.load(open(sys.argv[1]))[0]
dev, results = sys.argv[2], sys.argv[3]
groups = [g for g in rep["groups"] if g["view"] != "target" and g["device"] == dev]
for g in groups:
    sp = g["span"]
    print(f"{g['label']}: n {g['n']}; {sp['interface'] or '-'}; {sp['from']} to {sp['to']}; "
          f"mean {g['latency_us']['mean']:.1f} us; {'user space' if sp['user_space'] else sp['note']}")
# the interface each engine's commands are reported under, and the component from its system
# call (or SQE) to the file system
IFACE = {"psync": ("pread/pwrite", "host.sync.to_fs"), "pvsync2": ("pread/pwrite", "host.sync.to_fs"),
         "libaio": ("aio", "host.syscall.to_fs"), "io_uring": ("io_uring", "host.uring.to_fs")}
bad = []
for job in sys.argv[4:]:
    engine, rw, qd = job.split("-")
    op = rw.removeprefix("rand")
    fio = json.load(open(f"{results}/xfs-{job}.json"))["jobs"][0][op]
    iface, to_fs = IFACE[engine]
    mine = [g for g in groups if g["op"] == op and g["span"]["interface"].startswith(iface)]
    n = sum(g["n"] for g in mine)
    if n != fio["total_ios"]:
        bad.append(f"{job}: {n} commands under {iface}, fio did {fio['total_ios']} I/Os")
    for g in mine:
        ids = {c["id"]: c for c in g["components"]}
        if not g["span"]["user_space"]:
            bad.append(f"{job}: {g['label']} does not reach user space: {g['span']['note']}")
        if "host.fs.submit" not in ids:
            bad.append(f"{job}: {g['label']} has no file system stage ({sorted(ids)})")
        elif ids["host.fs.submit"]["n"] != g["n"]:
            bad.append(f"{job}: {g['label']}: file system stage on {ids['host.fs.submit']['n']} of {g['n']}")
        # io-wq takes the SQE to the file system when the inline issue would block
        if to_fs not in ids and "host.uring.iowq" not in ids:
            bad.append(f"{job}: {g['label']} has no {to_fs} ({sorted(ids)})")
    if not n:
        continue
    e2e = sum(g["n"] * g["latency_us"]["mean"] for g in mine) / n
    lat = fio["lat_ns"]["mean"] / 1000
    ratio = e2e / lat
    print(f"{job}: {n} commands, end to end {e2e:.1f} us, fio's lat {lat:.1f} us: {ratio:.3f}")
    # QD1 and libaio: the span lies inside fio's lat, short of it by the system call's way in
    # and out and fio's own time; io_uring at QD8 reaps most CQEs from the ring, timed to the
    # next io_uring_enter() entry (after fio's reap)
    if (qd == "1" or engine == "libaio") and not 0.85 < ratio < 1.02:
        bad.append(f"{job}: end to end {ratio:.3f} of fio's mean lat, not within (0.85, 1.02)")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
log "XFS: O_DIRECT with psync, pvsync2, libaio and io_uring reported from the system call through the file system"

for j in psync pvsync2 libaio io_uring; do
	buffered_reads xfs "$j"
done
umount "$mnt"
log "XFS: buffered reads that missed the page cache reported from the system call through the page cache"
