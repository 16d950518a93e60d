#!/usr/bin/env python3
"""Check one nvmetrace recording against the fio run it recorded (tests/guest/scenarios/35-accuracy.sh).

usage: accuracy.py LABEL FIO_JSON FIO_IOLOG REPORT_JSON COMMANDS_JSONL SAMPLE SEED LBS

Asserts, and prints one line of figures:
  - sampling: the host commands are exactly the fio I/Os whose LBA the predicate picks
    (mix64(lba ^ seed) <= 2^64-1 / N, the module's own function), none lost or incomplete;
  - the target recorded the same commands as the host (same op and LBA, same count);
  - every host command has all its events, in order, so no component is negative, and the
    stages of the report add up to its end-to-end mean;
  - nvmetrace's end-to-end mean lies inside fio's total latency (slat + clat) and the ratio
    and the gap (time above the block layer: syscalls, fio itself, wake-up) are printed.
"""
import collections, json, sys

M = (1 << 64) - 1
HOST_EVENTS = ["block_bio_queue", "nvme_setup_cmd", "block_rq_issue", "nvme_complete_rq",
               "block_rq_complete"]
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


label, fio_json, iolog, report_json, commands, sample, seed, lbs = sys.argv[1:9]
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

# every I/O fio issued, from its iolog (offsets in bytes)
expected = collections.Counter()
issued = 0
for line in open(iolog):
    f = line.split()
    if len(f) == 5:  # iolog version 3: a timestamp first
        f = f[1:]
    if len(f) == 4 and f[1] in ("read", "write"):
        issued += 1
        lba = int(f[2]) // lbs
        if mix(lba ^ seed) <= threshold:
            expected[(f[1], lba)] += 1
if issued != fio_ios:
    fail("fio's iolog has %d I/Os, its JSON %d" % (issued, fio_ios))

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
ratio = e2e / fio_lat_us
if not 0 < ratio <= 1.0:
    fail("nvmetrace end to end %.2f us is not inside fio's latency %.2f us" % (e2e, fio_lat_us))
print("ok   %-22s fio %6d I/Os lat %8.2f us | nvmetrace n %6d (expected %6d) e2e %8.2f us "
      "ratio %.3f  above the block layer %7.2f us"
      % (label, fio_ios, fio_lat_us, g["n"], sum(expected.values()), e2e, ratio, fio_lat_us - e2e))
