# shellcheck shell=bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime.install's scenarios of what changes the node or proves the image
# (install.sh sources it, and runs them): upgrade (a newer image's plugin
# swapped under a running one), uninstall (hpn-rdma-uninstall.yaml with a pod
# attached, then drained), reproducible (the image built again elsewhere)
# and podman_load. Sourcing it builds and imports the newer image. It uses
# install.sh's node and helpers (ds_pod, ds_ctr, install_once, attached_pod,
# ctr_end).

upgrade() {
	local id fifo holder out old_id new_id
	old_id=$(readelf -l "$CNIBIN/hpn-rdma" | sed -n 's|.*interpreter: /opt/hpn-rdma/\([^/]*\)/.*|\1|p')
	id=$(attached_pod rdma-old)
	# An old plugin still running (VERSION, waiting for its stdin) across the swap.
	fifo=$T/version.fifo
	mkfifo "$fifo"
	rtn_in env CNI_COMMAND=VERSION "$CNIBIN/hpn-rdma" <"$fifo" >"$T/version.out" 2>&1 &
	holder=$!
	bg_started "$holder"
	exec {hold}>"$fifo"
	sleep 0.2
	install_once install-2 0 "$NEXT"
	grep -q "updated .*/hpn-rdma$" <<<"$(ctr_log install-2 install)" ||
		fail "the newer installer did not update the plugin: $(ctr_log install-2 install)"
	new_id=$(readelf -l "$CNIBIN/hpn-rdma" | sed -n 's|.*interpreter: /opt/hpn-rdma/\([^/]*\)/.*|\1|p')
	[[ -n $new_id && $new_id != "$old_id" && -d $BUNDLE/$old_id && -d $BUNDLE/$new_id ]] ||
		fail "after the swap: bundle $new_id named, $old_id kept ($(ls "$BUNDLE"))"
	echo '{"cniVersion":"1.0.0"}' >&"$hold"
	exec {hold}>&-
	wait "$holder" || fail "the old plugin process failed after the swap: $(cat "$T/version.out")"
	grep -q supportedVersions "$T/version.out" || fail "the old plugin did not answer: $(cat "$T/version.out")"
	# DEL by the new binary gives the NIC the old one attached back.
	stop_remove "$id"
	# The next install (an init container restart) drops the bundle no binary names.
	install_once install-2 1 "$NEXT"
	[[ ! -e $BUNDLE/$old_id && -d $BUNDLE/$new_id ]] ||
		fail "the old bundle $old_id was not removed: $(ls "$BUNDLE")"
}

# uninstall_ctr NAME: hpn-rdma-uninstall.yaml's container started; prints its pod and container IDs.
uninstall_ctr() {
	local pod
	pod=$(ds_pod "$1")
	echo "$pod $(ds_ctr "$pod" "$1" "$UNINSTALL" hpn-rdma-uninstall main uninstall)"
}

# log_wait POD_NAME CONTAINER REGEX: until the container's log has a line matching (30 s at most).
log_wait() {
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q -- "$3" <<<"$(ctr_log "$1" "$2")" && return 0
		sleep 0.1
	done
	fail "$1's $2 never printed /$3/: $(ctr_log "$1" "$2" | tail -n 5)"
}

uninstall_held() {
	local id un probe rc err
	id=$(attached_pod rdma-held)
	mapfile -t probe < <(/usr/bin/python3 "$HPN_SRC/test/runtime/daemonset.py" "$UNINSTALL" \
		hpn-rdma-uninstall main uninstall x "${MAP[@]}" --configmap "$CM" \
		--service-account "$SA" --image "$IMAGE" --probe)
	read -r -a un < <(uninstall_ctr uninstall-1)
	log_wait uninstall-1 uninstall 'kept .*hpn-rdma$'
	grep -q 'may still hold NICs' <<<"$(ctr_log uninstall-1 uninstall)" ||
		fail "uninstall did not say why it keeps the plugin: $(ctr_log uninstall-1 uninstall)"
	[[ ! -e $CNICONF/$KEY && ! -e $KUBECONFIG_HOST && -x $CNIBIN/hpn-rdma ]] ||
		fail "with a pod attached: the conflist and kubeconfig must go, the plugin stay"
	set +e
	cri exec "${un[1]}" "${probe[@]}" >/dev/null 2>&1
	rc=$?
	set -e
	((rc == 1)) || fail "the readiness probe said $rc with the plugin still there"
	# What the operator meets when pods were left attached: with its only
	# network config gone, containerd (1.6) cannot tear a pod down at all
	# ("cni plugin not initialized"), so the journal stays. doc/install.md
	# says to remove the RDMA pods first; the way back is the DaemonSet.
	wait_network_gone
	if err=$(cri stopp "$id" 2>&1); then
		fail "StopPodSandbox succeeded with no network config (doc/install.md says it cannot)"
	fi
	grep -q 'cni plugin not initialized' <<<"$err" || fail "StopPodSandbox failed otherwise: $err"
	# Stopped while it waits: 75 (EX_TEMPFAIL), the plugin kept.
	ctr_end "${un[0]}" "${un[1]}" 75
	install_once install-3
	rtn_wait_network "$NET"
	stop_remove "$id"
	# Now, with no pod attached, uninstall removes everything and stays (a DaemonSet's pod).
	read -r -a un < <(uninstall_ctr uninstall-2)
	log_wait uninstall-2 uninstall '^done'
	[[ ! -e $CNICONF/$KEY && ! -e $KUBECONFIG_HOST && ! -e $CNIBIN/hpn-rdma &&
		-z $(ls -A "$BUNDLE") ]] || fail "uninstall left: $(ls -A "$CNICONF" "$CNIBIN" "$BUNDLE")"
	in_ctr "${un[1]}" "${probe[@]}" >/dev/null || fail "the readiness probe does not say it is done"
	[[ $(cri inspect "${un[1]}" | jq -r .state) == CONTAINER_RUNNING ]] ||
		fail "the uninstall container exited (a DaemonSet would restart it)"
	ctr_end "${un[0]}" "${un[1]}"
}

# wait_network_gone: until containerd has dropped its network (NetworkReady false).
wait_network_gone() {
	local i
	for ((i = 0; i < 200; i++)); do
		cri -timeout 5 status -v 2>/dev/null | jq -e '.status.conditions[]
			| select(.type == "NetworkReady") | .status == false' >/dev/null && return 0
		sleep 0.05
	done
	fail "containerd still has a network after the conflist went"
}

# A newer image: the same agent, a plugin whose bytes differ (a section more), so its bundle is another.
NEXT=${IMAGE%:*}:${IMAGE##*:}-next
objcopy --add-section .hpn_next=/dev/null "$HPN_PLUGIN" "$T/plugin-next" ||
	fail "objcopy could not make the newer plugin"
bash "$HPN_SRC/scripts/image.sh" --agent "$HPN_AGENT" --plugin "$T/plugin-next" --name "$NEXT" \
	--out "$T/next.tar" >"$T/next.log" 2>&1 || fail "scripts/image.sh could not build the newer image: $(tail -n 3 "$T/next.log")"
rtn_ctrd ctr -a "$RTN_SOCK" -n k8s.io images import "$T/next.tar" >/dev/null ||
	fail "ctr could not import the newer image"

# build_id ELF: its GNU build ID (a hash of the whole file, debug data included).
build_id() { readelf -n "$1" | awk '/Build ID:/ { print $3 }'; }

# The same sources elsewhere: a copy of the tree (the files git tracks or
# would, as they are now) and a build directory, each at another path than
# this build's (here of other lengths too), as reproducible-builds varies it;
# this build's cache (generator, compiler, type, flags, options; its
# pkg-config results too, which spares the configure 20 s of grpc's) under
# the new paths, and only the image built there: both binaries compiled
# again. The same build IDs, the same archive byte for byte, the same digest.
reproducible() {
	local src=$T/elsewhere/hpn-rdma-src b=$T/b2 line d bin mine theirs
	[[ -f ${HPN_BUILD:-}/CMakeCache.txt ]] || fail "no CMakeCache.txt in HPN_BUILD=${HPN_BUILD:-}"
	git -C "$HPN_SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
		fail "$HPN_SRC is not a git work tree: cannot tell its sources from the rest"
	mkdir -p "$src" "$b"
	git -C "$HPN_SRC" ls-files -z --cached --others --exclude-standard |
		tar -C "$HPN_SRC" --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$src" -xf - ||
		fail "could not copy the tree to $src"
	# The build dir first: it may lie inside the tree.
	while IFS= read -r line; do
		line=${line//"$HPN_BUILD"/$b}
		printf '%s\n' "${line//"$HPN_SRC"/$src}"
	done <"$HPN_BUILD/CMakeCache.txt" >"$b/CMakeCache.txt"
	cmake -S "$src" -B "$b" -DBUILD_TESTING=OFF >"$T/b2.log" 2>&1 ||
		fail "cmake could not configure the copy: $(tail -n 3 "$T/b2.log")"
	cmake --build "$b" --target hpn-image -j2 >>"$T/b2.log" 2>&1 ||
		fail "the copy's image did not build: $(tail -n 3 "$T/b2.log")"
	for bin in plugin/hpn-rdma agent/hpn-rdma-agent; do
		mine=$(build_id "$HPN_BUILD/$bin") theirs=$(build_id "$b/$bin")
		[[ -n $mine && $mine == "$theirs" ]] || fail "$bin: build ID $mine in $HPN_BUILD, \
$theirs built from $src in $b (is $HPN_BUILD up to date with the tree?)"
	done
	d=$(cat "$b/hpn-rdma-image.digest")
	[[ $d == "$(cat "$DIGEST_FILE")" ]] || fail "built in two places: $(cat "$DIGEST_FILE"), then $d"
	cmp -s "$HPN_IMAGE" "$b/hpn-rdma-image.tar" || fail "built in two places: the archives differ, digests equal"
	info "image digest, built in $HPN_BUILD and again in $b: $d"
	rm -rf "$src" "$b"
}

# podman load into a scratch store (not the machine's): the name and digest
# ctr sees. (Running it under podman is not tried: podman's runc sets rlimits
# this sandbox refuses, "error setting rlimit type 6"; containerd runs it here.)
podman_load() {
	local p=$T/podman d
	local pm=(podman --root "$p/root" --runroot "$p/run" --storage-driver vfs
		--events-backend none --cgroup-manager cgroupfs)
	"${pm[@]}" load -i "$HPN_IMAGE" >"$T/podman.log" 2>&1 ||
		fail "podman load failed: $(tail -n 3 "$T/podman.log")"
	d=$("${pm[@]}" image inspect --format '{{.Digest}} {{.Config.Entrypoint}}' "$IMAGE") ||
		fail "podman loaded no $IMAGE: $(tail -n 3 "$T/podman.log")"
	[[ $d == "$(cat "$DIGEST_FILE") [/usr/sbin/hpn-rdma-agent]" ]] ||
		fail "podman sees $d, the build made $(cat "$DIGEST_FILE")"
	"${pm[@]}" rmi -a >/dev/null 2>&1 || true
	rm -rf "$p"
}
