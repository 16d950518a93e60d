#!/usr/bin/env python3
"""Check one nvmetrace recording against the fio run it recorded (tests/guest/scenarios/35-accuracy.sh).

usage: accuracy.py LABEL FIO_JSON REPORT_JSON COMMANDS_JSONL SAMPLE SEED LBS FIO_LAT_LOG
                   FIO_NULL_JSON FIO_NULL_LAT_LOG

Asserts, and prints one line of figures:
  - sampling: the host commands are exactly the fio I/Os (from its latency log) whose LBA the predicate picks
    (mix64(lba ^ seed) <= 2^64-1 / N, the module's own function), none lost or incomplete;
  - the target recorded the same commands as the host (same op and LBA, same count);
  - every host command has all its events, in order, so no component is negative, and the
    stages of the report add up to its end-to-end mean;
  - the end to end (io_submit() entry to io_getevents() return: the span user space sees)
    plus fio's own time is compared with fio's total latency (lat = slat + clat) over
    the same I/Os: fio's per-I/O latency log (FIO_LAT_LOG, with offsets) gives the lat of
    each I/O nvmetrace sampled.  fio's own time is the part of lat no kernel hook can see
    (fio's loop in user space before io_submit() and after io_getevents() returns); it is
    measured apart, with fio's null engine in the same shape (FIO_NULL_*: the median of its
    lat is fio's own work per I/O, no syscall), and printed as its own figure, beside what remains of
    fio's lat after nvmetrace's end to end (lat - e2e).  fio's mean over all its I/Os is
    printed too (at 1 of 10 it differs by the sampling alone).  The goal is 2 %; the line says
    whether it was met ("goal 2 %: met" / "missed").  What is asserted is the bound the
    recordings keep today on a loaded TCG guest: the ratio lies in [0.80, 1.02] (nvmetrace never
    shows more than fio saw, and explains at least 80 % of it).  At QD1 a gap of 15-40 us per
    I/O remains outside the kernel span, in fio's user space, larger than what fio's null engine
    shows; it is printed as "lat - e2e";
  - the stages above the block layer are printed as figures of their own: syscall and file
    submission (io_submit entry to block_bio_queue) and completion to user space
    (block_rq_complete to io_getevents' return: aio completion, wake-up, reap).
"""
import collections, json, sys

M = (1 << 64) - 1
HOST_EVENTS = ["io_submit (entry)", "blkdev_read_iter/blkdev_write_iter", "block_bio_queue",
               "nvme_setup_cmd", "block_rq_issue", "nvme_complete_rq", "block_rq_complete",
               "aio_complete_rw", "io_getevents (return)"]
GOAL = 0.02             # the agreement aimed at, reported per case
BOUND = (0.80, 1.02)    # what is asserted (see the docstring)
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


label, fio_json, report_json, commands, sample, seed, lbs, latlog, null_json, null_latlog = \
    sys.argv[1:11]
sample, seed, lbs = int(sample), int(seed), int(lbs)
threshold = M if sample == 1 else M // sample

text = open(fio_json).read()
fio = json.loads(text[text.index("{"):])
job = fio["jobs"][0]
side = "read" if job["read"]["total_ios"] > 0 else "write"
fio_ios = job[side]["total_ios"]
fio_lat_us = job[side]["lat_ns"]["mean"] / 1000.0
if job["error"] or fio_ios == 0:
    fail("fio: %d I/Os, error %d" % (fio_ios, job["error"]))
text = open(null_json).read()
nj = json.loads(text[text.index("{"):])["jobs"][0][side]
if nj["total_ios"] == 0:
    fail("fio's null engine did no I/O")
# the null run's median lat (its latency log): fio's own work per I/O, without the rare
# stalls of an emulated guest on a shared machine that its mean would carry
own = sorted(int(l.split(",")[1]) for l in open(null_latlog) if l.count(",") >= 4)
if not own:
    fail("fio's null engine wrote no latency log")
fio_own_us = own[len(own) // 2] / 1000.0
if abs(sum(own) / len(own) / nj["lat_ns"]["mean"] - 1) > 0.5:
    fio_own_us *= 1000.0  # a log in microseconds (older fio)

# fio's latency (lat) of each I/O: time, value, direction, size, offset[, priority]
# (one line per I/O: it is also the list of every I/O fio issued, so no iolog is needed,
# whose writing would sit inside fio's lat)
lat_all, lat_sampled = [], []
expected = collections.Counter()
for line in open(latlog):
    f = [x.strip() for x in line.split(",")]
    if len(f) < 5:
        continue
    v, lba = int(f[1]), int(f[4]) // lbs
    lat_all.append(v)
    if mix(lba ^ seed) <= threshold:
        lat_sampled.append(v)
        expected[("write" if f[2] == "1" else "read", lba)] += 1
if len(lat_all) != fio_ios or not lat_sampled:
    fail("fio's latency log has %d I/Os (%d sampled), its JSON %d"
         % (len(lat_all), len(lat_sampled), fio_ios))
# the log's unit: nanoseconds, or microseconds in older fio
unit = 1.0 if abs(sum(lat_all) / len(lat_all) / (fio_lat_us * 1000) - 1) < 0.5 else 1000.0
fio_same_us = sum(lat_sampled) / len(lat_sampled) * unit / 1000.0

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
hg = [g for g in groups if g["op"] == side and g["device"].startswith("nvme")]
if len(hg) != 1:
    fail("expected one host group, report has: %s" % [g["label"] for g in groups])
g = hg[0]
e2e = g["latency_us"]["mean"]
stage_sum = sum(s["mean_us"] for s in g["stages"])
if abs(stage_sum - e2e) > 0.011 * max(1, len(g["stages"])):
    fail("stages add up to %.3f us, end to end is %.3f us" % (stage_sum, e2e))
if g["n"] != sum(host.values()):
    fail("report counts %d commands, the command dump %d" % (g["n"], sum(host.values())))
stage = {s["name"]: s["mean_us"] for s in g["stages"]}
above = stage.get("syscall and file submission (before the block layer)")
below = stage.get("completion to user space (wake-up, reap)")
if above is None or below is None:
    fail("no stages above the block layer in the report: %s" % list(stage))
ratio = (e2e + fio_own_us) / fio_same_us
line = ("%-22s fio %6d I/Os lat %8.2f us (same I/Os: %6d, %8.2f us) | nvmetrace n %6d e2e %8.2f us"
        " | (e2e + fio's own) / lat %.3f, e2e / lat %.3f (to all I/Os %.3f) | fio's own time "
        "(null engine, median) %6.2f us, lat - e2e %7.2f us | syscall+file submission %7.2f us, "
        "completion to user space %7.2f us"
        % (label, fio_ios, fio_lat_us, len(lat_sampled), fio_same_us, g["n"], e2e, ratio,
           e2e / fio_same_us, e2e / fio_lat_us, fio_own_us, fio_same_us - e2e, above, below))
if not BOUND[0] <= ratio <= BOUND[1]:
    fail("(end to end + fio's own) / lat is outside [%.2f, %.2f]: %s" % (BOUND[0], BOUND[1], line))
print("ok   %s | goal 2 %%: %s" % (line, "met" if abs(ratio - 1) <= GOAL else "missed"))
