# Helpers for the dmacost scenarios (51, 52); sourced after lib.sh.

# The namespace (nvmeXnY) of the emulated PCI NVMe controller the scenario asked QEMU for.
pci_nvme_namespace() {
	local c b n
	need_module nvme
	wait_for 20 bash -c 'for c in /sys/class/nvme/nvme*; do
		[ "$(cat $c/transport 2>/dev/null)" = pcie ] && ls -d $c/nvme*n* >/dev/null 2>&1 && exit 0
	done; exit 1' || fail "no PCI NVMe namespace (is the scenario's lane-qemu line there?)"
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/transport")" = pcie ] || continue
		for b in "$c"/nvme*n*; do
			n=${b##*/}
			[[ $n =~ ^nvme[0-9]+n[0-9]+$ ]] && [ -b "/dev/$n" ] && { echo "$n"; return 0; }
		done
	done
	fail "the PCI NVMe controller has no namespace block device"
}

# dmacost_check DEV IOMMU: run dmacost on DEV, keep the table and JSON in $RESULTS, and check
# the DMA device is DEV's PCI function, the IOMMU state (none | translating), and that every
# size from 4 KiB to 2 MiB was measured (page by page, as one contiguous entry, premapped),
# with the 2 MiB page-by-page median above the one-entry one. Behind a translating IOMMU it
# must also be above the premapped one; without one, premapping may save nothing (Debian's 6.1
# syncs every entry), and the table must say so exactly where its own figures show it.
dmacost_check() {
	local dev=$1 want=$2 pci j
	pci=$(basename "$(readlink -f "/sys/block/$dev/device/device")")
	"$NVMETRACE_BIN" dmacost -n 32 "$dev" | tee "$RESULTS/dmacost.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || fail "dmacost $dev failed"
	"$NVMETRACE_BIN" dmacost -n 32 --json "$dev" >"$RESULTS/dmacost.json" || fail "dmacost --json"
	j=$RESULTS/dmacost.json
	jq -e --arg pci "$pci" '.has_dma and .dma_device == $pci and .driver == "nvme"' "$j" >/dev/null ||
		fail "DMA device is not $dev's PCI function $pci: $(jq -c '{dma_device,driver,walk}' "$j")"
	case $want in
	none) jq -e '.iommu == "none" and (.iommu_translating | not)' "$j" >/dev/null ||
		fail "IOMMU reported without one: $(jq -c '{iommu,iommu_domain_type}' "$j")" ;;
	translating) jq -e '.iommu_translating' "$j" >/dev/null ||
		fail "IOMMU not reported translating: $(jq -c '{iommu,iommu_domain_type}' "$j")" ;;
	esac
	jq -e '[.sizes[].bytes] == [4096,8192,16384,32768,65536,131072,262144,524288,1048576,2097152]' \
		"$j" >/dev/null || fail "sizes are not 4 KiB .. 2 MiB: $(jq -c '[.sizes[].bytes]' "$j")"
	jq -e 'all(.sizes[]; has("map_unmap_ns") and .map_unmap_ns > 0 and .premapped_ns >= 0
		and .map_unmap_one_entry_ns > 0)' \
		"$j" >/dev/null || fail "a size was not measured: $(jq -c '.sizes' "$j")"
	# mapping 512 entries costs more than mapping the same bytes as one
	jq -e '.sizes[-1].map_unmap_ns > .sizes[-1].map_unmap_one_entry_ns' "$j" >/dev/null ||
		fail "2 MiB page-by-page map+unmap not above one entry's: $(jq -c '.sizes[-1]' "$j")"
	jq -e 'all(.sizes[]; .premapped_cheaper == (.premapped_ns < .map_unmap_ns))' "$j" >/dev/null ||
		fail "premapped_cheaper disagrees with the medians: $(jq -c '.sizes' "$j")"
	if [ "$want" = translating ]; then
		# behind an IOMMU, mapping 512 pages costs more than syncing an existing mapping
		jq -e '.sizes[-1].premapped_cheaper' "$j" >/dev/null ||
			fail "2 MiB map+unmap not above premapped behind an IOMMU: $(jq -c '.sizes[-1]' "$j")"
	fi
	# the table's note names exactly the sizes its own columns show premapped no cheaper
	local dearer note
	dearer=$(awk '$2 ~ /^[KMG]iB$/ && $5 ~ /^[0-9]+$/ && $8 ~ /^[0-9]+$/ && $8 >= $5 { printf "%s%s %s", (n++ ? ", " : ""), $1, $2 }' \
		"$RESULTS/dmacost.txt")
	note=$(sed -n 's/^note: premapped is no cheaper than map+unmap at \(.*\): .*/\1/p' "$RESULTS/dmacost.txt")
	[ "$dearer" = "$note" ] || fail "the note names '$note', the table shows premapped no cheaper at '$dearer'"
	log "premapped no cheaper than map+unmap at: ${dearer:-no size}"
	log "dmacost $dev ($pci): IOMMU $(jq -r .iommu "$j"), opt $(jq -r .dma_opt_mapping_size "$j")"
}
