#!/usr/bin/env python3
"""The syscall edges of a recording of aio_edges (user/tests/aio_edges.cc): the time between
user space and the first and last host hooks of each command, which no kernel hook sees.

usage: edges.py AIO_EDGES_OUT COMMANDS_JSONL LBS [--json]
       edges.py --own FIO_JSON FIO_LAT_LOG AIO_EDGES_OUT

aio_edges times each QD1 I/O with CLOCK_MONOTONIC, the clock of the module's timestamps: t0
before io_submit(), t1 after it returned, t2 after io_getevents() returned.  Each recorded host
command (nvmetrace report --commands) is the I/O of the same op and LBA whose io_submit()
entry lies in [t0, t1].  Per joined command:
  entry edge = io_submit (entry) - t0         (user space to the io_submit() hook)
  exit edge  = t2 - io_getevents (return)     (the io_getevents() hook back to user space)
and the command's end to end (io_submit entry to io_getevents return) against t2 - t0.
Every mean leaves out the values more than 1 ms over their median: a stall of the emulated
CPU (descheduled by the host), counted as "stalled".
Prints one line; with --json, a JSON object.  Exits 1 when no command joins, or when a
sampled command's edge is negative (its timestamps and the user's are not one clock).

--own: fio's own time per I/O, from a fio run (its JSON and per-I/O latency log) and an
aio_edges run of the same op and size at QD1 on the same device (no recording): fio's mean
lat minus aio_edges' mean round trip (t2 - t0).  Both pass through the same kernel path;
what differs is the user space around the syscalls: fio's loop and its libaio engine, against
two clock reads.  Prints a JSON object.
"""
import collections, json, statistics, sys

SUBMIT, REAP = "io_submit (entry)", "io_getevents (return)"


def load_ios(path):
    ios = []
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        op, off, t0, t1, t2 = line.split()
        ios.append((op, int(off), int(t0), int(t1), int(t2)))
    return ios


def join(ios, commands_path, lbs):
    by_key = collections.defaultdict(list)
    for op, off, t0, t1, t2 in ios:
        by_key[(op, off // lbs)].append((t0, t1, t2))
    rows = []
    for line in open(commands_path):
        c = json.loads(line)
        if c.get("side") != "host":
            continue
        ev = c["events"]
        if SUBMIT not in ev or REAP not in ev:
            continue
        for t0, t1, t2 in by_key.get((c["op"], c["lba"]), ()):
            if t0 <= ev[SUBMIT] <= t1:
                rows.append((ev[SUBMIT] - t0, t2 - ev[REAP], ev[REAP] - ev[SUBMIT], t2 - t0))
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


def own(fio_json, fio_lat_log, edges_out):
    text = open(fio_json).read()
    job = json.loads(text[text.index("{"):])["jobs"][0]
    side = "read" if job["read"]["total_ios"] > 0 else "write"
    ios = load_ios(edges_out)
    if job["error"] or job[side]["total_ios"] == 0 or not ios:
        print(json.dumps({"error": "fio: %d I/Os, error %d; aio_edges: %d I/Os"
                          % (job[side]["total_ios"], job["error"], len(ios))}))
        sys.exit(1)
    lats = [int(l.split(",")[1]) for l in open(fio_lat_log) if l.count(",") >= 4]
    if abs(statistics.fmean(lats) / job[side]["lat_ns"]["mean"] - 1) > 0.5:
        lats = [v * 1000 for v in lats]  # a log in microseconds (older fio)
    fio = split_stalled(lats)[0]
    client = split_stalled([t2 - t0 for _, _, t0, _, t2 in ios])[0]
    fio_us, client_us = statistics.fmean(fio) / 1000.0, statistics.fmean(client) / 1000.0
    print(json.dumps({"own_us": fio_us - client_us, "fio_lat_us": fio_us, "fio_ios": len(lats),
                      "client_us": client_us, "client_ios": len(ios),
                      "stalled": len(lats) - len(fio) + len(ios) - len(client)}))


def main():
    if sys.argv[1:2] == ["--own"]:
        if len(sys.argv) != 5:
            sys.exit(__doc__)
        return own(sys.argv[2], sys.argv[3], sys.argv[4])
    args = [a for a in sys.argv[1:] if a != "--json"]
    if len(args) != 3:
        sys.exit(__doc__)
    rows = join(load_ios(args[0]), args[1], int(args[2]))
    if not rows:
        print("FAIL: no recorded command joins an I/O of %s" % args[0])
        sys.exit(1)
    s = summarize(rows)
    if "--json" in sys.argv:
        print(json.dumps(s))
    else:
        print("edges: %d commands joined | entry (user to io_submit hook) %.2f us (p50 %.2f), "
              "exit (io_getevents hook to user) %.2f us (p50 %.2f) | e2e %.2f us, user's %.2f us"
              " | %d stalled" % (s["n"], s["entry_us"], s["entry_p50_us"], s["exit_us"], s["exit_p50_us"],
                 s["e2e_us"], s["user_us"], s["stalled"]))
    if s["negative"]:
        print("FAIL: %d commands with a negative edge" % s["negative"])
        sys.exit(1)


if __name__ == "__main__":
    main()
