#!/usr/bin/env bash
# oci-pack.sh [--env KEY=VALUE]... [--label KEY=VALUE]... ROOTFS IMAGE_NAME OUTPUT.tar ENTRYPOINT [ARG]...
#
# Packs the directory ROOTFS as a one-layer OCI image layout archive
# (image-spec v1.0: oci-layout, index.json, blobs/sha256/<digest>), with
# ENTRYPOINT and its ARGs as the config's Entrypoint, that `ctr images
# import` and `podman load` take without a registry or a daemon. The layer is
# an uncompressed tar of ROOTFS; the index names the image through the
# io.containerd.image.name annotation (ctr's import takes it as the image's
# name) and org.opencontainers.image.ref.name (podman's load takes the full
# name from it). The one packer of the tree: the runtime tier's pause image
# (test/runtime/CMakeLists.txt) and hpn-rdma's own image (scripts/image.sh).
#
# Reproducible: entries sorted, owners 0:0, every mtime SOURCE_DATE_EPOCH (0
# unless set), no group or other write, no atime/ctime, no xattrs; JSON
# written compactly by jq; the archive's own files made under umask 022. The
# same ROOTFS contents and modes give the same digests, on any machine (the
# modes are otherwise ROOTFS's: make it under a fixed umask, as image.sh does).
# Prints the manifest's digest (sha256:...), which is the image's ID for
# ctr and its digest for podman.
set -euo pipefail
umask 022

envs=() labels=()
while (($#)) && [[ $1 == --* ]]; do
	case $1 in
	--env) envs+=("${2:?}"); shift 2 ;;
	--label) labels+=("${2:?}"); shift 2 ;;
	*) echo "oci-pack.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
(($# >= 4)) || {
	echo "usage: oci-pack.sh [--env K=V]... [--label K=V]... ROOTFS IMAGE_NAME OUTPUT.tar ENTRYPOINT [ARG]..." >&2
	exit 2
}
rootfs=$1 name=$2 out=$3
shift 3
[[ -d $rootfs ]] || { echo "oci-pack.sh: $rootfs is not a directory" >&2; exit 2; }
[[ $name == *:* ]] || { echo "oci-pack.sh: $name has no tag (name:tag)" >&2; exit 2; }
[[ -x $rootfs/$1 || -L $rootfs/$1 ]] || {
	echo "oci-pack.sh: the entrypoint $1 is not an executable of $rootfs" >&2
	exit 2
}
epoch=${SOURCE_DATE_EPOCH:-0}

work=$(mktemp -d "${TMPDIR:-/tmp}/hpn-oci-pack.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/oci/blobs/sha256"

# The OCI platform name of this machine (the image holds native binaries).
case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
*) arch=$(uname -m) ;;
esac

# shellcheck disable=SC2054 # the commas belong to --pax-option
tarflags=(--sort=name --owner=0 --group=0 --numeric-owner --mtime=@"$epoch" --format=posix
	--no-xattrs --no-acls --no-selinux --mode=go-w
	--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime)

# blob FILE: store FILE as a blob; prints "<digest hex> <size>".
blob() {
	local d s
	d=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$work/oci/blobs/sha256/$d"
	echo "$d $s"
}

# Every entry of ROOTFS, without the leading "./" (sorted by tar itself).
(cd "$rootfs" && find . -mindepth 1 -maxdepth 1 -printf '%P\0' | LC_ALL=C sort -z) |
	tar -C "$rootfs" "${tarflags[@]}" --null -T - -cf "$work/layer.tar"
read -r layer layer_size < <(blob "$work/layer.tar")

entry=$(printf '%s\n' "$@" | jq -Rsc 'split("\n")[:-1]')
env_json=$(printf '%s\n' ${envs[@]+"${envs[@]}"} | jq -Rsc 'split("\n") | map(select(. != ""))')
label_json=$(printf '%s\n' ${labels[@]+"${labels[@]}"} | jq -Rsc 'split("\n")
	| map(select(. != "") | capture("^(?<key>[^=]+)=(?<value>.*)$")) | from_entries')
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
# The uncompressed layer's digest is also its diff_id.
jq -cn --arg diff "sha256:$layer" --arg arch "$arch" --argjson entry "$entry" \
	--argjson env "$env_json" --argjson labels "$label_json" --arg created "$created" '{
	architecture: $arch, os: "linux", created: $created,
	config: ({Entrypoint: $entry, WorkingDir: "/"}
		+ (if ($env | length) > 0 then {Env: $env} else {} end)
		+ (if ($labels | length) > 0 then {Labels: $labels} else {} end)),
	rootfs: {type: "layers", diff_ids: [$diff]},
	history: [{created: $created, created_by: "hpn-rdma scripts/oci-pack.sh"}]
}' >"$work/config.json"
read -r config config_size < <(blob "$work/config.json")

jq -cn --arg c "sha256:$config" --argjson cs "$config_size" \
	--arg l "sha256:$layer" --argjson ls "$layer_size" '{
	schemaVersion: 2,
	mediaType: "application/vnd.oci.image.manifest.v1+json",
	config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
	layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $l, size: $ls}]
}' >"$work/manifest.json"
read -r manifest manifest_size < <(blob "$work/manifest.json")

jq -cn --arg m "sha256:$manifest" --argjson ms "$manifest_size" --arg name "$name" \
	--arg arch "$arch" '{
	schemaVersion: 2,
	mediaType: "application/vnd.oci.image.index.v1+json",
	manifests: [{
		mediaType: "application/vnd.oci.image.manifest.v1+json",
		digest: $m, size: $ms,
		platform: {architecture: $arch, os: "linux"},
		annotations: {"io.containerd.image.name": $name,
			"org.opencontainers.image.ref.name": $name}
	}]
}' >"$work/oci/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"

tar -C "$work/oci" "${tarflags[@]}" -cf "$work/image.tar" oci-layout index.json blobs
mv "$work/image.tar" "$out"
echo "sha256:$manifest"
