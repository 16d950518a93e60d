#!/bin/sh
# report --html in a real browser: a synthetic joined recording
# (synth_recording), its page and its `report --json`, loaded by Debian's
# chromium through playwright-core (html_browser_check.cjs), which fails on a
# console error, a request for anything outside the page, a blank plot, or a
# figure on the page that is not the JSON's.  The screenshot is OUTDIR/page.png.
# Exit 77 (skip) without chromium or the npm packages, unless CI is set.
#   html_browser_test.sh path/to/nvmetrace path/to/synth_recording path/to/tools/html-deps OUTDIR
set -u
nvmetrace=$1
synth=$2
html_deps=$3
out=$4
here=$(dirname "$0")
. "$here/../browser_env.sh"
browser_env "$html_deps"

rm -rf "$out"
mkdir -p "$out"
"$synth" "$out/host.ntr" "$out/target.ntr" 20000 || { echo "FAIL: synth_recording"; exit 1; }
"$nvmetrace" report --json "$out/host.ntr" "$out/target.ntr" >"$out/report.json" ||
	{ echo "FAIL: report --json"; exit 1; }
if ! "$nvmetrace" report --html "$out/report.html" "$out/host.ntr" "$out/target.ntr"; then
	# a build without the plotting library cannot make the page
	"$nvmetrace" report --html "$out/x.html" "$out/host.ntr" 2>&1 | grep -q "tools/html-deps" &&
		missing "nvmetrace was built without the plotting library"
	echo "FAIL: report --html"
	exit 1
fi
node "$here/html_browser_check.cjs" "$modules" "$chromium" "$out/report.html" "$out/report.json" \
	"$out/page.png" "$out/profile"
