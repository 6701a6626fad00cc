#!/bin/bash
# hpn-vm: kernel=7 nics=4
# The current kernel (7.x, Debian trixie-backports) in the default shared RDMA
# netns mode: RDMA pods made by hand (floor.sh: iproute2 and rdma(8), no
# plugin), every scenario in one boot. What each proves:
#  pods      two pods, one virtio NIC each moved in as hpn0 with an address;
#            `rdma link add` of an rxe on hpn0 run inside each pod gives that
#            pod its own UDP 4791 socket; port ACTIVE, GID 1 = ::ffff:<ipv4>
#            RoCE v2; rping, ibv_rc_pingpong and ib_write_bw pod to pod with
#            the exact device and GID index; counters rise on both devices;
#            rxe deleted, NICs home: no rdma link, NICs under their names.
#  macvlan   the same over macvlan children of one parent NIC, one rxe per
#            child, each made inside its pod.
#  parent    one rxe on the parent (what 6.1 needed, the children's GIDs in
#            its table, 2 entries a child with one IPv4 address, v2 alone:
#            what a DRA share costs): binds, but carries no pod-to-pod traffic on 7.x.
#  gone      a pod netns deleted with rxe inside: the rxe device is gone, the
#            NIC is back under its pod-side name, or dev<ifindex> when that
#            name is taken; a macvlan child and its rxe simply vanish.
#  lifetime  an rxe follows a rename of its netdev and its MTU (1500: RoCE
#            MTU 1024, 9000: 4096), and dies when the netdev changes netns
#            either way: make it after the move into the pod, delete it
#            before the move back.
#  names     the errors rdma(8) gets: ENODEV from outside the pod, ENFILE for
#            a name another pod holds, EEXIST for a second rxe on one netdev,
#            EOPNOTSUPP for a move to another netns; every pod sees every
#            pod's device.
#  rails     a pod with hpn0 and hpn1, in one subnet and then in two: per-NIC
#            routing table and `ip rule from <addr>`, arp_ignore=1 and
#            arp_announce=2; rping and ib_write_bw on each rail move bytes on
#            that rail's devices only.
#  agent     hpn-rdma-agent's metrics on a real rxe: the two pods of `pods`,
#            each attachment journalled as ADD writes it (rxa/rxb bound, GID
#            1), the agent on the node with a health loop every second; its
#            /metrics says both ports ACTIVE and both attachments healthy
#            (CHECK's RDMA proof on the real device), and after ib_write_bw
#            the RDMA byte counters (rdma statistic's sent_bytes/rcvd_bytes)
#            and hpn0's link counters rose by at least what was written.
# Run one: test/vm/run.sh test/vm/vm7-shared.sh NAME...
# shellcheck disable=SC2034 # counter arrays are used through namerefs
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=floor.sh
source "$(dirname "$0")/floor.sh"

vm7_require shared

A=hpnv-a
B=hpnv-b
ITERS=40	# ib_write_bw iterations of 64 KiB in the tests (the bench runs more)

# udp4791 POD: POD (empty: the initial netns) has a UDP socket on port 4791
# (0x12B7), RoCE v2's: rxe's receive socket.
udp4791() {
	local -a in=()
	[[ -n $1 ]] && in=(ip netns exec "$1")
	[[ $("${in[@]}" cat /proc/net/udp) =~ :12B7\ 00000000:0000\ 07 ]]
}

# no_rdma: no RDMA device anywhere (shared mode: all are visible here).
no_rdma() {
	local l
	l=$(rdma link show)
	[[ -z $l ]] || fail "RDMA links left: $l"
}

# two_pods_traffic SUBNET: rping, ibv_rc_pingpong and ib_write_bw between rxa
# in $A (SUBNET.1) and rxb in $B (SUBNET.2), and the counters of both rose.
two_pods_traffic() {
	local -A c0 c1
	counters c0
	rping_pods "$A" "$1.1" "$B"
	pingpong_pods "$A" rxa "$B" rxb "$1.1"
	write_bw_pods "$A" rxa "$B" rxb "$1.1" "$ITERS"
	counters c1
	rose_dir c0 c1 rxb/1 sent_bytes $((ITERS * 65536))
	rose_dir c0 c1 rxa/1 rcvd_bytes $((ITERS * 65536))
	rose_dir c0 c1 rxa/1 sent_bytes 1
	rose_dir c0 c1 rxb/1 rcvd_bytes 1
}

# rose_dir BEFORE AFTER DEV/PORT COUNTER MIN: COUNTER grew by MIN or more.
rose_dir() {
	local d
	d=$(delta "$1" "$2" "$3" "$4")
	((d >= $5)) || fail "$3 $4 grew by $d, expected at least $5"
	echo "  # $3 $4 +$d"
}

scen_pods() {
	local n0=${VM_NICS[0]} n1=${VM_NICS[1]} l
	info "pods: $n0 -> $A as hpn0, $n1 -> $B as hpn0, rxe made inside each pod"
	pod_add "$A"
	pod_add "$B"
	nic_to_pod "$n0" "$A" hpn0 10.71.0.1/24
	nic_to_pod "$n1" "$B" hpn0 10.71.0.2/24
	[[ -z $(home_as "${VM_MACS[0]}") && -z $(home_as "${VM_MACS[1]}") ]] ||
		fail "a NIC is still in the initial netns"
	! udp4791 "$A" || fail "$A has a UDP 4791 socket before any rxe"
	rxe_in "$A" hpn0 rxa
	rxe_in "$B" hpn0 rxb
	# Shared mode: the device is listed in every netns, its netdev by name only
	# in the netdev's own.
	l=$(ip netns exec "$A" rdma link show)
	[[ $l == *"link rxa/1 state ACTIVE physical_state LINK_UP netdev hpn0 "* ]] ||
		fail "in $A, rdma link show does not show rxa ACTIVE on hpn0: $l"
	[[ $'\n'$l$'\n' == *$'\n'"link rxb/1 state ACTIVE physical_state LINK_UP "$'\n'* ]] ||
		fail "in $A, rxb (of $B) should be listed, without a netdev: $l"
	# 7.1+: each pod's rxe listens on its own netns's UDP 4791, none in the host.
	udp4791 "$A" || fail "no UDP 4791 socket in $A after rdma link add there"
	udp4791 "$B" || fail "no UDP 4791 socket in $B"
	! udp4791 "" || fail "a UDP 4791 socket in the initial netns"
	port_gid "$A" rxa 10.71.0.1
	port_gid "$B" rxb 10.71.0.2
	two_pods_traffic 10.71.0
	rxe_del "$A" rxa
	rxe_del "$B" rxb
	no_rdma
	! udp4791 "$A" || fail "$A kept its UDP 4791 socket after its rxe was deleted"
	nic_home "$A" hpn0 "$n0"
	nic_home "$B" hpn0 "$n1"
	fx ip netns del "$A"
	fx ip netns del "$B"
	nics_as_booted
}

scen_macvlan() {
	local p=${VM_NICS[0]}
	info "macvlan: children of $p made in $A and $B as hpn0, an rxe on each child inside its pod"
	pod_add "$A"
	pod_add "$B"
	# A child's carrier follows its parent: the parent must be up.
	fx ip link set "$p" up
	fx ip link add link "$p" name hpn0 netns "$A" type macvlan mode bridge
	fx ip link add link "$p" name hpn0 netns "$B" type macvlan mode bridge
	fx ip -n "$A" addr add 10.73.0.1/24 dev hpn0
	fx ip -n "$A" link set hpn0 up
	fx ip -n "$B" addr add 10.73.0.2/24 dev hpn0
	fx ip -n "$B" link set hpn0 up
	rxe_in "$A" hpn0 rxa
	rxe_in "$B" hpn0 rxb
	port_gid "$A" rxa 10.73.0.1
	port_gid "$B" rxb 10.73.0.2
	two_pods_traffic 10.73.0
	rxe_del "$A" rxa
	rxe_del "$B" rxb
	no_rdma
	fx ip -n "$A" link del hpn0
	fx ip -n "$B" link del hpn0
	fx ip link set "$p" down
	fx ip netns del "$A"
	fx ip netns del "$B"
}

# child_gids DEV PARENT: the non-zero entries of DEV's port 1 GID table whose
# netdev is not PARENT (its upper devices': the children's).
child_gids() {
	local d=/sys/class/infiniband/$1/ports/1 f i n=0 nd
	for f in "$d"/gids/*; do
		i=${f##*/}
		[[ $(cat "$f" 2>/dev/null) != 0000:0000:0000:0000:0000:0000:0000:0000 ]] || continue
		nd=$(cat "$d/gid_attrs/ndevs/$i" 2>/dev/null) || continue
		[[ -n $nd && $nd != "$2" ]] && n=$((n + 1))
	done
	echo "$n"
}

child_gids_are() {
	[[ $(child_gids "$1" "$2") == "$3" ]]
}

scen_parent() {
	local p=${VM_NICS[0]} out ga gb t
	local -A c0 c1
	info "parent: one rxe on $p in the host, macvlan children in $A and $B (the 6.1 way)"
	pod_add "$A"
	pod_add "$B"
	fx ip link set "$p" up
	fx ip link add link "$p" name hpn0 netns "$A" type macvlan mode bridge
	fx ip link add link "$p" name hpn0 netns "$B" type macvlan mode bridge
	fx ip -n "$A" addr add 10.74.0.1/24 dev hpn0
	fx ip -n "$A" link set hpn0 up
	fx ip -n "$B" addr add 10.74.0.2/24 dev hpn0
	fx ip -n "$B" link set hpn0 up
	fx rdma link add rxp type rxe netdev "$p"
	# The children's addresses are in the parent's GID table (upper devices).
	wait_for 5 has_gid rxp 10.74.0.2 ||
		fail "rxp has no GID for $B's child: $(ibv_devinfo -v -d rxp -i 1 | grep GID)"
	out=$(ip netns exec "$A" ibv_devinfo -v -d rxp -i 1)
	ga=$(sed -n 's/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:10\.74\.0\.1, RoCE v2$/\1/p' <<<"$out")
	gb=$(sed -n 's/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:10\.74\.0\.2, RoCE v2$/\1/p' <<<"$out")
	[[ -n $ga && -n $gb ]] || fail "rxp's GID table lacks a child's address: $(grep GID <<<"$out")"
	echo "  # rxp GID[$ga] ::ffff:10.74.0.1 ($A's child), GID[$gb] ::ffff:10.74.0.2 ($B's child)"
	# What a share costs its parent's GID table (doc/dra.md, Shared NICs: N is
	# the free entries over 2 x T): each child with one IPv4 address puts it
	# and its IPv6 link-local address there, once per RoCE type T of the
	# port (rxe: v2 alone, so 2 a child).
	t=$(cat /sys/class/infiniband/rxp/ports/1/gid_attrs/types/0)
	[[ $t == "RoCE v2" ]] || fail "rxp's GID 0 is of type '$t', not RoCE v2 alone"
	wait_for 5 child_gids_are rxp "$p" 4 ||
		fail "rxp: the two children take $(child_gids rxp "$p") GID entries, not 2 each:" \
			"$(ibv_devinfo -v -d rxp -i 1 | grep GID)"
	echo "  # rxp (RoCE v2 alone): 2 children with an IPv4 address take 4 GID entries, 2 a share"
	udp4791 "" || fail "no UDP 4791 socket in the initial netns for rxp"
	! udp4791 "$A" || fail "$A has a UDP 4791 socket, but no rxe was made there"
	counters c0
	serve "$A" ibv_rc_pingpong -d rxp -i 1 -g "$ga" -n 5
	server_ready ibv_rc_pingpong tcp_listening "$SRV" "$FLOOR_PORT"
	client "$B" 6 ibv_rc_pingpong -d rxp -i 1 -g "$gb" -n 5 10.74.0.1
	server_wait 2
	counters c1
	if [[ $CLI_RC == 0 ]]; then
		fail "ibv_rc_pingpong between two children over the parent's rxe worked on $VM_KVER:" \
			"7.3 carried none (the sends left by the wire, the pods had no UDP 4791 socket)." \
			"Update DESIGN.md and this scenario."
	fi
	[[ $CLI_RC == 124 ]] || fail "ibv_rc_pingpong failed (exit $CLI_RC) instead of hanging: $CLI_OUT"
	[[ $(delta c0 c1 rxp/1 sent_pkts) -gt 0 && $(delta c0 c1 rxp/1 rcvd_pkts) == 0 ]] ||
		fail "rxp: expected packets sent and none received, got sent +$(delta c0 c1 rxp/1 sent_pkts)," \
			"received +$(delta c0 c1 rxp/1 rcvd_pkts)"
	echo "  # known limit: the parent's rxe sent $(delta c0 c1 rxp/1 sent_pkts) packets," \
		"received none; ibv_rc_pingpong hung (killed after 6 s)"
	fx rdma link delete rxp
	fx ip -n "$A" link del hpn0
	fx ip -n "$B" link del hpn0
	fx ip link set "$p" down
	fx ip netns del "$A"
	fx ip netns del "$B"
}

scen_gone() {
	local n0=${VM_NICS[0]} n1=${VM_NICS[1]} p=${VM_NICS[2]} name idx d
	info "gone: pod netns deleted with rxe inside"
	pod_add "$A"
	pod_add "$B"
	nic_to_pod "$n0" "$A" hpn0 10.71.0.1/24
	nic_to_pod "$n1" "$B" hpn0 10.71.0.2/24
	rxe_in "$A" hpn0 rxa
	rxe_in "$B" hpn0 rxb
	fx ip netns del "$A"
	wait_for 20 is_home "${VM_MACS[0]}" || fail "$n0 did not come back from $A"
	name=$(home_as "${VM_MACS[0]}")
	[[ $name == hpn0 ]] || fail "$n0 came back from the deleted $A as '$name', expected its pod-side name hpn0"
	d=$(rdma dev show)
	[[ $d != *" rxa: "* && $d == *" rxb: "* ]] || fail "after $A died: rxa should be gone, rxb there: $d"
	echo "  # $A deleted: rxa gone, $n0 back as hpn0"
	# hpn0 is taken in the host now: the kernel names the next one dev<ifindex>.
	fx ip netns del "$B"
	wait_for 20 is_home "${VM_MACS[1]}" || fail "$n1 did not come back from $B"
	name=$(home_as "${VM_MACS[1]}")
	read -r idx <"/sys/class/net/$name/ifindex"
	[[ $name == "dev$idx" ]] || fail "$n1 came back as '$name', expected dev$idx (hpn0 was taken)"
	no_rdma
	echo "  # $B deleted while the host had an hpn0: rxb gone, $n1 back as $name (dev<ifindex>)"
	# Found by MAC, renamed home (down: the kernel downs a NIC leaving a netns).
	fx ip link set hpn0 name "$n0"
	fx ip link set "$name" name "$n1"
	nics_as_booted
	info "gone: a macvlan child with rxe in a deleted pod"
	pod_add "$A"
	fx ip link set "$p" up
	fx ip link add link "$p" name hpn0 netns "$A" type macvlan mode bridge
	fx ip -n "$A" link set hpn0 up
	rxe_in "$A" hpn0 rxa
	fx ip netns del "$A"
	wait_for 20 rdma_none || fail "rxa outlived the macvlan child's netns: $(rdma link show)"
	[[ $(<"/sys/class/net/$p/operstate") == up ]] || fail "the parent $p is not up any more"
	local l
	l=$(ip -o link show)
	[[ $l != *hpn0* ]] || fail "the macvlan child came back to the host: $l"
	echo "  # child and rxa gone with the netns, $p untouched"
	fx ip link set "$p" down
}

# rxe_mtu POD DEV MTU: port 1 of DEV, seen from POD, has active_mtu MTU.
rxe_mtu() {
	local l
	l=$(ip netns exec "$1" ibv_devinfo -d "$2" -i 1)
	[[ $l =~ active_mtu:[[:space:]]+$3\  ]] || fail "$2: active_mtu is not $3: $(grep mtu <<<"$l")"
	echo "  # $2: active_mtu $3"
}

scen_lifetime() {
	local n0=${VM_NICS[0]} l
	info "lifetime: rename, move out, made before the move"
	pod_add "$A"
	nic_to_pod "$n0" "$A" hpn0 10.71.0.1/24
	rxe_in "$A" hpn0 rxa
	# A rename (even up) keeps the device: it follows its netdev.
	fx ip -n "$A" link set hpn0 name hpnx
	l=$(ip netns exec "$A" rdma link show rxa/1)
	[[ $l == *"netdev hpnx "* ]] || fail "rxa did not follow the rename to hpnx: $l"
	fx ip -n "$A" link set hpnx name hpn0
	# The RoCE MTU follows the netdev's: the largest IB MTU that fits.
	rxe_mtu "$A" rxa 1024
	fx ip -n "$A" link set hpn0 mtu 9000
	rxe_mtu "$A" rxa 4096
	fx ip -n "$A" link set hpn0 mtu 1500
	rxe_mtu "$A" rxa 1024
	# Leaving the netns destroys it.
	nic_home "$A" hpn0 "$n0"
	wait_for 5 rdma_none || fail "rxa survived its netdev leaving $A: $(rdma link show)"
	echo "  # hpn0 left $A with rxa on it: rxa destroyed"
	# So does entering one: an rxe made in the host before the move is lost.
	fx rdma link add rxa type rxe netdev "$n0"
	fx ip link set "$n0" netns "$A" name hpn0
	wait_for 5 rdma_none || fail "rxa survived its netdev entering $A: $(rdma link show)"
	echo "  # $n0 entered $A with rxa on it: rxa destroyed"
	nic_home "$A" hpn0 "$n0"
	fx ip netns del "$A"
	nics_as_booted
}

scen_names() {
	local n0=${VM_NICS[0]} n1=${VM_NICS[1]} l
	info "names: what rdma link add refuses"
	pod_add "$A"
	pod_add "$B"
	nic_to_pod "$n0" "$A" hpn0 10.71.0.1/24
	nic_to_pod "$n1" "$B" hpn0 10.71.0.2/24
	# The netdev is looked up in the netns of the netlink socket.
	fx_refused "error: No such device" rdma link add rxa type rxe netdev hpn0
	rxe_in "$A" hpn0 rxa
	# Device names are one namespace for the whole node, whatever the mode.
	fx_refused "error: Too many open files in system" \
		ip netns exec "$B" rdma link add rxa type rxe netdev hpn0
	fx_refused "error: File exists" ip netns exec "$A" rdma link add rxa2 type rxe netdev hpn0
	fx_refused "error: No such device" ip netns exec "$A" rdma link add rxa2 type rxe netdev nosuch
	# Only exclusive mode moves RDMA devices between netns.
	fx_refused "Error: Cannot change net namespace of RDMA device in shared netns mode."$'\n'"error: Operation not supported" \
		rdma dev set rxa netns "$A"
	# Shared mode isolates nothing: $B sees (and could open) $A's device.
	l=$(ip netns exec "$B" ibv_devices)
	[[ $l == *rxa* ]] || fail "$B does not see rxa in shared mode: $l"
	echo "  # in $B, ibv_devices lists $A's rxa"
	rxe_del "$A" rxa
	nic_home "$A" hpn0 "$n0"
	nic_home "$B" hpn0 "$n1"
	fx ip netns del "$A"
	fx ip netns del "$B"
}

# rail_pod POD ADDR0/LEN ADDR1/LEN: the pod's NICs hpn0 and hpn1 as rails:
# each address on its NIC, a routing table per NIC (100 + i) with the NIC's
# subnet and an `ip rule from <addr>` into it, and ARP per NIC.
rail_pod() {
	local pod=$1 i a
	shift
	fx ip netns exec "$pod" sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2
	for i in 0 1; do
		a=${1%/*}
		net_of "$1"
		fx ip -n "$pod" route add "$NET" dev "hpn$i" src "$a" table $((100 + i))
		fx ip -n "$pod" rule add from "$a" table $((100 + i))
		shift
	done
}

# net_of ADDR/LEN: NET = the IPv4 network of ADDR/LEN ("10.75.0.0/24").
NET=
net_of() {
	local o1 o2 o3 o4 n m len=${1#*/}
	IFS=. read -r o1 o2 o3 o4 <<<"${1%/*}"
	n=$(((o1 << 24) | (o2 << 16) | (o3 << 8) | o4))
	m=$(((0xffffffff << (32 - len)) & 0xffffffff))
	n=$((n & m))
	NET="$((n >> 24)).$(((n >> 16) & 255)).$(((n >> 8) & 255)).$((n & 255))/$len"
}

# rail_unpod POD ADDR0 ADDR1: drop the rules, tables and addresses.
rail_unpod() {
	local pod=$1 i
	shift
	for i in 0 1; do
		fx ip -n "$pod" rule del from "$1" table $((100 + i))
		fx ip -n "$pod" route flush table $((100 + i))
		fx ip -n "$pod" addr flush dev "hpn$i"
		shift
	done
}

# rail_check SPOD SADDR SDEV CPOD CADDR CDEV I: rail I between two pods:
# the rule routes CADDR's traffic to SADDR by hpnI; rping bound to CADDR and
# ib_write_bw between SDEV and CDEV work; only SDEV and CDEV counted bytes,
# the other rail's devices nothing; the neighbour entries for SADDR in CPOD
# and CADDR in SPOD have the MAC of that address's own NIC (no ARP flux).
rail_check() {
	local spod=$1 sa=$2 sdev=$3 cpod=$4 ca=$5 cdev=$6 i=$7 o r
	local -A c0 c1
	o=$((1 - i))
	r=$(ip -n "$cpod" route get "$sa" from "$ca")
	[[ $r == *" dev hpn$i "* ]] || fail "rail $i: in $cpod, $ca -> $sa is not routed by hpn$i: $r"
	r=$(ip -n "$spod" route get "$ca" from "$sa")
	[[ $r == *" dev hpn$i "* ]] || fail "rail $i: in $spod, $sa -> $ca is not routed by hpn$i: $r"
	counters c0
	rping_pods "$spod" "$sa" "$cpod" "$ca"
	write_bw_pods "$spod" "$sdev" "$cpod" "$cdev" "$sa" "$ITERS"
	counters c1
	rose_dir c0 c1 "$cdev/1" sent_bytes $((ITERS * 65536))
	rose_dir c0 c1 "$sdev/1" rcvd_bytes $((ITERS * 65536))
	still c0 c1 "${sdev%?}$o/1" "${cdev%?}$o/1"
	echo "  # rail $i: ${sdev%?}$o and ${cdev%?}$o counted nothing"
	neigh_owner "$cpod" "$sa" "$spod" "hpn$i"
	neigh_owner "$spod" "$ca" "$cpod" "hpn$i"
}

# neigh_owner POD ADDR OWNERPOD OWNERIF: every neighbour entry POD has for
# ADDR holds the MAC of OWNERIF in OWNERPOD.
neigh_owner() {
	local mac l n=0
	mac=$(ip netns exec "$3" cat "/sys/class/net/$4/address")
	while read -r l; do
		[[ $l == "$2 "* ]] || continue
		n=$((n + 1))
		[[ $l == *" lladdr $mac "* ]] ||
			fail "ARP flux: in $1, '$l', but $2 is $3's $4 ($mac)"
	done < <(ip -n "$1" neigh show)
	((n > 0)) || fail "in $1, no neighbour entry for $2"
}

scen_rails() {
	info "rails: $A with ${VM_NICS[0]} and ${VM_NICS[1]} as hpn0 and hpn1, $B with ${VM_NICS[2]} and ${VM_NICS[3]}"
	pod_add "$A"
	pod_add "$B"
	nic_to_pod "${VM_NICS[0]}" "$A" hpn0 10.75.0.1/24
	nic_to_pod "${VM_NICS[1]}" "$A" hpn1 10.75.0.11/24
	nic_to_pod "${VM_NICS[2]}" "$B" hpn0 10.75.0.2/24
	nic_to_pod "${VM_NICS[3]}" "$B" hpn1 10.75.0.12/24
	rxe_in "$A" hpn0 rxa0
	rxe_in "$A" hpn1 rxa1
	rxe_in "$B" hpn0 rxb0
	rxe_in "$B" hpn1 rxb1
	info "rails: one subnet 10.75.0.0/24"
	rail_pod "$A" 10.75.0.1/24 10.75.0.11/24
	rail_pod "$B" 10.75.0.2/24 10.75.0.12/24
	port_gid "$A" rxa0 10.75.0.1
	port_gid "$A" rxa1 10.75.0.11
	port_gid "$B" rxb0 10.75.0.2
	port_gid "$B" rxb1 10.75.0.12
	rail_check "$A" 10.75.0.1 rxa0 "$B" 10.75.0.2 rxb0 0
	rail_check "$A" 10.75.0.11 rxa1 "$B" 10.75.0.12 rxb1 1
	rail_unpod "$A" 10.75.0.1 10.75.0.11
	rail_unpod "$B" 10.75.0.2 10.75.0.12
	info "rails: two subnets, 10.75.0.0/24 on hpn0 and 10.76.0.0/24 on hpn1"
	fx ip -n "$A" addr add 10.75.0.1/24 dev hpn0
	fx ip -n "$A" addr add 10.76.0.1/24 dev hpn1
	fx ip -n "$B" addr add 10.75.0.2/24 dev hpn0
	fx ip -n "$B" addr add 10.76.0.2/24 dev hpn1
	rail_pod "$A" 10.75.0.1/24 10.76.0.1/24
	rail_pod "$B" 10.75.0.2/24 10.76.0.2/24
	# The rxe devices stayed; their GID entries followed the new addresses.
	port_gid "$A" rxa1 10.76.0.1
	port_gid "$B" rxb1 10.76.0.2
	rail_check "$A" 10.75.0.1 rxa0 "$B" 10.75.0.2 rxb0 0
	rail_check "$A" 10.76.0.1 rxa1 "$B" 10.76.0.2 rxb1 1
	local d
	for d in rxa0 rxa1; do rxe_del "$A" "$d"; done
	for d in rxb0 rxb1; do rxe_del "$B" "$d"; done
	no_rdma
	nic_home "$A" hpn0 "${VM_NICS[0]}"
	nic_home "$A" hpn1 "${VM_NICS[1]}"
	nic_home "$B" hpn0 "${VM_NICS[2]}"
	nic_home "$B" hpn1 "${VM_NICS[3]}"
	fx ip netns del "$A"
	fx ip netns del "$B"
	nics_as_booted
}

# agent_journal POD NIC IFINDEX MAC RXE: the journal ADD writes for NIC moved
# into POD as hpn0, RXE bound on port 1 with GID index 1, pod hpnv/POD.
agent_journal() {
	jq -cn --arg boot "$(</proc/sys/kernel/random/boot_id)" --arg cid "$CID-$1" \
		--arg netns "/run/netns/$1" --arg nic "$2" --argjson idx "$3" --arg mac "$4" \
		--arg rxe "$5" --arg pod "$1" '{
		version: 2, bootId: $boot, phase: 4, containerId: $cid, cniIfName: "eth0",
		netns: $netns,
		nics: [{kind: "moved", podIfName: "hpn0",
			host: {name: $nic, ifindex: $idx, mtu: 1500, up: false, mac: $mac, altnames: []},
			rdma: {name: $rxe, netdev: "hpn0", moved: false}}],
		result: {cniVersion: "1.0.0", interfaces: [{name: "hpn0", mac: $mac, sandbox: $netns}],
			ips: [], dns: {},
			rdma: [{interface: 0, bound: true, device: $rxe, port: 1, gidIndex: 1}]},
		pod: {namespace: "hpnv", name: $pod, uid: ""}}' >"$T/state/hpnv-agent/.$CID-$1.eth0"
	mv "$T/state/hpnv-agent/.$CID-$1.eth0" "$T/state/hpnv-agent/$CID-$1.eth0"
}

# agent_metric NAME POD: the value of metric NAME for pod POD, from a scrape
# at least a second after the last (the agent answers within a second from
# its last collection).
agent_metric() {
	awk -v n="$1" -v p="pod=\"$2\"" '$1 ~ "^" n "[{]" && index($1, p) { print $2 }' "$T/scrape"
}

agent_scrape() {
	local i
	nap 1.1
	for ((i = 0; i < 20; i++)); do
		curl -sf "http://127.0.0.1:$AGENT_PORT/metrics" >"$T/scrape" 2>"$T/curl.err" && return 0
		nap 0.5
	done
	fail "no answer from the agent's /metrics: $(<"$T/curl.err"); lo: $(ip -o addr show lo); $(tail -n 5 "$T/agent.log")"
}

scen_agent() {
	local n0=${VM_NICS[0]} n1=${VM_NICS[1]} agent=${HPN_BUILD:-}/agent/hpn-rdma-agent
	local i0 i1 lo_up=true pid v tx0 rx0 ltx0 tx1 rx1 ltx1 min=$((ITERS * 65536))
	[[ -x $agent ]] || skip "hpn-rdma-agent was not built ($agent)"
	info "agent: the pods of 'pods' journalled; the agent's metrics on rxa and rxb, before and after ib_write_bw"
	AGENT_PORT=19470
	mkdir -p "$T/state/hpnv-agent" "$T/kl"
	chmod 0700 "$T/state" "$T/state/hpnv-agent"
	jq -cn --arg s "$T/state" --arg a "$n0" --arg b "$n1" '{cniVersion: "1.0.0",
		name: "hpnv-agent", type: "hpn-rdma", stateDir: $s, rdmaRequired: false,
		match: {devices: [$a, $b]}}' >"$T/agent.conf"
	i0=$(ip -j link show "$n0" | jq '.[0].ifindex')
	i1=$(ip -j link show "$n1" | jq '.[0].ifindex')
	pod_add "$A"
	pod_add "$B"
	agent_journal "$A" "$n0" "$i0" "${VM_MACS[0]}" rxa
	agent_journal "$B" "$n1" "$i1" "${VM_MACS[1]}" rxb
	nic_to_pod "$n0" "$A" hpn0 10.76.0.1/24
	nic_to_pod "$n1" "$B" hpn0 10.76.0.2/24
	rxe_in "$A" hpn0 rxa
	rxe_in "$B" hpn0 rxb
	port_gid "$A" rxa 10.76.0.1
	port_gid "$B" rxb 10.76.0.2
	[[ $(ip -o link show lo) == *"state UNKNOWN"* || $(ip -o link show lo) == *"<LOOPBACK,UP"* ]] ||
		lo_up=false
	$lo_up || fx ip link set lo up
	"$agent" --config "$T/agent.conf" --kubelet-dir "$T/kl" --lookup-socket "$T/agent.sock" \
		--cdi-dir "$T/cdi" --cri-socket none --health-interval 1 --metrics-address "127.0.0.1:$AGENT_PORT" \
		2>"$T/agent.log" &
	pid=$!
	# shellcheck disable=SC2064 # the pid now
	trap "kill $pid 2>/dev/null || true" EXIT
	for ((v = 0; v < 60; v++)); do
		agent_scrape
		[[ $(agent_metric hpn_rdma_attachment_healthy "$A") == 1 &&
			$(agent_metric hpn_rdma_attachment_healthy "$B") == 1 ]] && break
	done
	[[ $(agent_metric hpn_rdma_attachment_healthy "$A") == 1 ]] ||
		fail "the health loop does not find $A's attachment whole: $(grep -E 'attachment_(healthy|broken)' "$T/scrape"; tail -n 5 "$T/agent.log")"
	[[ $(agent_metric hpn_rdma_attachment_healthy "$B") == 1 ]] ||
		fail "the health loop does not find $B's attachment whole: $(tail -n 5 "$T/agent.log")"
	for v in "$A" "$B"; do
		[[ $(agent_metric hpn_rdma_port_state "$v") == 4 && $(agent_metric hpn_rdma_port_active "$v") == 1 ]] ||
			fail "$v's port is not ACTIVE in the metrics: $(grep -E "^hpn_rdma_port_(state|active)" "$T/scrape")"
	done
	grep -q "^hpn_rdma_port_statistic_total{.*pod=\"$B\".*statistic=\"sent_bytes\"" "$T/scrape" ||
		fail "no rdma statistic counters of rxb: $(grep -c '^hpn_rdma_port' "$T/scrape") port lines"
	tx0=$(agent_metric hpn_rdma_port_transmit_bytes_total "$B")
	rx0=$(agent_metric hpn_rdma_port_receive_bytes_total "$A")
	ltx0=$(agent_metric hpn_rdma_interface_transmit_bytes_total "$B")
	[[ $tx0 =~ ^[0-9]+$ && $rx0 =~ ^[0-9]+$ && $ltx0 =~ ^[0-9]+$ ]] ||
		fail "no byte counters: rxb sent '$tx0', rxa received '$rx0', $B's hpn0 sent '$ltx0'"
	write_bw_pods "$A" rxa "$B" rxb 10.76.0.1 "$ITERS"
	agent_scrape
	tx1=$(agent_metric hpn_rdma_port_transmit_bytes_total "$B")
	rx1=$(agent_metric hpn_rdma_port_receive_bytes_total "$A")
	ltx1=$(agent_metric hpn_rdma_interface_transmit_bytes_total "$B")
	((tx1 - tx0 >= min)) || fail "rxb's hpn_rdma_port_transmit_bytes_total rose by $((tx1 - tx0)), expected >= $min"
	((rx1 - rx0 >= min)) || fail "rxa's hpn_rdma_port_receive_bytes_total rose by $((rx1 - rx0)), expected >= $min"
	((ltx1 - ltx0 >= min)) || fail "$B's hpn0 transmit bytes rose by $((ltx1 - ltx0)), expected >= $min"
	echo "  # agent: rxb sent +$((tx1 - tx0)), rxa received +$((rx1 - rx0)), $B's hpn0 sent +$((ltx1 - ltx0)) bytes"
	kill "$pid"
	wait "$pid" || fail "the agent exited $? after SIGTERM: $(tail -n 5 "$T/agent.log")"
	trap - EXIT
	$lo_up || fx ip link set lo down
	rxe_del "$A" rxa
	rxe_del "$B" rxb
	no_rdma
	nic_home "$A" hpn0 "$n0"
	nic_home "$B" hpn0 "$n1"
	fx ip netns del "$A"
	fx ip netns del "$B"
	rm -rf "$T/state" "$T/kl"
	nics_as_booted
}

run_scenarios pods macvlan parent gone lifetime names rails agent
