#!/usr/bin/env python3
"""Checks a Chrome trace-event JSON file (what `nvmetrace export` writes).

  trace_check.py TRACE [--need-process WORD]... [--min-commands N]
                 [--target-parts N]
  trace_check.py --self-test

The rules: the file is an object with a "traceEvents" array (and, if there,
"displayTimeUnit" "ns" or "ms" and a "metadata" object); every event has a
"ph" this format knows and integer "pid" and "tid"; a complete event ("X")
has a string "name", numeric "ts" and "dur" >= 0 (microseconds), and, if
there, a string "cat" and an object "args"; a metadata event ("M") is one of
process_name, thread_name, process_sort_index, thread_sort_index, with
args.name a string or args.sort_index an integer; every process with
slices has a process_name and every track a thread_name; and on each
(pid, tid) the slices nest: one that starts inside another ends inside it.
Times are compared in whole nanoseconds.

--need-process WORD: a process_name starting with WORD ("host", "target").
--min-commands N: at least N slices of cat "command".
--target-parts N: exactly N slices of cat "command.target" (joined commands).

Prints what it checked; exits 1 naming the first violation, 2 on bad usage.
"""

import json
import os
import sys
import tempfile

PHASES = {"X", "M", "B", "E", "i", "I", "C"}
META_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


class Violation(Exception):
    pass


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and v == v and v not in (float("inf"), float("-inf")))


def ns(us):
    return round(us * 1000)


def check(trace):
    """Returns a summary dict of a valid trace; raises Violation otherwise."""
    if not isinstance(trace, dict):
        raise Violation("the top level is not an object")
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        raise Violation("no traceEvents array")
    if "displayTimeUnit" in trace and trace["displayTimeUnit"] not in ("ns", "ms"):
        raise Violation("displayTimeUnit %r is neither ns nor ms" % trace["displayTimeUnit"])
    if "metadata" in trace and not isinstance(trace["metadata"], dict):
        raise Violation("metadata is not an object")

    processes, threads = {}, {}
    tracks = {}
    cats = {}
    for i, e in enumerate(events):
        where = "event %d" % i
        if not isinstance(e, dict):
            raise Violation("%s is not an object" % where)
        ph = e.get("ph")
        if ph not in PHASES:
            raise Violation("%s: ph %r is not one of %s" % (where, ph, sorted(PHASES)))
        for k in ("pid", "tid"):
            if not is_int(e.get(k)):
                raise Violation("%s: %s %r is not an integer" % (where, k, e.get(k)))
        if "args" in e and not isinstance(e["args"], dict):
            raise Violation("%s: args is not an object" % where)
        if ph == "M":
            name = e.get("name")
            if name not in META_NAMES:
                raise Violation("%s: metadata name %r is not one of %s"
                                % (where, name, sorted(META_NAMES)))
            args = e.get("args")
            if not isinstance(args, dict):
                raise Violation("%s: %s without args" % (where, name))
            if name.endswith("_name"):
                if not isinstance(args.get("name"), str):
                    raise Violation("%s: %s without a string args.name" % (where, name))
                if name == "process_name":
                    processes[e["pid"]] = args["name"]
                else:
                    threads[(e["pid"], e["tid"])] = args["name"]
            elif not is_int(args.get("sort_index")):
                raise Violation("%s: %s without an integer args.sort_index" % (where, name))
            continue
        if not is_num(e.get("ts")) or e["ts"] < 0:
            raise Violation("%s: ts %r is not a number >= 0" % (where, e.get("ts")))
        if ph != "X":
            continue
        if not isinstance(e.get("name"), str):
            raise Violation("%s: X without a string name" % where)
        if "cat" in e and not isinstance(e["cat"], str):
            raise Violation("%s: cat is not a string" % where)
        if not is_num(e.get("dur")) or e["dur"] < 0:
            raise Violation("%s (%s): dur %r is not a number >= 0"
                            % (where, e["name"], e.get("dur")))
        # the end as ts + dur, then rounded: export writes multiples of 1/1024 us,
        # whose sum is exact where ts and dur rounded to ns apart may be 1 ns off
        tracks.setdefault((e["pid"], e["tid"]), []).append(
            (ns(e["ts"]), ns(e["ts"] + e["dur"]), i))
        cats[e.get("cat", "")] = cats.get(e.get("cat", ""), 0) + 1

    depth = 0
    for (pid, tid), slices in sorted(tracks.items()):
        if pid not in processes:
            raise Violation("pid %d has slices but no process_name" % pid)
        if (pid, tid) not in threads:
            raise Violation("pid %d tid %d has slices but no thread_name" % (pid, tid))
        # outer first: by start, then the longer
        slices.sort(key=lambda s: (s[0], -s[1], s[2]))
        stack = []
        for start, end, i in slices:
            while stack and (stack[-1][1] < start or (stack[-1][1] == start and stack[-1][0] < start)):
                stack.pop()
            if stack and end > stack[-1][1]:
                o = stack[-1]
                raise Violation(
                    "pid %d tid %d (%s): event %d (%s, %d..%d ns) starts inside event %d "
                    "(%s, %d..%d ns) and ends after it"
                    % (pid, tid, threads[(pid, tid)], i, events[i]["name"], start, end, o[2],
                       events[o[2]]["name"], o[0], o[1]))
            stack.append((start, end, i))
            depth = max(depth, len(stack))
    return {"events": len(events), "slices": sum(len(s) for s in tracks.values()),
            "processes": processes, "tracks": len(tracks), "depth": depth, "cats": cats}


def run(path, need, min_commands, target_parts):
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        raise Violation("not a JSON file: %s" % e)
    s = check(trace)
    for word in need:
        if not any(n.startswith(word) for n in s["processes"].values()):
            raise Violation("no process name starts with %r: %s"
                            % (word, sorted(s["processes"].values())))
    commands = s["cats"].get("command", 0)
    parts = s["cats"].get("command.target", 0)
    if min_commands is not None and commands < min_commands:
        raise Violation("%d command slices, fewer than %d" % (commands, min_commands))
    if target_parts is not None and parts != target_parts:
        raise Violation("%d target parts of joined commands, not %d" % (parts, target_parts))
    print("trace_check: %s: ok: %d events, %d slices on %d tracks of %d processes (%s), nested "
          "at most %d deep; %d command slices, %d target parts; slices by cat: %s"
          % (path, s["events"], s["slices"], s["tracks"], len(s["processes"]),
             "; ".join(s["processes"][p] for p in sorted(s["processes"])), s["depth"], commands,
             parts, json.dumps(s["cats"], sort_keys=True)))
    return s


def self_test():
    def x(name, ts, dur, tid=1, cat="command"):
        return {"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
                "args": {}}
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "host h"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "nvme0n1 q1"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "nvme0n1 q1 #2"}},
            {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 2, "args": {"sort_index": 1001}}]
    good = meta + [x("a", 1.0, 10.0), x("s", 1.0, 4.0, cat="stage"), x("t", 5.0, 6.0, cat="stage"),
                   x("c", 5.0, 0.001, cat="component"), x("b", 11.0, 2.5), x("z", 13.5, 0.0),
                   x("o", 2.0, 20.0, tid=2)]
    bad = {
        "partial overlap": meta + [x("a", 1.0, 10.0), x("b", 5.0, 10.0)],
        "a child past its parent by 1 ns": meta + [x("a", 1.0, 10.0),
                                                   x("s", 1.001, 10.0, cat="stage")],
        "negative dur": meta + [x("a", 1.0, -0.001)],
        "negative ts": meta + [x("a", -1.0, 1.0)],
        "string ts": meta + [dict(x("a", 1.0, 1.0), ts="1.0")],
        "no dur": meta + [{k: v for k, v in x("a", 1.0, 1.0).items() if k != "dur"}],
        "bool pid": meta + [dict(x("a", 1.0, 1.0), pid=True)],
        "unknown metadata": meta + [{"ph": "M", "name": "thread_title", "pid": 1, "tid": 1,
                                     "args": {"name": "x"}}],
        "unnamed track": meta + [x("a", 1.0, 1.0, tid=9)],
        "unknown ph": meta + [dict(x("a", 1.0, 1.0), ph="Q")],
    }
    with tempfile.TemporaryDirectory() as d:
        def write(name, events, **top):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                json.dump(dict({"traceEvents": events, "displayTimeUnit": "ns", "metadata": {}},
                               **top), f)
            return p
        s = run(write("good.json", good), ["host"], 4, 0)
        assert s["depth"] == 3, s
        failures = []
        for why, events in bad.items():
            try:
                check(json.load(open(write("bad.json", events))))
                failures.append(why)
            except Violation as e:
                print("trace_check: self-test: rejects %s: %s" % (why, e))
        for why, top in {"displayTimeUnit s": {"displayTimeUnit": "s"},
                         "metadata list": {"metadata": []}}.items():
            try:
                check(json.load(open(write("bad.json", good, **top))))
                failures.append(why)
            except Violation as e:
                print("trace_check: self-test: rejects %s: %s" % (why, e))
        for why, args in {"too few commands": (["host"], 5, None),
                          "no target process": (["target"], None, None),
                          "target parts": ([], None, 1)}.items():
            try:
                run(write("good.json", good), *args)
                failures.append(why)
            except Violation as e:
                print("trace_check: self-test: rejects %s: %s" % (why, e))
        try:
            run(os.path.join(d, "none.json"), [], None, None)
            failures.append("a missing file")
        except Violation as e:
            print("trace_check: self-test: rejects a missing file: %s" % e)
    if failures:
        print("trace_check: self-test FAILED: accepted %s" % ", ".join(failures), file=sys.stderr)
        return 1
    print("trace_check: self-test ok")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    path, need, min_commands, target_parts = None, [], None, None
    it = iter(argv)
    try:
        for a in it:
            if a == "--need-process":
                need.append(next(it))
            elif a == "--min-commands":
                min_commands = int(next(it))
            elif a == "--target-parts":
                target_parts = int(next(it))
            elif a.startswith("-") or path:
                raise ValueError(a)
            else:
                path = a
    except (StopIteration, ValueError):
        path = None
    if not path:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        run(path, need, min_commands, target_parts)
    except Violation as e:
        print("trace_check: %s: %s" % (path, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
