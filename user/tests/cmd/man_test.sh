#!/bin/sh
# The man pages build (tools/gen-man, help2man) and each names every option its
# command's --help lists.  Exit 77 (skip) without help2man.
#   man_test.sh path/to/nvmetrace path/to/tools/gen-man OUTDIR
set -u
nvmetrace=$1
genman=$2
out=$3
command -v help2man >/dev/null || { echo "help2man missing (tools/deps installs it)"; exit 77; }
rm -rf "$out"
"$genman" "$nvmetrace" "$out" || { echo "FAIL: tools/gen-man failed"; exit 1; }
fail=0
for page in "$out"/nvmetrace.1 "$out"/nvmetrace-*.1; do
	name=$(basename "$page" .1)
	cmd=${name#nvmetrace}
	cmd=${cmd#-}
	# the page's text, hyphens as plain '-' (groff writes \-)
	text=$(sed 's/\\-/-/g' "$page")
	echo "$text" | grep -q "^\\.TH \"*$(echo "$name" | tr a-z A-Z)" ||
		{ echo "FAIL: $page has no .TH for $name"; fail=1; }
	# every long option of the command's --help (e.g. --exit-code) is on its page
	# shellcheck disable=SC2086
	for o in $("$nvmetrace" $cmd --help | grep -oE '(^|[ ,])--[a-z][a-z-]*' | sed 's/^[ ,]//' | sort -u); do
		echo "$text" | grep -q -- "$o" || { echo "FAIL: $page does not name $o"; fail=1; }
	done
	echo "$text" | grep -qi "^\.SH \"*EXAMPLES" || { echo "FAIL: $page has no Examples"; fail=1; }
done
[ -f "$out/nvmetrace-record.1" ] && [ -f "$out/nvmetrace-compare.1" ] ||
	{ echo "FAIL: no page per subcommand"; fail=1; }
exit $fail
