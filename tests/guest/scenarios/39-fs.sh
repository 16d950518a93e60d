#!/bin/bash
# 39-fs: ext4 on the nvme-tcp namespace (loopback, host recorded, every command). Buffered
# writes made durable by sync(2), whose write-back a kernel thread (the flusher) queues, and
# O_DIRECT reads of a file (fio psync). A write-back command is a kernel thread's, in a group of
# its own that says no system call starts it; no command of a file says it reaches user space
# (the file's read_iter/write_iter are not the block device's: the submission above the block
# layer is not recorded, and the group says so).
# lane-timeout: 600
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin

# a namespace that keeps what is written: a file system reads back its own metadata
modprobe null_blk memory_backed=1 gb=1 || fail "modprobe null_blk memory_backed=1 failed"
need_module ext4
nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"
mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "/dev/$dev" || fail "mkfs.ext4 failed"
mnt=$RESULTS/mnt
mkdir -p "$mnt"
mount -t ext4 "/dev/$dev" "$mnt" || fail "mount failed"

d=$RESULTS/fs
mkdir -p "$d"
"$NVMETRACE_BIN" record -r host -s 1 -o "$d/rec.ntr" >"$d/record.out" 2>&1 &
rec=$!
recorder_wait "$d/record.out" fs
# buffered: the page cache takes the writes; sync(2) hands them to the flusher and waits
# (the mapping of inodes to the flusher's work may leave some to the caller's own task)
dd if=/dev/urandom of="$mnt/buffered" bs=64k count=32 status=none || fail "dd failed"
sync
run_fio fs-psync-read --filename="$mnt/direct" --direct=1 --ioengine=psync --rw=randread \
	--bs=4k --size=8m --io_size=2m || fail "fio on the file failed"
kill -INT $rec
wait $rec || { cat "$d/record.out"; fail "record failed"; }
umount "$mnt"

"$NVMETRACE_BIN" report "$d/rec.ntr" >"$d/report.txt" || fail "report failed"
"$NVMETRACE_BIN" report --json "$d/rec.ntr" >"$d/report.json" || fail "report --json failed"
cat "$d/report.txt"
python3 - "$d/report.json" "$dev" <<'EOF' || fail "the file system's commands are not reported as they went"
import json, sys
rep = json.load(open(sys.argv[1]))[0]
groups = [g for g in rep["groups"] if g["view"] != "target" and g["device"] == sys.argv[2]]
bad = []
for g in groups:
    sp = g["span"]
    print(f"{g['label']}: n {g['n']}; {sp['from']} to {sp['to']}; "
          f"{'user space' if sp['user_space'] else sp['note']}")
    if sp["user_space"]:
        bad.append(f"{g['label']}: a file's command says it reaches user space")
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
reads = sum(g["n"] for g in groups if g["op"] == "read" and g["span"]["interface"] == "")
print(f"reads of the file with no system call recorded: {reads}")
if reads < 512:
    bad.append(f"{reads} reads of the file reported, fio read 512 blocks of 4k")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
log "ext4: write-back and a file's reads reported with their spans"
