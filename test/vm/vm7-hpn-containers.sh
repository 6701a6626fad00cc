#!/bin/bash
# hpn-vm: kernel=7 nics=2
# The kubelet's device plugin path for real, in the 7.x VM: the runtime
# tier's containerd node (Debian's containerd 1.6 + runc, driven through
# hpn-cri; ctr7.sh) whose pool is the VM's two virtio NICs, network bridge +
# hpn-rdma with softRoce, hpn-rdma-agent serving the kubelet stand-in
# hpn-kubelet (registration, Allocate, PodResources: what the kubelet's
# device manager does, not its admission). Default shared RDMA netns mode.
#  devices   the stand-in's PodResources gives pod a the first NIC, pod c
#            the second; pod b holds none and is not opted in. Allocate, at
#            admission, answers for a and c the container's directory
#            (agent.deviceDir/<ID>) as /dev/infiniband and rdma_cm: the rxe
#            is made at ADD. RunPodSandbox: ADD attaches exactly the
#            allocated NIC, makes the rxe in the pod and its uverbsN node in
#            that directory (the kernel's numbers). CreateContainer with
#            Allocate's devices, not privileged, the guest's /usr, /bin,
#            /lib, /lib64 read-only: containerd expanded the directory (the
#            runtime spec has the node and its device cgroup rule, no
#            allow-all, no CAP_SYS_ADMIN); ibv_devinfo opens the pod's device
#            and ib_write_bw runs container c to container a; b's container
#            has no /dev/infiniband, and a node it makes itself cannot be
#            opened (EPERM: the device cgroup is real). Every pod removed: no
#            rdma link, no journal, no device node left, the NICs back.
#            CDI: Allocate names each pod's CDI device
#            (alibabacloud.com/hpn-rdma=<PCI>) beside the directory; ADD
#            writes its spec in agent.cdiDir with the made device's numbers
#            (the nodes of the directory, rdma_cm), journalled; containerd 1.6
#            skips the CRI CDI devices the containers get; DEL removes the
#            spec. Through containerd: an ADD failing after the spec is
#            written (HPN_FAIL_AT=cdi) rolls it back, one killed there leaves
#            it to containerd's DEL, and a file not ours at its name fails
#            ADD (naming the path) and is left as it was.
#  cdi21     the same node under containerd 2.1 (forky's, from the runtime
#            tier's cache, with its CNI plugins 1.9), which resolves CDI: pod
#            a's container, created with only the CDI device Allocate named,
#            has its own rxe's uverbsN and rdma_cm from ADD's spec (ibv_devinfo:
#            PORT_ACTIVE); pod b's container naming a's device is refused at
#            StartContainer by the spec's hook (hpn-rdma cdi-hook, naming pod
#            a) and never runs; DEL removes the spec.
# The node's CDI directory is containerd's cdi_spec_dirs (node.sh) and the
# network's agent.cdiDir.
# Run: test/vm/run.sh test/vm/vm7-hpn-containers.sh [devices|cdi21]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=floor.sh
source "$(dirname "$0")/floor.sh"	# tcp_listening, rdma_none, FLOOR_PORT
# shellcheck source=ctr7.sh
source "$(dirname "$0")/ctr7.sh"

vm7_require shared

OPT_IN='{"alibabacloud.com/hpn-type": "rdma"}'
ITERS=40

# hpn0_addr POD: the IPv4 address of hpn0 in POD.
hpn0_addr() {
	local l
	l=$(nsenter -t "$(vctr_pod_pid "$1")" -n ip -4 -o addr show dev hpn0)
	[[ $l =~ inet\ ([0-9.]+)/ ]] || fail "no IPv4 address on hpn0 in $1: $l"
	echo "${BASH_REMATCH[1]}"
}

# cdi_spec ID: ADD's CDI spec for NIC ID.
cdi_spec() {
	echo "$RTN_CDI_DIR/alibabacloud.com-hpn-rdma-pod_$1.json"
}

# spec_of ID DEV UVERBS MAJMIN: ADD's CDI spec for ID names device ID with
# DEV's nodes: UVERBS first (MAJMIN, its node in Allocate's directory), then
# umadN, then rdma_cm with the kernel's numbers; the journal names it.
spec_of() {
	local id=$1 s cm journal
	[[ -f $(cdi_spec "$id") ]] || fail "ADD wrote no CDI spec for $id: $(ls -la "$RTN_CDI_DIR")"
	s=$(<"$(cdi_spec "$id")")
	read -r cm </sys/class/misc/rdma_cm/dev
	jq_ok '.cdiVersion == "0.5.0" and .kind == "alibabacloud.com/hpn-rdma" and
		(.devices | length) == 1 and .devices[0].name == $id and
		(.devices[0].containerEdits.deviceNodes as $n |
			$n[0] == {path: ("/dev/infiniband/" + $u), hostPath: ($d + "/" + $id + "/" + $u),
				type: "c", major: ($mm | split(":")[0] | tonumber),
				minor: ($mm | split(":")[1] | tonumber), permissions: "rw"} and
			all($n[1:-1][]; .path | test("^/dev/infiniband/umad[0-9]+$")) and
			$n[-1] == {path: "/dev/infiniband/rdma_cm", hostPath: "/dev/infiniband/rdma_cm",
				type: "c", major: ($cm | split(":")[0] | tonumber),
				minor: ($cm | split(":")[1] | tonumber), permissions: "rw"}) and
		(.devices[0].containerEdits.env | index("HPN_RDMA_DEVICE_" +
			($id | ascii_upcase | gsub("[^A-Z0-9]"; "_")) + "=" + $dev))' \
		"ADD's CDI spec for $id" "$s" --arg id "$id" --arg dev "$2" --arg u "$3" --arg mm "$4" \
		--arg cm "$cm" --arg d "$T/devdir"
	echo "  # CDI spec of $id: $(jq -c '[.devices[0].containerEdits.deviceNodes[] |
		"\(.path) \(.major):\(.minor)"]' <<<"$s")"
	[[ $(stat -c %a "$(cdi_spec "$id")") == 644 ]] || fail "ADD's CDI spec is not 0644"
	journal=$(jq -cs . "$T/state/$VCTR_NET"/*)
	jq_ok 'any(.[]; .cdiDir == $d and any(.nics[]; .rdma.cdiSpec == $f))' \
		"a journal names the spec for DEL" "$journal" --arg d "$RTN_CDI_DIR" \
		--arg f "alibabacloud.com-hpn-rdma-pod_$id.json"
}

# node_of ID UVERBS MAJMIN: Allocate's directory for ID holds the node UVERBS
# that ADD made, with the kernel's numbers MAJMIN (decimal).
node_of() {
	local got want
	got=$(stat -c '%F %t:%T' "$T/devdir/$1/$2") || fail "ADD made no $2 in Allocate's directory for $1"
	printf -v want 'character special file %x:%x' "${3%:*}" "${3#*:}"
	[[ $got == "$want" ]] || fail "$T/devdir/$1/$2 is $got, not $want ($3)"
}

scen_devices() {
	local deva uva mma devc uvc ctra ctrb ctrc spec got ip pid srv l ctr p alla allc
	trap vctr_down EXIT
	vctr_up
	# The kubelet's side: pod a holds the first NIC, pod c the second.
	vctr_agent_up "$(jq -cn --arg a "${VM_PCIS[0]}" --arg c "${VM_PCIS[1]}" '[
		{namespace: "hpnv", name: "a", containers: [{name: "main", devices: [{resource: "rdma/hpn", ids: [$a]}]}]},
		{namespace: "hpnv", name: "c", containers: [{name: "main", devices: [{resource: "rdma/hpn", ids: [$c]}]}]}]')"
	# Admission: Allocate, before the sandbox exists. The device is made at
	# ADD, so the answer is a directory, resolved at CreateContainer.
	alla=$(vctr_allocate "${VM_PCIS[0]}")
	jq_ok '. == [{containerPath: "/dev/infiniband", hostPath: ($d + "/" + $id), permissions: "rw"},
		{containerPath: "/dev/infiniband/rdma_cm", hostPath: "/dev/infiniband/rdma_cm", permissions: "rw"}]' \
		"Allocate for pod a (softRoce: the container's directory and rdma_cm)" "$alla" \
		--arg d "$T/devdir" --arg id "${VM_PCIS[0]}"
	jq_ok '.[0].cdi == ["alibabacloud.com/hpn-rdma=" + $id]' \
		"Allocate for pod a names the CDI device ADD's spec will define" \
		"$(<"$T/alloc-${VM_PCIS[0]}.json")" --arg id "${VM_PCIS[0]}"
	[[ -d $RTN_CDI_DIR && -z $(ls -A "$RTN_CDI_DIR") ]] ||
		fail "the agent made no empty CDI directory (the NICs have no RDMA device): $(ls -la "$RTN_CDI_DIR")"
	allc=$(vctr_allocate "${VM_PCIS[1]}")
	[[ -d $T/devdir/${VM_PCIS[0]} && -z $(ls -A "$T/devdir/${VM_PCIS[0]}") ]] ||
		fail "Allocate's directory for pod a is not there, empty: $(ls -la "$T/devdir")"

	vctr_pod a "$OPT_IN"
	vctr_rxe a
	deva=$DEV uva=$UVERBS mma=$MAJMIN
	info "pod a: $deva on hpn0, $uva ($mma)"
	[[ $(nsenter -t "$(vctr_pod_pid a)" -n ip -o link show hpn0) == *" link/ether ${VM_MACS[0]} "* ]] ||
		fail "pod a's hpn0 is not the NIC the kubelet allocated to it (${VM_PCIS[0]})"
	node_of "${VM_PCIS[0]}" "$uva" "$mma"
	spec_of "${VM_PCIS[0]}" "$deva" "$uva" "$mma"
	vctr_pod c "$OPT_IN"
	vctr_rxe c
	devc=$DEV uvc=$UVERBS
	[[ $devc != "$deva" ]] || fail "pods a and c share $deva"
	info "pod c: $devc on hpn0, $uvc ($MAJMIN)"
	node_of "${VM_PCIS[1]}" "$uvc" "$MAJMIN"
	spec_of "${VM_PCIS[1]}" "$devc" "$uvc" "$MAJMIN"
	vctr_pod b '{}'

	# With the CDI devices Allocate named, as a kubelet passes them: containerd 1.6
	# does not know the field and takes the DeviceSpecs alone.
	vctr_ctr a "$alla" "$(<"$T/alloc-${VM_PCIS[0]}.cdi")"
	ctra=$VCTR_CTR
	# The spec containerd gave runc (the shim's bundle): the expanded node,
	# its cgroup rule, rdma_cm; not privileged (no allow-all rule, no
	# CAP_SYS_ADMIN).
	spec=$(<"$RTN_DIR/state/io.containerd.runtime.v2.task/k8s.io/$ctra/config.json")
	jq_ok '.linux as $l |
		([$l.devices[] | select(.path == $u and .type == "c" and .major == $ma and .minor == $mi)] | length) == 1 and
		([$l.resources.devices[] | select(.allow and .type == "c" and .major == $ma and .minor == $mi and .access == "rw")] | length) == 1 and
		([$l.devices[] | select(.path == "/dev/infiniband/rdma_cm")] | length) == 1 and
		([$l.resources.devices[] | select(.allow and (.type // "a") == "a")] | length) == 0 and
		(.process.capabilities.effective | index("CAP_SYS_ADMIN") | not)' "container a's runtime spec" "$spec" \
		--arg u "/dev/infiniband/$uva" --argjson ma "${mma%:*}" --argjson mi "${mma#*:}"
	echo "  # container a's spec: $(jq -c '[.linux.devices[] | select(.path | startswith("/dev/infiniband"))] as $d |
		[$d[] | "\(.path) \(.type) \(.major):\(.minor)"] + [.linux.resources.devices[] | select(. as $r |
		any($d[]; .major == $r.major and .minor == $r.minor)) | "allow \(.type) \(.major):\(.minor) \(.access)"]' <<<"$spec")"
	vctr_exec "$ctra" stat -c '%n %F %t:%T' "/dev/infiniband/$uva" /dev/infiniband/rdma_cm
	((RC == 0)) || fail "container a has not its device nodes: $OUT"
	echo "  # container a: ${OUT//$'\n'/; }"
	vctr_exec "$ctra" ibv_devinfo -d "$deva"
	((RC == 0)) && [[ $OUT == *"PORT_ACTIVE"* ]] ||
		fail "ibv_devinfo -d $deva in container a: exit $RC: $OUT"
	echo "  # container a: ibv_devinfo -d $deva: port 1 PORT_ACTIVE"

	vctr_ctr c "$allc" "$(<"$T/alloc-${VM_PCIS[1]}.cdi")"
	ctrc=$VCTR_CTR

	vctr_ctr b '[]'
	ctrb=$VCTR_CTR
	vctr_exec "$ctrb" bash -c "test ! -e /dev/infiniband && mknod /dev/$uva c ${mma%:*} ${mma#*:} && exec 3<>/dev/$uva"
	[[ $RC != 0 && $OUT == *"Operation not permitted"* ]] ||
		fail "container b (no device entry) opened its own node of $uva: exit $RC: $OUT"
	echo "  # container b: no /dev/infiniband; its own $uva node: EPERM"
	vctr_exec "$ctrb" ibv_devinfo -d "$deva"
	((RC != 0)) || fail "ibv_devinfo -d $deva worked in container b: $OUT"

	# ib_write_bw from container c to container a, over the pods' own devices.
	ip=$(hpn0_addr a)
	pid=$(vctr_pod_pid a)
	cri exec -t 120 "$ctra" ib_write_bw -d "$deva" -i 1 -x 1 -F -n "$ITERS" >"$T/srv.out" 2>&1 &
	srv=$!
	wait_for 60 tcp_listening "$pid" "$FLOOR_PORT" || fail "ib_write_bw did not listen in container a: $(<"$T/srv.out")"
	vctr_ms
	vctr_exec "$ctrc" ib_write_bw -d "$devc" -i 1 -x 1 -F -n "$ITERS" "$ip"
	wait "$srv" || fail "ib_write_bw server in container a: exit $?: $(<"$T/srv.out")"
	((RC == 0)) || fail "ib_write_bw client in container c: exit $RC: $OUT"
	got=
	while read -r l; do
		[[ $l =~ ^65536[[:space:]]+${ITERS}[[:space:]]+[0-9.]+[[:space:]]+([0-9.]+) ]] && got=${BASH_REMATCH[1]}
	done <<<"$OUT"
	[[ -n $got ]] || fail "ib_write_bw: no result line in: $OUT"
	vctr_ms
	echo "  # ib_write_bw container c ($devc) -> container a ($deva): $got MB/s ($MS ms)"

	for ctr in "$ctrb" "$ctrc" "$ctra"; do
		cri stop "$ctr" && cri rm "$ctr" || fail "StopContainer/RemoveContainer $ctr failed"
	done
	for p in b c a; do
		cri stopp "${VCTR_POD[$p]}" && cri rmp "${VCTR_POD[$p]}" || fail "stop/remove of pod $p failed"
	done
	vctr_ms
	info "containers and pods removed: $MS ms"
	wait_for 10 rdma_none || fail "rdma links left: $(rdma link show)"
	[[ -z $(compgen -G "$T/state/$VCTR_NET/*") ]] || fail "journals left: $(ls "$T/state/$VCTR_NET")"
	[[ -z $(compgen -G "$T/devdir/*/*") ]] ||
		fail "DEL left device nodes: $(ls -lR "$T/devdir")"
	[[ -z $(ls -A "$RTN_CDI_DIR") ]] || fail "DEL left CDI specs: $(ls -la "$RTN_CDI_DIR")"
	# The NICs back on the node are Healthy for the next pod: the rxe that
	# went with DEL was the pod's, not the NIC's.
	wait_for 10 all_healthy ||
		fail "the agent does not list both NICs Healthy after DEL: $(last_list)"
	cdi_failures
}

# no_leftovers WHAT: no pod's CDI spec, journal or rdma link left.
no_leftovers() {
	[[ ! -e $(cdi_spec "${VM_PCIS[0]}") ]] || fail "$1: the CDI spec is left"
	[[ -z $(compgen -G "$T/state/$VCTR_NET/*") ]] || fail "$1: journals left: $(ls "$T/state/$VCTR_NET")"
	wait_for 10 rdma_none || fail "$1: rdma links left: $(rdma link show)"
}

# Pod a again, through containerd, with its ADD failing around the CDI spec.
cdi_failures() {
	local f n0 n1 sum
	f=$(cdi_spec "${VM_PCIS[0]}")
	# Failing once the spec is written: the rollback removes it (after it was written).
	vctr_fail_at cdi
	n0=$(grep -c "CDI spec $f: device" "$T/plugin.log" || true)
	vctr_pod_fails a "$OPT_IN"
	grep -q 'injected failure after step cdi' "$T/plugin.log" ||
		fail "ADD did not fail at the cdi step: $OUT"
	n1=$(grep -c "CDI spec $f: device" "$T/plugin.log" || true)
	((n1 == n0 + 1)) || fail "the failing ADD did not write the spec first ($n0 -> $n1 writes)"
	grep -q "removed CDI spec $f" "$T/plugin.log" || fail "the rollback did not remove $f"
	no_leftovers "ADD failing after the CDI spec"
	info "ADD failing after the CDI spec: rolled back, spec removed"
	# Killed there: the journal names the spec, and containerd's DEL after the failed ADD removes it.
	vctr_fail_at cdi kill
	vctr_pod_fails a "$OPT_IN"
	n0=$(grep -c "CDI spec $f: device" "$T/plugin.log" || true)
	((n0 == n1 + 1)) || fail "the killed ADD did not write the spec ($n1 -> $n0 writes)"
	no_leftovers "ADD killed after the CDI spec, then containerd's DEL"
	info "ADD killed after the CDI spec: containerd's DEL removed it"
	vctr_fail_at
	# Another writer's file at the name: ADD fails naming it, rolled back, the file untouched.
	echo '{"cdiVersion":"0.5.0","kind":"example.com/nic","devices":[]}' >"$f"
	sum=$(sha256sum <"$f")
	vctr_pod_fails a "$OPT_IN"
	[[ $OUT == *"CDI spec $f is a spec of kind "*"example.com/nic"*"not hpn-rdma's: left as it is"* ]] ||
		fail "the runtime's error does not name the foreign spec: $OUT"
	[[ $(sha256sum <"$f") == "$sum" ]] || fail "the foreign spec at $f was changed"
	rm "$f"
	no_leftovers "ADD refused for a foreign spec"
	info "a foreign spec at ADD's name: ADD refused, the file left"
	wait_for 10 all_healthy || fail "the NICs are not Healthy after the failed ADDs: $(last_list)"
}

# last_list: the devices of the agent's latest ListAndWatch response.
last_list() {
	local l last=
	while read -r l; do
		[[ $l == *'"event":"list"'* ]] && last=$l
	done <"$T/kubelet.events"
	echo "$last"
}

all_healthy() {
	local l
	l=$(last_list)
	[[ $l == *'"health":"Healthy"'* && $l != *'"health":"Unhealthy"'* ]]
}

scen_cdi21() {
	local deva uva mma ctra out id
	rtn_use 2.1
	trap 'vctr_down; rtn_use 1.6' EXIT
	vctr_up
	vctr_agent_up "$(jq -cn --arg a "${VM_PCIS[0]}" '[{namespace: "hpnv", name: "a",
		containers: [{name: "main", devices: [{resource: "rdma/hpn", ids: [$a]}]}]}]')"
	vctr_allocate "${VM_PCIS[0]}" >/dev/null
	vctr_pod a "$OPT_IN"
	vctr_rxe a
	deva=$DEV uva=$UVERBS mma=$MAJMIN
	spec_of "${VM_PCIS[0]}" "$deva" "$uva" "$mma"
	jq_ok '.devices[0].containerEdits.hooks == [{hookName: "createRuntime", path: $p,
		args: ["hpn-rdma", "cdi-hook", "--state-dir", ($t + "/state"), "--network", $n, $id]}]' \
		"ADD's spec names the plugin as its hook" "$(<"$(cdi_spec "${VM_PCIS[0]}")")" \
		--arg p "$HPN_PLUGIN" --arg t "$T" --arg n "$VCTR_NET" --arg id "${VM_PCIS[0]}"
	# Only the CDI device: no DeviceSpecs, as a kubelet of 1.32+ passes them.
	vctr_ctr a '[]' "$(<"$T/alloc-${VM_PCIS[0]}.cdi")"
	ctra=$VCTR_CTR
	vctr_exec "$ctra" stat -c '%n %t:%T' "/dev/infiniband/$uva" /dev/infiniband/rdma_cm
	printf -v out '%x:%x' "${mma%:*}" "${mma#*:}"
	((RC == 0)) && [[ $OUT == "/dev/infiniband/$uva $out"* ]] ||
		fail "container a has not its device from the CDI spec: $OUT"
	vctr_exec "$ctra" ibv_devinfo -d "$deva"
	((RC == 0)) && [[ $OUT == *"PORT_ACTIVE"* ]] ||
		fail "ibv_devinfo -d $deva in container a (CDI only): exit $RC: $OUT"
	echo "  # container a (CDI only): /dev/infiniband/$uva $mma, ibv_devinfo -d $deva: PORT_ACTIVE"
	# Pod b's container naming a's device: the hook refuses it.
	vctr_pod b '{}'
	jq -n --arg img "$RTN_IMAGE" --argjson cdi "$(<"$T/alloc-${VM_PCIS[0]}.cdi")" '{
		metadata: {name: "main", attempt: 0}, image: {image: $img}, command: ["/pause"],
		CDIDevices: $cdi, logPath: "main/0.log"}' >"$VCTR_DIR/n/pods/b.ctr.json"
	id=$(cri create "${VCTR_POD[b]}" "$VCTR_DIR/n/pods/b.ctr.json" "$VCTR_DIR/n/pods/b.json") ||
		fail "CreateContainer in b failed (the refusal comes at StartContainer)"
	! out=$(cri start "$id" 2>&1) || fail "pod b's container was given pod a's device"
	[[ $out == *"attached to pod hpnv/a, not to this container's pod"* ]] ||
		fail "pod b's container failed, but not with the hook's message: $out"
	echo "  # container b naming a's device: ${out##*stderr: }"
	cri rm "$id" || fail "RemoveContainer of b's refused container failed"
	cri stop "$ctra" && cri rm "$ctra" || fail "StopContainer/RemoveContainer of a failed"
	for id in b a; do
		cri stopp "${VCTR_POD[$id]}" && cri rmp "${VCTR_POD[$id]}" || fail "stop/remove of pod $id failed"
	done
	wait_for 10 rdma_none || fail "rdma links left: $(rdma link show)"
	[[ -z $(ls -A "$RTN_CDI_DIR") ]] || fail "DEL left CDI specs: $(ls -la "$RTN_CDI_DIR")"
}

run_scenarios devices cdi21
