#!/usr/bin/env python3
"""Checks a `nvmetrace bench` CSV and its .meta sidecar (Documentation/bench.md).

bench_check.py FILE.csv [--cells N] [--ok N] [--skipped N] [--failed N]
               [--engine block|passthru] [--buf B] [--fixed 0|1] [--fallbacks-zero]
               [--recordings] [--control]
--control: every cell is two rows, the kernel's engine and then spdk_nvme_perf (the control arm)
on the same cell, its busy cores at least one per worker's half (SPDK's workers poll).
Exit 0 when every check holds, 1 with the reasons otherwise.
"""
import argparse
import csv
import json
import os
import sys

COLUMNS = ["cell", "profile", "rep", "engine", "device", "pattern", "size", "qd", "threads",
           "buf", "fixed", "status", "elapsed_s", "ios", "failed", "first_error", "fallbacks",
           "iops", "mib_s", "lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_p999_us",
           "busy_cores", "recording", "note"]
META_KEYS = ["format", "format_version", "date", "kernel_release", "tool_version",
             "tool_git_commit", "module_version", "module_srcversion", "command_line", "device",
             "pool", "cpus_online", "target_cpus", "profile", "columns"]
DEVICE_KEYS = ["path", "engine", "disk", "model", "serial", "subsysnqn", "lba_size",
               "max_hw_sectors_kb", "bytes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--cells", type=int)
    ap.add_argument("--ok", type=int)
    ap.add_argument("--skipped", type=int)
    ap.add_argument("--failed", type=int, default=0)
    ap.add_argument("--engine")
    ap.add_argument("--buf")
    ap.add_argument("--fixed")
    ap.add_argument("--fallbacks-zero", action="store_true")
    ap.add_argument("--recordings", action="store_true")
    ap.add_argument("--control", action="store_true")
    a = ap.parse_args()
    errs = []

    with open(a.csv, newline="") as f:
        rd = csv.reader(f)
        header = next(rd)
        rows = [dict(zip(header, r)) for r in rd]
        if header != COLUMNS:
            errs.append(f"columns {header} != {COLUMNS}")
    meta_path = os.path.splitext(a.csv)[0] + ".meta"
    meta = json.load(open(meta_path))
    for k in META_KEYS:
        if k not in meta:
            errs.append(f"{meta_path}: no key {k}")
    for k in DEVICE_KEYS:
        if k not in meta.get("device", {}):
            errs.append(f"{meta_path}: no device.{k}")
    if meta.get("kernel_release") != os.uname().release:
        errs.append(f"meta kernel_release {meta.get('kernel_release')} != {os.uname().release}")
    if meta.get("columns") != COLUMNS:
        errs.append("meta columns differ from the CSV's")
    if not meta.get("device", {}).get("lba_size", 0) > 0:
        errs.append("meta device.lba_size not > 0")
    for k in ("pool_buf_kb", "pool_nr", "available"):
        if k not in meta.get("pool", {}):
            errs.append(f"meta pool.{k} missing")

    status = [r["status"] for r in rows]
    if a.cells is not None and len(rows) != a.cells:
        errs.append(f"{len(rows)} cells, expected {a.cells}")
    for name, want in (("ok", a.ok), ("skipped", a.skipped), ("failed", a.failed)):
        if want is not None and status.count(name) != want:
            errs.append(f"{status.count(name)} {name} cells, expected {want}")
    if a.control:
        ctl = meta.get("control", {})
        if ctl.get("initiator") != "spdk_nvme_perf" or not ctl.get("trid"):
            errs.append(f"meta control: {ctl}")
        if len(rows) % 2:
            errs.append(f"{len(rows)} rows: not two per cell")
        cell_keys = ("cell", "profile", "rep", "pattern", "size", "qd", "threads")
        for k, c in zip(rows[0::2], rows[1::2]):
            if c["engine"] != "spdk_nvme_perf" or k["engine"] == "spdk_nvme_perf":
                errs.append(f"cell {k['cell']}: engines {k['engine']}, {c['engine']}")
            if any(k[x] != c[x] for x in cell_keys):
                errs.append(f"cell {k['cell']}: the arms ran different cells: {k} / {c}")
            if c["device"] != ctl.get("trid"):
                errs.append(f"cell {c['cell']}: spdk row device {c['device']} != {ctl.get('trid')}")
    for r in rows:
        tag = f"cell {r['cell']} ({r['pattern']} {r['size']} qd{r['qd']} x{r['threads']})"
        spdk = r["engine"] == "spdk_nvme_perf"
        if spdk:
            tag += " spdk_nvme_perf"
        if r["status"] not in ("ok", "failed", "skipped"):
            errs.append(f"{tag}: status {r['status']}")
        if r["status"] == "skipped":
            if not r["note"]:
                errs.append(f"{tag}: skipped without a reason")
            if r["iops"]:
                errs.append(f"{tag}: skipped but has IOPS")
            continue
        if r["status"] == "failed":
            if not r["note"]:
                errs.append(f"{tag}: failed without a reason")
            continue
        ios, iops = int(r["ios"]), float(r["iops"])
        if not (ios > 0 and iops > 0 and float(r["mib_s"]) > 0):
            errs.append(f"{tag}: ios {ios} iops {iops} mib_s {r['mib_s']}")
        if int(r["failed"]) != 0 or r["first_error"]:
            errs.append(f"{tag}: failed {r['failed']} ({r['first_error']})")
        if spdk:
            # no percentiles, fixed buffers or fallbacks in its summary: empty, never 0
            for k in ("lat_p50_us", "lat_p99_us", "lat_p999_us", "fixed", "fallbacks"):
                if r[k] != "":
                    errs.append(f"{tag}: {k} is {r[k]!r}, not empty")
            if r["buf"] != "spdk" or not float(r["lat_mean_us"]) > 0:
                errs.append(f"{tag}: buf {r['buf']} mean latency {r['lat_mean_us']}")
            want = 0.5 * int(r["threads"])
            if not want <= float(r["busy_cores"]) <= meta["cpus_online"] + 0.5:
                errs.append(f"{tag}: busy_cores {r['busy_cores']}, its pollers need >= {want}")
            mbs = float(r["mib_s"])
            if abs(mbs - iops * int(r["size"]) / 2**20) > 0.01 * mbs + 0.02:
                errs.append(f"{tag}: mib_s {r['mib_s']} != iops x size")
            continue
        lat = float(r["lat_p50_us"])
        if not (0 < lat <= float(r["lat_p99_us"]) <= float(r["lat_p999_us"])):
            errs.append(f"{tag}: latency p50 {lat} p99 {r['lat_p99_us']} p99.9 {r['lat_p999_us']}")
        if not float(r["lat_mean_us"]) > 0:
            errs.append(f"{tag}: mean latency {r['lat_mean_us']}")
        if not 0 <= float(r["busy_cores"]) <= meta["cpus_online"] + 0.5:
            errs.append(f"{tag}: busy_cores {r['busy_cores']}")
        el = float(r["elapsed_s"])
        if not (el > 0 and abs(ios / el - iops) <= 0.02 * iops + 1):
            errs.append(f"{tag}: iops {iops} != ios {ios} / elapsed {el}")
        if a.engine and r["engine"] != a.engine:
            errs.append(f"{tag}: engine {r['engine']}")
        if a.buf and r["buf"] != a.buf:
            errs.append(f"{tag}: buf {r['buf']}")
        if a.fixed is not None and r["fixed"] != a.fixed:
            errs.append(f"{tag}: fixed {r['fixed']}")
        fb = int(r["fallbacks"])
        if a.fallbacks_zero and fb != 0:
            errs.append(f"{tag}: {fb} fallbacks")
        if r["fixed"] == "0" and fb != ios:
            errs.append(f"{tag}: unregistered buffers but fallbacks {fb} != ios {ios}")
        if a.recordings:
            p = os.path.join(os.path.dirname(a.csv), r["recording"])
            if not r["recording"] or not os.path.isfile(p):
                errs.append(f"{tag}: no recording ({r['recording']!r})")
    for e in errs:
        print("bench_check:", e, file=sys.stderr)
    print(f"bench_check: {a.csv}: {len(rows)} cells, {status.count('ok')} ok, "
          f"{status.count('skipped')} skipped, {status.count('failed')} failed; "
          f"{len(errs)} problems")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
