# shellcheck shell=bash
# tests/guest/lib-pair.sh — helpers for pair scenarios ("# lane-pair:" in the header; see
# tools/lane): the same script runs in a host guest and a target guest linked by a
# virtio-net NIC. Sourced after lib.sh. Environment from the lane (tools/guest/guest-run):
# PAIR (/pair, the folder both guests share), PAIR_ROLE (host|target), PAIR_IFACE,
# PAIR_TARGET_ADDR, PAIR_HOST_ADDR, PAIR_PEER_KERNEL.
#
#   pair_signal NAME            tell the peer NAME happened (a file in $PAIR)
#   pair_wait NAME SECS         wait for the peer's NAME; fail when it does not come in time or
#                               the peer's scenario has already exited
#   pair_rdma_link              soft-RoCE (rdma_rxe) on the link's NIC (crc32 modules first)
#   pair_target_setup TRTYPE [NULL_BLK-PARAMS...]
#                               target: null_blk (with the given module parameters) exported
#                               as $NVMET_NQN on $PAIR_TARGET_ADDR:$NVMET_PORT over tcp|rdma
#   pair_target_teardown        remove it
#   pair_host_connect TRTYPE    host: connect to it; prints the block device (nvmeXnY)
: "${PAIR:?PAIR not set: pair scenarios run under tools/lane with a lane-pair header}"

PAIR_PEER=host; [ "$PAIR_ROLE" = host ] && PAIR_PEER=target

pair_signal() { : >"$PAIR/$1.tmp"; mv "$PAIR/$1.tmp" "$PAIR/$1"; log "pair: signalled $1"; }

pair_wait() {
	local name=$1 n=$(( $2 * 10 ))
	while [ ! -e "$PAIR/$name" ]; do
		[ -e "$PAIR/$PAIR_PEER.exit" ] &&
			fail "the $PAIR_PEER exited ($(cat "$PAIR/$PAIR_PEER.exit")) before '$name'"
		n=$((n - 1)); [ $n -gt 0 ] || fail "no '$name' from the $PAIR_PEER within $2 s"
		sleep 0.1
	done
	log "pair: got $name"
}

pair_rdma_link() {
	local m
	# rdma_rxe needs crc32 (FIELD-NOTES): without it `rdma link add` fails with ENOENT
	for m in crc32_generic crc32-pclmul; do modprobe "$m" 2>/dev/null || true; done
	need_module rdma_rxe ib_uverbs
	rdma link add rxe0 type rxe netdev "$PAIR_IFACE" || fail "rdma link add rxe0 on $PAIR_IFACE failed"
	log "rdma: rxe0 on $PAIR_IFACE"
}

pair_target_setup() {
	local tr=$1 s p; shift
	modprobe -r null_blk 2>/dev/null || true
	need_module nvmet "nvmet_$tr"
	modprobe null_blk "$@" || fail "modprobe null_blk $* failed"
	[ -b /dev/nullb0 ] || wait_for 5 test -b /dev/nullb0 || fail "/dev/nullb0 did not appear"
	s=$NVMET_CFG/subsystems/$NVMET_NQN
	mkdir "$s"
	echo 1 >"$s/attr_allow_any_host"
	mkdir "$s/namespaces/1"
	echo -n /dev/nullb0 >"$s/namespaces/1/device_path"
	echo 1 >"$s/namespaces/1/enable"
	p=$NVMET_CFG/ports/1
	mkdir "$p"
	echo "$tr" >"$p/addr_trtype"
	echo ipv4 >"$p/addr_adrfam"
	echo "$PAIR_TARGET_ADDR" >"$p/addr_traddr"
	echo "$NVMET_PORT" >"$p/addr_trsvcid"
	ln -s "$s" "$p/subsystems/$NVMET_NQN" || fail "nvmet: cannot enable the $tr port"
	log "nvmet: $NVMET_NQN on $tr $PAIR_TARGET_ADDR:$NVMET_PORT, null_blk $*"
}

pair_target_teardown() {
	nvmet_teardown
	modprobe -r nvmet_rdma 2>/dev/null || true
}

pair_host_connect() { nvme_fabrics_connect "$1" "$PAIR_TARGET_ADDR"; }
