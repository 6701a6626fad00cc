# shellcheck shell=bash
# A throwaway Kubernetes "node" for the runtime tier and the benchmark: its own
# network namespace, its own containerd (with Debian 12's runc) and the CNI
# plugins containerd runs from it, all under one scratch directory. Sourced
# by test/runtime/lib.sh and by scripts/bench.sh; it needs `skip` and `fail`
# from the caller (exit 77 with a SKIP line, exit 1 with a FAIL line).
#
# The node is one process, the holder: it sits in the netns $RTN_NS and in
# a mount namespace of its own, where /sys is remounted for that netns (so
# /sys/class/net shows the node's links, as `ip netns exec` does) with the
# host's cgroup hierarchies moved back under it (runc needs them), and a
# tmpfs covers /run/containerd and /var/lib/cni (shim sockets, libcni's
# cache: containerd writes there whatever its config says). containerd,
# ctr and everything the node runs enter both namespaces of the holder
# (rtn_in), so a containerd restarted after SIGKILL finds the netns mounts
# its predecessor made, as on a real node. The host's own network and mounts
# are never touched.
#
# rtn_cleanup (the caller's EXIT trap calls it) kills what the node started,
# by process ID: every process in the node's netns (containerd, shims, the
# holder) and in its cgroup parent (pod sandboxes and containers), then
# deletes the netns, the cgroups and the scratch directory. Mounts made in
# the node's mount namespace go with its last process.
#
# Which containerd: HPN_CTRD, one of
#   1.6  Debian 12's (the machine's, from PATH), the CNI plugins of
#        containernetworking-plugins (1.1.1, CNI up to 1.0.0)
#   1.7  trixie's, with CDI on (enable_cdi), the same CNI plugins
#   2.1  forky's (its config the 1.x one through `containerd config migrate`),
#        with forky's CNI plugins 1.9 and the conflist at cniVersion 1.1.0
# 1.7 and 2.1 come unpacked from HPN_RUNTIME_CACHE (test/runtime/fetch.sh,
# ctest's runtime.fetch). Every version runs Debian 12's runc. RTN_CDI_DIR is
# the node's one CDI spec directory (1.7 and 2.1 read it; 1.6 has no CDI).
#
# NRI: off on every version unless the caller sets RTN_NRI=1 before
# rtn_setup (1.7 and 2.x only: 1.6 has none); then containerd serves it at
# RTN_NRI_SOCK in the scratch dir, with no plugin directory of the machine's
# (/opt/nri/plugins, /etc/nri/conf.d).

RTN_PREFIX=${RTN_PREFIX:-hpnr-$$-}
RTN_NS=${RTN_PREFIX}node
RTN_CGROUP=/${RTN_PREFIX%-}	# the pods' cgroup parent (cgroupfs syntax)
RTN_CACHE=${HPN_RUNTIME_CACHE:-/var/cache/hpn-rdma/runtime}
RTN_CTRD=		# the version (rtn_use)
RTN_BIN=		# containerd, its shims and ctr (empty: from PATH)
RTN_CNI_BIN=
RTN_CDI_DIR=
RTN_NRI=${RTN_NRI:-}	# 1: containerd serves NRI at RTN_NRI_SOCK (rtn_setup)
RTN_NRI_SOCK=
# A function rtn_setup calls with a path in the scratch dir, where it must
# write an executable the runc shim then runs instead of runc (its
# BinaryName option); empty: runc from PATH.
RTN_RUNC_WRAP=${RTN_RUNC_WRAP:-}

# rtn_use VERSION: the containerd (and CNI plugins) the next node runs.
rtn_use() {
	RTN_CTRD=$1
	RTN_BIN=
	RTN_CNI_BIN=${HPN_CNI_BIN:-/usr/lib/cni}
	case $1 in
	1.7) RTN_BIN=$RTN_CACHE/containerd-1.7/root/usr/bin ;;
	2.1)
		RTN_BIN=$RTN_CACHE/containerd-2.1/root/usr/bin
		RTN_CNI_BIN=${HPN_CNI_BIN:-$RTN_CACHE/cni-1.9/root/usr/lib/cni}
		;;
	esac
}
rtn_use "${HPN_CTRD:-1.6}"
RTN_DIR=		# scratch dir; everything of the node lives under it
RTN_SOCK=
RTN_NODE_PID=	# the holder
RTN_MADE_DIRS=()	# host directories made only to mount over in the node
RTN_IMAGE=${HPN_PAUSE_IMAGE_NAME:-hpn.local/pause:hpn-test}
RTN_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# rtn_why_not: prints why this machine cannot run the node (empty: it can).
rtn_why_not() {
	local t
	[[ $(id -u) == 0 ]] || {
		echo "needs root (network namespaces, containerd)"
		return
	}
	case $RTN_CTRD in
	1.6)
		for t in containerd containerd-shim-runc-v2 ctr; do
			command -v $t >/dev/null || {
				echo "$t is not installed (Debian: containerd)"
				return
			}
		done
		;;
	1.7 | 2.1)
		for t in "containerd-$RTN_CTRD" "cni-1.9"; do
			[[ $t == cni-1.9 && $RTN_CTRD != 2.1 ]] && continue
			if [[ -s $RTN_CACHE/$t/skip-reason ]]; then
				echo "containerd $RTN_CTRD: $(<"$RTN_CACHE/$t/skip-reason")"
				return
			fi
			[[ -f $RTN_CACHE/$t/stamp ]] || {
				echo "$RTN_CACHE/$t is not fetched (ctest -R runtime.fetch, or test/runtime/fetch.sh)"
				return
			}
		done
		;;
	*)
		echo "HPN_CTRD=$RTN_CTRD: not one of 1.6, 1.7, 2.1"
		return
		;;
	esac
	command -v runc >/dev/null || {
		echo "runc is not installed (Debian: runc)"
		return
	}
	for t in ip jq nsenter unshare findmnt; do
		command -v $t >/dev/null || {
			echo "$t is not installed (Debian: iproute2, jq, util-linux)"
			return
		}
	done
	for t in bridge host-local loopback; do
		[[ -x $RTN_CNI_BIN/$t ]] || {
			echo "$RTN_CNI_BIN/$t is missing (Debian: containernetworking-plugins; 2.1: runtime.fetch)"
			return
		}
	done
	if [[ -z ${HPN_CRI:-} || ! -x ${HPN_CRI:-} ]]; then
		echo "${HPN_RUNTIME_WHY:-the CRI client hpn-cri is not built (${HPN_CRI:-HPN_CRI unset})}"
		return
	fi
	[[ -n ${HPN_PAUSE_IMAGE:-} && -f ${HPN_PAUSE_IMAGE:-} ]] || {
		echo "the pause image archive is not built (${HPN_PAUSE_IMAGE:-HPN_PAUSE_IMAGE unset})"
		return
	}
	grep -q ' /sys/fs/cgroup' /proc/self/mountinfo || {
		echo "no cgroup filesystem under /sys/fs/cgroup (runc needs one)"
		return
	}
	ip netns add "${RTN_PREFIX}probe" 2>/dev/null || {
		echo "cannot create network namespaces here"
		return
	}
	ip netns del "${RTN_PREFIX}probe"
}

# rtn_in CMD...: run CMD on the node (its netns and mount namespace).
rtn_in() {
	nsenter -t "$RTN_NODE_PID" -m -n -- "$@"
}

# cri ARGS...: the CRI client against the node's containerd.
cri() {
	"$HPN_CRI" -a "$RTN_SOCK" "$@"
}

# The holder's shell (bash -c, $1 = the scratch dir): cgroups kept aside
# while /sys is remounted, then moved back.
# shellcheck disable=SC2016 # $1 is the inner shell's
RTN_HOLDER_SH='set -e
	mount --rbind /sys/fs/cgroup "$1/cgroup-hold"
	umount -l /sys
	mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
	mount --move "$1/cgroup-hold" /sys/fs/cgroup
	mount -t tmpfs -o mode=0711,size=16m hpnr-run-containerd /run/containerd
	mount -t tmpfs -o mode=0755,size=16m hpnr-var-lib-cni /var/lib/cni
	: >"$1/node.ready"
	exec sleep infinity'

# rtn_holder: become the holder (exec): RTN_HOLDER_SH in the node's netns
# and a private mount namespace of its own. A caller whose root is not its
# mount namespace's (a chroot) redefines it: see test/vm/ctr7.sh.
rtn_holder() {
	exec nsenter --net="/run/netns/$RTN_NS" unshare --mount --propagation private -- \
		bash -c "$RTN_HOLDER_SH" hpnr-node "$RTN_DIR"
}

# rtn_setup DIR: make the node (netns, holder, CNI bin dir, containerd config)
# in DIR. Installs no trap: the caller's EXIT trap must call rtn_cleanup.
rtn_setup() {
	RTN_DIR=$1
	RTN_SOCK=$RTN_DIR/containerd.sock
	RTN_CDI_DIR=$RTN_DIR/cdi
	mkdir -p "$RTN_DIR"/{root,state,opt,cni/bin,cni/net.d,cgroup-hold,logs,cdi}
	# Host paths containerd 1.6 writes to whatever its config says: the shims'
	# sockets (/run/containerd/s) and libcni's result cache (/var/lib/cni/results,
	# the prevResult of DEL). The node mounts a tmpfs over each; one that is
	# missing is made for that, and removed again by rtn_cleanup.
	local d
	for d in /run/containerd /var/lib/cni; do
		if [[ ! -d $d ]]; then
			mkdir -p "$d"
			RTN_MADE_DIRS=("$d" "${RTN_MADE_DIRS[@]}")
		fi
	done
	ip netns add "$RTN_NS"
	ip -n "$RTN_NS" link set lo up
	rtn_holder &
	RTN_NODE_PID=$!
	disown "$RTN_NODE_PID"
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -e $RTN_DIR/node.ready ]] && break
		kill -0 "$RTN_NODE_PID" 2>/dev/null || fail "the node's namespaces could not be set up"
		sleep 0.05
	done
	[[ -e $RTN_DIR/node.ready ]] || fail "the node's namespaces were not ready in 5 s"
	rtn_in test -d /sys/class/net/lo || fail "the node's /sys does not show its netns"

	local p
	for p in bridge host-local loopback; do
		ln -s "$RTN_CNI_BIN/$p" "$RTN_DIR/cni/bin/$p"
	done
	# containerd 1.x config (version 2). The CRI settings this machine needs
	# (DESIGN.md "What the runtime does"); other snapshotters off so nothing
	# probes the host's disks; the opt plugin's directory kept in the scratch
	# dir; NRI off (2.x turns it on; it would serve a socket on the host)
	# unless RTN_NRI asks for it, and then in the scratch dir.
	local cdi='' nri=', "io.containerd.nri.v1.nri"' nri_conf='' runc=''
	[[ $RTN_CTRD == 1.6 ]] || cdi="enable_cdi = true
		  cdi_spec_dirs = [\"$RTN_CDI_DIR\"]"
	if [[ $RTN_NRI == 1 ]]; then
		[[ $RTN_CTRD != 1.6 ]] || fail "containerd 1.6 has no NRI (RTN_NRI=1)"
		RTN_NRI_SOCK=$RTN_DIR/nri/nri.sock
		mkdir -p "$RTN_DIR"/nri/{plugins,conf.d}
		nri=
		nri_conf="[plugins.\"io.containerd.nri.v1.nri\"]
		  disable = false
		  socket_path = \"$RTN_NRI_SOCK\"
		  plugin_path = \"$RTN_DIR/nri/plugins\"
		  plugin_config_path = \"$RTN_DIR/nri/conf.d\""
	fi
	if [[ -n $RTN_RUNC_WRAP ]]; then
		"$RTN_RUNC_WRAP" "$RTN_DIR/runc"
		[[ -x $RTN_DIR/runc ]] || fail "$RTN_RUNC_WRAP wrote no executable $RTN_DIR/runc"
		runc="[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]
		        BinaryName = \"$RTN_DIR/runc\""
	fi
	cat >"$RTN_DIR/config.toml" <<-EOF
		version = 2
		root = "$RTN_DIR/root"
		state = "$RTN_DIR/state"
		disabled_plugins = ["io.containerd.snapshotter.v1.btrfs",
		  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
		  "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing",
		  "io.containerd.tracing.processor.v1.otlp"${nri}]
		[grpc]
		  address = "$RTN_SOCK"
		[plugins."io.containerd.internal.v1.opt"]
		  path = "$RTN_DIR/opt"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$RTN_IMAGE"
		  restrict_oom_score_adj = true
		  netns_mounts_under_state_dir = true
		  disable_apparmor = true
		  stream_server_address = "127.0.0.1"
		  ${cdi}
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "$RTN_DIR/cni/bin"
		    conf_dir = "$RTN_DIR/cni/net.d"
		    max_conf_num = 1
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      ${runc}
		${nri_conf}
	EOF
	# 2.x reads version 3: its own migration of the same settings.
	if [[ $RTN_CTRD == 2.*  ]]; then
		mv "$RTN_DIR/config.toml" "$RTN_DIR/config-v2.toml"
		"$RTN_BIN/containerd" --config "$RTN_DIR/config-v2.toml" config migrate \
			>"$RTN_DIR/config.toml" 2>"$RTN_DIR/migrate.log" ||
			fail "containerd $RTN_CTRD config migrate failed: $(tail -n 3 "$RTN_DIR/migrate.log")"
	fi
	[[ -z $RTN_NRI_SOCK ]] || grep -qF "$RTN_NRI_SOCK" "$RTN_DIR/config.toml" ||
		fail "containerd $RTN_CTRD's config lost NRI's socket_path"
	[[ -z $runc ]] || grep -qF "$RTN_DIR/runc" "$RTN_DIR/config.toml" ||
		fail "containerd $RTN_CTRD's config lost the runc shim's BinaryName"
}

# rtn_ctrd CMD ARGS...: containerd's own CMD (containerd, ctr) of this node's version.
rtn_ctrd() {
	local c=$1
	shift
	if [[ -n $RTN_BIN ]]; then
		rtn_in env PATH="$RTN_BIN:$PATH" "$RTN_BIN/$c" "$@"
	else
		rtn_in "$c" "$@"
	fi
}

# rtn_plugin BINARY [CALLS_DIR]: the hpn-rdma containerd runs. With CALLS_DIR,
# test/runtime/record.sh in front of it: every call recorded there as JSON.
rtn_plugin() {
	local bin=$1 calls=${2:-} w=$RTN_DIR/cni/bin/hpn-rdma
	rm -f "$w"
	if [[ -z $calls ]]; then
		ln -s "$bin" "$w"
		return
	fi
	mkdir -p "$calls"
	printf '#!/bin/bash\nexec bash %q %q %q\n' "$RTN_LIB_DIR/record.sh" "$bin" "$calls" >"$w"
	chmod 0755 "$w"
}

# rtn_conflist JSON: the node's one network config (what containerd loads).
rtn_conflist() {
	rm -f "$RTN_DIR"/cni/net.d/*
	echo "$1" >"$RTN_DIR/cni/net.d/.new"
	mv "$RTN_DIR/cni/net.d/.new" "$RTN_DIR/cni/net.d/10-node.conflist"
}

# rtn_wait_network NAME: until containerd has loaded the network NAME and says
# NetworkReady (it watches conf_dir and reloads on its own).
rtn_wait_network() {
	local i st
	for ((i = 0; i < 200; i++)); do
		st=$(cri -timeout 5 status -v 2>/dev/null) || st='{}'
		if jq -e --arg n "$1" '(.status.conditions[] | select(.type == "NetworkReady")
			| .status) and ([.info.cniconfig.Networks[]?.Config.Name] | index($n))' \
			<<<"$st" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.05
	done
	fail "containerd did not load network $1 in 10 s: $(jq -c '.status' <<<"$st" 2>/dev/null)"
}

# rtn_ctrd_pid: containerd's process ID, empty when it is not running. Kept in
# a file: a scenario in a subshell may restart it.
rtn_ctrd_pid() {
	local pid
	pid=$(cat "$RTN_DIR/containerd.pid" 2>/dev/null) || return 0
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
	return 0
}

# rtn_containerd_start: start containerd on the node; wait until it serves CRI.
rtn_containerd_start() {
	local i pid run=(containerd)
	[[ -z $RTN_BIN ]] || run=(env "PATH=$RTN_BIN:$PATH" "$RTN_BIN/containerd")
	# A simple command, not rtn_ctrd: a function run with & is a subshell
	# whose pid is not containerd's (SIGTERM to it left containerd running);
	# nsenter and env exec, so $! is containerd itself.
	nsenter -t "$RTN_NODE_PID" -m -n -- "${run[@]}" --config "$RTN_DIR/config.toml" \
		>>"$RTN_DIR/containerd.log" 2>&1 &
	pid=$!
	disown "$pid"
	echo "$pid" >"$RTN_DIR/containerd.pid"
	for ((i = 0; i < 200; i++)); do
		if [[ -S $RTN_SOCK ]] && cri -timeout 2 version >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null ||
			fail "containerd exited at start: $(tail -n 5 "$RTN_DIR/containerd.log")"
		sleep 0.05
	done
	fail "containerd did not serve CRI in 10 s: $(tail -n 5 "$RTN_DIR/containerd.log")"
}

# rtn_containerd_stop [SIGNAL]: stop containerd (TERM by default) and wait.
# Its shims, and the pods they run, live on, as on a node.
rtn_containerd_stop() {
	local i pid
	pid=$(rtn_ctrd_pid)
	[[ -n $pid ]] || return 0
	kill -"${1:-TERM}" "$pid" 2>/dev/null || true
	for ((i = 0; i < 200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$pid" 2>/dev/null && fail "containerd ($pid) did not exit on SIG${1:-TERM}"
	wait "$pid" 2>/dev/null || true
	rm -f "$RTN_DIR/containerd.pid"
}

# rtn_import_image [ARCHIVE]: an OCI image archive (the pause image by default)
# into containerd's k8s.io namespace, where the CRI plugin finds its
# sandbox_image and the images of containers.
rtn_import_image() {
	local a=${1:-$HPN_PAUSE_IMAGE}
	rtn_ctrd ctr -a "$RTN_SOCK" -n k8s.io images import "$a" >/dev/null ||
		fail "ctr could not import $a"
}

# rtn_nics N [MTU]: stand-in NICs rnic0..N-1 on the node: veth ends, down as
# unused NICs are, each peer (rpeerK) up on the node.
rtn_nics() {
	local k
	for ((k = 0; k < $1; k++)); do
		rtn_nic "$k" "${2:-1500}"
	done
}

rtn_nic() {
	ip -n "$RTN_NS" link add "rnic$1" mtu "${2:-1500}" type veth peer name "rpeer$1"
	ip -n "$RTN_NS" link set "rpeer$1" up
}

# rtn_pids: every process of the node: in its netns (containerd, shims, the
# holder) or in its pods' cgroups (sandboxes, containers, execs).
rtn_pids() {
	{
		ip netns pids "$RTN_NS" 2>/dev/null
		find /sys/fs/cgroup"$RTN_CGROUP" /sys/fs/cgroup/*"$RTN_CGROUP" -name cgroup.procs \
			-exec cat {} + 2>/dev/null
	} | sort -un
}

rtn_cleanup() {
	local i p pids
	set +e
	if [[ -n $RTN_DIR && -d /run/netns && -e /run/netns/$RTN_NS ]]; then
		p=$(rtn_ctrd_pid)
		[[ -n $p ]] && kill -9 "$p" 2>/dev/null
		for ((i = 0; i < 50; i++)); do
			pids=$(rtn_pids)
			[[ -z $pids ]] && break
			for p in $pids; do
				kill -9 "$p" 2>/dev/null
			done
			sleep 0.1
		done
		[[ -z $pids ]] || echo "WARNING: node processes still alive: $pids" >&2
	fi
	[[ -n $RTN_NODE_PID ]] && wait "$RTN_NODE_PID" 2>/dev/null
	# Deepest cgroups first, in every hierarchy.
	find /sys/fs/cgroup"$RTN_CGROUP" /sys/fs/cgroup/*"$RTN_CGROUP" -depth -type d \
		-exec rmdir {} + 2>/dev/null
	for p in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		[[ $p == "$RTN_PREFIX"* ]] && ip netns del "$p"
	done
	# Another node still running (ctest -j) mounts over these: removing one
	# would unmount its tmpfs there; then they stay (empty).
	if ! ip netns list 2>/dev/null | awk '{print $1}' | grep -Eq '^(hpnr-[0-9]+-node|hpnb-[0-9]+-rt-node)$'; then
		for p in "${RTN_MADE_DIRS[@]}"; do
			rmdir "$p" 2>/dev/null
		done
	fi
	[[ -n $RTN_DIR && -d $RTN_DIR ]] && rm -rf "$RTN_DIR"
	return 0
}
