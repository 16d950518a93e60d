#!/bin/bash
# tools/retprobe-cost.d/guest.sh KO HOOKLOOP CALLS: inside the icount guest, each mode of
# retprobe_cost.ko on do_io_getevents, io_getevents(0, ...) called CALLS times by hookloop;
# prints "mode N: ns_per_call" (mode 0: no module). The least of 5 loops (hookloop).
set -euo pipefail
ko=$1 hl=$2 calls=$3
for m in 0 1 2 3 4 5; do
	if [ "$m" != 0 ] && ! insmod "$ko" mode="$m" func=do_io_getevents; then
		echo "mode $m: insmod failed"
		continue
	fi
	read -r _ _ ns < <("$hl" io_getevents "$calls")
	echo "mode $m: $ns"
	[ "$m" = 0 ] || rmmod retprobe_cost
done
