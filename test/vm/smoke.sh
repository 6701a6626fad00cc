#!/bin/bash
# The vm tier's own check: the guest is what the other scenarios assume.
#
# Proves that the kernel is Debian's 6.1; that both virtio NICs are there
# with PCI parents at the fixed addresses run.sh gives them; that a soft-RoCE
# device can be made on one (rdma_rxe, with crc32_generic loaded first) and
# that libibverbs sees it with port 1 PORT_ACTIVE; that the RDMA subsystem
# reports its netns mode; and that the plugin binary from the host's build
# tree runs inside the VM.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

read -r kver </proc/sys/kernel/osrelease
[[ $kver == 6.1.* ]] || fail "kernel is $kver, expected Debian's 6.1"
info "kernel $kver"

vm_nics
[[ ${VM_PCIS[*]} == "0000:00:04.0 0000:00:05.0" ]] ||
	fail "virtio NICs at PCI ${VM_PCIS[*]}, expected 0000:00:04.0 0000:00:05.0"
[[ ${VM_MACS[*]} == "52:54:00:12:34:50 52:54:00:12:34:51" ]] ||
	fail "virtio NIC MACs are ${VM_MACS[*]}, expected run.sh's"
info "NICs: ${VM_NICS[0]} ${VM_PCIS[0]}, ${VM_NICS[1]} ${VM_PCIS[1]}"

nic=${VM_NICS[0]}
ip link set "$nic" up
rxe_add "$nic" rxe0
rxe_port_active rxe0
dev=$(ibv_devinfo -d rxe0) || fail "ibv_devinfo -d rxe0 failed: $dev"
[[ $dev =~ hca_id:[[:space:]]+rxe0 ]] || fail "ibv_devinfo does not show rxe0: $dev"
[[ $dev =~ state:[[:space:]]+PORT_ACTIVE ]] ||
	fail "ibv_devinfo: port 1 of rxe0 is not PORT_ACTIVE: $dev"
info "rxe0 on $nic: PORT_ACTIVE"

sys=$(rdma system) || fail "rdma system failed"
[[ $sys =~ netns\ (shared|exclusive) ]] || fail "rdma system shows no netns mode: $sys"
info "rdma system: $sys"

[[ -n ${HPN_PLUGIN:-} ]] || fail "HPN_PLUGIN is not set (run through ctest)"
ver=$("$HPN_PLUGIN" --version 2>&1) || fail "$HPN_PLUGIN --version failed: $ver"
[[ $ver == hpn-rdma* ]] || fail "$HPN_PLUGIN --version printed: $ver"
info "plugin: $ver"

echo "PASS: $(basename "$0")"
