#!/usr/bin/env python3
"""tests/guest/tcp_target_check.py CASE FIO_IOS REPORT.json COMMANDS.jsonl

Checks one recording of both roles (one guest over nvme-tcp loopback, -s 1) of one fio run:
 - report --commands: every host and target command of the case's op has exactly the
   nvme-tcp / nvmet-tcp events CASE has (the command arrival on the target's socket in
   at least 90 % of the target's commands: an arrival noted after nvmet_req_init belongs
   to another PDU and is left out);
 - report --json: the joined groups hold FIO_IOS commands, have no missing boundary, no
   component negative for any command, components summing to end to end, and the seed's
   rows.
Prints what it checked; exits 1 on the first failure.
"""
import json
import sys

CMD, R2T_RX, H2C_TX, C2H_RX, RSP_RX = (
    "nvme_tcp_try_send (command PDU)", "nvme_tcp_recv_skb (R2T)",
    "nvme_tcp_try_send (H2C data)", "nvme_tcp_recv_skb (C2H data)",
    "nvme_tcp_recv_skb (response)")
ARRIVAL, R2T_TX, DATA_RX, H2C_RX = (
    "nvmet_tcp_data_ready (command arrival)", "nvmet_tcp_queue_response (R2T)",
    "nvmet_tcp_build_pdu_iovec (in-capsule data)", "nvmet_tcp_build_pdu_iovec (H2C data)")
HOST_TCP = {CMD, R2T_RX, H2C_TX, C2H_RX, RSP_RX}
TARGET_TCP = {R2T_TX, DATA_RX, H2C_RX}

# case: op, host's nvme-tcp events, target's nvmet-tcp events (arrival aside), rows
SEED = ["host block layer, submission", "host driver, submission",
        "network: wire and NICs (computed)", "network: target receive path",
        "target driver, submission", "storage: target block layer and drive",
        "target driver, completion"]
CASES = {
    "read": ("read", {CMD, C2H_RX, RSP_RX}, set(),
             SEED + ["network: host receive path", "host driver, completion",
                     "host block layer, completion", "handoff to nvme_complete_rq"]),
    "read-success": ("read", {CMD, C2H_RX}, set(),
                     SEED + ["network: host receive path", "host block layer, completion",
                             "handoff to nvme_complete_rq"]),
    "write-incapsule": ("write", {CMD, RSP_RX}, {DATA_RX},
                        SEED + ["network: target receive path, in-capsule data",
                                "host driver, completion", "host block layer, completion"]),
    "write-r2t": ("write", {CMD, R2T_RX, H2C_TX, RSP_RX}, {R2T_TX, H2C_RX},
                  SEED + ["network: R2T to H2C data (wire and host)",
                          "network: target receive path, H2C data",
                          "host driver, completion", "host block layer, completion"]),
}
CASES["write-r2t-4m"] = CASES["write-r2t"]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


case, ios, report, commands = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
op, host_want, target_want, rows = CASES[case]

# ---- per command
n = {"host": 0, "target": 0}
arrivals = 0
sizes = set()
for line in open(commands):
    c = json.loads(line)
    if c["op"] != op:
        continue
    side = c["side"]
    n[side] += 1
    ev = set(c["events"])
    if side == "host":
        sizes.add(c.get("bytes"))
        got = ev & HOST_TCP
        if got != host_want:
            fail("%s host command lba %d: nvme-tcp events %s, want %s"
                 % (case, c["lba"], sorted(got), sorted(host_want)))
    else:
        got = ev & TARGET_TCP
        if got != target_want:
            fail("%s target command lba %d: nvmet-tcp events %s, want %s"
                 % (case, c["lba"], sorted(got), sorted(target_want)))
        if ARRIVAL in ev:
            arrivals += 1
            if c["events"][ARRIVAL] > c["events"]["nvmet_req_init"]:
                fail("%s target command lba %d: arrival after nvmet_req_init" % (case, c["lba"]))
        # the target's events in path order
        order = [e for e in ("nvmet_req_init", R2T_TX, DATA_RX, H2C_RX, "nvmet_bdev_execute_rw",
                             "nvmet_bio_done", "nvmet_req_complete") if e in c["events"]]
        ts = [c["events"][e] for e in order]
        if ts != sorted(ts):
            fail("%s target command lba %d: events out of order %s" % (case, c["lba"], order))
if n["host"] != ios or n["target"] != ios:
    fail("%s: %d host and %d target %s commands, fio did %d" % (case, n["host"], n["target"],
                                                                 op, ios))
if arrivals < 0.9 * n["target"]:
    fail("%s: the command arrival for only %d of %d target commands"
         % (case, arrivals, n["target"]))
if case == "write-r2t-4m" and 4 << 20 not in sizes:
    fail("%s: no 4 MiB command (sizes %s)" % (case, sorted(sizes)))

# ---- per joined group
rep = json.load(open(report))
if isinstance(rep, list):
    rep = rep[0]
groups = [g for g in rep["groups"] if g["view"] == "joined" and g["op"] == op]
if sum(g["n"] for g in groups) != ios:
    fail("%s: %d joined commands, fio did %d (groups %s)"
         % (case, sum(g["n"] for g in groups), ios, [(g["label"], g["view"], g["n"])
                                                     for g in rep["groups"]]))
for g in groups:
    if g["missing"]:
        fail("%s: missing boundaries %s" % (g["label"], g["missing"]))
    top = [c for c in g["components"] if c["depth"] == 0 and c["name"] != "end to end"]
    e2e = [c for c in g["components"] if c["name"] == "end to end"][0]
    for c in g["components"]:
        if c["negative"]:
            fail("%s: %s negative for %d commands" % (g["label"], c["name"], c["negative"]))
    total = sum(c["mean_us"] for c in top)
    if abs(total - e2e["mean_us"]) > 1e-6 * e2e["mean_us"] + 1e-6:
        fail("%s: components sum to %f us, end to end is %f us"
             % (g["label"], total, e2e["mean_us"]))
main = max(groups, key=lambda g: g["n"])
names = [c["name"] for c in main["components"]]
for r in rows:
    if r not in names:
        fail("%s: no row '%s' (has %s)" % (main["label"], r, names))
# reads: the seed's table, in its order (path order)
if op == "read" and [x for x in names if x in rows] != rows:
    fail("%s: rows out of the seed's order: %s" % (main["label"], names))
print("ok: %s: %d commands, each with host %s and target %s; arrival for %d; %d joined "
      "groups, components sum to end to end, none negative; rows: %s"
      % (case, ios, sorted(host_want), sorted(target_want) or "none", arrivals, len(groups),
         "; ".join(names)))
