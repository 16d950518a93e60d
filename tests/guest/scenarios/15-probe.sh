#!/bin/bash
# 15-probe: `nvmetrace probe` tells the truth: with nvme-core not loaded its hooks wait for
# it; with the target set up every target hook attaches (nvmet's layout from BTF), the
# function-entry ones through ftrace (the do_io_getevents and pread/pwrite kretprobes as kprobes); a hook
# on a function that does not exist (module parameter probe_test_symbol) is reported absent
# and probe fails; nothing stays attached afterwards. The nvme-tcp send hooks are the
# exact ones where the module has them, else their stand-in (inline / spare states). Without
# CAP_SYS_ADMIN probe cannot START (it says so); status still works. nvme-core's and nvmet's
# tracepoints are checked against BTF (btf_trace_*) for the arguments the probes take. A
# module loaded with bench_hooks attaches only the hooks named, and probe says so and fails; one
# loaded with bench_nop attaches every hook with a handler that does nothing, which runs under
# fio; probe fails, record warns.
# lane-timeout: 150
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN

insmod "$NVMETRACE_KO" || fail "insmod failed"
modprobe -r nvme_tcp nvme_fabrics nvme_core 2>/dev/null || true
$NT probe -r host | tee "$RESULTS/host-no-nvme.txt" || fail "probe -r host failed without nvme-core"
grep -qE '^  ok +block_rq_issue' "$RESULTS/host-no-nvme.txt" || fail "block_rq_issue not ok"
grep -qE '^  wait +nvme_setup_cmd' "$RESULTS/host-no-nvme.txt" || fail "nvme_setup_cmd should wait for nvme-core"
grep -q 'nvme_core tracepoints: not checked against BTF (nvme_core not loaded)' \
	"$RESULTS/host-no-nvme.txt" || fail "no word that nvme-core's tracepoints could not be checked"

nvmet_tcp_setup
dev=$(nvme_tcp_connect)
$NT probe -r host -r target | tee "$RESULTS/both.txt" || fail "probe failed with target and host up"
for h in nvme_setup_cmd nvme_complete_rq nvmet_req_init nvmet_bdev_execute_rw nvmet_bio_done \
	nvmet_req_complete; do
	grep -qE "^  ok +$h " "$RESULTS/both.txt" || fail "$h not attached"
done
grep -q 'nvmet layout from BTF: ok' "$RESULTS/both.txt" || fail "no nvmet layout"
# the probes' prototypes against the tracepoints' own in this kernel's BTF (btf_trace_*)
grep -q 'nvme_core tracepoints: 2 checked against BTF' "$RESULTS/both.txt" ||
	fail "nvme-core's tracepoints not checked against BTF"
grep -q 'nvmet tracepoints: 2 checked against BTF' "$RESULTS/both.txt" ||
	fail "nvmet's tracepoints not checked against BTF"
# the nvme-tcp send hooks: the exact ones where nvme_tcp has them as functions, else
# inlined, with their stand-in nvme_tcp_try_send attached (spare when it is not needed)
send=$(tcp_send_hooks)
log "nvme-tcp send hooks on this kernel: $send"
for h in nvme_tcp_try_send_cmd_pdu nvme_tcp_try_send_data_pdu nvme_tcp_try_send; do
	case " $send " in
	*" $h "*) want=ok ;;
	*) [ $h = nvme_tcp_try_send ] && want=spare || want=inline ;;
	esac
	grep -qE "^  $want +$h " "$RESULTS/both.txt" || fail "$h is not reported '$want'"
done
# function-entry hooks say how they attached: through ftrace, where the function is ftrace-able
for h in nvmet_bdev_execute_rw nvmet_bio_done blkdev_read_iter aio_complete_rw; do
	grep -qE "^  ok +$h +ftrace" "$RESULTS/both.txt" || fail "$h not reported attached through ftrace"
done
grep -qE '^  ok +do_io_getevents +kprobe' "$RESULTS/both.txt" || fail "do_io_getevents (a kretprobe) not reported as a kprobe"
for h in pread64 pwrite64 preadv pwritev preadv2 pwritev2; do
	grep -qE "^  ok +__x64_sys_$h +kprobe" "$RESULTS/both.txt" ||
		fail "__x64_sys_$h (a kretprobe) not reported as an attached kprobe"
done
grep -q '  load: ok' "$RESULTS/both.txt" || fail "load not ok"
# START needs CAP_SYS_ADMIN, as /dev/nvmetrace does; reading the status does not
if capsh --drop=cap_sys_admin -- -c "$NT probe -r host" >"$RESULTS/no-sys-admin.txt" 2>&1; then
	cat "$RESULTS/no-sys-admin.txt"; fail "probe attached hooks without CAP_SYS_ADMIN"
fi
grep -q 'CAP_SYS_ADMIN' "$RESULTS/no-sys-admin.txt" ||
	{ cat "$RESULTS/no-sys-admin.txt"; fail "no word of CAP_SYS_ADMIN when it is missing"; }
capsh --drop=cap_sys_admin -- -c "$NT status --json" | jq -e '.state == "idle"' >/dev/null ||
	fail "status without CAP_SYS_ADMIN failed"
$NT status --json | jq -e '.state == "idle"' >/dev/null || fail "probe left the module recording"
rmmod nvmetrace || fail "rmmod failed"

# a module loaded for a benchmark of single hook sites (bench_hooks): only the named hooks
# attach, the others are said to be left off, and probe fails (a recording would miss them)
insmod "$NVMETRACE_KO" bench_hooks=block_rq_issue,nvmet_req_init || fail "insmod with bench_hooks failed"
if $NT probe -r host -r target >"$RESULTS/bench-hooks.txt"; then
	cat "$RESULTS/bench-hooks.txt"; fail "probe passed with all but two hooks left off"
fi
cat "$RESULTS/bench-hooks.txt"
for h in block_rq_issue nvmet_req_init; do
	grep -qE "^  ok +$h " "$RESULTS/bench-hooks.txt" || fail "$h, named in bench_hooks, not attached"
done
for h in block_rq_complete nvme_setup_cmd nvmet_req_complete nvmet_bio_done; do
	grep -qE "^  off +$h .*left off: the module was loaded with bench_hooks=block_rq_issue,nvmet_req_init" \
		"$RESULTS/bench-hooks.txt" || fail "$h not said to be left off by bench_hooks"
done
[ "$(grep -cE '^  ok ' "$RESULTS/bench-hooks.txt")" = 2 ] || fail "more than the two named hooks attached"
rmmod nvmetrace || fail "rmmod failed"

# a module loaded for a benchmark of the attach mechanism (bench_nop): every hook attaches with
# a handler that does nothing; probe says so and fails, record warns and its recording holds
# nothing, and the no-op handlers run under I/O through every kind of hook (tracepoints, the
# ftrace ops, the do_io_getevents kretprobe) without harm
insmod "$NVMETRACE_KO" bench_nop=1 || fail "insmod with bench_nop failed"
if $NT probe -r host -r target >"$RESULTS/bench-nop.txt"; then
	cat "$RESULTS/bench-nop.txt"; fail "probe passed with hooks that record nothing"
fi
cat "$RESULTS/bench-nop.txt"
grep -q 'the module was loaded with bench_nop: its hooks record nothing' "$RESULTS/bench-nop.txt" ||
	fail "probe did not say the module was loaded with bench_nop"
for h in block_rq_issue nvmet_req_init blkdev_read_iter do_io_getevents; do
	grep -qE "^  ok +$h " "$RESULTS/bench-nop.txt" || fail "$h not attached with bench_nop"
done
$NT record -r host -r target -s 1 -o /tmp/nop.ntr >/tmp/nop.out 2>&1 &
rec=$!
recorder_wait /tmp/nop.out bench_nop
run_fio nop --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randrw --bs=4k --iodepth=4 \
	--size=64m --io_size=8m || fail "fio with bench_nop hooks failed"
kill -INT $rec
wait $rec || { cat /tmp/nop.out; fail "record with bench_nop failed"; }
cp /tmp/nop.out "$RESULTS/nop-record.out"
grep -q 'loaded with bench_nop: its hooks attach with handlers that do nothing' /tmp/nop.out ||
	{ cat /tmp/nop.out; fail "record did not warn of bench_nop"; }
[ "$($NT status --json | jq .records)" = 0 ] || fail "the bench_nop module wrote records"
rmmod nvmetrace || fail "rmmod failed"

insmod "$NVMETRACE_KO" probe_test_symbol=nvmetrace_no_such_function || fail "insmod with probe_test_symbol failed"
if $NT probe -r host >"$RESULTS/absent.txt"; then
	cat "$RESULTS/absent.txt"; fail "probe passed with a hook that cannot attach"
fi
cat "$RESULTS/absent.txt"
grep -qE '^  absent +nvmetrace_no_such_function +kprobe' "$RESULTS/absent.txt" ||
	fail "the missing function is not reported absent"
grep -q '  load: FAILED' "$RESULTS/absent.txt" || fail "load not reported as failed"
rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
