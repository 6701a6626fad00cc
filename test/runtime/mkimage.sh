#!/usr/bin/env bash
# mkimage.sh PAUSE_BINARY IMAGE_NAME OUTPUT.tar
#
# Packs the runtime tier's pause binary as a one-layer OCI image layout
# archive (image-spec v1.0: oci-layout, index.json, blobs/sha256/<digest>)
# that `ctr -n k8s.io images import` loads and containerd's CRI plugin runs as
# its sandbox_image, so nothing is ever pulled. The layer is an uncompressed
# tar holding /pause; the index names the image through the
# io.containerd.image.name annotation, which ctr's import takes as the
# image's name. Reproducible: fixed owners, modes and times, so the same
# binary gives the same digests. Run by the build (test/runtime/CMakeLists.txt).
set -euo pipefail

[[ $# == 3 ]] || {
	echo "usage: mkimage.sh PAUSE_BINARY IMAGE_NAME OUTPUT.tar" >&2
	exit 2
}
bin=$1 name=$2 out=$3
[[ -x $bin ]] || {
	echo "mkimage.sh: $bin is not an executable" >&2
	exit 2
}

work=$(mktemp -d "${TMPDIR:-/tmp}/hpn-mkimage.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs" "$work/oci/blobs/sha256"
install -m 0755 "$bin" "$work/rootfs/pause"

# The OCI platform name of this machine (the image holds a native binary).
case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
*) arch=$(uname -m) ;;
esac

# shellcheck disable=SC2054 # the commas belong to --pax-option
tarflags=(--sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=posix
	--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime)

# blob FILE: store FILE as a blob; prints "<digest hex> <size>".
blob() {
	local d s
	d=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$work/oci/blobs/sha256/$d"
	echo "$d $s"
}

tar -C "$work/rootfs" "${tarflags[@]}" -cf "$work/layer.tar" pause
read -r layer layer_size < <(blob "$work/layer.tar")

# The uncompressed layer's digest is also its diff_id.
jq -cn --arg diff "sha256:$layer" --arg arch "$arch" '{
	architecture: $arch, os: "linux",
	config: {Entrypoint: ["/pause"], WorkingDir: "/"},
	rootfs: {type: "layers", diff_ids: [$diff]},
	history: [{created_by: "hpn-rdma test/runtime/mkimage.sh"}]
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
	manifests: [{
		mediaType: "application/vnd.oci.image.manifest.v1+json",
		digest: $m, size: $ms,
		platform: {architecture: $arch, os: "linux"},
		annotations: {"io.containerd.image.name": $name,
			"org.opencontainers.image.ref.name": ($name | sub(".*:"; ""))}
	}]
}' >"$work/oci/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"

tar -C "$work/oci" "${tarflags[@]}" -cf "$work/image.tar" oci-layout index.json blobs
mv "$work/image.tar" "$out"
