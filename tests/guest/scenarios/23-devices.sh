#!/bin/bash
# 23-devices: a recording follows the machine as it changes. nvmetrace records host and target
# at 1-of-1 from before any NVMe-oF device exists on the host, nvme_tcp not loaded yet; while
# it runs the host loads nvme_tcp and connects (fio), resets the controller while fio runs, the
# link goes down and comes back while fio runs (the host's requests in flight time out and fail
# over, and go again once it has connected again), disconnects and connects again (a new
# controller of the same subsystem, fio), the target adds a second namespace that the host
# finds (fio) and takes it away again, nvme_tcp is unloaded and loaded again between a
# disconnect and a connect (fio), and the target's nvmet and nvmet_tcp are unloaded and set up
# again (fio). Namespace 2 comes and goes while fio runs on namespace 1.
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
# each I/O takes a millisecond on the target's disk (a timer completes it), so that fio always
# has commands in flight at the target when the host's controller is reset (step 2)
NULLB=(nr_devices=2 irqmode=2 completion_nsec=1000000)
modprobe -r null_blk && modprobe null_blk "${NULLB[@]}" || fail "null_blk with two devices"
wait_for 5 test -b /dev/nullb1 || fail "/dev/nullb1 did not appear"
nvmet_tcp_setup
# nvme_tcp not loaded: the first connect loads it while recording, and its hooks get its layout then
modprobe -r nvme_tcp 2>/dev/null
[ -e /sys/module/nvme_tcp ] && fail "nvme_tcp still loaded"
insmod "$NVMETRACE_KO" || fail "insmod failed"

# record's output is polled while it runs: it goes to the guest's own tmpfs, not to the 9p
# results share (where a reader polling a file being written has seen its first line turn
# into NUL bytes on 6.12), and is copied there at the end
ROUT=/tmp/record.out
"$NT" record -r host -r target -s 1 -o "$RESULTS/rec.ntr" >"$ROUT" 2>&1 &
REC=$!
recorder_wait "$ROUT"
said() { grep -q -- "$1" "$ROUT"; }
said "no NVMe-oF namespace on this host yet: recording those that appear" ||
	{ cat "$ROUT"; fail "record did not say it starts with no namespace"; }
said "nvme_tcp is not loaded yet: its hooks attach when it is" ||
	{ cat "$ROUT"; fail "record did not say nvme_tcp's hooks wait for it"; }
# tcp_loaded N: record said N times that nvme_tcp loaded and its hooks attached
tcp_loaded() { [ "$(grep -c "nvmetrace: nvme_tcp loaded: its [0-9]* hooks attached" "$ROUT")" -ge "$1" ]; }
recorder_alive() { kill -0 $REC 2>/dev/null || { cat "$ROUT"; fail "the recorder died ($1)"; }; }
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

# 1. a namespace connected after the recording started (the connect loads nvme_tcp); after a
# lost connection the host tries to connect again every second (step 2b)
dev=$(nvme_tcp_connect "$NVMET_NQN" ",reconnect_delay=1")
appeared "$dev" || { cat "$ROUT"; fail "record did not say $dev appeared"; }
tcp_loaded 1 || { cat "$ROUT"; fail "record did not give nvme_tcp its layout"; }
run_fio connect --filename="/dev/$dev" --rw=randread "${fio_args[@]}" || fail "fio connect"

# 2. a controller reset while fio runs: the same controller, its queues made anew. Requests
# in flight at the driver fail over (nvme multipath sends their bios again on the new queues),
# bios issued meanwhile wait on the head for a live path; commands issued before the
# recorder's look carry the old id and the next (the join takes either)
log "step 2: reset under I/O"
# reads + writes completed by the target's disk (a multipath head counts none before 6.3)
io_count() { awk '{ print $1 + $5 }' /sys/block/nullb0/stat; }
io_since() { [ "$(io_count)" -gt "$1" ]; }
io_goes_on() { # fio's I/O on namespace 1 still completes ($1: after what)
	local n
	n=$(io_count)
	wait_for 60 io_since "$n" || fail "no I/O completed on namespace 1 $1"
}
fio_live=(--ioengine=libaio --direct=1 --bs=4k --iodepth=4 --size=32m --time_based --runtime=600)
ctrl=$(ctrl_of) || fail "no controller of $NVMET_NQN"
id0=$(cat "/sys/class/nvme/$ctrl/cntlid")
run_fio_bg reset --filename="/dev/$dev" --rw=randwrite "${fio_live[@]}"
io_goes_on "once fio started"
echo 1 >"/sys/class/nvme/$ctrl/reset_controller" || fail "reset_controller refused under I/O"
wait_for 30 bash -c "[ \"\$(cat /sys/class/nvme/$ctrl/state)\" = live ]" ||
	fail "$ctrl not live again after the reset"
id1=$(cat "/sys/class/nvme/$ctrl/cntlid")
io_goes_on "after the reset"
fio_stop
# nvmet gives the new association the lowest free id: a new one while the old controller is
# still being freed (the usual case here), else the same, and then there is nothing to say
if [ "$id1" != "$id0" ]; then
	wait_for 30 said "nvmetrace: $dev (tcp .*): controller id was $id0" ||
		{ cat "$ROUT"; fail "record did not say $dev changed controller id"; }
else
	log "the reset kept controller id $id0"
fi

# 2b. the link goes down while fio runs, with commands in flight: the host's requests time out
# (2 s here, on the controller's path disk), its error recovery cancels them and they fail over
# (their bios wait on the head, 23-devices.check); the link comes back, the host connects again
# and sends them
log "step 2b: the link goes down under I/O"
live() { [ "$(cat "/sys/class/nvme/$ctrl/state")" = live ]; }
inflight() { [ "$(awk '{ print $1 + $2 }' /sys/block/nullb0/inflight)" -gt 0 ]; }
path=$(ls -d /sys/class/nvme/"$ctrl"/nvme*c*n1 | head -n 1)
[ -w "$path/queue/io_timeout" ] || fail "no io_timeout for $ctrl's path disk ($path)"
io_timeout=$(cat "$path/queue/io_timeout")
echo 2000 >"$path/queue/io_timeout" || fail "$path/queue/io_timeout refused 2000 ms"
run_fio_bg flap --filename="/dev/$dev" --rw=randread "${fio_live[@]}"
io_goes_on "once fio started"
wait_for 30 inflight || fail "no command in flight at the target"
ip link set lo down || fail "cannot take lo down"
wait_for 60 bash -c "! grep -qx live /sys/class/nvme/$ctrl/state" ||
	{ ip link set lo up; fail "$ctrl still live with the link down"; }
ip link set lo up || fail "cannot bring lo up again"
wait_for 60 live || fail "$ctrl did not connect again ($(cat "/sys/class/nvme/$ctrl/state"))"
io_goes_on "after the host connected again"
fio_stop
echo "$io_timeout" >"$path/queue/io_timeout"

# 3. disconnected, then connected again: a new controller of the same subsystem
nvme_disconnect_all
wait_for 30 said "nvmetrace: $dev (tcp .*) went away" ||
	{ cat "$ROUT"; fail "record did not say $dev went away"; }
lines=$(grep -c "appeared: recording it" "$ROUT")
dev2=$(nvme_tcp_connect)
new_line() { [ "$(grep -c "appeared: recording it" "$ROUT")" -gt "$lines" ]; }
wait_for 30 new_line || { cat "$ROUT"; fail "record did not say $dev2 appeared"; }
run_fio reconnect --filename="/dev/$dev2" --rw=randrw "${fio_args[@]}" || fail "fio reconnect"

# 4. while fio runs on namespace 1, the target adds a namespace; the host finds it (namespace
# attribute changed event), fio there; then the target disables and removes it again
log "step 4: namespace 2 under I/O"
run_fio_bg live --filename="/dev/$dev2" --rw=randrw "${fio_live[@]}"
io_goes_on "once fio started"
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
# nvmet since 6.13 sends the namespace-changed notice before it marks the namespace enabled
# (nvmet_ns_enable(): nvmet_ns_changed(), then xa_set_mark(NVMET_NS_ENABLED)), so a host that
# lists the active namespaces in between never makes the disk and hears nothing more: it is
# asked to rescan once (on a loaded machine, 7.2 and 7.3)
if ! wait_for 20 ns2_dev >/dev/null; then
	log "the host did not make namespace 2 on the target's notice: asking it to rescan"
	echo 1 >"/sys/class/nvme/$(ctrl_of)/rescan_controller" || fail "rescan_controller refused"
	wait_for 60 ns2_dev >/dev/null || fail "namespace 2 did not appear on the host"
fi
dev3=$(ns2_dev)
appeared "$dev3" || { cat "$ROUT"; fail "record did not say $dev3 appeared"; }
said "nvmetrace: target namespace 2 of $NVMET_NQN (/dev/nullb1) appeared: recording it" ||
	{ cat "$ROUT"; fail "record did not say target namespace 2 appeared"; }
run_fio ns2 --filename="/dev/$dev3" --rw=randread "${fio_args[@]}" || fail "fio ns2"
log "step 4: namespace 2 taken away"
echo 0 >"$ns2/enable" && rmdir "$ns2" || fail "the target kept namespace 2"
wait_for 60 said "nvmetrace: $dev3 (tcp .*) went away" ||
	{ cat "$ROUT"; fail "record did not say $dev3 went away"; }
wait_for 30 said "nvmetrace: target namespace 2 of $NVMET_NQN (/dev/nullb1) went away" ||
	{ cat "$ROUT"; fail "record did not say target namespace 2 went away"; }
io_goes_on "after namespace 2 went away"
fio_stop

# 5. nvme_tcp unloaded and loaded again (its hooks go and come back), then connected again
log "step 5: nvme_tcp reloaded"
gone=$(grep -c "went away" "$ROUT")
gone_line() { [ "$(grep -c "went away" "$ROUT")" -gt "$gone" ]; }
nvme_disconnect_all
wait_for 30 gone_line || { cat "$ROUT"; fail "record did not say $dev2 went away"; }
modprobe -r nvme_tcp || fail "cannot unload nvme_tcp"
recorder_alive "nvme_tcp unloaded"
modprobe nvme_tcp || fail "cannot load nvme_tcp again"
wait_for 30 tcp_loaded 2 || { cat "$ROUT"; fail "record did not see nvme_tcp loaded again"; }
lines=$(grep -c "appeared: recording it" "$ROUT")
dev4=$(nvme_tcp_connect)
wait_for 30 new_line || { cat "$ROUT"; fail "record did not say $dev4 appeared"; }
run_fio reload --filename="/dev/$dev4" --rw=randread "${fio_args[@]}" || fail "fio reload"

# 6. the target's side reloaded: nvmet and nvmet_tcp unloaded (every subsystem and port taken
# down first) and set up again, then connected again
gone=$(grep -c "went away" "$ROUT")
nvme_disconnect_all
wait_for 30 gone_line || { cat "$ROUT"; fail "record did not say $dev4 went away"; }
nvmet_teardown
[ -e /sys/module/nvmet ] && fail "nvmet still loaded after the teardown"
recorder_alive "nvmet unloaded"
modprobe null_blk "${NULLB[@]}" || fail "null_blk again"
wait_for 5 test -b /dev/nullb0 || fail "/dev/nullb0 did not come back"
nvmet_tcp_setup
lines=$(grep -c "appeared: recording it" "$ROUT")
dev5=$(nvme_tcp_connect)
wait_for 30 new_line || { cat "$ROUT"; fail "record did not say $dev5 appeared"; }
run_fio nvmet-reload --filename="/dev/$dev5" --rw=randwrite "${fio_args[@]}" || fail "fio nvmet-reload"

recorder_alive "at the end"
kill -INT $REC
wait $REC || { cat "$ROUT"; fail "record failed"; }
cat "$ROUT"
cp "$ROUT" "$RESULTS/record.out"
grep -q "STALE" "$ROUT" && fail "a hook went stale across the nvme_tcp reload"
echo "$dev $dev2 $dev3 $dev4 $dev5" >"$RESULTS/devs"

rmmod nvmetrace || fail "rmmod failed"
nvme_disconnect_all
nvmet_teardown
log "ok"
