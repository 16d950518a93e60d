#!/usr/bin/env python3
"""Checks of an nvme-rdma + nvmet-rdma recording (tests/guest/scenarios/42-rdma.sh).

rdma_check.py REPORT.json COMMANDS.jsonl FTRACE.txt FIO.json...

0. Each fio run completed I/O without errors (one process for all, instead of fio_check's jq).

1. The report joins every host command with its target command, and each joined group
   has every RDMA component (the data transfer by RDMA READ for writes of 64 KiB), none
   negative, no merged component, and the components add up to the end to end.
2. Every recorded command has every RDMA event its op and size call for, in path order
   (so every component of every command is >= 0; they tile its end to end by construction).
   A kprobe that fires while another kprobe's handler runs on the same CPU is skipped by
   the kprobe core (counted in its nmissed): nvme_rdma_send_done, nvme_rdma_recv_done and
   nvme_rdma_complete_rq run in softirq, which can interrupt the nvme_rdma_post_send
   handler.  Commands that lack one of them (or a target RDMA event) must stay rare
   (< 5 %); their groups (the coarser path, nothing invented) are checked like the
   others, except for the components they cannot have.
3. For a sample of commands, nvmetrace's RDMA events and the kernel's own ftrace events
   (nvme_setup_cmd, nvmet_req_init, nvmet_req_complete, nvme_complete_rq) for the same
   (qid, cid) fall in path order.  Host and target run in one guest on one clock
   (CLOCK_MONOTONIC, trace_clock mono), so they are compared directly; ftrace prints
   microseconds, so its event may lie anywhere in its microsecond.
"""
import bisect
import collections
import json
import random
import re
import sys

report_path, commands_path, ftrace_path = sys.argv[1:4]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------- 0. fio
for path in sys.argv[4:]:
    text = open(path).read()
    doc = json.loads(text[text.index("{"):])  # fio may print lines before its JSON
    ios = sum(j[d]["total_ios"] for j in doc["jobs"] for d in ("read", "write", "trim"))
    errs = sum(j["error"] + j.get("total_err", 0) for j in doc["jobs"])
    if ios == 0 or errs:
        fail("fio %s: %d I/Os, %d errors" % (path, ios, errs))
    print("fio  %s: %d I/Os, 0 errors" % (path.rsplit("/", 1)[-1], ios))


# ---------------------------------------------------------------- 1. the report
reports = json.load(open(report_path))
if len(reports) != 1:
    fail("one joined report expected, got %d" % len(reports))
rep = reports[0]
j = rep.get("join")
if not j or not j["host"]:
    fail("no join, or no host command: %s" % j)
if j["matched"] != j["host"]:
    fail("%d of %d host commands matched: %s" % (j["matched"], j["host"], j))
if j["negative_network"]:
    fail("%d commands with a negative computed network" % j["negative_network"])

COMMON = ["host block layer, submission", "host driver, submission",
          "host driver, to the NIC (nvme-rdma)", "network: wire and NICs (computed)",
          "  command posted to send done (RDMA)", "network: target receive path",
          "target driver, submission", "storage: target block layer and drive",
          "target driver, completion", "target driver, response (nvmet-rdma)",
          "  response posted to send done (RDMA)", "network: host receive path",
          "host driver, completion", "host block layer, completion", "end to end"]
READ_DATA = ["network: RDMA READ of data (target)", "  data transfer (RDMA, at the target)"]
seen = set()
MISSED = ["network: host receive path", "host driver, completion"]
USER = ["syscall: io_submit entry to the file", "file submission to the block layer",
        "completion posted to the aio context", "wake-up and reap (io_getevents)"]
n_host = sum(g["n"] for g in rep["groups"])
for g in rep["groups"]:
    if g["view"] != "joined":
        fail("group %s is %s, not joined" % (g["label"], g["view"]))
    if g["missing"]:
        fail("group %s misses %s" % (g["label"], g["missing"]))
    names = [" " * 2 * c["depth"] + c["name"] for c in g["components"]]
    # fio's libaio I/O also has the stages above the block layer (io_submit .. io_getevents):
    # they come first and last, and are not RDMA's
    names = [n for n in names if n not in USER]
    want = list(COMMON)
    big_write = g["op"] == "write" and g["size"] >= 65536
    if big_write:
        i = want.index("target driver, submission")
        want[i:i] = READ_DATA
    if names == want:
        seen.add((g["op"], g["size"]))
    elif set(names) < set(want) and g["n"] <= 0.05 * n_host:
        print("note %d commands of %s lack %s (kprobe missed)"
              % (g["n"], g["label"], [w.strip() for w in want if w not in names]))
        want = names
    if names != want:
        fail("group %s: components\n  %s\nexpected\n  %s" % (g["label"], names, want))
    for c in g["components"]:
        if c["negative"] or c["min_us"] < 0:
            fail("group %s: %s negative (%d, min %.3f us)"
                 % (g["label"], c["name"], c["negative"], c["min_us"]))
        if c["n"] == 0:
            fail("group %s: %s has no command" % (g["label"], c["name"]))
    top = [c for c in g["components"] if c["depth"] == 0 and c["name"] != "end to end"]
    total = sum(c["mean_us"] for c in top)
    e2e = g["latency_us"]["mean"]
    if abs(total - e2e) > 0.002 * len(top) + 1e-6 * e2e:
        fail("group %s: components add up to %.3f us, end to end %.3f us"
             % (g["label"], total, e2e))
for need in (("read", 4096), ("write", 65536), ("write", 4096)):
    if need not in seen:
        fail("no joined group for %s %d: %s" % (need[0], need[1], sorted(seen)))

# ------------------------------------------------------ 2. every command's events
HOST_PATH = ["nvme_setup_cmd", "block_rq_issue", "nvme_rdma_post_send", "nvme_rdma_recv_done",
             "nvme_rdma_complete_rq", "nvme_complete_rq", "block_rq_complete"]
host, target = [], []
for line in open(commands_path):
    c = json.loads(line)
    if c["status"]:
        fail("command failed: %s" % c)
    (host if c["side"] == "host" else target).append(c)
if not host or not target:
    fail("%d host and %d target commands" % (len(host), len(target)))


def in_order(c, path):
    ev = c["events"]
    missing = [e for e in path if e not in ev]
    if missing:
        fail("%s command lba %d (%s %s): no %s: %s"
             % (c["side"], c["lba"], c["op"], c.get("bytes", c.get("blocks")), missing, ev))
    for a, b in zip(path, path[1:]):
        if ev[a] > ev[b]:
            fail("%s command lba %d: %s after %s: %s" % (c["side"], c["lba"], a, b, ev))


SOFTIRQ_HOST = ("nvme_rdma_send_done", "nvme_rdma_recv_done", "nvme_rdma_complete_rq")
SOFTIRQ_TARGET = ("nvmet_rdma_recv_done", "nvmet_rdma_read_data_done", "nvmet_rdma_send_done")
missed = 0


def present(c, path, may_miss):
    """path without the events of may_miss that c lacks; counts c as missed if any"""
    global missed
    lacks = [e for e in path if e in may_miss and e not in c["events"]]
    missed += bool(lacks)
    return [e for e in path if e not in lacks]


for c in host:
    in_order(c, present(c, HOST_PATH, SOFTIRQ_HOST))
    # the capsule's send completes after it was posted and before the request completes
    in_order(c, present(c, ["nvme_rdma_post_send", "nvme_rdma_send_done",
                            "nvme_rdma_complete_rq"], SOFTIRQ_HOST))
for c in target:
    read_data = c["op"] == "write" and c.get("bytes", 0) >= 65536
    path = ["nvmet_rdma_recv_done", "nvmet_req_init"]
    path += ["nvmet_rdma_read_data_done"] if read_data else []
    path += ["nvmet_bdev_execute_rw", "nvmet_bio_done", "nvmet_req_complete",
             "nvmet_rdma_queue_response", "nvmet_rdma_send_done"]
    in_order(c, present(c, path, SOFTIRQ_TARGET))
    if not read_data and "nvmet_rdma_read_data_done" in c["events"]:
        fail("target %s of %s bytes has an RDMA READ: %s" % (c["op"], c.get("bytes"), c))

if missed > 0.05 * (len(host) + len(target)):
    fail("%d of %d commands lack an RDMA event" % (missed, len(host) + len(target)))

# ------------------------------------------------------ 3. against ftrace's order
line_re = re.compile(r"\s(\d+)\.(\d{6}): (nvmet?_\w+): (.*)$")
ft = collections.defaultdict(list)  # (event, qid, cid) -> sorted [(ts_us_start, lba)]
n = 0
for line in open(ftrace_path):
    m = line_re.search(line)
    if not m:
        continue
    q = re.search(r"qid=(\d+), cmdid=(\d+)", m.group(4))
    if not q:
        continue
    lba = re.search(r"slba=(\d+)", m.group(4))
    ts = int(m.group(1)) * 1_000_000_000 + int(m.group(2)) * 1000
    ft[(m.group(3), int(q.group(1)), int(q.group(2)))].append((ts, int(lba.group(1)) if lba else None))
    n += 1
if n == 0:
    fail("ftrace recorded nothing")
for v in ft.values():
    v.sort()
# the two probes of one tracepoint (ftrace's, nvmetrace's) can be ms apart under TCG on a
# loaded machine (45-ftrace-order); a (qid, cid, lba) does not recur within this
TOL_NS = 50_000_000


def ftrace_event(name, c, ours):
    """ftrace's record of the same tracepoint hit as nvmetrace's at `ours`."""
    v = ft.get((name, c["qid"], c["cid"]), [])
    best = None
    for t, l in v[bisect.bisect_left(v, (ours - TOL_NS,)):]:
        if t > ours + TOL_NS:
            break
        if l is not None and l != c["lba"]:
            continue
        if best is None or abs(t - ours) < abs(best - ours):
            best = t
    if best is None:
        fail("%s qid %d cid %d lba %d: no ftrace event near %d"
             % (name, c["qid"], c["cid"], c["lba"], ours))
    return best


tkey = collections.defaultdict(list)
for t in target:
    tkey[(t["qid"], t["cid"], t["lba"])].append(t)
random.seed(4)
sample = random.sample(host, min(200, len(host)))
checked = 0
for h in sample:
    cands = tkey.get((h["qid"], h["cid"], h["lba"]), [])
    if not cands:
        fail("host command qid %d cid %d lba %d: no target command" % (h["qid"], h["cid"], h["lba"]))
    t = min(cands, key=lambda t: abs(t["events"]["nvmet_req_init"] - h["events"]["nvme_setup_cmd"]))
    he, te = h["events"], t["events"]
    if any(e not in he for e in SOFTIRQ_HOST) or any(
            e not in te for e in ("nvmet_rdma_recv_done", "nvmet_rdma_queue_response")):
        continue  # kprobe missed (see the top)
    # (name, earliest, latest): nvmetrace's exact; ftrace's anywhere in its microsecond
    seq = []

    def ours(name, ev):
        seq.append((name, ev[name], ev[name]))

    def kernel(name, c, ev):
        f = ftrace_event(name, c, ev[name])
        seq.append(("ftrace " + name, f, f + 999))

    kernel("nvme_setup_cmd", h, he)
    ours("nvme_rdma_post_send", he)
    ours("nvmet_rdma_recv_done", te)
    kernel("nvmet_req_init", t, te)
    if "nvmet_rdma_read_data_done" in te:
        ours("nvmet_rdma_read_data_done", te)
    kernel("nvmet_req_complete", t, te)
    ours("nvmet_rdma_queue_response", te)
    ours("nvme_rdma_recv_done", he)
    ours("nvme_rdma_complete_rq", he)
    kernel("nvme_complete_rq", h, he)
    for (a, lo_a, _), (b, _, hi_b) in zip(seq, seq[1:]):
        if lo_a > hi_b:
            fail("qid %d cid %d lba %d: %s at %d is after %s at %d"
                 % (h["qid"], h["cid"], h["lba"], a, lo_a, b, hi_b))
    checked += 1
print("ok   %d host, %d target commands, all joined; every RDMA event and component present "
      "and >= 0 for all but %d (a kprobe missed); %d commands in the order of ftrace's %d "
      "events" % (len(host), len(target), missed, checked, n))
for g in rep["groups"]:
    print("     %-28s n %5d  e2e %8.1f us" % (g["label"], g["n"], g["latency_us"]["mean"]))
