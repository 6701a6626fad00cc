#!/usr/bin/env bash
# Builds hpn-rdma and shows it end to end without touching this machine's
# network: a throwaway "node" netns with a veth end standing in for an RDMA NIC
# (given a PCI address through a fake sysfs), a throwaway pod netns, then ADD
# selecting the NIC by PCI address with host-local IPAM, the result, the pod's
# view, the NCCL hints file, the journal, CHECK, DEL, and the node as it was.
# The pod opts in by annotation, as the runtime passes it. Run as root.
# (Debian's host-local speaks CNI up to 1.0.0, so the demo does too.)
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" --target hpn-rdma >/dev/null
plugin=$PWD/build/plugin/hpn-rdma

node=hpn-demo-node-$$
pod=hpn-demo-pod-$$
tmp=$(mktemp -d /tmp/hpn-demo.XXXXXX)
cleanup() {
	ip netns del "$pod" 2>/dev/null || true
	ip netns del "$node" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$node"
ip netns add "$pod"
# The stand-in NIC: one end of a veth pair, named like a ConnectX port.
ip -n "$node" link add ens1f0np0 mtu 9000 type veth peer name peer0
ip -n "$node" link set ens1f0np0 up
# ...and a PCI identity for it, in a fake sysfs laid out like a ConnectX port's,
# so the NIC is selected by PCI address as a device plugin would hand it over.
pci=0000:af:00.0
dev=devices/pci0000:ae/0000:ae:00.0/$pci
mkdir -p "$tmp/sysfs/$dev/net/ens1f0np0" "$tmp/sysfs/bus/pci/devices" "$tmp/sysfs/class/net"
ln -s "../../../$dev" "$tmp/sysfs/bus/pci/devices/$pci"
ln -s "../../$dev/net/ens1f0np0" "$tmp/sysfs/class/net/ens1f0np0"
ln -s "../../../$pci" "$tmp/sysfs/$dev/net/ens1f0np0/device"

conf=$(cat <<JSON
{
  "cniVersion": "1.0.0",
  "name": "hpn-demo",
  "type": "hpn-rdma",
  "ifName": "hpn0",
  "pciBusID": "$pci",
  "rdmaRequired": false,
  "sysfsRoot": "$tmp/sysfs",
  "mtu": 4200,
  "stateDir": "$tmp/state",
  "logFile": "$tmp/hpn-rdma.log",
  "podSelector": {"annotation": "alibabacloud.com/hpn-type", "value": "rdma"},
  "nccl": {"dir": "$tmp/pods", "env": {"NCCL_DEBUG": "INFO"}},
  "runtimeConfig": {
    "io.kubernetes.cri.pod-annotations": {
      "alibabacloud.com/hpn-type": "rdma",
      "alibabacloud.com/gpu-model-series": "gpu-hpn",
      "alibabacloud.com/gpu-count": "8"
    }
  },
  "ipam": {
    "type": "host-local",
    "ranges": [[{"subnet": "192.168.77.0/24"}]],
    "routes": [{"dst": "192.168.0.0/16"}],
    "dataDir": "$tmp/ipam"
  }
}
JSON
)
uid=6f1c2a3e-8d4b-4c5a-9e7f-0a1b2c3d4e5f
cni() { # cni COMMAND [config]: run the plugin as a runtime would, inside the node netns
	ip netns exec "$node" env CNI_COMMAND="$1" CNI_CONTAINERID=demo-0001 \
		CNI_NETNS=/run/netns/$pod CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=demo;K8S_POD_UID=$uid" \
		"$plugin" <<<"${2:-$conf}"
}
step() { printf '\n== %s\n' "$*"; }

step "node before ADD"
ip -n "$node" -br link show ens1f0np0
step "ADD: the result"
result=$(cni ADD)
jq . <<<"$result"
step "the pod's view"
ip -n "$pod" -br addr show hpn0
ip -n "$pod" route
step "the NCCL hints file (a pod mounts it at /etc/nccl.conf)"
cat "$tmp/pods/$uid/nccl.conf"
step "the journal DEL will undo from"
jq -c . "$tmp"/state/hpn-demo/*
step "CHECK (with the result as prevResult)"
cni CHECK "$(jq -c --argjson p "$result" '. + {prevResult: $p}' <<<"$conf")" && echo "CHECK ok"
step "DEL, twice (DEL is idempotent)"
cni DEL && cni DEL && echo "DEL ok"
step "node after DEL"
ip -n "$node" -br link show ens1f0np0
ip -n "$node" link show ens1f0np0 | grep -o 'mtu [0-9]*'
[[ ! -e $tmp/pods/$uid ]] && echo "hints file removed"
step "a pod without the annotation: ADD passes through and attaches nothing"
cni ADD "$(jq -c '.runtimeConfig["io.kubernetes.cri.pod-annotations"] = {}' <<<"$conf")"
echo
ip -n "$node" -br link show ens1f0np0
step "log"
cat "$tmp/hpn-rdma.log"
