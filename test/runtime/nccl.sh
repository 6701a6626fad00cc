#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime tier: a real NCCL in an opted-in pod (doc/nccl.md, "A real NCCL in
# a pod"). The probe image (test data, packed here with scripts/oci-pack.sh)
# holds NCCL 2.22 from the runtime cache with trixie's libc, the probe, a
# pause to keep the container alive, and an /etc/nccl.conf of its own that
# names another interface (lo). Each container runs the probe with
# NCCL_DEBUG=INFO in its environment (ExecSync); NCCL's own log must show
# every setting it reads at bootstrap that the pod's hints file holds taken
# from that file, and its bootstrap on the interface the hints name, at that
# interface's address in the pod. Scenarios:
#  mounted   the hints at /etc/nccl.conf as doc/nccl.md says (hostPath,
#            subPathExpr $(POD_UID)/nccl.conf, read-only): they win over the
#            image's file; the hints' NCCL_DEBUG loses to the pod's own.
#  unmounted the same pod without the mount: NCCL reads the image's file, and
#            the check of the first scenario fails on its log.
#  conffile  nccl.confFile: the hints mounted there with NCCL_CONF_FILE set;
#            NCCL 2.22 has no NCCL_CONF_FILE and reads the image's file.
# Skips, saying why, without the cache (test/runtime/fetch.sh) or a node.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=ncclprobe.sh
source "$(dirname "$0")/ncclprobe.sh"

OPT_IN='{"alibabacloud.com/hpn-type": "rdma"}'
PROBE_IMAGE_NAME=hpn.local/ncclprobe:hpn-test
CONF_FILE=/etc/hpn-rdma/nccl.conf	# the conffile scenario's nccl.confFile
# What this node's conflist adds to the example's hints: a key NCCL reads at
# bootstrap (beside NCCL_SOCKET_IFNAME, which the example sets), one the pod's
# environment overrides, and two it reads only at communicator init.
EXTRA_ENV='{"NCCL_SOCKET_FAMILY": "AF_INET", "NCCL_DEBUG": "WARN", "NCCL_IB_TC": "136",
	"NCCL_IB_TIMEOUT": "22"}'

# nccl_conflist NAME [FILTER]: the example conflist as this node runs it
# (rt_conflist), named NAME, with EXTRA_ENV in nccl.env; then FILTER on the
# hpn-rdma plugin.
nccl_conflist() {
	rt_conflist | jq -c --arg n "$1" --argjson x "$EXTRA_ENV" '.name = $n |
		.plugins |= map(if .type == "hpn-rdma" then .nccl.env = $x | '"${2:-.}"' else . end)'
}

# pack_probe_image: the probe image archive in $T, imported into the node's
# containerd (about 5 s: NCCL is 241 MB). The rootfs is trixie's merged /usr:
# the loader at /lib64 as the probe's ELF interpreter names it, and only the
# libraries it loads (LD_DEBUG=libs: libnccl 2.22 carries the CUDA runtime
# in itself and needs no libcudart; libcuda, the driver, it looks for and
# does without).
pack_probe_image() {
	local r=$T/probe-rootfs f
	(
		umask 022
		mkdir -p "$r/usr/lib/x86_64-linux-gnu" "$r/usr/lib64" "$r/etc"
		ln -s usr/lib "$r/lib"
		ln -s usr/lib64 "$r/lib64"
		ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$r/usr/lib64/ld-linux-x86-64.so.2"
		for f in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libgcc_s.so.1 libstdc++.so.6 \
			libnccl.so.2; do
			# The soname's link and the file it names.
			cp -a "$NCCL_LIBDIR/$f" "$r/usr/lib/x86_64-linux-gnu/"
			[[ ! -L $NCCL_LIBDIR/$f ]] ||
				cp -a "$NCCL_LIBDIR/$(readlink "$NCCL_LIBDIR/$f")" "$r/usr/lib/x86_64-linux-gnu/"
		done
		install -m 0755 "$NCCL_PROBE" "$r/ncclprobe"
		install -m 0755 "$HPN_BUILD/test/runtime/hpn-pause" "$r/pause"
		# The image's own file: another interface than the hints'.
		echo "NCCL_SOCKET_IFNAME=lo" >"$r/etc/nccl.conf"
	) || fail "could not assemble the probe image's rootfs from $NCCL_ROOT"
	bash "$HPN_SRC/scripts/oci-pack.sh" "$r" "$PROBE_IMAGE_NAME" "$T/probe-image.tar" /pause \
		>/dev/null || fail "scripts/oci-pack.sh could not pack the probe image"
	rm -rf "$r"
	rtn_import_image "$T/probe-image.tar"
	rm -f "$T/probe-image.tar"
}

# probe_container POD_ID POD_NAME MOUNT_PATH [KEY=VALUE...]: container "probe"
# of the probe image in the pod, kept alive by its pause, with NCCL_DEBUG=INFO
# and the KEY=VALUEs in its environment; MOUNT_PATH (none when empty) is where
# the hints volume is mounted, as kubelet mounts the Deployment's: hostPath =
# the network's nccl.dir, subPathExpr $(POD_UID)/nccl.conf, read-only. No host
# directory is mounted: the image's trixie libc must be the one NCCL gets.
# Prints its ID.
probe_container() {
	local pod=$1 name=$2 at=$3 uid mounts='[]' envs id
	shift 3
	uid=$(pod_uid "$name")
	if [[ -n $at ]]; then
		mounts=$(jq -cn --arg h "$(kubelet_subpath "$HINTS" "$uid/nccl.conf")" --arg at "$at" \
			'[{containerPath: $at, hostPath: $h, readonly: true}]')
	fi
	envs=$(printf '%s\n' "POD_UID=$uid" NCCL_DEBUG=INFO "$@" |
		jq -Rsc 'split("\n")[:-1] | map(capture("^(?<key>[^=]+)=(?<value>.*)$"))')
	jq -n --argjson m "$mounts" --argjson e "$envs" --arg img "$PROBE_IMAGE_NAME" '{
		metadata: {name: "probe", attempt: 0}, image: {image: $img},
		command: ["/pause"], envs: $e, mounts: $m, logPath: "probe/0.log"}' \
		>"$T/pods/$name.probe.json"
	id=$(cri create "$pod" "$T/pods/$name.probe.json" "$T/pods/$name.json") ||
		fail "CreateContainer of the probe in $name failed"
	cri start "$id" || fail "StartContainer $id failed"
	echo "$id"
}

# ctr_file ID PATH: PATH as the container sees it, read from the host through
# its pause's /proc/PID/root (the image has no cat). The process is found in
# the container's cgroup: <cgroupParent>/<ID> with the cgroupfs driver (v1:
# in each hierarchy, pids here; v2: the one tree).
ctr_file() {
	local d pid=
	for d in "/sys/fs/cgroup/pids$RTN_CGROUP/$1" "/sys/fs/cgroup$RTN_CGROUP/$1"; do
		[[ -r $d/cgroup.procs ]] && read -r pid <"$d/cgroup.procs" && break
	done
	[[ $pid =~ ^[0-9]+$ ]] || fail "no process in the cgroup of container $1 under $RTN_CGROUP"
	cat "/proc/$pid/root$2"
}

# run_probe ID: the probe in the container (ExecSync), its stdout and stderr
# (NCCL logs to stdout); it must exit 0. Its NCCL lines are echoed.
run_probe() {
	local out
	out=$(cri exec "$1" /ncclprobe 2>&1) || fail "the probe failed in $1 ($?): $out"
	grep -E 'NCCL INFO|^ncclprobe:' <<<"$out" | sed 's/^/  | /' >&2
	echo "$out"
}

# eth0_addr POD_ID: eth0's IPv4 address in the pod.
eth0_addr() {
	rtn_in nsenter --net="$(pod_netns "$1")" ip -j -4 addr show eth0 |
		jq -r '.[0].addr_info[0].local'
}

# the_add POD_ID: hpn-rdma's ADD of the sandbox, which succeeded; its result.
the_add() {
	local add
	add=$(rt_calls "$1" | jq -c '[.[] | select(.cmd == "ADD")]')
	jq_ok 'length == 1 and .[0].rc == 0 and (.[0].out.interfaces | map(.name) | index("hpn0"))' \
		"one ADD, which gave the pod hpn0" "$add"
	jq -c '.[0].out' <<<"$add"
}

# finish POD_ID CTR_ID: the container and the pod gone, the hints with them.
finish() {
	local uid=$3
	cri stop "$2" || fail "StopContainer failed"
	cri rm "$2" || fail "RemoveContainer failed"
	stop_remove "$1"
	[[ ! -e $HINTS/$uid ]] || fail "the hints are still there after the pod"
}

mounted() {
	local id ctr res uid hints log
	rt_pod nccl "$OPT_IN"
	uid=$(pod_uid nccl)
	id=$(runp nccl)
	res=$(the_add "$id")
	hints=$(<"$HINTS/$uid/nccl.conf")
	jq_ok '.nccl.file == $f and .nccl.confFile == "/etc/nccl.conf" and
		.nccl.env.NCCL_SOCKET_IFNAME == "eth0" and .nccl.env.NCCL_SOCKET_FAMILY == "AF_INET"' \
		"the result names the file, /etc/nccl.conf, eth0 and AF_INET" "$res" \
		--arg f "$HINTS/$uid/nccl.conf"
	ctr=$(probe_container "$id" nccl /etc/nccl.conf)
	[[ $(ctr_file "$ctr" /etc/nccl.conf) == "$hints" ]] ||
		fail "/etc/nccl.conf in the container is not the pod's hints file"
	log=$(run_probe "$ctr")
	nccl_took "$log" "$hints" "$(eth0_addr "$id")" ||
		fail "NCCL did not take its bootstrap settings from the hints: $NCCL_WHY"
	info "the pod's hints: $(grep -v '^#' <<<"$hints" | tr '\n' ' ')"
	info "NCCL $NCCL_VERSION took from the hints: $(printf '%s; ' "${NCCL_WANT[@]}")${NCCL_BOOT}"
	# Both of the settings it reads at bootstrap: the example's and the node's.
	[[ ${NCCL_WANT[*]} == *NCCL_SOCKET_FAMILY* && ${NCCL_WANT[*]} == *NCCL_SOCKET_IFNAME* ]] ||
		fail "the check covered ${NCCL_WANT[*]}, not NCCL_SOCKET_FAMILY and NCCL_SOCKET_IFNAME"
	# The hints say NCCL_DEBUG=WARN: the pod's own INFO won, as NCCL's rule says.
	[[ $hints == *$'\nNCCL_DEBUG=WARN'* ]] || fail "the hints lack NCCL_DEBUG=WARN"
	finish "$id" "$ctr" "$uid"
}

unmounted() {
	local id ctr uid hints log want
	rt_pod nccl-bare "$OPT_IN"
	uid=$(pod_uid nccl-bare)
	id=$(runp nccl-bare)
	the_add "$id" >/dev/null
	hints=$(<"$HINTS/$uid/nccl.conf")
	ctr=$(probe_container "$id" nccl-bare "")
	[[ $(ctr_file "$ctr" /etc/nccl.conf) == "NCCL_SOCKET_IFNAME=lo" ]] ||
		fail "the container's /etc/nccl.conf is not the image's"
	log=$(run_probe "$ctr")
	! nccl_took "$log" "$hints" "$(eth0_addr "$id")" ||
		fail "the check passed on a pod whose hints are not mounted"
	info "without the mount the check fails: $NCCL_WHY"
	for want in "${NCCL_WANT[@]}"; do
		[[ " ${NCCL_GOT[*]} " != *" $want "* ]] || fail "NCCL logged '$want' without the hints"
	done
	[[ ${NCCL_GOT[*]} == "NCCL_SOCKET_IFNAME set by environment to lo" &&
		$NCCL_BOOT == "Bootstrap : Using lo:127.0.0.1<"* ]] ||
		fail "NCCL did not read the image's own file: ${NCCL_GOT[*]}; $NCCL_BOOT"
	finish "$id" "$ctr" "$uid"
}

# nccl.confFile: the pod mounts its hints at CONF_FILE and sets NCCL_CONF_FILE
# to it, keeping the image's /etc/nccl.conf. NCCL 2.23 and later read
# $NCCL_CONF_FILE first, then /etc/nccl.conf (doc/nccl.md); 2.22, the one
# here, knows no NCCL_CONF_FILE: it reads ~/.nccl.conf (no passwd entry in
# this image: none) and /etc/nccl.conf, the image's, and bootstraps on lo.
conffile() {
	local id ctr res uid hints log
	trap 'rtn_conflist "$(nccl_conflist "$NET-nccl")"' EXIT
	rtn_conflist "$(nccl_conflist "$NET-conffile" '.nccl.confFile = "'"$CONF_FILE"'"')"
	rtn_wait_network "$NET-conffile"
	rt_pod nccl-cf "$OPT_IN"
	uid=$(pod_uid nccl-cf)
	id=$(runp nccl-cf)
	res=$(the_add "$id")
	hints=$(<"$HINTS/$uid/nccl.conf")
	jq_ok '.nccl.confFile == $cf' "the result's nccl.confFile is $CONF_FILE" "$res" \
		--arg cf "$CONF_FILE"
	[[ $hints == *$'\n'"# for NCCL_CONF_FILE set to $CONF_FILE (NCCL 2.23 and later)"$'\n'* ]] ||
		fail "the hints' header does not say they are for NCCL_CONF_FILE: $hints"
	ctr=$(probe_container "$id" nccl-cf "$CONF_FILE" "NCCL_CONF_FILE=$CONF_FILE")
	[[ $(ctr_file "$ctr" "$CONF_FILE") == "$hints" ]] ||
		fail "$CONF_FILE in the container is not the pod's hints file"
	[[ $(ctr_file "$ctr" /etc/nccl.conf) == "NCCL_SOCKET_IFNAME=lo" ]] ||
		fail "the container's /etc/nccl.conf is not the image's"
	log=$(run_probe "$ctr")
	nccl_read "$log"
	[[ $NCCL_VERSION == 2.22.* ]] || fail "this scenario proves what 2.22 does; NCCL is $NCCL_VERSION"
	[[ ${NCCL_GOT[*]} == "NCCL_SOCKET_IFNAME set by environment to lo" &&
		$NCCL_BOOT == "Bootstrap : Using lo:127.0.0.1<"* ]] ||
		fail "NCCL 2.22 did not read the image's /etc/nccl.conf alone: ${NCCL_GOT[*]}; $NCCL_BOOT"
	info "NCCL $NCCL_VERSION with NCCL_CONF_FILE=$CONF_FILE read the image's file: ${NCCL_GOT[*]}; $NCCL_BOOT"
	finish "$id" "$ctr" "$uid"
}

why=$(ncclprobe_why_not)
[[ -z $why ]] || skip "$why"
rt_init
t0=$(date +%s%N)
pack_probe_image
info "probe image packed and imported: $((($(date +%s%N) - t0) / 1000000)) ms"
rtn_conflist "$(nccl_conflist "$NET-nccl")"
rtn_wait_network "$NET-nccl"
scenario "hints at /etc/nccl.conf: NCCL takes its bootstrap settings from them" mounted
scenario "hints not mounted: NCCL reads the image's file, the check fails" unmounted
scenario "nccl.confFile: hints at $CONF_FILE with NCCL_CONF_FILE; 2.22 reads the image's" conffile
rt_done
