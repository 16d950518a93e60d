#!/usr/bin/env python3
"""Judge the data races KCSAN reported in a guest's kernel log: which involve nvmetrace.

    kcsan.py DMESG [--out FILE]

A report runs from its "BUG: KCSAN:" line to the "====" line that closes it. It is
nvmetrace's when a frame of either access is in the module (a "[nvmetrace]" frame, or
an nvmetrace function in the title); else both accesses are the kernel's own code (its
own races, which a module that only reads cannot cause). Prints one line per report (its
title and whose it is) and last "kcsan: N reports: K in the kernel's own code, M
nvmetrace's"; with --out, the same into FILE. Exit 0 when none is nvmetrace's, 1 when
one is, 2 when the log cannot be read or a report has no frame to judge it by.
"""
import argparse
import re
import sys

TS = re.compile(r"^\[\s*[0-9.]+\]\s?")
FRAME = re.compile(r"^\s*(?:\? )?([A-Za-z0-9_.$]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?:\s+\[(\S+)\])?")


def reports(lines):
    """Each report as (title, frames): frames are (function, module or None)."""
    out, cur = [], None
    for raw in lines:
        line = TS.sub("", raw.rstrip("\n"))
        if "BUG: KCSAN:" in line:
            if cur:
                out.append(cur)
            cur = (line[line.index("BUG: KCSAN:"):], [])
            continue
        if cur is None:
            continue
        if line.startswith("====="):
            out.append(cur)
            cur = None
            continue
        m = FRAME.match(line)
        if m:
            cur[1].append((m.group(1), m.group(2)))
    if cur:
        out.append(cur)
    return out


def is_ours(title, frames):
    if any(mod == "nvmetrace" for _, mod in frames):
        return True
    # the title names the two functions; a module's are named without their module
    return bool(re.search(r"\bnvmetrace_\w+|\[nvmetrace\]", title))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dmesg")
    ap.add_argument("--out")
    o = ap.parse_args()
    try:
        with open(o.dmesg, errors="replace") as f:
            found = reports(f)
    except OSError as e:
        print(f"kcsan.py: cannot read {o.dmesg}: {e}", file=sys.stderr)
        return 2
    lines, ours, unjudged = [], 0, 0
    for title, frames in found:
        if not frames:
            unjudged += 1
            lines.append(f"no frames to judge by: {title}")
        elif is_ours(title, frames):
            ours += 1
            lines.append(f"nvmetrace's: {title}")
        else:
            lines.append(f"the kernel's own: {title}")
    n = len(found)
    lines.append(f"kcsan: {n} reports: {n - ours - unjudged} in the kernel's own code, {ours} nvmetrace's"
                 + (f", {unjudged} not judged" if unjudged else ""))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if o.out:
        with open(o.out, "w") as f:
            f.write(text)
    return 2 if unjudged else 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
