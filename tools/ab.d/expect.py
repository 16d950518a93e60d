#!/usr/bin/env python3
"""Check an A/B comparison (tools/ab's compare.json) against the stages expected to move.

    expect.py COMPARE_JSON --up STAGE [--up STAGE]... [--min-commands N] [--other-min-share F]

Per cell, with one result line each (PASS/FAIL and why):
  - the cell ran on both sides;
  - every expected STAGE moved up in every group of the cell that has it with at least
    N commands (default 200) on both sides, and at least one such group exists;
  - no other stage moved, up or down, in any group of the cell, by at least F (default 0)
    of the group's end-to-end mean in A.
Ends with "N passed, N failed"; exit status 1 when a check failed, 2 on bad input.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("compare_json")
    ap.add_argument("--up", action="append", required=True, metavar="STAGE")
    ap.add_argument("--min-commands", type=int, default=200)
    ap.add_argument("--other-min-share", type=float, default=0.0, metavar="F")
    o = ap.parse_args()
    try:
        with open(o.compare_json) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print("expect.py: cannot read %s: %s (was tools/ab run complete?)" % (o.compare_json, e), file=sys.stderr)
        return 2
    cells = doc.get("cells") or []
    if not cells:
        print("expect.py: %s has no cells" % o.compare_json, file=sys.stderr)
        return 2
    npass = nfail = 0
    for c in cells:
        name = c.get("cell", "?")
        if "error" in c:
            print("FAIL  %s  the cell did not run on both sides: %s" % (name, c["error"]))
            nfail += 1
            continue
        problems, found = [], {s: 0 for s in o.up}
        for g in c["compare"]["groups"]:
            label = "%s (%s)" % (g["label"], g.get("view", "?"))
            e2e_a = ((g.get("end_to_end") or {}).get("a") or {}).get("mean_us") or 0
            for s in g["stages"]:
                a, b = s.get("a"), s.get("b")
                if s["name"] in found:
                    if not a or not b or a["n"] < o.min_commands or b["n"] < o.min_commands:
                        continue
                    found[s["name"]] += 1
                    if s["moved"] != "up":
                        problems.append("%s: %s did not move up (%.1f -> %.1f us, z %.1f)" % (
                            label, s["name"], a["mean_us"], b["mean_us"], s["z"]))
                elif s["moved"] and abs(s.get("delta_us") or 0) >= o.other_min_share * e2e_a:
                    problems.append("%s: %s moved %s (%s -> %s us, z %.1f)" % (
                        label, s["name"], s["moved"], "%.1f" % a["mean_us"] if a else "-",
                        "%.1f" % b["mean_us"] if b else "-", s["z"]))
        for s, n in found.items():
            if n == 0:
                unpaired = ["A: " + x for x in c["compare"].get("only_a", [])] + \
                           ["B: " + x for x in c["compare"].get("only_b", [])]
                problems.append("no group with %s on both sides (>= %d commands each)%s" % (
                    s, o.min_commands, "; groups on one side only: " + ", ".join(unpaired) if unpaired else ""))
        ups = "; ".join("%s %s: %.1f -> %.1f us" % (g["label"], s["name"], s["a"]["mean_us"], s["b"]["mean_us"])
                        for g in c["compare"]["groups"] for s in g["stages"]
                        if s["name"] in found and s["moved"] == "up")
        if problems:
            print("FAIL  %s  %s" % (name, "; ".join(problems)))
            nfail += 1
        else:
            print("PASS  %s  up: %s; nothing else moved" % (name, ups))
            npass += 1
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
