# shellcheck shell=bash
# A fake sysfs tree in the kernel's layout, for a plugin or agent given its
# root (sysfsRoot): PCI NICs (mk_fake_pci) and their RDMA devices (mk_rdma).
# Sourced by test/netns/lib.sh (so by every netns and agent test) and by
# bench/dra.sh; needs nothing else.

# mk_fake_pci ROOT PCIADDR IFNAME: a sysfs tree under ROOT in the layout of
# a real PCI NIC: bus/pci/devices/<addr> and class/net/<if> are symlinks into
# devices/, and class/net/<if>/device points back to the PCI device.
mk_fake_pci() {
	local root=$1 addr=$2 ifname=$3
	local rel="devices/pci0000:ae/0000:ae:00.0/$addr"
	mkdir -p "$root/$rel/net/$ifname" "$root/bus/pci/devices" "$root/class/net"
	echo 0x15b3 >"$root/$rel/vendor"
	echo 0x1017 >"$root/$rel/device"
	echo 0x020000 >"$root/$rel/class"
	ln -sfn "../../../$rel" "$root/bus/pci/devices/$addr"
	ln -sfn "../../$rel/net/$ifname" "$root/class/net/$ifname"
	ln -sfn "../../../$addr" "$root/$rel/net/$ifname/device"
}

# mk_rdma ROOT PCI IBDEV CHARDEV...: an RDMA device on PCI function PCI (made
# by mk_fake_pci) with port 1 ACTIVE, and its character devices
# (uverbsN, umadN, issmN) in the classes the kernel puts them in, with the
# kernel's numbers (uverbsN 231:192+N, umadN 231:N, issmN 231:64+N; rdma_cm
# 10:58).
mk_rdma() {
	local root=$1 addr=$2 ib=$3 rel d n
	shift 3
	rel="devices/pci0000:ae/0000:ae:00.0/$addr/infiniband/$ib"
	mkdir -p "$root/$rel/ports/1" "$root/class/infiniband" "$root/class/misc/rdma_cm"
	echo "10:58" >"$root/class/misc/rdma_cm/dev"
	echo "4: ACTIVE" >"$root/$rel/ports/1/state"
	echo "Ethernet" >"$root/$rel/ports/1/link_layer"
	echo "1: CA" >"$root/$rel/node_type"
	ln -sfn "../../../$addr" "$root/$rel/device"
	ln -sfn "../../$rel" "$root/class/infiniband/$ib"
	for d in "$@"; do
		local cls=infiniband_mad
		n=${d##*[a-z]}
		[[ $d == uverbs* ]] && cls=infiniband_verbs n=$((192 + n))
		[[ $d == issm* ]] && n=$((64 + n))
		mkdir -p "$root/class/$cls/$d"
		echo "$ib" >"$root/class/$cls/$d/ibdev"
		echo "231:$n" >"$root/class/$cls/$d/dev"
	done
}
