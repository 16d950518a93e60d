#!/usr/bin/env python3
"""The offsets of I/Os on a file as offsets on its disk (tests/guest/scenarios/35-accuracy.sh's
cells on a file of a file system).

usage: fiemap.py FILE fio LOG...
       fiemap.py FILE edges SIZE LOG...   (io_edges' I/O is of one SIZE, in bytes)

Rewrites each LOG in place: the offset of each I/O (fio's per-I/O latency log: time, lat,
direction, size, offset[, priority]; io_edges' output: "op offset t0 t1 t2") becomes the byte
offset on the disk the file's file system is on, from the file's extents (FS_IOC_FIEMAP, after
a sync of the file), so that tests/guest/edges.py and accuracy.py name each I/O's command by
its LBA as for a block device.  An I/O that does not lie whole in one written extent has no
one command to name: an error, as is a file with an extent not yet written (its reads do no
I/O at all).
"""
import bisect, fcntl, struct, sys

FS_IOC_FIEMAP = 0xC020660B      # _IOWR('f', 11, struct fiemap)
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_UNKNOWN = 0x2
FIEMAP_EXTENT_ENCODED = 0x8
FIEMAP_EXTENT_UNWRITTEN = 0x800
HEAD = struct.Struct("=QQIIII")         # fm_start, fm_length, fm_flags, mapped, count, reserved
EXTENT = struct.Struct("=QQQ16xI12x")   # fe_logical, fe_physical, fe_length, ..., fe_flags
BATCH = 256


def extents(path):
    """[(logical, physical, length)] of the file, in logical order"""
    out, start = [], 0
    with open(path, "rb") as f:
        while True:
            buf = bytearray(HEAD.pack(start, (1 << 64) - 1 - start, FIEMAP_FLAG_SYNC, 0, BATCH, 0))
            buf += bytes(EXTENT.size * BATCH)
            fcntl.ioctl(f.fileno(), FS_IOC_FIEMAP, buf)
            mapped = HEAD.unpack_from(buf)[3]
            last = False
            for i in range(mapped):
                lo, ph, n, flags = EXTENT.unpack_from(buf, HEAD.size + i * EXTENT.size)
                if flags & (FIEMAP_EXTENT_UNWRITTEN | FIEMAP_EXTENT_UNKNOWN |
                            FIEMAP_EXTENT_ENCODED):
                    sys.exit("fiemap: %s: extent at %d has flags %#x: not plainly written data"
                             % (path, lo, flags))
                out.append((lo, ph, n))
                last = bool(flags & FIEMAP_EXTENT_LAST)
            if last or not mapped:
                return out
            start = out[-1][0] + out[-1][2]


def mapper(path):
    """a function (offset, size) -> the disk's byte offset"""
    ext = extents(path)
    starts = [lo for lo, _, _ in ext]

    def disk(off, size):
        i = bisect.bisect_right(starts, off) - 1
        if i < 0 or off + size > ext[i][0] + ext[i][2]:
            sys.exit("fiemap: %s: the I/O at %d (%d bytes) is not in one extent" % (path, off, size))
        return ext[i][1] + off - ext[i][0]
    return disk


def main():
    if len(sys.argv) < 4 or sys.argv[2] not in ("fio", "edges"):
        sys.exit(__doc__)
    path, kind, logs = sys.argv[1], sys.argv[2], sys.argv[3:]
    size = 0
    if kind == "edges":
        size, logs = int(logs[0]), logs[1:]
    disk = mapper(path)
    for log in logs:
        out = []
        with open(log) as f:
            for line in f:
                if kind == "fio":
                    fields = [x.strip() for x in line.split(",")]
                    if len(fields) >= 5:
                        fields[4] = str(disk(int(fields[4]), int(fields[3])))
                        line = ", ".join(fields) + "\n"
                elif not line.startswith("#") and line.strip():
                    fields = line.split()
                    fields[1] = str(disk(int(fields[1]), size))
                    line = " ".join(fields) + "\n"
                out.append(line)
        with open(log, "w") as f:
            f.writelines(out)


if __name__ == "__main__":
    main()
