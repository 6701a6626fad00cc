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
#  nri21     the managed service's pods as its users write them, through
#            containerd 2.1's NRI (the node's socket) and hpn-rdma-agent
#            --nri: conf/20's label-selected network (softRoce, nri.required)
#            reading the labels from the API stand-in (test/kube), two pods
#            of the seed's Pod (model gpu-hpn, whose profile admits
#            Soft-RoCE) and one not selected, their CRI configs bare (no
#            device, mount, env or annotation; the guest's tool directories
#            stand for an image). The agent adjusts a's and c's containers:
#            the runtime spec has exactly the pod's uverbsN and rdma_cm with
#            their rw rules, its hints read-only at /etc/nccl.conf,
#            RLIMIT_MEMLOCK unlimited (the guest's root may raise it, so runc
#            does); inside, /dev/infiniband holds those two, ibv_devinfo opens
#            the pod's device and not the other pod's, ib_write_bw runs c to
#            a, and a real NCCL (the runtime cache's) takes its bootstrap
#            settings from the mounted file. b's container has none of it.
# Run: test/vm/run.sh test/vm/vm7-hpn-containers.sh [devices|cdi21|nri21]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=floor.sh
source "$(dirname "$0")/floor.sh"	# tcp_listening, rdma_none, FLOOR_PORT
# shellcheck source=ctr7.sh
source "$(dirname "$0")/ctr7.sh"
# shellcheck source=../kube/lib.sh
source "$(dirname "$0")/../kube/lib.sh"
# shellcheck source=../runtime/ncclprobe.sh
source "$(dirname "$0")/../runtime/ncclprobe.sh"

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

# write_bw CLIENT_CTR CLIENT_DEV SERVER_CTR SERVER_DEV SERVER_POD: ib_write_bw
# from one container to the other over their pods' own devices (the server's
# hpn0 address); the bandwidth said.
write_bw() {
	local ip pid srv got l
	ip=$(hpn0_addr "$5")
	pid=$(vctr_pod_pid "$5")
	cri exec -t 120 "$3" ib_write_bw -d "$4" -i 1 -x 1 -F -n "$ITERS" >"$T/srv.out" 2>&1 &
	srv=$!
	wait_for 60 tcp_listening "$pid" "$FLOOR_PORT" ||
		fail "ib_write_bw did not listen in pod $5's container: $(<"$T/srv.out")"
	vctr_ms
	vctr_exec "$1" ib_write_bw -d "$2" -i 1 -x 1 -F -n "$ITERS" "$ip"
	wait "$srv" || fail "ib_write_bw server in pod $5's container: exit $?: $(<"$T/srv.out")"
	((RC == 0)) || fail "ib_write_bw client ($2): exit $RC: $OUT"
	got=
	while read -r l; do
		[[ $l =~ ^65536[[:space:]]+${ITERS}[[:space:]]+[0-9.]+[[:space:]]+([0-9.]+) ]] && got=${BASH_REMATCH[1]}
	done <<<"$OUT"
	[[ -n $got ]] || fail "ib_write_bw: no result line in: $OUT"
	vctr_ms
	echo "  # ib_write_bw $2 -> pod $5's container ($4): $got MB/s ($MS ms)"
}

scen_devices() {
	local deva uva mma devc uvc ctra ctrb ctrc spec ctr p alla allc
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

	write_bw "$ctrc" "$devc" "$ctra" "$deva" a
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

# ---- nri21: the managed service's pods, through containerd 2.1's NRI --------------

SEED_FIXTURE=$HPN_SRC/test/fixtures/pods/default/seed-gu8tf-7d9c5b8f4-x2kqp.json
KUBE_WORK=

# nri_conflist PCI...: the label-selected node's network
# (conf/20-hpn-rdma-gpu.conflist) on this node: its bridge's addresses and
# directories, softRoce over the NICs at PCI..., the API stand-in's
# kubeconfig, the agent's socket (no kubelet: no lookup) and nri.required.
# Its MTU is left out (virtio's default).
nri_conflist() {
	jq -c --arg n "$VCTR_NET" --arg t "$T" --arg kc "$KUBE_WORK/kubeconfig" \
		--argjson p "$(printf '%s\n' "$@" | jq -Rsc 'split("\n") | map(select(. != ""))')" '
		.name = $n |
		.plugins |= map(
			if .type == "bridge" then
				.bridge = "hpnvbr0" | .ipMasq = false |
				.ipam.ranges = [[{subnet: "10.250.0.0/24"}]] | .ipam.dataDir = ($t + "/ipam")
			elif .type == "hpn-rdma" then
				del(.mtu) | .match = {pciAddresses: $p} | .softRoce = true | .logLevel = "debug" |
				.stateDir = ($t + "/state") | .logFile = ($t + "/plugin.log") |
				.nccl.dir = ($t + "/hints") | .kubernetes.kubeconfig = $kc |
				.agent = {socket: ($t + "/agent.sock"), lookup: false} | .nri = {required: true} |
				.ipam.ranges = [[{subnet: "10.251.0.0/24"}]] | .ipam.dataDir = ($t + "/ipam")
			else . end)' "$HPN_SRC/conf/20-hpn-rdma-gpu.conflist"
}

# seed_pod NAME LABELS: the seed's Pod (8 nvidia.com/gpu) in the API stand-in
# as hpnv/NAME with LABELS, and its sandbox, made as the kubelet makes it:
# no annotation.
seed_pod() {
	local uid
	uid=$(</proc/sys/kernel/random/uuid)
	jq --arg name "$1" --arg uid "$uid" --argjson l "$2" '.metadata.namespace = "hpnv" |
		.metadata.name = $name | .metadata.uid = $uid | .metadata.labels = $l' \
		"$SEED_FIXTURE" >"$KUBE_WORK/pods/hpnv/$1.json"
	VCTR_UID=$uid vctr_pod "$1" '{}'
	HINTS_OF[$1]=$T/hints/$uid/nccl.conf
}
declare -A HINTS_OF=()

# nodes_of DEV: DEV's character devices as [[path, major, minor]]: its uverbsN
# and umadN (the kernel's class directories), then rdma_cm.
nodes_of() {
	local d ib mm out='[]'
	for d in /sys/class/infiniband_verbs/uverbs* /sys/class/infiniband_mad/umad*; do
		[[ -e $d/ibdev ]] || continue
		read -r ib <"$d/ibdev"
		[[ $ib == "$1" ]] || continue
		read -r mm <"$d/dev"
		out=$(jq -c --arg p "/dev/infiniband/${d##*/}" --arg mm "$mm" \
			'. + [[$p] + ($mm | split(":") | map(tonumber))]' <<<"$out")
	done
	read -r mm </sys/class/misc/rdma_cm/dev
	jq -c --arg mm "$mm" '. + [["/dev/infiniband/rdma_cm"] + ($mm | split(":") | map(tonumber))]' <<<"$out"
}

# nri_spec CTR DEV_JSON HINTS WHAT: the spec containerd 2.1 gave runc for
# container CTR holds exactly the devices DEV_JSON ([[path, major, minor]]),
# each with one rw allow rule and no allow-all, HINTS read-only at
# /etc/nccl.conf, RLIMIT_MEMLOCK unlimited; not privileged.
nri_spec() {
	local spec
	spec=$(<"$RTN_DIR/state/io.containerd.runtime.v2.task/k8s.io/$1/config.json")
	jq_ok '.linux as $l |
		([$l.devices[]? | [.path, .major, .minor]] | sort) == ($d | sort) and
		all($l.devices[]?; .type == "c") and
		([$l.resources.devices[] | select(.allow and .type == "c") | [.major, .minor, .access]] | sort) ==
			([$d[] | [.[1], .[2], "rw"]] | sort) and
		([$l.resources.devices[] | select(.allow and (.type // "a") == "a")] | length) == 0 and
		([.mounts[] | select(.destination == "/etc/nccl.conf")] |
			length == 1 and (.[0] | .source == $h and (.options | index("ro")))) and
		([.process.rlimits[]? | select(.type == "RLIMIT_MEMLOCK") | [.soft, .hard]] ==
			[[18446744073709551615, 18446744073709551615]]) and
		(.process.capabilities.effective | index("CAP_SYS_ADMIN") | not)' \
		"$4: the runtime spec" "$spec" --argjson d "$2" --arg h "$3"
}

# nri_bare CTR WHAT: nothing of the agent's in container CTR's spec.
nri_bare() {
	jq_ok '([.linux.devices[]?] | length) == 0 and
		([.mounts[] | select(.destination == "/etc/nccl.conf")] | length) == 0 and
		([.process.rlimits[]? | select(.type == "RLIMIT_MEMLOCK")] | length) == 0' \
		"$2: the runtime spec" "$(<"$RTN_DIR/state/io.containerd.runtime.v2.task/k8s.io/$1/config.json")"
}

scen_nri21() {
	local why deva devc nodea nodec ctra ctrc ctrb p line eth0 m
	why=$(ncclprobe_why_not)
	[[ -z $why ]] || skip "$why"
	for p in openssl python3; do
		command -v $p >/dev/null || skip "$p is not installed (scripts/install-deps.sh)"
	done
	rtn_use 2.1
	# shellcheck disable=SC2034 # node.sh and ctr7.sh read them
	RTN_NRI=1 VCTR_CONFLIST=nri_conflist KUBE_WORK=$T/kube
	trap 'kube_stop; vctr_down; rtn_use 1.6' EXIT
	mkdir -p "$KUBE_WORK/pods/hpnv"
	vctr_up
	# The API stand-in on the node's loopback, where the plugin runs.
	kube_pki
	# shellcheck disable=SC2034 # kube_start reads them
	KUBE_PY_WRAP=(ip netns exec "$RTN_NS") KUBE_LIFETIME=1200
	kube_start "$KUBE_WORK/pods" || fail "the API stand-in did not start"
	echo "hpnv-token-$$" >"$KUBE_WORK/tokens"
	# shellcheck disable=SC2154 # KUBE_PORT_good: set by kube_start (printf -v)
	kubeconfig "$KUBE_WORK/kubeconfig" "https://127.0.0.1:$KUBE_PORT_good" file "token: hpnv-token-$$"
	vctr_ms
	info "the API stand-in: $MS ms"
	# The agent as the DaemonSet runs it, with containerd's NRI socket.
	rtn_in "$HPN_AGENT" --config "$RTN_DIR/cni/net.d/10-node.conflist" --kubelet-dir "$T/kl" \
		--lookup-socket "$T/agent.sock" --cdi-dir "$RTN_CDI_DIR" --cri-socket none \
		--health-interval 0 --nri="$RTN_NRI_SOCK" 2>"$T/agent.log" &
	# shellcheck disable=SC2034 # vctr_down stops it
	VCTR_AGENT_PID=$!
	wait_for 60 grep -q 'NRI: registered as hpn-rdma' "$T/agent.log" ||
		fail "the agent did not register with containerd's NRI: $(tail -n 5 "$T/agent.log")"
	vctr_ms
	info "the agent registered with NRI: $MS ms"

	# Two pods of the seed's shape (the model gpu-hpn: its profile admits
	# Soft-RoCE, GU8TF's requires mlx5), one not selected.
	local labels
	labels=$(jq -c '.metadata.labels | .["alibabacloud.com/gpu-model-series"] = "gpu-hpn"' "$SEED_FIXTURE")
	seed_pod a "$labels"
	vctr_rxe a
	deva=$DEV
	nodea=$(nodes_of "$deva")
	seed_pod c "$labels"
	vctr_rxe c
	devc=$DEV
	nodec=$(nodes_of "$devc")
	[[ $devc != "$deva" ]] || fail "pods a and c share $deva"
	seed_pod b '{"app": "plain"}'
	[[ -s ${HINTS_OF[a]} && -s ${HINTS_OF[c]} && ! -e ${HINTS_OF[b]} ]] ||
		fail "hints: a ${HINTS_OF[a]}, c ${HINTS_OF[c]}, none for b: $(ls -R "$T/hints")"

	# The containers as the seed's: no device, no mount, no env of the
	# pod's (the tools' directories stand for its image), not privileged.
	m=$(wc -l <"$T/agent.log")
	VCTR_TOOLS=("$NCCL_ROOT" "${NCCL_PROBE%/*}")
	vctr_ctr a '[]'
	ctra=$VCTR_CTR
	# shellcheck disable=SC2034 # vctr_ctr reads it
	VCTR_TOOLS=()
	vctr_ctr c '[]'
	ctrc=$VCTR_CTR
	vctr_ctr b '[]'
	ctrb=$VCTR_CTR
	line=$(tail -n "+$((m + 1))" "$T/agent.log" | grep 'NRI: container main of pod hpnv/a:') ||
		fail "the agent did not account for pod a's container: $(tail -n 5 "$T/agent.log")"
	[[ $line == *": $(jq length <<<"$nodea") device nodes added (0 there already), hints /etc/nccl.conf, RLIMIT_MEMLOCK raised" ]] ||
		fail "the agent's account of a's adjustment (nodes $nodea): $line"
	nri_spec "$ctra" "$nodea" "${HINTS_OF[a]}" "pod a's container"
	nri_spec "$ctrc" "$nodec" "${HINTS_OF[c]}" "pod c's container"
	echo "  # pod a's container: $(jq -r 'map("\(.[0]) \(.[1]):\(.[2])") | join(", ")' <<<"$nodea")"
	nri_bare "$ctrb" "pod b's container (not selected)"

	# Inside: the pod's device and no other, its hints, the limit.
	p=$(rtn_ctrd ctr -a "$RTN_SOCK" -n k8s.io tasks ls | awk -v c="$ctra" '$1 == c { print $2 }')
	[[ $(grep '^Max locked memory' "/proc/$p/limits") == *" unlimited "*" unlimited "* ]] ||
		fail "container a's process: $(grep '^Max locked memory' "/proc/$p/limits")"
	vctr_exec "$ctra" bash -c "ls /dev/infiniband; cat /etc/nccl.conf; grep '^Max locked memory' /proc/self/limits"
	((RC == 0)) || fail "container a: exit $RC: $OUT"
	[[ $OUT == "$(jq -r 'map(.[0] | ltrimstr("/dev/infiniband/")) | sort | .[]' <<<"$nodea")"$'\n'"$(<"${HINTS_OF[a]}")"$'\n'"Max locked memory"*unlimited*unlimited*bytes* ]] ||
		fail "container a: /dev/infiniband, /etc/nccl.conf, RLIMIT_MEMLOCK: $OUT"
	vctr_exec "$ctra" ibv_devinfo -d "$deva"
	((RC == 0)) && [[ $OUT == *"PORT_ACTIVE"* ]] ||
		fail "ibv_devinfo -d $deva in container a: exit $RC: $OUT"
	vctr_exec "$ctra" ibv_devinfo -d "$devc"
	((RC != 0)) || fail "container a opened pod c's device $devc: $OUT"
	echo "  # container a: its nodes alone in /dev/infiniband, its hints at /etc/nccl.conf, RLIMIT_MEMLOCK unlimited; ibv_devinfo -d $deva: PORT_ACTIVE; $devc: not openable"
	vctr_exec "$ctrb" bash -c "test ! -e /dev/infiniband && test ! -e /etc/nccl.conf && grep '^Max locked memory' /proc/self/limits"
	((RC == 0)) && [[ $OUT != *unlimited* ]] || fail "container b (not selected): $OUT"
	write_bw "$ctrc" "$devc" "$ctra" "$deva" a

	# A real NCCL in container a, reading the hints NRI mounted.
	eth0=$(nsenter -t "$(vctr_pod_pid a)" -n ip -4 -o addr show dev eth0)
	[[ $eth0 =~ inet\ ([0-9.]+)/ ]] || fail "no IPv4 address on eth0 in pod a: $eth0"
	eth0=${BASH_REMATCH[1]}
	vctr_exec "$ctra" env -i NCCL_DEBUG=INFO "$NCCL_LOADER" --library-path "$NCCL_LIBDIR" "$NCCL_PROBE"
	sed 's/^/  | /' <<<"$OUT"
	nccl_took "$OUT" "$(<"${HINTS_OF[a]}")" "$eth0" ||
		fail "NCCL in container a did not take its bootstrap settings from /etc/nccl.conf: $NCCL_WHY"
	echo "  # NCCL $NCCL_VERSION in container a took from /etc/nccl.conf: $(printf '%s; ' "${NCCL_WANT[@]}")$NCCL_BOOT"

	for p in "$ctra" "$ctrb" "$ctrc"; do
		cri stop "$p" && cri rm "$p" || fail "StopContainer/RemoveContainer $p failed"
	done
	for p in a b c; do
		cri stopp "${VCTR_POD[$p]}" && cri rmp "${VCTR_POD[$p]}" || fail "stop/remove of pod $p failed"
	done
	wait_for 10 rdma_none || fail "rdma links left: $(rdma link show)"
	[[ -z $(compgen -G "$T/state/$VCTR_NET/*") ]] || fail "journals left: $(ls "$T/state/$VCTR_NET")"
	[[ -z $(compgen -G "$T/hints/*") ]] || fail "hints left: $(ls -R "$T/hints")"
}

run_scenarios devices cdi21 nri21
