#!/bin/bash
# 45-ftrace-order: nvmetrace against the kernel's own tracefs events. While nvmetrace records
# both roles of an nvme-tcp loopback, ftrace records nvme:nvme_setup_cmd, nvme:nvme_complete_rq,
# nvmet:nvmet_req_init and nvmet:nvmet_req_complete with trace_clock mono (nvmetrace's clock).
# For a sample of commands, found in both by (qid, cid, and the LBA where the event has it),
# the order of the four events is the same in both, and each nvmetrace timestamp is within a
# tolerance of ftrace's (ftrace prints microseconds). nvmetrace's nvmet-tcp events of those
# commands (the command's arrival on the target's socket, R2T, in-capsule and H2C data; the
# workload mixes 4k writes in the capsule and 64k writes after an R2T) fall where they must
# against ftrace's nvmet_req_init and nvmet_req_complete: the arrival before nvmet_req_init,
# the others between the two. Under load either ring may lose events: only commands complete
# on both sides and in ftrace are compared, and at least 50 of them must be.
# lane-timeout: 240
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN
T=/sys/kernel/tracing
[ -d "$T/events" ] || mount -t tracefs nodev "$T" 2>/dev/null || true
[ -w "$T/trace_clock" ] || skip "no tracefs"

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"
for e in nvme/nvme_setup_cmd nvme/nvme_complete_rq nvmet/nvmet_req_init nvmet/nvmet_req_complete; do
	[ -e "$T/events/$e/enable" ] || skip "no tracepoint $e"
done

echo 0 >"$T/tracing_on"
echo mono >"$T/trace_clock" || fail "trace_clock mono refused"
echo 8192 >"$T/buffer_size_kb"
echo >"$T/trace"
for e in nvme/nvme_setup_cmd nvme/nvme_complete_rq nvmet/nvmet_req_init nvmet/nvmet_req_complete; do
	echo 1 >"$T/events/$e/enable"
done
"$NT" record -r host -r target -s 1 -o "$RESULTS/rec.ntr" >"$RESULTS/record.out" 2>&1 &
rec=$!
recorder_wait "$RESULTS/record.out"
echo 1 >"$T/tracing_on"
run_fio rd --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randrw --bssplit=4k/70:64k/30 \
	--iodepth=4 --size=64m --time_based --runtime=2 || fail "fio failed"
echo 0 >"$T/tracing_on"
kill -INT $rec
wait $rec || { cat "$RESULTS/record.out"; fail "record failed"; }
for e in nvme/nvme_setup_cmd nvme/nvme_complete_rq nvmet/nvmet_req_init nvmet/nvmet_req_complete; do
	echo 0 >"$T/events/$e/enable"
done
cat "$T/trace" >"$RESULTS/ftrace.txt"
echo >"$T/trace"
echo local >"$T/trace_clock"
# ftrace's ring may overrun under load: say so (those commands are then left out below)
grep -H 'overrun' "$T"/per_cpu/cpu*/stats 2>/dev/null || true
"$NT" report --commands "$RESULTS/rec.ntr" >"$RESULTS/commands.jsonl" || fail "report --commands failed"
"$NT" report --detail "$RESULTS/rec.ntr"

python3 - "$RESULTS/ftrace.txt" "$RESULTS/commands.jsonl" <<'PY' || exit 1
import bisect, collections, json, random, re, sys
ftrace, cmds = sys.argv[1:3]
TOL_NS = 5_000_000  # under TCG on a loaded host the two probes of one tracepoint can be ms apart
def fail(m):
    print("FAIL: " + m, file=sys.stderr); sys.exit(1)
# "   fio-123 [000] ..... 12.345678: nvme_setup_cmd: nvme0: disk=nvme0n1, qid=1, cmdid=4097, ..."
line_re = re.compile(r"\s(\d+)\.(\d{6}): (nvmet?_\w+): (.*)$")
ev = collections.defaultdict(list)  # (event, qid, cid) -> [(ts, lba)]
n = 0
for line in open(ftrace):
    m = line_re.search(line)
    if not m:
        continue
    ts = int(m.group(1)) * 1_000_000_000 + int(m.group(2)) * 1000
    name, rest = m.group(3), m.group(4)
    q = re.search(r"qid=(\d+), cmdid=(\d+)", rest)
    if not q:
        continue
    lba = re.search(r"slba=(\d+)", rest)
    ev[(name, int(q.group(1)), int(q.group(2)))].append((ts, int(lba.group(1)) if lba else None))
    n += 1
if n == 0:
    fail("ftrace recorded nothing")
for v in ev.values():
    v.sort()
# ftrace event -> nvmetrace's name of the same hook
NAMES = {"nvme_setup_cmd": "nvme_setup_cmd", "nvme_complete_rq": "nvme_complete_rq",
         "nvmet_req_init": "nvmet_req_init", "nvmet_req_complete": "nvmet_req_complete"}
def nearest(name, qid, cid, ts, lba):
    v = ev.get((name, qid, cid), [])
    best = None
    for t, l in v[bisect.bisect_left(v, (ts - TOL_NS,)):]:
        if t > ts + TOL_NS:
            break
        if lba is not None and l is not None and l != lba:
            continue
        if best is None or abs(t - ts) < abs(best - ts):
            best = t
    return best
host, target = [], []
for line in open(cmds):
    c = json.loads(line)
    if "cid" not in c or "qid" not in c:
        continue
    (host if c["side"] == "host" else target).append(c)
if not host or not target:
    fail("no host or no target commands with qid and cid (%d, %d)" % (len(host), len(target)))
# a command's four events: the host's and its target command's (same qid, cid, LBA; nearest)
tkey = collections.defaultdict(list)
for t in target:
    tkey[(t["qid"], t["cid"], t["lba"])].append(t)
TCPT_ARRIVAL = "nvmet_tcp_data_ready (command arrival)"
TCPT = {TCPT_ARRIVAL, "nvmet_tcp_queue_response (R2T)",
        "nvmet_tcp_build_pdu_iovec (in-capsule data)", "nvmet_tcp_build_pdu_iovec (H2C data)"}
tcpt_seen = collections.Counter()
# Only commands complete on both sides are compared: nvmetrace's host command with both of
# its events and its target command with both of its own (a ring may drop records under
# load), and ftrace holding all four (its ring may overrun: see the stats printed above).
# Those that are not are counted, and a minimum number of complete ones must remain.
HOST_EV = ("nvme_setup_cmd", "nvme_complete_rq")
TGT_EV = ("nvmet_req_init", "nvmet_req_complete")
MIN_CHECKED = 50
# After an R2T nvme-tcp builds the H2C data PDU in the request's PDU buffer, where the command
# was: ftrace's nvme_complete_rq then prints the PDU's transfer tag as the command id
# (nvme_tcp_setup_h2c_data_pdu(); the tracepoint reads nvme_req(rq)->cmd). Such a write is
# compared without its host completion.
H2C_TX = "nvme_tcp_try_send (H2C data)"
random.seed(1)
random.shuffle(host)
checked, maxdiff, r2t_writes = 0, 0, 0
skipped = collections.Counter()
for h in host:
    if checked >= 300:
        break
    if not all(e in h["events"] for e in HOST_EV):
        skipped["host command incomplete"] += 1
        continue
    hs = h["events"]["nvme_setup_cmd"]
    cands = [t for t in tkey.get((h["qid"], h["cid"], h["lba"]), [])
             if all(e in t["events"] for e in TGT_EV)]
    t = min(cands, key=lambda t: abs(t["events"]["nvmet_req_init"] - hs), default=None)
    if t is None:
        skipped["no complete target command"] += 1
        continue
    hev = HOST_EV if H2C_TX not in h["events"] else HOST_EV[:1]
    no_host_done = len(hev) < len(HOST_EV)
    ours = [(e, h["events"][e], h) for e in hev] + [(e, t["events"][e], t) for e in TGT_EV]
    theirs = []
    for e, ts, c in ours:
        lba = c["lba"] if e in ("nvme_setup_cmd", "nvmet_req_init") else None
        f = nearest(e, c["qid"], c["cid"], ts, lba)
        if f is None:
            break
        theirs.append((e, f))
    if len(theirs) != len(ours):
        skipped["ftrace lacks an event within %d us" % (TOL_NS // 1000)] += 1
        continue
    f = dict(theirs)
    maxdiff = max(maxdiff, max(abs(f[e] - ts) for e, ts, c in ours))
    # nvmet-tcp events against the kernel's own nvmet events of this command, up to the
    # distance between nvmetrace's and ftrace's probe of the same tracepoint (+1 us:
    # ftrace prints microseconds)
    te = t["events"]
    s_init = abs(f["nvmet_req_init"] - te["nvmet_req_init"]) + 1000
    s_done = abs(f["nvmet_req_complete"] - te["nvmet_req_complete"]) + 1000
    for e, ts in te.items():
        if e not in TCPT:
            continue
        ok = (ts <= f["nvmet_req_init"] + s_init if e == TCPT_ARRIVAL else
              f["nvmet_req_init"] - s_init <= ts <= f["nvmet_req_complete"] + s_done)
        if not ok:
            fail("qid %d cid %d lba %d: %s at %d, ftrace nvmet_req_init %d, "
                 "nvmet_req_complete %d" % (t["qid"], t["cid"], t["lba"], e, ts,
                                            f["nvmet_req_init"], f["nvmet_req_complete"]))
        tcpt_seen[e] += 1
    ord_ours = [e for e, ts, c in sorted(ours, key=lambda x: x[1])]
    # ftrace's microseconds may tie: a tie agrees with either order
    for a, b in zip(ord_ours, ord_ours[1:]):
        if f[a] > f[b]:
            fail("qid %d cid %d lba %d: nvmetrace has %s before %s, ftrace after (%d > %d)"
                 % (h["qid"], h["cid"], h["lba"], a, b, f[a], f[b]))
    checked += 1
    r2t_writes += no_host_done
print("skipped (not complete on both sides): %s" %
      (", ".join("%s %d" % kv for kv in sorted(skipped.items())) or "none"))
if checked < MIN_CHECKED:
    fail("only %d commands complete on both sides and in ftrace (at least %d needed; %d host "
         "commands)" % (checked, MIN_CHECKED, len(host)))
for e in sorted(TCPT):
    if not tcpt_seen[e]:
        fail("no %s among the %d commands checked" % (e, checked))
print("ok   %d commands, host and target: same order as ftrace (%d R2T writes without their "
      "host completion); largest timestamp difference %.1f us; %d ftrace events"
      % (checked, r2t_writes, maxdiff / 1000, n))
print("ok   nvmet-tcp events where ftrace's nvmet events put them: %s"
      % ", ".join("%s %d" % (e, tcpt_seen[e]) for e in sorted(TCPT)))
PY
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
