#!/usr/bin/env python3
"""The syscall edges of a recording of io_edges (user/tests/io_edges.cc): the time between
user space and the first and last host hooks of each command, which no kernel hook sees.

usage: edges.py IO_EDGES_OUT COMMANDS_JSONL LBS [--json | --json-out=FILE]
       edges.py --own FIO_JSON FIO_LAT_LOG COMMANDS_JSONL LBS IO_EDGES_OUT...

io_edges times each QD1 I/O of one of fio's engines (its first line: "# engine NAME"; without
it libaio) with CLOCK_MONOTONIC, the clock of the module's timestamps: t0 before the submitting
system call, t1 after it returned, t2 after the I/O was reaped.  The engine's span (SPANS) is
from the submitting call's entry hook to the reaping call's return hook: io_submit() to
io_getevents() for libaio, io_uring_enter() to io_uring_enter() for io_uring and io_uring_cmd,
the system call's entry to its return for psync and pvsync2.  Each recorded host command
(nvmetrace report --commands) is the I/O of the same op and LBA whose entry lies in [t0, t1].
A command io_uring reaped from its mapped CQ ring has no return of its own (its span ends at
the next entry) and is not joined.  Per joined command:
  entry edge = entry hook - t0         (user space to the submitting call's hook)
  exit edge  = t2 - return hook        (the reaping call's hook back to user space)
and the command's end to end (entry to return) against t2 - t0.
Every mean leaves out the values more than 1 ms over their median: a stall of the emulated
CPU (descheduled by the host), counted as "stalled".
Prints one line; with --json, a JSON object instead; with --json-out=FILE, the line and the JSON
object into FILE (one join for both).  Exits 1 when no command joins, or when a
sampled command's edge is negative (its timestamps and the user's are not one clock).

--own: fio's own time per I/O: the part of fio's lat spent in fio's loop and its engine in
user space, measured in a host recording of its own (1 of 1, on the namespace under test,
apart from the fio runs it serves) that holds a fio run (its JSON and per-I/O latency log,
with offsets) and io_edges runs of fio's engine before and after it (QD1, same op and size, on
LBAs fio does not use).  Each fio I/O is joined with its command (same op and LBA, in
completion order), so fio's time outside the span (lat - the span) is known per I/O: fio's
own time plus its syscall edges.  io_edges' edges in the same recording are the syscall edges
alone, so
  fio's own time = fio's mean time outside the span - io_edges' mean edges.
Both come from timestamps taken around the same kernel span, so what the kernel does inside
it (and fio's own work between io_submit() and io_getevents(), e.g. its clock reads, which
is inside the span) cancels.  With it, speed_spread: how far the machine's speed moved during
fio's run (speed_spread() below; 35-accuracy measures again past SPEED_SPREAD).  Prints a JSON
object; exits 1 when too few I/Os join.
"""
import collections, json, statistics, sys

SUBMIT, REAP = "io_submit (entry)", "io_getevents (return)"
URING = ("io_uring_enter (entry) or SQPOLL", "io_uring_enter (return)")
SYNC = ("pread64/pwrite64/preadv2/pwritev2 (entry)", "pread64/pwrite64/preadv2/pwritev2 (return)")
# fio's engine: the host events its span starts and ends at
SPANS = {"libaio": (SUBMIT, REAP), "io_uring": URING, "io_uring_cmd": URING, "psync": SYNC,
         "pvsync2": SYNC}
RING = "reap_from_ring_window_ns"  # a command io_uring reaped from its mapped CQ ring


def span_of(engine):
    if engine not in SPANS:
        sys.exit("edges.py: no span known for fio's engine %r" % engine)
    return SPANS[engine]


def lines(path):
    """the lines of a file, closed once read"""
    with open(path) as f:
        yield from f


def load_ios(path):
    """(engine, [(op, offset, t0, t1, t2)]) of an io_edges output"""
    engine, ios = "libaio", []
    for line in lines(path):
        if line.startswith("# engine "):
            engine = line.split()[2]
        if line.startswith("#") or not line.strip():
            continue
        op, off, t0, t1, t2 = line.split()
        ios.append((op, int(off), int(t0), int(t1), int(t2)))
    return engine, ios


def join(loaded, commands_path, lbs):
    engine, ios = loaded
    submit, reap = span_of(engine)
    by_key = collections.defaultdict(list)
    for op, off, t0, t1, t2 in ios:
        by_key[(op, off // lbs)].append((t0, t1, t2))
    rows = []
    for line in lines(commands_path):
        c = json.loads(line)
        if c.get("side") != "host" or RING in c:
            continue
        ev = c["events"]
        if submit not in ev or reap not in ev:
            continue
        for t0, t1, t2 in by_key.get((c["op"], c["lba"]), ()):
            if t0 <= ev[submit] <= t1:
                rows.append((ev[submit] - t0, t2 - ev[reap], ev[reap] - ev[submit], t2 - t0))
                break
    return rows


STALL_NS = 1000 * 1000  # a value this much over the median: the emulated CPU stalled


def split_stalled(items, key=lambda v: v):
    """(kept, stalled, median of the keys): an item whose key is over the median by more than
    STALL_NS is a stall (a descheduled vCPU)"""
    med = sorted(key(x) for x in items)[len(items) // 2]
    return ([x for x in items if key(x) <= med + STALL_NS],
            [x for x in items if key(x) > med + STALL_NS], med)


def summarize(rows):
    n = len(rows)
    rows = split_stalled(rows, key=lambda r: r[0])[0]
    rows = split_stalled(rows, key=lambda r: r[1])[0]
    mean = lambda i: statistics.fmean(r[i] for r in rows) / 1000.0
    med = lambda i: statistics.median(r[i] for r in rows) / 1000.0
    return {"n": len(rows), "entry_us": mean(0), "exit_us": mean(1), "edges_us": mean(0) + mean(1),
            "entry_p50_us": med(0), "exit_p50_us": med(1), "e2e_us": mean(2), "user_us": mean(3),
            "negative": sum(1 for r in rows if r[0] < 0 or r[1] < 0), "stalled": n - len(rows)}


def fio_job(fio_json):
    """fio's first job and its side ("read" or "write")"""
    text = "".join(lines(fio_json))
    job = json.loads(text[text.index("{"):])["jobs"][0]
    return job, ("read" if job["read"]["total_ios"] > 0 else "write")


def fio_lat_log(path, lbs, mean_ns):
    """fio's per-I/O latency log (time, lat, direction, size, offset[, priority]): one
    (op, lba, lat in ns) per I/O, in log order.  The unit is nanoseconds, or microseconds in
    older fio: the one whose mean is near fio's own mean_ns."""
    ios = []
    for line in lines(path):
        f = [x.strip() for x in line.split(",")]
        if len(f) >= 5:
            ios.append(("write" if f[2] == "1" else "read", int(f[4]) // lbs, int(f[1])))
    if ios and abs(statistics.fmean(v for _, _, v in ios) / mean_ns - 1) > 0.5:
        ios = [(op, lba, v * 1000) for op, lba, v in ios]
    return ios


def host_spans(commands_path, names=(SUBMIT, REAP)):
    """(op, lba): [(reap, span, reaped from the ring)] of the host commands that have every
    event of names, sorted by their reap; the span is from the first of names to the last
    (for a command reaped from io_uring's CQ ring, to the entry that saw it)"""
    spans = collections.defaultdict(list)
    for line in lines(commands_path):
        c = json.loads(line)
        ev = c["events"]
        if c.get("side") == "host" and all(n in ev for n in names):
            spans[(c["op"], c["lba"])].append((ev[names[-1]], ev[names[-1]] - ev[names[0]],
                                               RING in c))
    for v in spans.values():
        v.sort()
    return spans


def outside_span(fio_ios, spans):
    """Each fio I/O against its command: fio logs an LBA's I/Os in completion order, and an
    LBA's commands are sorted by their reap.  [(lat, span, lat - span, reaped from the ring,
    the I/O's place in fio's log)] in ns, over the LBAs with as many commands as I/Os (an LBA
    that lost a record is left out)."""
    lats = collections.defaultdict(list)
    for i, (op, lba, v) in enumerate(fio_ios):
        lats[(op, lba)].append((v, i))
    out = []
    for key, vs in lats.items():
        cs = spans.get(key, [])
        if len(cs) == len(vs):
            out.extend((v, e, v - e, ring, i) for (v, i), (_, e, ring) in zip(vs, cs))
    return out


PARTS = 8               # speed_spread: the run cut in this many parts of consecutive I/Os
SPEED_SPREAD = 1.4      # over this, the machine's speed changed during the run


def speed_spread(outside):
    """The machine's steadiness during a QD1 run: fio's time outside the span (outside_span's
    items) in PARTS runs of consecutive I/Os (fio's log order), the median of each; the
    largest over the smallest.  Stalls are left out before (split_stalled).  A steady machine
    keeps it near 1 (33 of 42 psync calibrations in the emulated guest at 1.02-1.33); a CPU
    slowed in a part of the run moves the parts apart (the other 9 at 1.46-1.92, among them
    the run that gave 13.6 us of own time against the usual 5-7 and failed a cell), and a
    mean taken over such a run holds a mix of two speeds, which no single speed scales (a
    run slow throughout keeps its parts together and is scaled as a whole).  None (not known) with fewer than PARTS I/Os a part or a part's median at
    or below 0."""
    order = sorted(outside, key=lambda x: x[4])
    n = len(order)
    if n < PARTS * PARTS:
        return None
    meds = [statistics.median(x[2] for x in order[k * n // PARTS:(k + 1) * n // PARTS])
            for k in range(PARTS)]
    return max(meds) / min(meds) if min(meds) > 0 else None


def fio_engine(job):
    """fio's engine of a job (libaio when its options do not name one)"""
    return job.get("job options", {}).get("ioengine", "libaio")


def own(fio_json, fio_lat_log_path, commands_path, lbs, edges_outs):
    job, side = fio_job(fio_json)
    loaded = [load_ios(p) for p in edges_outs]
    engine = fio_engine(job)
    ios = [io for _, l in loaded for io in l]
    fio_ios = fio_lat_log(fio_lat_log_path, lbs, job[side]["lat_ns"]["mean"] or 1)
    if job["error"] or job[side]["total_ios"] == 0 or not ios or not fio_ios:
        print(json.dumps({"error": "fio: %d I/Os, error %d; io_edges: %d I/Os"
                          % (job[side]["total_ios"], job["error"], len(ios))}))
        sys.exit(1)
    if any(e != engine for e, _ in loaded):
        print(json.dumps({"error": "fio ran %s, io_edges %s" % (engine, [e for e, _ in loaded])}))
        sys.exit(1)
    # a command reaped from io_uring's ring has no return: its span ends inside fio's own time
    outside = [x for x in outside_span(fio_ios, host_spans(commands_path, span_of(engine)))
               if not x[3]]
    rows = join((engine, ios), commands_path, lbs)
    if len(outside) < len(fio_ios) // 2 or len(rows) < len(ios) // 2:
        print(json.dumps({"error": "too few I/Os joined with their commands: fio %d of %d, "
                          "io_edges %d of %d" % (len(outside), len(fio_ios), len(rows), len(ios))}))
        sys.exit(1)
    kept, stalled, _ = split_stalled(outside, key=lambda x: x[2])
    fio_out_us = statistics.fmean(x[2] for x in kept) / 1000.0
    e = summarize(rows)
    print(json.dumps({"engine": engine, "own_us": fio_out_us - e["edges_us"],
                      "fio_outside_us": fio_out_us, "speed_spread": speed_spread(kept),
                      "fio_ios": len(fio_ios), "fio_joined": len(outside),
                      "fio_lat_us": statistics.fmean(x[0] for x in kept) / 1000.0,
                      "fio_lat_p50_us": statistics.median(x[0] for x in outside) / 1000.0,
                      "client_edges_us": e["edges_us"], "client_ios": len(ios),
                      "client_joined": len(rows), "stalled": len(stalled) + e["stalled"]}))


def main():
    if sys.argv[1:2] == ["--own"]:
        if len(sys.argv) < 7:
            sys.exit(__doc__)
        return own(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6:])
    json_out = [a[len("--json-out="):] for a in sys.argv[1:] if a.startswith("--json-out=")]
    args = [a for a in sys.argv[1:] if a != "--json" and not a.startswith("--json-out=")]
    if len(args) != 3:
        sys.exit(__doc__)
    loaded = load_ios(args[0])
    rows = join(loaded, args[1], int(args[2]))
    if not rows:
        print("FAIL: no recorded command joins an I/O of %s" % args[0])
        sys.exit(1)
    s = summarize(rows)
    s["engine"] = loaded[0]
    for path in json_out:
        with open(path, "w") as f:
            f.write(json.dumps(s) + "\n")
    if "--json" in sys.argv:
        print(json.dumps(s))
    else:
        print("edges (%s): %d commands joined | entry (user to the submitting call's hook) %.2f us"
              " (p50 %.2f), exit (the reaping call's hook to user) %.2f us (p50 %.2f) | e2e %.2f"
              " us, user's %.2f us | %d stalled"
              % (loaded[0], s["n"], s["entry_us"], s["entry_p50_us"], s["exit_us"],
                 s["exit_p50_us"], s["e2e_us"], s["user_us"], s["stalled"]))
    if s["negative"]:
        print("FAIL: %d commands with a negative edge" % s["negative"])
        sys.exit(1)


if __name__ == "__main__":
    main()
