#!/usr/bin/env bash
# image.sh --agent BIN --plugin BIN --out IMAGE.tar [--name NAME:TAG] [--bundle-root DIR] [--rootfs DIR]
#
# hpn-rdma's OCI image, made from this tree's build output and the Debian
# packages installed on this machine, with no registry and no daemon: a rootfs
# assembled here, packed by scripts/oci-pack.sh (run by the build: the
# hpn-image target). What is in it:
#
#   /usr/sbin/hpn-rdma-agent      the entrypoint: the agent, and its install
#                                 and uninstall subcommands (hpn-rdma-agent(8))
#   /usr/lib/<triplet>/...        the agent's libraries, as ldd resolves them,
#                                 and those it dlopen()s (libcurl, libyaml,
#                                 libibverbs and its providers) with theirs
#   /usr/lib/hpn-rdma/hpn-rdma    the CNI plugin: the payload the installer puts
#                                 in the host's CNI bin dir
#   /usr/lib/hpn-rdma/<id>/lib/   the plugin's bundle, which the installer puts
#                                 at <bundle-root>/<id>/lib on the host
#
# The plugin runs on the host, not in this image, whose libraries the host may
# not have (libcjson, a glibc as new as Debian 12's, libcurl and libyaml for
# the Kubernetes lookup). So it carries its own: the bundle holds the dynamic
# loader, every library ldd finds for the plugin, and the ones it opens with
# dlopen() (the sonames lib/*.c names: libibverbs, librdmacm, libcurl,
# libyaml) with theirs, and the rdma-core providers libibverbs loads by name
# (lib<driver>-rdmav<N>.so, from the package that ships libibverbs' provider
# directory). The copy in the image is patched (patchelf) to that bundle: its
# interpreter is <bundle-root>/<id>/lib/ld-linux-*.so.*, its DT_RPATH
# <bundle-root>/<id>/lib (DT_RPATH, not DT_RUNPATH: an executable's DT_RPATH
# also serves the dlopen() calls of libraries without a path of their own, so
# libibverbs finds the bundled providers). <id> is the version and a digest of
# the bundle's contents, so a new bundle never overwrites the one a running
# plugin uses, and the installer swaps the binary only after its bundle is
# complete. Which providers load is still the host's choice: libibverbs reads
# the driver names from the host's /etc/libibverbs.d (its NIC stack's, rdma-core
# or the vendor's), as it would for any program there.
#
# No shell and no other tool is in the image: the agent is the installer.
# Reproducible: files are copied (content and mode only), what is made here
# is made under umask 022 (the caller's umask would reach the layer's modes),
# the binaries stripped the same way each time, and oci-pack.sh fixes owners,
# times and order, so the same inputs give the same digest. The binaries
# themselves name no build path (CMakeLists.txt maps them out), so a build
# of the same tree elsewhere is the same input (runtime.install checks it:
# reproducible, test/runtime/install-change.sh). Prints the image's digest.
set -euo pipefail
umask 022

src=$(cd "$(dirname "$0")/.." && pwd)
agent= plugin= out= name=hpn.local/hpn-rdma:0.1.0 bundle_root=/opt/hpn-rdma keep_rootfs=
while (($#)); do
	case $1 in
	--agent) agent=${2:?}; shift ;;
	--plugin) plugin=${2:?}; shift ;;
	--out) out=${2:?}; shift ;;
	--name) name=${2:?}; shift ;;
	--bundle-root) bundle_root=${2:?}; shift ;;
	--rootfs) keep_rootfs=${2:?}; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "image.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[[ -x $agent && -x $plugin && -n $out ]] || {
	echo "usage: image.sh --agent BIN --plugin BIN --out IMAGE.tar (see --help)" >&2
	exit 2
}
agent=$(readlink -f "$agent") plugin=$(readlink -f "$plugin")
[[ $bundle_root == /* ]] || { echo "image.sh: --bundle-root must be absolute" >&2; exit 2; }
for t in ldd patchelf strip dpkg-query jq sha256sum; do
	command -v $t >/dev/null || { echo "image.sh: $t is needed (see scripts/install-deps.sh)" >&2; exit 1; }
done
version=${name##*:}

work=$(mktemp -d "${TMPDIR:-/tmp}/hpn-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root"

# Merged /usr as on the build machine: /lib -> usr/lib and the like.
for d in bin sbin lib lib32 lib64 libx32; do
	if [[ -L /$d ]]; then
		ln -s "$(readlink "/$d")" "$root/$d"
		mkdir -p "$root/$(readlink -f "/$d")"
	fi
done

# put NAME_PATH DEST_DIR: the file NAME_PATH resolves to, copied once into
# DEST_DIR under its own (real) name, and NAME_PATH's base name a symlink to
# it when that differs: the soname links as the package has them.
put() {
	local real base
	real=$(readlink -f "$1")
	base=$(basename "$1")
	mkdir -p "$2"
	[[ -e $2/$(basename "$real") ]] || install -m "$(stat -c %a "$real")" "$real" "$2/$(basename "$real")"
	if [[ $base != "$(basename "$real")" && ! -e $2/$base ]]; then
		ln -s "$(basename "$real")" "$2/$base"
	fi
}

# libs FILE...: every library the dynamic loader would map for FILEs (ldd's
# resolved paths, the loader itself included), one per line, sorted.
libs() {
	local f
	for f in "$@"; do
		ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
	done | LC_ALL=C sort -u
}

# What lib/ opens with dlopen() (found by the sonames lib/*.c names), and the
# rdma-core providers libibverbs loads by name: the agent's and the plugin's.
dl_sonames=$(grep -ho '"lib[a-z0-9_.+-]*\.so\.[0-9]*"' "$src"/lib/*.c | tr -d '"' | LC_ALL=C sort -u)
[[ -n $dl_sonames ]] || { echo "image.sh: found no dlopen()ed soname in lib/*.c" >&2; exit 1; }
dl_paths=()
for so in $dl_sonames; do
	# awk reads to the end: an early exit would kill ldconfig with SIGPIPE (pipefail: 141).
	p=$(ldconfig -p | awk -v so="$so" '!p && $1 == so && /x86-64|x32|AArch64|64bit/ { p = $NF } END { print p }')
	[[ -n $p ]] || p=$(ldconfig -p | awk -v so="$so" '!p && $1 == so { p = $NF } END { print p }')
	[[ -n $p ]] || { echo "image.sh: $so is not installed (see scripts/install-deps.sh)" >&2; exit 1; }
	dl_paths+=("$p")
done
# The providers: the files of the package that owns libibverbs' provider
# directory (<libdir>/libibverbs/), lib<driver>-rdmav<N>.so.
ibv=$(printf '%s\n' "${dl_paths[@]}" | awk '!p && /\/libibverbs\.so/ { p = $0 } END { print p }')
prov_dir=$(dirname "$(readlink -f "$ibv")")/libibverbs
prov_pkg=$(dpkg-query -S "$prov_dir" | awk -F: 'NR == 1 { print $1 }')
mapfile -t providers < <(dpkg-query -L "$prov_pkg" | grep -E "^$prov_dir/lib[^/]*-rdmav[0-9]+\.so$" | LC_ALL=C sort)
((${#providers[@]})) || { echo "image.sh: $prov_pkg ships no provider under $prov_dir" >&2; exit 1; }

# The agent and its libraries, where the build machine has them: those ldd
# finds, and the ones it opens with dlopen() as the plugin does (libcurl for
# the pod cache and the DRA driver's API calls, libyaml for the kubeconfig,
# libibverbs and its providers for health's RDMA proofs), with theirs. Without
# them the agent in this image could make no API call at all.
install -D -m 0755 "$agent" "$root/usr/sbin/hpn-rdma-agent"
strip --strip-unneeded "$root/usr/sbin/hpn-rdma-agent"
for l in $(libs "$agent" "${dl_paths[@]}" "${providers[@]}") "${dl_paths[@]}" "${providers[@]}"; do
	put "$l" "$root$(dirname "$(readlink -f "$l")")"
	# The path the agent's PT_INTERP (or a DT_NEEDED) names, if another one.
	if [[ ! -e $root$l ]]; then
		mkdir -p "$root$(dirname "$l")"
		ln -s "$(readlink -f "$l")" "$root$l"
	fi
done

# The plugin's bundle: its libraries, the dlopen()ed ones with theirs, the providers.
bundle=$work/bundle
mkdir -p "$bundle/lib"
for l in $(libs "$plugin" "${dl_paths[@]}" "${providers[@]}") "${dl_paths[@]}" "${providers[@]}"; do
	put "$l" "$bundle/lib"
done
interp=$(patchelf --print-interpreter "$plugin")
[[ -e $bundle/lib/$(basename "$interp") ]] || put "$interp" "$bundle/lib"
# <id>: the version and a digest of what the bundle holds (names, link
# targets, contents) and of the plugin itself.
digest=$( (
	cd "$bundle/lib"
	find . -mindepth 1 -printf '%P %y %l\n' | LC_ALL=C sort
	find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
	sha256sum <"$plugin"
) | sha256sum | cut -c1-12)
id=$version-$digest
mkdir -p "$root/usr/lib/hpn-rdma"
mv "$bundle" "$root/usr/lib/hpn-rdma/$id"
install -m 0755 "$plugin" "$root/usr/lib/hpn-rdma/hpn-rdma"
strip --strip-unneeded "$root/usr/lib/hpn-rdma/hpn-rdma"
patchelf --set-interpreter "$bundle_root/$id/lib/$(basename "$interp")" \
	--force-rpath --set-rpath "$bundle_root/$id/lib" "$root/usr/lib/hpn-rdma/hpn-rdma"

# Mount points need not exist in the image (runc makes them); the agent
# writes only under its mounts, so no /tmp. Root's entry, for tools that ask.
mkdir -p "$root/etc"
printf 'root:x:0:0:root:/:/nonexistent\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"

[[ -z $keep_rootfs ]] || { rm -rf "$keep_rootfs"; cp -a "$root" "$keep_rootfs"; }
bash "$src/scripts/oci-pack.sh" \
	--label "org.opencontainers.image.title=hpn-rdma" \
	--label "org.opencontainers.image.version=$version" \
	--label "io.hpn-rdma.bundle=$id" \
	"$root" "$name" "$out" /usr/sbin/hpn-rdma-agent
