#!/bin/bash
# 23-devices: a recording follows the machine as it changes. nvmetrace records host and target
# at 1-of-1 from before any NVMe-oF device exists on the host, nvme_tcp not loaded yet; while
# it runs the host loads nvme_tcp and connects (fio), resets the controller (fio), disconnects
# and connects again (a new controller of the same subsystem, fio), the target adds a second
# namespace that the host finds (fio) and takes it away again, nvme_tcp is unloaded and loaded
# again between a disconnect and a connect (fio), and the target's nvmet and nvmet_tcp are
# unloaded and set up again (fio).
# Asserts here: record starts with no namespace and says so; nvme_tcp's hooks attach when it
# loads (record says so, at each load); it says each device as it appears and goes; fio sees
# no error; the recorder ends cleanly; the module unloads.
# 23-devices.check, on the lane's machine: every fio I/O is a host command, every host command
# is matched on the target and has its nvme-tcp command PDU record, a target command without a
# host partner ran only while the host did not follow its controller's devices
# (before_device), and every group is named after its device (the device table grew with the
# recording).
# lane-timeout: 300
. "$NVMETRACE_SRC/tests/guest/lib.sh"
need_ko
need_bin
NT=$NVMETRACE_BIN

need_module null_blk
modprobe -r null_blk && modprobe null_blk nr_devices=2 || fail "null_blk with two devices"
wait_for 5 test -b /dev/nullb1 || fail "/dev/nullb1 did not appear"
nvmet_tcp_setup
# nvme_tcp not loaded: the first connect loads it while recording, and its hooks get its layout then
modprobe -r nvme_tcp 2>/dev/null
[ -e /sys/module/nvme_tcp ] && fail "nvme_tcp still loaded"
insmod "$NVMETRACE_KO" || fail "insmod failed"

"$NT" record -r host -r target -s 1 -o "$RESULTS/rec.ntr" >"$RESULTS/record.out" 2>&1 &
REC=$!
recorder_wait "$RESULTS/record.out"
said() { grep -q -- "$1" "$RESULTS/record.out"; }
said "no NVMe-oF namespace on this host yet: recording those that appear" ||
	{ cat "$RESULTS/record.out"; fail "record did not say it starts with no namespace"; }
said "nvme_tcp is not loaded yet: its hooks attach when it is" ||
	{ cat "$RESULTS/record.out"; fail "record did not say nvme_tcp's hooks wait for it"; }
# tcp_loaded N: record said N times that nvme_tcp loaded and its hooks attached
tcp_loaded() { [ "$(grep -c "nvmetrace: nvme_tcp loaded: its [0-9]* hooks attached" "$RESULTS/record.out")" -ge "$1" ]; }
recorder_alive() { kill -0 $REC 2>/dev/null || { cat "$RESULTS/record.out"; fail "the recorder died ($1)"; }; }
# appeared NAME: record said that the disk NAME appeared (its head disk, or itself)
appeared() { wait_for 30 said "nvmetrace: $1 (tcp $NVMET_NQN, .*) appeared: recording it"; }
ctrl_of() { # the controller (nvmeN) of subsystem $NVMET_NQN
	local c
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$NVMET_NQN" ] && { echo "${c##*/}"; return 0; }
	done
	return 1
}
fio_args=(--ioengine=libaio --direct=1 --bs=4k --iodepth=4 --size=32m --time_based --runtime=2)

# 1. a namespace connected after the recording started (the connect loads nvme_tcp)
dev=$(nvme_tcp_connect)
appeared "$dev" || { cat "$RESULTS/record.out"; fail "record did not say $dev appeared"; }
tcp_loaded 1 || { cat "$RESULTS/record.out"; fail "record did not give nvme_tcp its layout"; }
run_fio connect --filename="/dev/$dev" --rw=randread "${fio_args[@]}" || fail "fio connect"

# 2. a controller reset: the same controller, its queues made anew
ctrl=$(ctrl_of) || fail "no controller of $NVMET_NQN"
id0=$(cat "/sys/class/nvme/$ctrl/cntlid")
echo 1 >"/sys/class/nvme/$ctrl/reset_controller" || fail "reset_controller refused"
wait_for 30 bash -c "[ \"\$(cat /sys/class/nvme/$ctrl/state)\" = live ]" ||
	fail "$ctrl not live again after the reset"
id1=$(cat "/sys/class/nvme/$ctrl/cntlid")
# fio at once, not after record says the id changed: commands issued before the recorder's
# look carry the old id and the next (the join takes either)
run_fio reset --filename="/dev/$dev" --rw=randwrite "${fio_args[@]}" || fail "fio reset"
# nvmet gives the new association the lowest free id: a new one while the old controller is
# still being freed (the usual case here), else the same, and then there is nothing to say
if [ "$id1" != "$id0" ]; then
	wait_for 30 said "nvmetrace: $dev (tcp .*): controller id was $id0" ||
		{ cat "$RESULTS/record.out"; fail "record did not say $dev changed controller id"; }
else
	log "the reset kept controller id $id0"
fi

# 3. disconnected, then connected again: a new controller of the same subsystem
nvme_disconnect_all
wait_for 30 said "nvmetrace: $dev (tcp .*) went away" ||
	{ cat "$RESULTS/record.out"; fail "record did not say $dev went away"; }
lines=$(grep -c "appeared: recording it" "$RESULTS/record.out")
dev2=$(nvme_tcp_connect)
new_line() { [ "$(grep -c "appeared: recording it" "$RESULTS/record.out")" -gt "$lines" ]; }
wait_for 30 new_line || { cat "$RESULTS/record.out"; fail "record did not say $dev2 appeared"; }
run_fio reconnect --filename="/dev/$dev2" --rw=randrw "${fio_args[@]}" || fail "fio reconnect"

# 4. the target adds a namespace; the host finds it (namespace attribute changed event), fio
# there; then the target disables and removes it again
log "step 4: namespace 2"
ns2=$NVMET_CFG/subsystems/$NVMET_NQN/namespaces/2
mkdir "$ns2" && echo -n /dev/nullb1 >"$ns2/device_path" && echo 1 >"$ns2/enable" ||
	fail "the target refused namespace 2"
ns2_dev() {
	local b
	for b in /sys/block/nvme*n2; do
		[[ ${b##*/} =~ ^nvme[0-9]+n2$ ]] || continue # not a path disk (nvmeXcYn2)
		[ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NVMET_NQN" ] &&
			{ echo "${b##*/}"; return 0; }
	done
	return 1
}
wait_for 60 ns2_dev >/dev/null || fail "namespace 2 did not appear on the host"
dev3=$(ns2_dev)
appeared "$dev3" || { cat "$RESULTS/record.out"; fail "record did not say $dev3 appeared"; }
said "nvmetrace: target namespace 2 of $NVMET_NQN (/dev/nullb1) appeared: recording it" ||
	{ cat "$RESULTS/record.out"; fail "record did not say target namespace 2 appeared"; }
run_fio ns2 --filename="/dev/$dev3" --rw=randread "${fio_args[@]}" || fail "fio ns2"
log "step 4: namespace 2 taken away"
echo 0 >"$ns2/enable" && rmdir "$ns2" || fail "the target kept namespace 2"
wait_for 60 said "nvmetrace: $dev3 (tcp .*) went away" ||
	{ cat "$RESULTS/record.out"; fail "record did not say $dev3 went away"; }
wait_for 30 said "nvmetrace: target namespace 2 of $NVMET_NQN (/dev/nullb1) went away" ||
	{ cat "$RESULTS/record.out"; fail "record did not say target namespace 2 went away"; }

# 5. nvme_tcp unloaded and loaded again (its hooks go and come back), then connected again
log "step 5: nvme_tcp reloaded"
gone=$(grep -c "went away" "$RESULTS/record.out")
gone_line() { [ "$(grep -c "went away" "$RESULTS/record.out")" -gt "$gone" ]; }
nvme_disconnect_all
wait_for 30 gone_line || { cat "$RESULTS/record.out"; fail "record did not say $dev2 went away"; }
modprobe -r nvme_tcp || fail "cannot unload nvme_tcp"
recorder_alive "nvme_tcp unloaded"
modprobe nvme_tcp || fail "cannot load nvme_tcp again"
wait_for 30 tcp_loaded 2 || { cat "$RESULTS/record.out"; fail "record did not see nvme_tcp loaded again"; }
lines=$(grep -c "appeared: recording it" "$RESULTS/record.out")
dev4=$(nvme_tcp_connect)
wait_for 30 new_line || { cat "$RESULTS/record.out"; fail "record did not say $dev4 appeared"; }
run_fio reload --filename="/dev/$dev4" --rw=randread "${fio_args[@]}" || fail "fio reload"

# 6. the target's side reloaded: nvmet and nvmet_tcp unloaded (every subsystem and port taken
# down first) and set up again, then connected again
gone=$(grep -c "went away" "$RESULTS/record.out")
nvme_disconnect_all
wait_for 30 gone_line || { cat "$RESULTS/record.out"; fail "record did not say $dev4 went away"; }
nvmet_teardown
[ -e /sys/module/nvmet ] && fail "nvmet still loaded after the teardown"
recorder_alive "nvmet unloaded"
modprobe null_blk nr_devices=2 || fail "null_blk again"
wait_for 5 test -b /dev/nullb0 || fail "/dev/nullb0 did not come back"
nvmet_tcp_setup
lines=$(grep -c "appeared: recording it" "$RESULTS/record.out")
dev5=$(nvme_tcp_connect)
wait_for 30 new_line || { cat "$RESULTS/record.out"; fail "record did not say $dev5 appeared"; }
run_fio nvmet-reload --filename="/dev/$dev5" --rw=randwrite "${fio_args[@]}" || fail "fio nvmet-reload"

recorder_alive "at the end"
kill -INT $REC
wait $REC || { cat "$RESULTS/record.out"; fail "record failed"; }
cat "$RESULTS/record.out"
grep -q "STALE" "$RESULTS/record.out" && fail "a hook went stale across the nvme_tcp reload"
echo "$dev $dev2 $dev3 $dev4 $dev5" >"$RESULTS/devs"

rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
log "ok"
