#!/usr/bin/env python3
"""Judge kmemleak's unreferenced objects: whose are they?

    kmemleak.py MODULES KMEMLEAK KNOWN [--expect ID] [--release R]

MODULES is /proc/modules as it was while the scenario's modules were loaded
(before the teardown unloaded them), KMEMLEAK the contents of
/sys/kernel/debug/kmemleak after the teardown's scan, KNOWN the known kernel
leaks (tests/guest/kernel-leaks), R the kernel's release (default: this
machine's).

A module unloaded before the scan leaves its frames in a backtrace as bare
addresses; they are put back to their module by the address ranges of
MODULES.  An object is nvmetrace's when a frame of its backtrace is
nvmetrace's; it is a known kernel leak when its frames and first bytes match
an entry of KNOWN; anything else is unknown.

Prints one line per object and a last line
    kmemleak: N objects: K known kernel leaks, U unknown, M nvmetrace's
Exit status 0 when every object is a known kernel leak (and, with --expect
ID, there is at least one of ID: a control that shows the kernel leaks
without nvmetrace); 1 otherwise; 2 on unreadable input.
"""
import re
import sys

HEX_ADDR = re.compile(r"^0x([0-9a-f]{16})$")


def load_modules(path):
    """[(start, end, name)] from /proc/modules (name size refs deps state addr)."""
    mods = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 6 or not p[5].startswith("0x"):
                continue
            start, size = int(p[5], 16), int(p[1])
            if start:
                mods.append((start, start + size, p[0]))
    return mods


def module_of(addr, mods):
    for start, end, name in mods:
        if start <= addr < end:
            return name
    return None


def parse_objects(text):
    """Each object: address, size, comm, first bytes (text), frames."""
    objs = []
    cur = None
    section = None
    for line in text.splitlines():
        m = re.match(r"^unreferenced object (0x[0-9a-f]+) \(size (\d+)\):", line)
        if m:
            cur = {"addr": m.group(1), "size": int(m.group(2)), "comm": "", "bytes": b"",
                   "frames": []}
            objs.append(cur)
            section = None
            continue
        if cur is None:
            continue
        s = line.strip()
        m = re.match(r'^comm "([^"]*)"', s)
        if m:
            cur["comm"] = m.group(1)
        elif s.startswith("hex dump"):
            section = "hex"
        elif s.startswith("backtrace"):
            section = "bt"
        elif section == "hex" and re.match(r"^([0-9a-f]{2} )+", s):
            cur["bytes"] += bytes(int(x, 16) for x in re.findall(r"\b[0-9a-f]{2}\b", s[:48]))
        elif section == "bt" and s:
            cur["frames"].append(s)
    return objs


def frame_names(frames, mods):
    """Each frame as 'func [module]', 'func' (built in) or '[module]' (an unloaded
    module's bare address), or '?' (an address in none of MODULES)."""
    out = []
    for fr in frames:
        m = HEX_ADDR.match(fr)
        if m:
            mod = module_of(int(m.group(1), 16), mods)
            out.append("[%s]" % mod if mod else "?")
            continue
        m = re.match(r"^\[<[0-9a-f]+>\] (.*)$", fr)  # older kernels print the address first
        fr = m.group(1) if m else fr
        m = re.match(r"^([A-Za-z0-9_.]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[(\S+)\])?$", fr)
        if m:
            out.append("%s [%s]" % (m.group(1), m.group(2)) if m.group(2) else m.group(1))
        else:
            out.append(fr)
    return out


def load_known(path):
    """Entries: id, release pattern, comm pattern, first-bytes pattern, a frames
    pattern (matched against the frames joined by ' < '), what it is."""
    known = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            p = [x.strip() for x in line.split("|")]
            if len(p) != 6:
                raise ValueError("%s:%d: 6 fields separated by | expected" % (path, n))
            known.append({"id": p[0], "release": re.compile(p[1]), "comm": re.compile(p[2]),
                          "bytes": re.compile(p[3].encode()), "frames": re.compile(p[4]),
                          "what": p[5]})
    return known


def release():
    try:
        with open("/proc/sys/kernel/osrelease") as f:
            return f.read().strip()
    except OSError:
        return ""


def main(argv):
    args = argv[1:]
    opts = {"--expect": None, "--release": None}
    for o in opts:
        if o in args:
            i = args.index(o)
            if i + 1 >= len(args):
                print("kmemleak.py: %s needs a value" % o, file=sys.stderr)
                return 2
            opts[o] = args[i + 1]
            del args[i:i + 2]
    expect = opts["--expect"]
    if len(args) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        mods = load_modules(args[0])
        with open(args[1]) as f:
            objs = parse_objects(f.read())
        known = load_known(args[2])
    except (OSError, ValueError) as e:
        print("kmemleak.py: %s" % e, file=sys.stderr)
        return 2
    if not mods:
        print("kmemleak.py: %s lists no module address (read as root, kptr_restrict < 2)"
              % args[0], file=sys.stderr)
        return 2
    rel = opts["--release"] or release()
    n_known = n_unknown = n_ours = 0
    seen = set()
    for o in objs:
        names = frame_names(o["frames"], mods)
        chain = " < ".join(names)
        ours = any("[nvmetrace]" in x for x in names)
        verdict = None
        if ours:
            n_ours += 1
            verdict = "nvmetrace's"
        else:
            for k in known:
                if (k["release"].search(rel) and k["comm"].search(o["comm"])
                        and k["bytes"].search(o["bytes"]) and k["frames"].search(chain)):
                    verdict = "known kernel leak %s (%s)" % (k["id"], k["what"])
                    seen.add(k["id"])
                    n_known += 1
                    break
            if verdict is None:
                n_unknown += 1
                verdict = "UNKNOWN"
        print("%s size %d comm %s: %s\n    %s" % (o["addr"], o["size"], o["comm"], verdict, chain))
    print("kmemleak: %d objects: %d known kernel leaks, %d unknown, %d nvmetrace's"
          % (len(objs), n_known, n_unknown, n_ours))
    if n_unknown or n_ours:
        return 1
    if expect and expect not in seen:
        print("kmemleak: no leak %s: the kernel (%s) no longer shows it; take its entry out of "
              "%s" % (expect, rel, args[2]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
