#!/bin/sh
# export's trace in a real trace viewer: a real two-sided recording (the
# corpus's nvme-tcp host and target pair, recorded in a guest), joined by
# `nvmetrace export`, loaded into speedscope by Debian's chromium through
# playwright-core (trace_browser_check.cjs), which fails on a console error or
# warning, a request for anything but files, a blank timeline, or a viewer
# model that is not the file's.  The screenshot is OUTDIR/trace.png.
# Exit 77 (skip) without chromium or the npm packages, unless CI is set.
#   trace_browser_test.sh path/to/nvmetrace path/to/fuzz/corpus path/to/tools/html-deps OUTDIR
set -u
nvmetrace=$1
corpus=$2
html_deps=$3
out=$4
here=$(dirname "$0")
. "$here/../browser_env.sh"
browser_env "$html_deps"
[ -f "$modules/speedscope/dist/release/index.html" ] ||
	missing "no speedscope in $modules (tools/html-deps)"

rm -rf "$out"
mkdir -p "$out"
"$nvmetrace" export -o "$out/pair.trace.json" "$corpus/pair-host.ntr" "$corpus/pair-target.ntr" ||
	{ echo "FAIL: export"; exit 1; }
# both sides, joined: the host's commands with their target parts
grep -q '"joined":true' "$out/pair.trace.json" && grep -q '"command.target"' "$out/pair.trace.json" ||
	{ echo "FAIL: the pair's trace is not joined"; exit 1; }
node "$here/trace_browser_check.cjs" "$modules" "$chromium" "$out/pair.trace.json" \
	"$out/trace.png" "$out/profile"
