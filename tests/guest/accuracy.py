#!/usr/bin/env python3
"""Check one nvmetrace recording against the fio run it recorded (tests/guest/scenarios/35-accuracy.sh).

usage: accuracy.py LABEL FIO_JSON REPORT_JSON COMMANDS_JSONL SAMPLE SEED LBS FIO_LAT_LOG
                   OWN_JSON EDGES_JSON

fio's engine (its job options' ioengine: libaio, io_uring, io_uring_cmd, psync, pvsync2) sets
the span: from the submitting system call's entry hook to the reaping call's return hook
(edges.SPANS), and the host events each command must have in order (ENGINE_EVENTS).

Asserts, and prints one line of figures:
  - sampling: the host commands are exactly the fio I/Os (from its latency log) whose LBA the predicate picks
    (mix64(lba ^ seed) <= 2^64-1 / N, the module's own function), none lost or incomplete;
  - the target recorded the same commands as the host (same op and LBA, same count);
  - every host command has all its events, in order, so no component is negative, and the
    stages of the report add up to its end-to-end mean;
  - the end to end (e.g. io_submit() entry to io_getevents() return: the span user space sees)
    plus fio's own time plus the syscall edges is compared with fio's total latency
    (lat = slat + clat) over the same I/Os, and must agree within 2 %.  fio's per-I/O latency
    log (FIO_LAT_LOG, with offsets) gives the lat of each I/O nvmetrace sampled.  The two
    parts of lat that no kernel hook can see are measured apart and printed as figures of
    their own:
      - fio's own time: fio's loop and its engine in user space, before the submitting
        call and after the reaping call returns.  Measured in a recording of its own on the
        same device, before the cells of the same engine, op and size: fio at QD1 between two
        io_edges runs (a minimal client of the engine timed around its syscalls), on LBAs
        apart.  fio's time outside the span per I/O, less io_edges' syscall edges in the same
        recording
        (OWN_JSON, from tests/guest/edges.py --own; the QD1 figure serves the QD8 cells too:
        it is fio's work per I/O);
      - the syscall edges: from user space to the submitting call's entry hook, and from
        the reaping call's return hook back to user space (the syscall entry and exit, and
        the hooks' own work outside their timestamps), measured per command by io_edges,
        which times QD1 I/O around its syscalls with the module's clock, in a recording of
        the same engine, op, size and sampling (EDGES_JSON, from tests/guest/edges.py).
    An io_uring command reaped from the mapped CQ ring (fio at QD16 takes most of them so)
    is timed to the next io_uring_enter() entry, after fio's reap: its span holds fio's own
    time, and nothing is added to it (the share of commands reaped at a return is printed).
    The two are measured before the cells, at the machine speed of then: a loaded host
    slows the emulated guest down (twofold within seconds, measured, even with no other lane
    beside), and the time outside the span is CPU work that slows with it.  At QD1, where
    that time is 1 to 5 % of lat, both are scaled by the machine's speed during the cell
    against the calibration's: the median lat of the cell's sampled I/Os (hooked as the
    calibration's all were) over the QD1 recording's median.  A speed outside STEADY is too
    far off for that model: the cell exits with UNSTEADY (code 3), and 35-accuracy.sh measures
    both again and takes the cell again.  At QD8 the time outside the span is under 1 % of
    lat; no speed change moves the ratio by 2 %, and nothing is scaled (nor at QD16).
    Each sampled I/O is joined with its command (same op and LBA, in completion order), so
    the time outside the span is known per I/O.  An I/O whose time outside the span exceeds
    the median by more than 1 ms is a stall of the emulated CPU (the host descheduled it),
    which lands in fio's lat alone: those I/Os are counted, their share of lat's mean is
    printed as its own figure, and they are left out of both means for the ratio.  fio's mean
    over all its I/Os is printed too (at 1 of 10 it differs by the sampling alone), and so is
    the ratio without the edges;
  - for libaio, the stages above the block layer are printed as figures of their own: syscall
    and file submission (io_submit entry to block_bio_queue) and completion to user space
    (block_rq_complete to io_getevents' return: aio completion, wake-up, reap).
"""
import collections, json, os, statistics, sys

# tests/guest/edges.py, beside this script
from edges import (STALL_NS, fio_engine, fio_job, fio_lat_log, host_spans, outside_span, span_of,
                   split_stalled)

M = (1 << 64) - 1
# the host events every command of fio's engine has, in the order they happen: its span's
# first and last (edges.SPANS) around the block layer and the driver
BLOCK = ["blkdev_read_iter/blkdev_write_iter", "block_bio_queue", "nvme_setup_cmd",
         "block_rq_issue", "nvme_complete_rq", "block_rq_complete"]
ENGINE_EVENTS = {
    "libaio": BLOCK + ["aio_complete_rw"],
    "io_uring": BLOCK + ["io_uring_complete (CQE posted)"],
    # passthrough: no bio
    "io_uring_cmd": ["nvme_setup_cmd", "block_rq_issue", "nvme_complete_rq", "block_rq_complete",
                     "io_uring_complete (CQE posted)"],
    "psync": BLOCK,
    "pvsync2": BLOCK,
}
GOAL = 0.02             # (e2e + fio's own + edges) / lat within 1 +- GOAL
# A QD1 cell's machine speed over the calibration's that scaling may bridge: NEAR before
# the last try (a cell further off is taken again after measuring anew, so that a model
# stretched far from where it was measured rarely decides), STEADY on the last
# (ACCURACY_LAST_TRY=1). Once, at 1.46, the scaled ratio was 1.021 and the unscaled 1.002.
# QD1 4k 1-of-10 cells on 6.12: 0.997-0.999 at 1.18, 0.993 at 1.24, 0.984 at 1.27 and 0.977
# at 1.28: past ~1.2 the scaled model drifts by percents, so such a cell is taken again
NEAR = (0.75, 1.2)
STEADY = (0.5, 2.0)
if os.environ.get("ACCURACY_LAST_TRY") != "1":
    STEADY = NEAR
UNSTEADY = 3            # exit code: measure fio's own time and the edges again, retake the cell
TARGET_EVENTS = ["nvmet_req_init", "nvmet_bdev_execute_rw", "nvmet_bio_done", "nvmet_req_complete"]


def mix(x):
    x ^= x >> 30
    x = (x * 0xbf58476d1ce4e5b9) & M
    x ^= x >> 27
    x = (x * 0x94d049bb133111eb) & M
    x ^= x >> 31
    return x


def fail(msg):
    print("FAIL: %s: %s" % (label, msg))
    sys.exit(1)


label, fio_json, report_json, commands, sample, seed, lbs, latlog, own_json, edges_json = \
    sys.argv[1:11]
edges = json.load(open(edges_json))
sample, seed, lbs = int(sample), int(seed), int(lbs)
threshold = M if sample == 1 else M // sample

job, side = fio_job(fio_json)
engine = fio_engine(job)
first, last = span_of(engine)
# a file of a file system (fio's filename no device): its file system's direct I/O comes
# first, the file submission is recorded at the bio, and named so
FS = "__iomap_dio_rw (file system direct I/O)"
FILE_BIO = "the file's first bio (file submission)"
on_file = not job["job options"].get("filename", "/dev/").startswith("/dev/")
HOST_EVENTS = [first] + ([FS] if on_file else []) + ENGINE_EVENTS[engine] + [last]
if on_file:
    HOST_EVENTS = [FILE_BIO if e == BLOCK[0] else e for e in HOST_EVENTS]
fio_ios = job[side]["total_ios"]
fio_lat_us = job[side]["lat_ns"]["mean"] / 1000.0
if job["error"] or fio_ios == 0:
    fail("fio: %d I/Os, error %d" % (fio_ios, job["error"]))
own = json.load(open(own_json))
fio_own_us = own["own_us"]
for what, e in (("fio's own time", own), ("the edges", edges)):
    if e.get("engine", "libaio") != engine:
        fail("%s were measured with %s, fio ran %s" % (what, e.get("engine", "libaio"), engine))
qd = int(job["job options"].get("iodepth", "1"))

# fio's latency (lat) of each I/O, from its per-I/O log (one line per I/O: it is also the list
# of every I/O fio issued, so no iolog is needed, whose writing would sit inside fio's lat)
lat_all = fio_lat_log(latlog, lbs, fio_lat_us * 1000)
sampled = [io for io in lat_all if mix(io[1] ^ seed) <= threshold]
# the machine's speed against the QD1 recording's: medians of hooked I/Os, which a few stalls
# do not move
speed = statistics.median(v for _, _, v in sampled) / 1000.0 / own["fio_lat_p50_us"] \
    if sampled else 1.0
if qd == 1 and not STEADY[0] <= speed <= STEADY[1]:
    print("UNSTEADY: %s: fio's median lat is %.2f times the %.2f us of the QD1 recording that"
          " measured fio's own time: the machine's speed changed (allowed %.2f to %.2f), so"
          " that time and the syscall edges do not hold for this cell"
          % (label, speed, own["fio_lat_p50_us"], STEADY[0], STEADY[1]))
    sys.exit(UNSTEADY)
expected = collections.Counter((op, lba) for op, lba, _ in sampled)
if len(lat_all) != fio_ios or not sampled:
    fail("fio's latency log has %d I/Os (%d sampled), its JSON %d"
         % (len(lat_all), len(sampled), fio_ios))
fio_same_us = sum(v for _, _, v in sampled) / len(sampled) / 1000.0

host, target = collections.Counter(), collections.Counter()
negative = missing = 0
for line in open(commands):
    c = json.loads(line)
    key = (c["op"], c["lba"])
    ev = c["events"]
    names = HOST_EVENTS if c["side"] == "host" else TARGET_EVENTS
    if any(n not in ev for n in names):
        missing += 1
        continue
    ts = [ev[n] for n in names]
    if any(b < a for a, b in zip(ts, ts[1:])):
        negative += 1
    (host if c["side"] == "host" else target)[key] += 1

if missing:
    fail("%d commands without all their events" % missing)
if negative:
    fail("%d commands with events out of order (a negative component)" % negative)
if host != expected:
    extra, absent = host - expected, expected - host
    fail("host commands differ from fio's sampled I/Os: %d expected, %d recorded, "
         "%d not recorded (e.g. %s), %d unexpected (e.g. %s)"
         % (sum(expected.values()), sum(host.values()), sum(absent.values()),
            list(absent)[:3], sum(extra.values()), list(extra)[:3]))
if target != host:
    fail("target recorded %d commands, host %d; %d differ"
         % (sum(target.values()), sum(host.values()), sum(((target - host) + (host - target)).values())))

rep = json.load(open(report_json))
groups = [g for r in rep for g in r["groups"]]
# one host group, or for io_uring one per way a command was reaped (at an io_uring_enter()
# return, or from the mapped CQ ring) and issued (inline, or again from io-wq after EAGAIN)
hg = [g for g in groups if g["view"] != "target" and g["op"] == side
      and g["device"].startswith("nvme")]
if not hg or (not engine.startswith("io_uring") and len(hg) != 1):
    fail("expected one host group, report has: %s" % [g["label"] for g in groups])
for g in hg:
    e2e_g = g["latency_us"]["mean"]
    stage_sum = sum(s["mean_us"] for s in g["stages"])
    if abs(stage_sum - e2e_g) > 0.011 * max(1, len(g["stages"])):
        fail("%s: stages add up to %.3f us, end to end is %.3f us" % (g["label"], stage_sum, e2e_g))
    if not g["span"]["user_space"]:
        fail("%s: its span does not reach user space (%s)" % (g["label"], g["span"]["note"]))
n_rep = sum(g["n"] for g in hg)
e2e = sum(g["latency_us"]["mean"] * g["n"] for g in hg) / n_rep
if n_rep != sum(host.values()):
    fail("report counts %d commands, the command dump %d" % (n_rep, sum(host.values())))
big = max(hg, key=lambda g: g["n"])
stage = {s["name"]: s["mean_us"] for s in big["stages"]}
above = stage.get("syscall and file submission (before the block layer)")
below = stage.get("completion to user space (wake-up, reap)")
if engine == "libaio" and (above is None or below is None):
    fail("no stages above the block layer in the report: %s" % list(stage))
# Each sampled I/O against its command (edges.outside_span: same op and LBA, in completion
# order; every LBA has as many commands as I/Os, checked above): lat - nvmetrace's end to
# end is the time of that I/O outside the kernel span.
outside = outside_span(sampled, host_spans(commands, HOST_EVENTS))
if len(outside) != len(sampled):
    fail("%d of %d sampled I/Os joined with their commands" % (len(outside), len(sampled)))
# An emulated CPU descheduled by the host (a shared machine under load) stalls for
# milliseconds; outside the span, such a stall lands in fio's lat alone.  Those I/Os (outside
# time more than STALL_NS over the median) are counted, shown as their own figure, and left
# out of both means; a stall inside the span is in both and stays.
kept, stalled, med = split_stalled(outside, key=lambda x: x[2])
# A stall of the emulated CPU hits commands whatever their reap; commands reaped at a return
# (x[3] false) that lie far outside their span far more often than those reaped from the ring
# are not stalls: the span ends before user space took their CQE
for ring in (False, True):
    n_kind = sum(1 for x in outside if x[3] == ring)
    n_st = sum(1 for x in stalled if x[3] == ring)
    n_other, st_other = len(outside) - n_kind, len(stalled) - n_st
    if n_kind >= 20 and n_st > max(5, 0.1 * n_kind) and \
            (not n_other or st_other / n_other < 0.5 * n_st / n_kind):
        fail("%d of the %d commands reaped %s lie more than %d us outside their span (%d of %d of"
             " the others): not stalls of the CPU; their span ends before user space took them"
             % (n_st, n_kind, "from the CQ ring" if ring else "at a system call's return",
                STALL_NS // 1000, st_other, n_other))
lat_k = sum(x[0] for x in kept) / len(kept) / 1000.0
e2e_k = sum(x[1] for x in kept) / len(kept) / 1000.0
stall_us = (sum(x[2] for x in stalled) / len(outside) / 1000.0) if stalled else 0.0
if abs(e2e_k * len(kept) + sum(x[1] for x in stalled) / 1000.0 - e2e * len(outside)) > \
        0.001 * e2e * len(outside):
    fail("the per-I/O end to end (%.2f us over %d) does not add up to the report's mean %.2f us"
         % ((e2e_k * len(kept) + sum(x[1] for x in stalled) / 1000.0) / len(outside),
            len(outside), e2e))
scale = speed if qd == 1 else 1.0
# fio's own time and the edges lie outside the span of a command reaped at a system call's
# return; one io_uring reaped from its CQ ring is timed to the next io_uring_enter() entry,
# after fio's reap: its span holds fio's own time already, and nothing is added to it
back = sum(1 for x in kept if not x[3]) / len(kept)
# fio's io_uring engine at QD1 waits for each CQE in a call of its own: the CQE is handed over at
# that call's return (at 1 of N too, where the return is probed only while a sampled command is
# in flight); one posted before fio waits is taken from the ring (0-0.2 % of them in this
# scenario's runs at 1 of 1, 1-8 % in 36-uring's on a loaded machine); with the wait's return
# unprobed, all of them are
if engine == "io_uring" and qd == 1 and back < 0.9:
    fail("io_uring at QD1: only %.1f %% of the sampled commands reaped at a system call's return"
         " (the rest from the CQ ring): the waiting call's return missed them" % (100 * back))
ratio_noedges = (e2e_k + back * scale * fio_own_us) / lat_k
ratio = (e2e_k + back * scale * (fio_own_us + edges["edges_us"])) / lat_k
ratio_unscaled = (e2e_k + back * (fio_own_us + edges["edges_us"])) / lat_k
line = ("%-22s %s: fio %6d I/Os lat %8.2f us (same I/Os: %6d, %8.2f us) | nvmetrace n %6d e2e %8.2f us"
        " | without %d stalled I/Os: lat %8.2f us, e2e %8.2f us; (e2e + fio's own + edges) / lat"
        " %.3f (without the edges %.3f) | fio's own time (its QD1 run) %5.2f us, syscall"
        " edges %5.2f us (entry %5.2f, exit %5.2f; io_edges, %d commands)%s, stalls outside the"
        " span (> %d us over the median of %.2f us) %d I/Os adding %.2f us to lat's mean,"
        " lat - e2e %7.2f us%s%s"
        % (label, engine, fio_ios, fio_lat_us, len(sampled), fio_same_us, n_rep, e2e,
           len(stalled), lat_k, e2e_k, ratio, ratio_noedges, fio_own_us, edges["edges_us"],
           edges["entry_us"], edges["exit_us"], edges["n"],
           "" if back == 1 else "; added to the %.1f %% of commands reaped at a return, not"
           " to those reaped from the CQ ring" % (100 * back),
           STALL_NS // 1000, med / 1000.0, len(stalled), stall_us, fio_same_us - e2e,
           " | syscall+file submission %7.2f us, completion to user space %7.2f us"
           % (above, below) if above is not None and below is not None else "",
           " | machine speed against the calibration's %.2f (fio's own time and the edges"
           " scaled by it; unscaled the ratio is %.3f)" % (speed, ratio_unscaled)
           if qd == 1 else ""))
if abs(ratio - 1) > GOAL:
    fail("(end to end + fio's own + syscall edges) / lat is off by more than %g %%: %s"
         % (GOAL * 100, line))
print("ok   %s" % line)
