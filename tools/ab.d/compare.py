#!/usr/bin/env python3
"""Compare two A/B results folders (tools/ab.d/workload.sh output): baseline and dev.

Per cell: IOPS ratio and CPU ratio (dev / baseline) from results.csv, and the stages that
moved, from `nvmetrace compare --json` of the cell's two recordings. Prints a table and
optionally writes the whole comparison as JSON. Exit 1 when a cell is missing or failed
on either side.
"""
import argparse
import csv
import json
import os
import subprocess
import sys


def read_side(folder):
    meta = {}
    with open(os.path.join(folder, "results.meta")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    with open(os.path.join(folder, "results.csv"), newline="") as f:
        rows = {r["cell"]: r for r in csv.DictReader(f)}
    return meta, rows


def ratio(b, a):
    return None if a == 0 else b / a


def stage_moves(nt, rec_a, rec_b):
    """The stages `nvmetrace compare` flags as moved, per group."""
    p = subprocess.run([nt, "compare", "--json", rec_a, rec_b], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("nvmetrace compare %s %s failed: %s" % (rec_a, rec_b, p.stderr.strip()))
    doc = json.loads(p.stdout)
    moved = []
    for g in doc["groups"]:
        for s in g["stages"]:
            if s["moved"]:
                moved.append({"group": g["label"], "stage": s["name"], "moved": s["moved"],
                              "a_us": s["a"]["mean_us"] if s["a"] else None,
                              "b_us": s["b"]["mean_us"] if s["b"] else None, "ratio": s["ratio"]})
    return doc, moved


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nvmetrace", required=True)
    ap.add_argument("--json")
    ap.add_argument("baseline")
    ap.add_argument("dev")
    o = ap.parse_args()
    ma, ra = read_side(o.baseline)
    mb, rb = read_side(o.dev)
    print("baseline: %s (%s)" % (ma.get("kernel_release", "?"), ma.get("kernel", "?")))
    print("dev:      %s (%s)" % (mb.get("kernel_release", "?"), mb.get("kernel", "?")))
    print()
    print("%-22s %12s %12s %7s %7s  %s" % ("cell", "IOPS base", "IOPS dev", "IOPS", "CPU", "stages that moved"))
    out = {"baseline": ma, "dev": mb, "cells": []}
    bad = 0
    for cell in list(ra) + [c for c in rb if c not in ra]:
        a, b = ra.get(cell), rb.get(cell)
        entry = {"cell": cell}
        if not a or not b or a["status"] != "ok" or b["status"] != "ok":
            why = []
            for side, r in (("baseline", a), ("dev", b)):
                if not r:
                    why.append("%s: missing" % side)
                elif r["status"] != "ok":
                    why.append("%s: %s" % (side, r["why"]))
            entry["error"] = "; ".join(why)
            print("%-22s %s" % (cell, entry["error"]))
            out["cells"].append(entry)
            bad += 1
            continue
        ia, ib = float(a["iops"]), float(b["iops"])
        ca = float(a["cpu_usr_pct"]) + float(a["cpu_sys_pct"])
        cb = float(b["cpu_usr_pct"]) + float(b["cpu_sys_pct"])
        doc, moved = stage_moves(o.nvmetrace, os.path.join(o.baseline, a["recording"]),
                                 os.path.join(o.dev, b["recording"]))
        entry.update({"iops_baseline": ia, "iops_dev": ib, "iops_ratio": ratio(ib, ia),
                      "cpu_baseline_pct": ca, "cpu_dev_pct": cb, "cpu_ratio": ratio(cb, ca),
                      "moved": moved, "compare": doc})
        out["cells"].append(entry)
        fmt = lambda x: "-" if x is None else "%.3f" % x
        desc = ", ".join("%s %s (%s -> %s us)" % (m["stage"], m["moved"], fmt(m["a_us"]), fmt(m["b_us"]))
                         for m in moved) or "none"
        print("%-22s %12.0f %12.0f %7s %7s  %s" % (cell, ia, ib, fmt(entry["iops_ratio"]),
                                                  fmt(entry["cpu_ratio"]), desc))
    if o.json:
        with open(o.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
