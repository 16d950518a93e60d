#!/bin/bash
# 60-pair: host and target on two guests (on the 6.1 line: host 6.1, target 6.12; on the
# 6.12 line the other way round), linked by a virtio-net NIC; each records on its own
# and the host joins the two recordings (report HOST TARGET), over nvme-tcp and nvme-rdma
# (soft-RoCE on the NIC). The target starts recording before the host and stops after it.
# Checks (60-pair.check, on the lane's machine over the two guests' recordings, with
# tests/guest/pair_check.py): 100 % of the host's commands matched at 1-of-1 and
# 1-of-100 (whose reads are half at LBAs the predicate picks, half not), the computed
# network >= 0 for every one, the joined end to end equal to the
# host's own; and `compare` of an idle drive (A) against the same drive under a competing
# fio on the target (B) flags storage as grown and network not as grown.
# lane-pair: host=line target=other
# lane-timeout: 420
. "$NVMETRACE_SRC/tests/guest/lib.sh"
. "$NVMETRACE_SRC/tests/guest/lib-pair.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN
# one tag, 5 ms per I/O: a competing job on the target makes storage wait several times
# longer, and costs the target little CPU (200 I/Os per second at most). The job is 4
# threads of one read each: one thread with many reads in flight would sleep in io_submit
# for the one tag, leaving nvmet's read behind at most one other.
NULL_BLK=(irqmode=2 completion_nsec=5000000 hw_queue_depth=1 submit_queues=1)
# phase transport sample host-iodepth busy
PHASES=("tcp-s1 tcp 1 1 no" "tcp-s100 tcp 100 4 no" "tcp-busy tcp 1 1 yes"
	"rdma-s1 rdma 1 1 no" "rdma-s100 rdma 100 4 no")
insmod "$NVMETRACE_KO" || fail "insmod failed"

target_phase() { # NAME SAMPLE BUSY
	local ph=$1 s=$2 busy=$3 rec
	"$NT" record -r target -s "$s" -o "$PAIR/$ph-target.ntr" >"$RESULTS/$ph-record.out" 2>&1 &
	rec=$!
	recorder_wait "$RESULTS/$ph-record.out" "$ph: target"
	if [ "$busy" = yes ]; then
		run_fio_bg "$ph-competing" --filename=/dev/nullb0 --ioengine=libaio --direct=1 \
			--rw=randread --bs=4k --iodepth=1 --numjobs=4 --group_reporting \
			--time_based --runtime=60
		io_flowing nullb0 60 ||
			fail "$ph: the competing fio did no I/O on /dev/nullb0: $(tail -n 5 "$RESULTS/$ph-competing.log")"
	fi
	pair_signal "ready-$ph"
	pair_wait "done-$ph" 120
	[ "$busy" = yes ] && fio_stop
	kill -INT $rec
	wait $rec || { cat "$RESULTS/$ph-record.out"; fail "$ph: target record failed"; }
	cat "$RESULTS/$ph-record.out"
	pair_signal "stopped-$ph"
}

host_phase() { # NAME SAMPLE IODEPTH DEV
	local ph=$1 s=$2 qd=$3 dev=$4 rec
	pair_wait "ready-$ph" 120
	"$NT" record -r host -s "$s" -o "$PAIR/$ph-host.ntr" >"$RESULTS/$ph-record.out" 2>&1 &
	rec=$!
	recorder_wait "$RESULTS/$ph-record.out" "$ph: host"
	if [ "$s" = 1 ]; then
		# a count of I/Os, not a time: compare needs enough commands on each side to tell a
		# moved stage from noise, and a loaded emulator may do 50 I/Os in 3 s (z 2.98 against
		# 3.29 for the storage stage then; 200 give about twice the z); 60 s at most
		run_fio "$ph" --filename="/dev/$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
			--iodepth="$qd" --size=64m --number_ios=200 --runtime=60 || fail "$ph: fio failed"
	else
		# half the reads at LBAs the 1-of-N predicate picks: sampled commands even when
		# the emulated guests do few I/Os per second
		python3 "$NVMETRACE_SRC/tests/guest/pair_check.py" iolog "/dev/$dev" 120 "$s" 0 \
			>"$RESULTS/$ph.iolog"
		run_fio "$ph" --ioengine=libaio --direct=1 --iodepth="$qd" \
			--read_iolog="$RESULTS/$ph.iolog" --replay_no_stall=1 || fail "$ph: fio failed"
	fi
	kill -INT $rec
	wait $rec || { cat "$RESULTS/$ph-record.out"; fail "$ph: host record failed"; }
	pair_signal "done-$ph"
	pair_wait "stopped-$ph" 60
	echo "$ph" >>"$RESULTS/phases"
}

if [ "$PAIR_ROLE" = target ]; then
	pair_target_setup tcp "${NULL_BLK[@]}"
	tr=tcp
	for p in "${PHASES[@]}"; do
		read -r ph t s qd busy <<<"$p"
		if [ "$t" != "$tr" ]; then
			pair_wait "switch-$t" 60
			pair_rdma_link
			need_module nvmet_rdma
			rm "$NVMET_CFG/ports/1/subsystems/$NVMET_NQN"
			echo "$t" >"$NVMET_CFG/ports/1/addr_trtype"
			ln -s "$NVMET_CFG/subsystems/$NVMET_NQN" "$NVMET_CFG/ports/1/subsystems/$NVMET_NQN" ||
				fail "nvmet: cannot enable the $t port"
			tr=$t
		fi
		target_phase "$ph" "$s" "$busy"
	done
	pair_wait finished 120
	rmmod nvmetrace || fail "rmmod failed"
	pair_target_teardown
	rdma link delete rxe0 2>/dev/null || true
else
	tr="" dev=""
	for p in "${PHASES[@]}"; do
		read -r ph t s qd busy <<<"$p"
		if [ "$t" != "$tr" ]; then
			if [ -n "$tr" ]; then
				nvme_disconnect_all
				pair_rdma_link
				pair_signal "switch-$t"
			fi
			pair_wait "ready-$ph" 120
			dev=$(pair_host_connect "$t")
			tr=$t
		fi
		host_phase "$ph" "$s" "$qd" "$dev"
	done
	nvme_disconnect_all
	pair_signal finished
	rmmod nvmetrace || fail "rmmod failed"
	rdma link delete rxe0 2>/dev/null || true
fi
