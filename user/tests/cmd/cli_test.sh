#!/bin/sh
# The command line's contract: exit 0 on success, 1 with one line on stderr on
# error, 2 on a usage error (compare --exit-code: 1 moved, 3 error).  Works with
# and without the module loaded.
#   cli_test.sh path/to/nvmetrace expected-version
set -u
nvmetrace=$1
version=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# run <expected exit> <args...>: stdout in $tmp/out, stderr in $tmp/err
run() {
	want=$1
	shift
	"$nvmetrace" "$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if [ "$got" != "$want" ]; then
		echo "FAIL: nvmetrace $* exited $got, expected $want"
		sed 's/^/  stderr: /' "$tmp/err"
		fail=1
		return 1
	fi
	return 0
}

# stderr is exactly one line starting with "nvmetrace: "
one_error_line() {
	if [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -q '^nvmetrace: ' "$tmp/err"; then
		echo "FAIL: nvmetrace $* did not print one error line:"
		sed 's/^/  stderr: /' "$tmp/err"
		fail=1
	fi
}

run 0 --version
if [ "$(head -n1 "$tmp/out")" != "nvmetrace $version" ]; then
	echo "FAIL: --version first line: $(head -n1 "$tmp/out")"
	fail=1
fi
if [ "$(wc -l <"$tmp/out")" != 2 ] || ! grep -q '^module ' "$tmp/out"; then
	echo "FAIL: --version second line is not about the module:"
	cat "$tmp/out"
	fail=1
fi

run 0 --help
run 2 && one_error_line "(no arguments)"
run 2 no-such-command && one_error_line no-such-command
run 2 status --no-such-option && one_error_line status --no-such-option

# compare: two runs, named one way or the other, and files that exist
run 1 compare && one_error_line compare
grep -q 'name both runs' "$tmp/err" || { echo "FAIL: compare without runs: $(cat "$tmp/err")"; fail=1; }
run 1 compare a.ntr && one_error_line compare a.ntr
run 1 compare a.ntr b.ntr --a c.ntr && one_error_line compare a.ntr b.ntr --a c.ntr
grep -q 'give two recordings' "$tmp/err" || { echo "FAIL: compare mixed: $(cat "$tmp/err")"; fail=1; }
run 1 compare "$tmp/none-a.ntr" "$tmp/none-b.ntr" && one_error_line compare missing files
run 1 compare --confidence 2 --a x --b y && one_error_line compare --confidence 2
# compare --exit-code: 1 means "moved", so errors are 3 and usage errors stay 2
run 3 compare --exit-code "$tmp/none-a.ntr" "$tmp/none-b.ntr" && one_error_line compare --exit-code missing
run 3 compare --exit-code && one_error_line compare --exit-code
run 3 compare --exit-code --confidence 2 --a x --b y && one_error_line compare --exit-code --confidence 2
run 2 compare --exit-code --no-such-option && one_error_line compare --exit-code --no-such-option

# record -- CMD: a command that cannot run is said before anything starts,
# and leaves no recording (nor moves an earlier one)
run 1 record -r host -o "$tmp/x.ntr" -- "$tmp/no-such-program" --its-option &&
	one_error_line record -- missing program
grep -q "cannot run $tmp/no-such-program: no such file" "$tmp/err" ||
	{ echo "FAIL: record -- missing program: $(cat "$tmp/err")"; fail=1; }
[ -e "$tmp/x.ntr" ] && { echo "FAIL: record -- missing program left $tmp/x.ntr"; fail=1; }
echo data >"$tmp/not-a-program"
echo earlier >"$tmp/nvmetrace.ntr"
(cd "$tmp" && "$nvmetrace" record -r host -- ./not-a-program >out 2>err)
got=$?
if [ "$got" != 1 ] || ! grep -q 'not executable' "$tmp/err" || [ -e "$tmp/nvmetrace.ntr.old" ] ||
	[ "$(cat "$tmp/nvmetrace.ntr")" != earlier ]; then
	echo "FAIL: record -- not executable: exit $got, $(cat "$tmp/err")"
	fail=1
fi
run 1 record -r host -- no-such-program-nvmetrace && one_error_line record -- not in PATH
grep -q 'not found in PATH' "$tmp/err" || { echo "FAIL: record -- not in PATH: $(cat "$tmp/err")"; fail=1; }
run 2 record -r host -- && one_error_line record -r host --
grep -q 'no command after --' "$tmp/err" || { echo "FAIL: record --: $(cat "$tmp/err")"; fail=1; }
# record of an SPDK side: what cannot be recorded is said before anything starts
run 1 record --spdk-target 999999999 -o "$tmp/x.ntr" && one_error_line record --spdk-target no pid
grep -q 'no process 999999999 is running' "$tmp/err" ||
	{ echo "FAIL: record --spdk-target no pid: $(cat "$tmp/err")"; fail=1; }
run 1 record --spdk-target 1 -r host -o "$tmp/x.ntr" && one_error_line record --spdk-target -r host
grep -q "records SPDK's target alone" "$tmp/err" ||
	{ echo "FAIL: record --spdk-target -r host: $(cat "$tmp/err")"; fail=1; }
run 1 record --spdk-host 999999999 -t rdma -o "$tmp/x.ntr" && one_error_line record --spdk-host -t rdma
grep -q "no process 999999999 is running" "$tmp/err" ||
	{ echo "FAIL: record --spdk-host -t rdma: $(cat "$tmp/err")"; fail=1; }
# over RDMA a program that is not on SPDK's driver: which function is missing, said before it runs
run 1 record --spdk-host /bin/true -t rdma -o "$tmp/x.ntr" -- /bin/true &&
	one_error_line record --spdk-host -t rdma -- not SPDK
grep -q "spdk_rdma_provider_qp_queue_send_wrs is not in it or the libraries it loads" "$tmp/err" ||
	{ echo "FAIL: record --spdk-host -t rdma -- /bin/true: $(cat "$tmp/err")"; fail=1; }
run 1 record --spdk-target 1 -o "$tmp/x.ntr" -- true && one_error_line record --spdk-target -- CMD
grep -q "start SPDK's target yourself" "$tmp/err" ||
	{ echo "FAIL: record --spdk-target -- CMD: $(cat "$tmp/err")"; fail=1; }
run 1 record --spdk-host /bin/true -o "$tmp/x.ntr" -- /bin/false && one_error_line record --spdk-host X -- Y
grep -q "with a command, --spdk-host names the same program" "$tmp/err" ||
	{ echo "FAIL: record --spdk-host X -- Y: $(cat "$tmp/err")"; fail=1; }
run 1 record --spdk-host /bin/true -o "$tmp/x.ntr" -- /bin/true && one_error_line record --spdk-host -- exits
grep -q "exited with status 0 before its trace ring was set up" "$tmp/err" ||
	{ echo "FAIL: record --spdk-host -- an app without a ring: $(cat "$tmp/err")"; fail=1; }
[ -e "$tmp/x.ntr" ] && { echo "FAIL: record of an SPDK side that failed left $tmp/x.ntr"; fail=1; }

# record's output: a folder is refused before anything moves
mkdir "$tmp/dir"
run 1 record -r host -o "$tmp/dir" && one_error_line record -o folder
grep -q 'a folder; name a file in it' "$tmp/err" || { echo "FAIL: record -o folder: $(cat "$tmp/err")"; fail=1; }

# bench takes fio's option names beside its own: parsed (the device is what fails)
run 1 bench /dev/nvmetrace-none --rw randread --bs 4k --iodepth 2 --numjobs 1 --runtime 1 &&
	one_error_line bench fio-named options
grep -q 'no such device' "$tmp/err" || { echo "FAIL: bench fio names: $(cat "$tmp/err")"; fail=1; }
run 0 bench --help
for o in --bs --iodepth --numjobs --runtime --rw -b -q -j -d -p; do
	grep -q -- "$o" "$tmp/out" || { echo "FAIL: bench --help does not name $o"; fail=1; }
done

if [ -e /sys/module/nvmetrace ]; then
	run 0 status && grep -q '^state ' "$tmp/out" || { echo "FAIL: status table"; fail=1; }
	run 0 status --json && grep -q '"state"' "$tmp/out" || { echo "FAIL: status --json"; fail=1; }
else
	for args in status "status --json"; do
		# shellcheck disable=SC2086
		run 1 $args && one_error_line $args
		if ! grep -qx 'nvmetrace: nvmetrace module not loaded: modprobe nvmetrace' "$tmp/err"; then
			echo "FAIL: nvmetrace $args without the module: $(cat "$tmp/err")"
			fail=1
		fi
	done
fi

exit $fail
