# shellcheck shell=bash
# Shared helpers of the vm test tier. A vm scenario is a bash script that
# run.sh runs inside the test VM (see run.sh for what the guest offers); it
# sources this file first, which turns on strict mode and skips the scenario
# when it is not inside that VM.
#
# Inside, the scenario is root in a throwaway machine: unlike the netns tier
# it uses the VM's initial netns as the "host" and its virtio NICs as real
# PCI NICs. Under TCG every process start costs 0.15-0.4 s: read sysfs with
# bash builtins (read, globs), and check results with one jq per step.
#
# Exit codes: 0 pass, 1 fail (a FAIL line says what), 77 skipped (a SKIP line
# says why). fail, skip, info and the expect_*/jq_ok assertions come from
# test/common.sh, shared with the netns tier; run_plugin works like that tier's.

set -euo pipefail
shopt -s inherit_errexit

# skip, fail, info, expect_ok, expect_result, expect_err, jq_ok
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

CNI_BIN=${HPN_CNI_BIN:-/usr/lib/cni}	# Debian's containernetworking-plugins

# The guard: run.sh boots the kernel with hpn_vm=1; nothing else does.
vm_guard() {
	local cmdline=
	read -r cmdline </proc/cmdline || true
	[[ " $cmdline " == *" hpn_vm=1 "* ]] ||
		skip "$(basename "$0") runs only inside the test VM: test/vm/run.sh $0 (or ctest -L vm)"
}
vm_guard

# vm_nics: the virtio NICs in the current netns, in PCI address order, as
# VM_NICS (names), VM_PCIS (PCI addresses) and VM_MACS. A virtio NIC's
# /sys/class/net/<if>/device is the virtio device, whose parent is the PCI
# function, so the netdev sits at /sys/bus/pci/devices/<pci>/virtio<N>/net/<if>.
# That directory is per netns like /sys/class/net; one glob, no processes.
# Fails unless both of run.sh's NICs are there.
VM_NICS=()
VM_PCIS=()
VM_MACS=()
vm_nics() {
	local dev pci mac
	VM_NICS=() VM_PCIS=() VM_MACS=()
	for dev in /sys/bus/pci/devices/*/virtio*/net/*; do
		[[ -e $dev ]] || continue
		pci=${dev#/sys/bus/pci/devices/}
		read -r mac <"$dev/address"
		VM_NICS+=("${dev##*/}")
		VM_PCIS+=("${pci%%/*}")
		VM_MACS+=("$mac")
	done
	((${#VM_NICS[@]} >= 2)) ||
		fail "expected 2 virtio NICs with PCI parents, found: ${VM_NICS[*]:-none}"
}

# nap SECONDS: sleep without starting a process (sleep(1) costs more than
# the nap): a read that times out on a pipe nobody writes to.
exec {NAP_FD}<> <(:)
nap() {
	read -rt "$1" -u "$NAP_FD" _ || true
}

# wait_for SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds;
# false if it did not within SECONDS. Make COMMAND a builtin or function
# (test, port_active) where possible.
wait_for() {
	local end=$((${EPOCHREALTIME/./} + $1 * 1000000))
	shift
	until "$@"; do
		((${EPOCHREALTIME/./} < end)) || return 1
		nap 0.1
	done
}

# rxe_add NETDEV NAME: a soft-RoCE device NAME on NETDEV, once `rdma link`
# lists it.
rxe_add() {
	local dev=$1 name=$2
	rdma link add "$name" type rxe netdev "$dev" ||
		fail "rdma link add $name type rxe netdev $dev failed"
	wait_for 10 test -e "/sys/class/infiniband/$name" ||
		fail "rxe device $name did not appear in /sys/class/infiniband"
	rdma link show "$name/1" >/dev/null ||
		fail "rxe device $name is not listed by rdma link"
}

# port_active NAME: port 1 of the RDMA device NAME is ACTIVE.
port_active() {
	local state=
	read -r state <"/sys/class/infiniband/$1/ports/1/state" && [[ $state == *ACTIVE ]]
}

# rxe_port_active NAME: wait until port 1 of NAME is ACTIVE (rxe follows
# its netdev's carrier, so bring that up first).
rxe_port_active() {
	wait_for 10 port_active "$1" ||
		fail "port 1 of $1 is not ACTIVE: $(cat "/sys/class/infiniband/$1/ports/1/state")"
}

# rxe_nics N: the VM's first N NICs up, each with a Soft-RoCE device (rxe0...)
# whose port is ACTIVE, in the kernel's default shared RDMA netns mode; sets
# nic0, nic1...
rxe_nics() {
	local i
	vm_nics
	for ((i = 0; i < $1; i++)); do
		printf -v "nic$i" '%s' "${VM_NICS[$i]}"
		ip link set "${VM_NICS[$i]}" up
		rxe_add "${VM_NICS[$i]}" "rxe$i"
	done
	for ((i = 0; i < $1; i++)); do
		rxe_port_active "rxe$i"
	done
	[[ $(rdma system show) == *"netns shared"* ]] || fail "the VM does not start in shared mode"
}

# ---- running the plugin ------------------------------------------------------

# Globals a scenario sets and run_plugin reads; T is its scratch dir.
T=$(mktemp -d /tmp/hpnv.XXXXXX)
CID=hpnv-$$
NETNS=
IFNAME=eth0
RC=0
OUT=
ERR=
LAST_RUN=

# run_plugin CMD CONFIG [NAME=VALUE | -NAME]...
# Runs $HPN_PLUGIN in the VM's initial netns with a clean CNI environment
# (CNI_CONTAINERID=$CID, CNI_NETNS=$NETNS, CNI_IFNAME=$IFNAME, CNI_PATH= the
# plugin's dir and $CNI_BIN); NAME=VALUE adds or overrides a variable, -NAME
# removes one. Sets RC, OUT (stdout) and ERR (stderr). Never fails by itself.
run_plugin() {
	run_cni "$1" "$2" "$NETNS" "${HPN_PLUGIN%/*}:$CNI_BIN" "${@:3}"
}

