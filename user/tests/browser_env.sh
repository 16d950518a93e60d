# Sourced by the browser tests (report/html_browser_test.sh,
# cmd/trace_browser_test.sh): Debian's chromium, node and the npm packages of
# tools/html-deps, or exit 77 (skip) without them, unless CI is set, where
# that fails.  Sets chromium and modules (the packages' node_modules).
#   browser_env path/to/tools/html-deps
missing() {
	if [ -n "${CI:-}" ]; then echo "FAIL: $1 (CI is set: the browser test must run)"; exit 1; fi
	echo "SKIP: $1"
	exit 77
}
browser_env() {
	chromium=${CHROMIUM:-/usr/bin/chromium}
	[ -x "$chromium" ] || missing "no $chromium (apt-get install chromium, or tools/deps)"
	command -v node >/dev/null || missing "no node (tools/deps)"
	modules=$("$1" --path) || missing "the npm packages are not installed (tools/html-deps)"
}
