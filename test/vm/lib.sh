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

# vm7_require MODE: the preamble of a 7.x scenario file: skip unless the
# guest runs Debian's 7.x kernel (run.sh boots it from the file's '# hpn-vm:'
# line), fail unless the RDMA netns mode is MODE (shared, the default, or
# exclusive: ib_core.netns_mode=0 on the command line). Sets VM_KVER, the
# kernel's release.
VM_KVER=
vm7_require() {
	local sys hint=
	read -r VM_KVER </proc/sys/kernel/osrelease
	[[ ${VM_KVER%%.*} -ge 7 ]] ||
		skip "kernel $VM_KVER: $(basename "$0") needs Debian's 7.x (run.sh boots it from the file's '# hpn-vm:' line)"
	[[ $1 == exclusive ]] && hint=" (ib_core.netns_mode=0 on the command line)"
	sys=$(rdma system show 2>&1) || true
	[[ $sys == *"netns $1"* ]] || fail "the VM did not boot in $1 RDMA netns mode$hint: $sys"
}

# ---- many scenarios in one boot ----------------------------------------------
# A boot costs 15-20 s under TCG, so one scenario file holds many scenarios:
# it defines a function scen_<name> for each and ends with
#   run_scenarios NAME...
# which runs each in a subshell of its own (a fail or skip ends that scenario
# only), timed, and prints a PASS/FAIL/SKIP line for it and a summary. The
# file's own arguments, when given, choose scenarios by name (run.sh FILE
# NAME...). After each scenario the VM must be as it booted -- every NIC in
# the initial netns under its boot name, down, without addresses, no other
# link but lo, no RDMA device, no named netns, the boot RDMA netns mode: a
# scenario's teardown is part of what it proves, so a scenario that passed
# but left anything behind fails, and vm_reset then puts the VM back so the
# next one starts clean. Exit: 1 if any failed, 77 if all skipped, else 0.

VM_BOOT_NAMES=()	# the NICs' names at boot, in VM_MACS order
VM_BOOT_MODE=	# "shared" or "exclusive"

# vm_state: the VM's state that run_scenarios compares with the boot's, one
# fact a line, sorted: links (name, flags, MTU, state, MAC; not the qdisc,
# which stays changed after a NIC was up once; nor the ifindex order: a NIC
# back from a netns where its index was taken keeps the new one), addresses,
# RDMA devices and the RDMA netns mode (of the initial netns), named netns.
# 5 processes.
vm_state() {
	local ns l w k out=()
	while read -r -a w; do
		l="link ${w[1]} ${w[2]}"
		for ((k = 3; k < ${#w[@]} - 1; k++)); do
			case ${w[k]} in
			mtu | state | link/ether) l+=" ${w[k]} ${w[k + 1]}" ;;
			esac
		done
		out+=("$l")
	done < <(ip -o link show)
	while read -r -a w; do
		[[ ${w[1]} == lo ]] || out+=("addr ${w[1]} ${w[3]}")
	done < <(ip -o addr show)
	while read -r -a w; do
		out+=("rdma ${w[1]%:}")
	done < <(rdma dev show)
	l=$(rdma system show)
	out+=("system ${l%% copy-on-fork*}")
	for ns in /run/netns/*; do
		[[ -e $ns ]] && out+=("netns ${ns##*/}")
	done
	printf '%s\n' "${out[@]}" | LC_ALL=C sort
}

# vm_link_mac LINE: NAME and MAC of an `ip -o link show` line.
vm_link_mac() {
	NAME=${1#*: } NAME=${NAME%%[:@]*}
	MAC=
	[[ $1 == *" link/ether "* ]] && MAC=${1##*link/ether } MAC=${MAC%% *}
	return 0
}

# vm_reset: put the VM back as it booted, whatever a scenario left: RDMA
# devices deleted (in every netns: exclusive mode hides them from the
# others), boot NICs moved back, other links deleted, netns deleted, the NICs
# renamed to their boot names, down and without addresses, the boot mode
# back. Best effort: run_scenarios checks the result.
vm_reset() {
	local ns dev i line NAME MAC
	for ns in "" /run/netns/*; do
		[[ -z $ns || -e $ns ]] || continue
		local -a in=()
		[[ -n $ns ]] && in=(ip netns exec "${ns##*/}")
		while read -r _ dev _; do
			"${in[@]}" rdma link delete "${dev%:}" 2>/dev/null || true
		done < <("${in[@]}" rdma dev show 2>/dev/null)
		[[ -n $ns ]] || continue
		while read -r line; do
			vm_link_mac "$line"
			for i in "${!VM_MACS[@]}"; do
				[[ ${VM_MACS[$i]} == "$MAC" ]] || continue
				ip -n "${ns##*/}" link set "$NAME" down 2>/dev/null || true
				ip -n "${ns##*/}" link set "$NAME" netns 1 name "tmp$i" 2>/dev/null || true
			done
		done < <(ip -n "${ns##*/}" -o link show 2>/dev/null)
	done
	ip -all netns delete 2>/dev/null || true
	# Netns teardown is asynchronous: the NICs come back, possibly renamed.
	wait_for 20 vm_all_nics_home || true
	while read -r line; do
		vm_link_mac "$line"
		[[ $NAME == lo || -e /sys/class/net/$NAME/device ]] && continue
		ip link del "$NAME" 2>/dev/null || true
	done < <(ip -o link show)
	for dev in /sys/class/net/*; do
		[[ -e $dev/device ]] || continue
		read -r MAC <"$dev/address"
		for i in "${!VM_MACS[@]}"; do
			[[ $MAC == "${VM_MACS[$i]}" ]] || continue
			ip link set "${dev##*/}" down
			ip addr flush dev "${dev##*/}"
			[[ ${dev##*/} == "${VM_BOOT_NAMES[$i]}" || ${dev##*/} == "tmp$i" ]] ||
				ip link set "${dev##*/}" name "tmp$i" 2>/dev/null || true
		done
	done
	for i in "${!VM_MACS[@]}"; do
		if [[ -e /sys/class/net/tmp$i ]]; then
			ip link set "tmp$i" name "${VM_BOOT_NAMES[$i]}" 2>/dev/null || true
		fi
	done
	rdma system set netns "$VM_BOOT_MODE" 2>/dev/null || true
	return 0
}

# vm_all_nics_home: every boot NIC is in the initial netns (by MAC).
vm_all_nics_home() {
	local dev mac n=0 i
	for dev in /sys/class/net/*; do
		[[ -e $dev/device ]] || continue
		read -r mac <"$dev/address"
		for i in "${!VM_MACS[@]}"; do
			[[ $mac == "${VM_MACS[$i]}" ]] && n=$((n + 1))
		done
	done
	((n == ${#VM_MACS[@]}))
}

# run_scenarios NAME...: run scen_NAME for each NAME (or for each of the
# script's arguments, which must be among them), as described above.
run_scenarios() {
	local all=("$@") want=("${SCEN_ARGS[@]}") n rc t0 ms
	local -a passed=() failed=() skipped=()
	((${#want[@]})) || want=("${all[@]}")
	for n in "${want[@]}"; do
		[[ " ${all[*]} " == *" $n "* ]] || fail "no scenario '$n' in $(basename "$0") (${all[*]})"
	done
	vm_nics
	VM_BOOT_NAMES=("${VM_NICS[@]}")
	VM_BOOT_MODE=$(rdma system show)
	VM_BOOT_MODE=${VM_BOOT_MODE#*netns } VM_BOOT_MODE=${VM_BOOT_MODE%% *}
	vm_state >"$T/boot.state"
	for n in "${want[@]}"; do
		echo "=== $n"
		t0=${EPOCHREALTIME/./}
		set +e
		(
			set -e
			# shellcheck disable=SC2034 # fail (common.sh) names it
			SCEN_NAME=$n
			"scen_$n"
		)
		rc=$?
		set -e
		ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
		vm_state >"$T/now.state"
		if ! diff -u "$T/boot.state" "$T/now.state" >"$T/state.diff"; then
			if ((rc == 0)); then
				echo "FAIL: [$n] the scenario left the VM changed:"
				sed -n '3,$p' "$T/state.diff"
				rc=1
			fi
			vm_reset
			vm_state >"$T/now.state"
			diff -u "$T/boot.state" "$T/now.state" >"$T/state.diff" || {
				echo "FAIL: [$n] vm_reset could not restore the VM; the rest is not run:"
				sed -n '3,$p' "$T/state.diff"
				failed+=("$n")
				break
			}
		fi
		case $rc in
		0) passed+=("$n") && echo "PASS: $n (${ms} ms)" ;;
		77) skipped+=("$n") && echo "SKIP: $n (${ms} ms)" ;;
		*) failed+=("$n") && echo "FAIL: $n, exit $rc (${ms} ms)" ;;
		esac
	done
	echo "=== $(basename "$0"): ${#passed[@]} passed${passed[*]:+ (${passed[*]})}," \
		"${#failed[@]} failed${failed[*]:+ (${failed[*]})}, ${#skipped[@]} skipped${skipped[*]:+ (${skipped[*]})}"
	((${#failed[@]} == 0)) || exit 1
	((${#passed[@]} > 0)) || exit 77
	exit 0
}
SCEN_ARGS=("$@")

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

