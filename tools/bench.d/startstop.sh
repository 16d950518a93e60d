#!/bin/bash
# tools/bench.d/startstop.sh — how long START and STOP take, as a lane scenario:
#   tools/lane run --kernel all tools/bench.d/startstop.sh
# kprobe events on nvmetrace_hooks_start/stop (entry and return) give the kernel side;
# also the wall time of `nvmetrace probe` and of the recorder's start and stop. Prints figures,
# asserts nothing (a measurement, not a test).
# lane-timeout: 600
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN
T=/sys/kernel/tracing
nvmet_tcp_setup
dev=$(nvme_tcp_connect)
insmod "$NVMETRACE_KO" || fail "insmod failed"
echo 'p:nts nvmetrace:nvmetrace_hooks_start' >>$T/kprobe_events
echo 'r:ntse nvmetrace:nvmetrace_hooks_start' >>$T/kprobe_events
echo 'p:ntp nvmetrace:nvmetrace_hooks_stop' >>$T/kprobe_events
echo 'r:ntpe nvmetrace:nvmetrace_hooks_stop' >>$T/kprobe_events
echo 1 >$T/events/kprobes/enable
now() { cut -d' ' -f1 /proc/uptime; }
for i in 1 2 3; do
	t0=$(date +%s.%N)
	"$NT" probe -r host -r target -t tcp >"$RESULTS/probe-$i.out" 2>&1 || { cat "$RESULTS/probe-$i.out"; fail probe; }
	t1=$(date +%s.%N)
	echo "probe-wall $i $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')"
done
for i in 1 2 3; do
	t0=$(date +%s.%N)
	"$NT" record -r host -r target -s 1 -o "$RESULTS/rec.ntr" >"$RESULTS/record-$i.out" 2>&1 &
	REC=$!
	wait_for 200 grep -q 'profiling as' "$RESULTS/record-$i.out" || { cat "$RESULTS/record-$i.out"; fail "record did not start"; }
	t1=$(date +%s.%N)
	sleep 1
	t2=$(date +%s.%N)
	kill -INT $REC
	wait $REC || { cat "$RESULTS/record-$i.out"; fail "record failed"; }
	t3=$(date +%s.%N)
	echo "record-wall $i start $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}') stop $(awk -v a=$t2 -v b=$t3 'BEGIN{printf "%.2f", b-a}')"
done
echo 0 >$T/events/kprobes/enable
cp $T/trace "$RESULTS/trace.txt"
# pair entry/return timestamps
grep -E ' (nts|ntse|ntp|ntpe):' $T/trace | awk '
	{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = substr($i, 1, length($i) - 1); ev = $(i + 1) } }
	ev == "nts:" { s = ts } ev == "ntse:" { printf "kernel START %.3f s\n", ts - s }
	ev == "ntp:" { p = ts } ev == "ntpe:" { printf "kernel STOP  %.3f s\n", ts - p }'
grep -c . $T/enabled_functions || true
cat "$RESULTS/probe-1.out"
rmmod nvmetrace
nvme_disconnect_all
nvmet_teardown
log done
