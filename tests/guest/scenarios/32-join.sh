#!/bin/bash
# 32-join: one guest holds both roles of an nvme-tcp loopback; a recording of both is reported
# joined (host and target commands matched by qid, command id, LBA and op). At 1-of-1 and
# 1-of-10, for reads and writes: 100 % of the host's commands are matched, the computed network
# is >= 0 for every one, and the joined end to end is the host's own (from the command dump).
# `export` of the recording is a valid, nested trace with every matched command's target part
# (tests/guest/trace_check.py). Its `report --html` page holds `report --json`'s JSON as it
# is and loads nothing from elsewhere (the html_browser ctest checks a page in a browser).
# lane-timeout: 300
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"

for rw in randread randwrite; do
	for s in 1 10; do
		label="$rw-1of$s"
		d=$RESULTS/$label
		mkdir -p "$d"
		"$NT" record -r host -r target -s "$s" -o "$d/rec.ntr" >"$d/record.out" 2>&1 &
		rec=$!
		recorder_wait "$d/record.out" "$label"
		run_fio "$label" --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw="$rw" \
			--bs=4k --iodepth=4 --size=64m --time_based --runtime=2 || fail "$label: fio failed"
		kill -INT $rec
		wait $rec || { cat "$d/record.out"; fail "$label: record failed"; }
		"$NT" report --detail "$d/rec.ntr" >"$d/report.txt" || fail "$label: report failed"
		cat "$d/report.txt"
		"$NT" report --json "$d/rec.ntr" >"$d/report.json" || fail "$label: report --json failed"
		"$NT" report --commands "$d/rec.ntr" >"$d/commands.jsonl" ||
			fail "$label: report --commands failed"
		python3 - "$label" "$d/report.json" "$d/commands.jsonl" <<'PY' || exit 1
import json, sys
label, rep, cmds = sys.argv[1:4]
def fail(m):
    print("FAIL: %s: %s" % (label, m), file=sys.stderr); sys.exit(1)
r = json.load(open(rep))
assert len(r) == 1, "one joined report expected"
r = r[0]
j = r.get("join")
if not j:
    fail("no join in the report of a host+target recording")
if j["host"] == 0:
    fail("no host command")
if j["matched"] != j["host"]:
    fail("%d of %d host commands matched: %s" % (j["matched"], j["host"], j))
if j["negative_network"]:
    fail("%d commands with a negative computed network" % j["negative_network"])
# One joined group, or several of one op when commands took different paths (nvmet-tcp
# records a command's arrival only when it starts a socket read): then their labels differ
# and together they hold every host command.
groups = sorted((g for g in r["groups"] if g["view"] == "joined"), key=lambda g: -g["n"])
if not groups or len(groups) != len(r["groups"]):
    fail("expected joined groups only, got %s" % [(g["label"], g["view"]) for g in r["groups"]])
labels = [g["label"] for g in groups]
if len(set(labels)) != len(labels):
    fail("groups share a label: %s" % labels)
if len({(g["op"], g["size"], g["device"]) for g in groups}) != 1:
    fail("expected one op, size and device: %s" % labels)
g = groups[0]
names = [c["name"] for c in g["components"]]
for need in ("network: wire and NICs (computed)", "target driver, submission",
             "storage: target block layer and drive", "end to end"):
    if need not in names:
        fail("no component %r: %s" % (need, names))
for grp in groups:
    for c in grp["components"]:
        if c["negative"]:
            fail("%s: component %s negative for %d commands" % (grp["label"], c["name"], c["negative"]))
    stages = sum(s["mean_us"] for s in grp["stages"])
    if abs(stages - grp["latency_us"]["mean"]) > 0.011 * len(grp["stages"]):
        fail("%s: stages add up to %.3f us, end to end %.3f us"
             % (grp["label"], stages, grp["latency_us"]["mean"]))
net = [c for c in g["components"] if c["name"] == "network: wire and NICs (computed)"][0]
if net["min_us"] < 0:
    fail("computed network min %.3f us" % net["min_us"])
# the joined end to end is the host's own: its first to its last event (io_submit entry to
# io_getevents return with libaio, as here)
e2e = []
for line in open(cmds):
    c = json.loads(line)
    if c["side"] == "host" and c["status"] == 0:
        ev = c["events"]
        e2e.append(max(ev.values()) - min(ev.values()))
n = sum(grp["n"] for grp in groups)
if len(e2e) != n:
    fail("joined groups have %d commands, the dump %d host commands" % (n, len(e2e)))
mean = sum(e2e) / len(e2e) / 1000.0
joined_mean = sum(grp["latency_us"]["mean"] * grp["n"] for grp in groups) / n
if abs(mean - joined_mean) > 0.0015:
    fail("joined end to end %.4f us, the host's %.4f us" % (joined_mean, mean))
print("ok   %-16s %d host commands, all matched; network mean %.2f us (min %.2f); e2e %.2f us"
      % (label, j["host"], net["mean_us"], net["min_us"], mean))
PY
		grep -q "matched (100 % of the host's)" "$d/report.txt" || fail "$label: no matched line"
		# The same recording as a Perfetto trace: valid trace-event JSON whose slices nest on
		# every track, a host and a target process, a slice for every matched command and its
		# target part on a target queue's track.
		"$NT" export -o "$d/trace.json" "$d/rec.ntr" 2>"$d/export.err" ||
			{ cat "$d/export.err"; fail "$label: export failed"; }
		cat "$d/export.err"
		matched=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["join"]["matched"])' \
			"$d/report.json") || fail "$label: no matched count"
		python3 "$NVMETRACE_SRC/tests/guest/trace_check.py" "$d/trace.json" --need-process host \
			--need-process target --min-commands "$matched" --target-parts "$matched" ||
			fail "$label: trace_check failed"
		# The page of the same recording: report --json's JSON as it is, nothing loaded
		# from elsewhere, a distribution and the latency over time for every group.
		if "$NT" report --html "$d/report.html" "$d/rec.ntr" 2>"$d/html.err"; then
			python3 - "$label" "$d/report.html" "$d/report.json" <<'PY' || exit 1
import json, re, sys
label, page, rep = sys.argv[1:4]
def fail(m):
    print("FAIL: %s: report --html: %s" % (label, m), file=sys.stderr); sys.exit(1)
text = open(page, encoding="utf-8").read()
def element(name):
    m = re.search(r'<script type="application/json" id="%s">(.*?)</script>' % name, text, re.S)
    if not m:
        fail("no %s element" % name)
    return json.loads(m.group(1))
if element("nvmetrace-report") != json.load(open(rep)):
    fail("the embedded JSON is not report --json's")
if re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", text, re.I) or "<link" in text:
    fail("the page loads something from elsewhere")
for g in element("nvmetrace-plots")[0]["groups"]:
    if not g["over_time"] or not g["cdf"][0]["points"]:
        fail("group %s has no latency over time or no distribution" % g["label"])
print("ok   %-16s report --html: %d bytes, its JSON report --json's" % (label, len(text)))
PY
		elif grep -q "tools/html-deps" "$d/html.err"; then
			echo "note: $label: report --html skipped: $(cat "$d/html.err")"
		else
			cat "$d/html.err"
			fail "$label: report --html failed"
		fi
	done
done
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
