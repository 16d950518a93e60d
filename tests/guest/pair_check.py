#!/usr/bin/env python3
"""Checks of the pair scenario (tests/guest/scenarios/60-pair.sh).

  pair_check.py join PHASE REPORT.json HOST-COMMANDS.jsonl
      the joined report of one host and one target recording: every host command
      matched, the computed network >= 0 for each, the joined end to end = the host's own
  pair_check.py compare COMPARE.json
      compare A (idle drive) B (competing job on the target's drive): storage moved up,
      network did not move up (the busy drive is not blamed on the network; the emulated
      link's own time does change between runs, sometimes down, and that is said)
  pair_check.py iolog DEV N SAMPLE SEED
      an fio iolog (version 2) of N 4 KiB reads of DEV, half at LBAs the 1-of-SAMPLE
      predicate picks (kmod/sample_core.h), half at LBAs it does not, interleaved: a short
      run then has sampled commands even when the guest does few I/Os per second
"""
import json
import sys


def fail(msg):
    print("FAIL: %s" % msg, file=sys.stderr)
    sys.exit(1)


def check_join(label, rep, cmds):
    r = json.load(open(rep))
    if len(r) != 1:
        fail("%s: one joined report expected, got %d" % (label, len(r)))
    r = r[0]
    j = r.get("join")
    if not j:
        fail("%s: no join object in the report" % label)
    if j["host"] == 0:
        fail("%s: no host command" % label)
    if j["matched"] != j["host"]:
        fail("%s: %d of %d host commands matched: %s" % (label, j["matched"], j["host"], j))
    if j["negative_network"]:
        fail("%s: %d commands with a negative computed network" % (label, j["negative_network"]))
    groups = [g for g in r["groups"] if g["view"] == "joined"]
    if not groups:
        fail("%s: no joined group: %s" % (label, [(g["label"], g["view"]) for g in r["groups"]]))
    # one group per path: a command whose io_getevents reap was not recorded (e.g. at the
    # recording's end) ends at block_rq_complete and forms a group of its own
    nets = []
    for g in groups:
        comps = {c["name"]: c for c in g["components"]}
        net = comps.get("network: wire and NICs (computed)")
        if not net:
            fail("%s: no computed network in %s: %s" % (label, g["label"], list(comps)))
        for c in g["components"]:
            if c["negative"]:
                fail("%s: component %s negative for %d commands" % (label, c["name"], c["negative"]))
        if net["min_us"] < 0:
            fail("%s: computed network min %.3f us" % (label, net["min_us"]))
        nets.append(net)
    n = sum(g["n"] for g in groups)
    joined_mean = sum(g["n"] * g["latency_us"]["mean"] for g in groups) / n
    net = {"mean_us": sum(g["n"] * x["mean_us"] for g, x in zip(groups, nets)) / n,
           "min_us": min(x["min_us"] for x in nets)}
    e2e = []
    for line in open(cmds):
        c = json.loads(line)
        if c["side"] == "host" and c["status"] == 0:
            ev = c["events"]
            # the first to the last of its events: io_submit entry to io_getevents return
            # where libaio's hooks saw it, block_bio_queue to block_rq_complete otherwise
            e2e.append(max(ev.values()) - min(ev.values()))
    if len(e2e) != n:
        fail("%s: joined groups have %d commands, the host's recording %d" % (label, n, len(e2e)))
    mean = sum(e2e) / len(e2e) / 1000.0
    if abs(mean - joined_mean) > 0.0015:
        fail("%s: joined end to end %.4f us, the host's %.4f us" % (label, joined_mean, mean))
    print("ok   %-10s %d host commands, all matched (%d target); network mean %.1f us, min %.1f; "
          "e2e %.1f us" % (label, j["host"], j["target"], net["mean_us"], net["min_us"], mean))


def check_compare(path):
    c = json.load(open(path))
    joined = [g for g in c["groups"] if g.get("view") == "joined"]
    if not joined:
        fail("compare: no joined group in both A and B: %s" % [g["label"] for g in c["groups"]])
    g = joined[0]
    st = {s["name"]: s for s in g["stages"]}
    for need in ("storage", "network"):
        if need not in st:
            fail("compare: no stage %s in %s" % (need, list(st)))
    s, n = st["storage"], st["network"]
    if s["moved"] != "up":
        fail("compare: storage not flagged as grown: %s" % s)
    if n["moved"] == "up":
        fail("compare: network flagged as grown: %s" % n)
    print("ok   compare    storage %.1f -> %.1f us (moved up), network %.1f -> %.1f us (%s)"
          % (s["a"]["mean_us"], s["b"]["mean_us"], n["a"]["mean_us"], n["b"]["mean_us"],
             "moved down: the emulated link" if n["moved"] else "unmoved"))


M64 = (1 << 64) - 1


def mix(x):  # nvmetrace_mix(), kmod/sample_core.h
    x ^= x >> 30
    x = (x * 0xbf58476d1ce4e5b9) & M64
    x ^= x >> 27
    x = (x * 0x94d049bb133111eb) & M64
    x ^= x >> 31
    return x


def iolog(dev, n, sample, seed):
    thr = M64 if sample <= 1 else M64 // sample
    picked, other = [], []
    lba = 0
    while len(picked) < n // 2 or len(other) < n - n // 2:
        (picked if mix(lba ^ seed) <= thr else other).append(lba)
        lba += 8  # 4 KiB in 512-byte blocks
    print("fio version 2 iolog")
    print("%s add" % dev)
    print("%s open" % dev)
    for i in range(n):
        lst = picked if i % 2 == 0 else other
        print("%s read %d 4096" % (dev, lst[i // 2] * 512))
    print("%s close" % dev)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "join":
        check_join(*sys.argv[2:5])
    elif len(sys.argv) == 3 and sys.argv[1] == "compare":
        check_compare(sys.argv[2])
    elif len(sys.argv) == 6 and sys.argv[1] == "iolog":
        iolog(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        fail("usage: pair_check.py join PHASE REPORT.json HOST.jsonl | compare COMPARE.json | "
             "iolog DEV N SAMPLE SEED")
