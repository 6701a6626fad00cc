#!/bin/bash
# prepare.sh CACHE_DIR: fetch Debian's 6.1 kernel and build the initramfs the
# vm tier boots (see run.sh). Idempotent: a stamp records the kernel package
# and a hash of this script and of the guest init; when both match, nothing
# is done (and apt is not even asked). To move to a newer kernel after
# `apt-get update`, delete CACHE_DIR/stamp.
#
# CACHE_DIR afterwards:
#   linux-image-6.1.0-N-amd64_*.deb   the package (apt-get download)
#   root/                             dpkg -x of it, plus modules.dep (depmod)
#   vmlinuz                           -> root/boot/vmlinuz-<release>
#   initramfs.cpio.gz                 busybox-static, the boot modules, /init
#   kmods                             the guest's /lib/modules (for autoload)
#   stamp
set -euo pipefail

# Loaded at boot, in this order, each after its dependencies (from
# modules.dep); built-in ones are skipped. Words after the name are module
# parameters. crc32_generic must come before rdma_rxe: rxe asks the crypto
# layer for "crc32" only at `rdma link add`, and without the module loaded
# that fails with ENOENT (nothing autoloads it). numdummies=0: no dummy0.
MODULES=(
	"virtio_pci" "virtio_net" "9p" "9pnet_virtio" "netfs" "fscache" "overlay"
	"af_packet" "crc32_generic"
	"ib_core" "ib_uverbs" "ib_cm" "iw_cm" "rdma_cm" "rdma_ucm" "rdma_rxe"
	"macvlan" "ipvlan" "dummy numdummies=0" "veth" "8021q"
)

# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"	# skip

cache=${1:?usage: prepare.sh CACHE_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
{ mkdir -p "$cache" && [[ -w $cache ]]; } 2>/dev/null ||
	skip "cannot write the vm cache $cache (set HPN_VM_CACHE)"
cache=$(cd "$cache" && pwd)
# Two build trees may run their vm.prepare at once.
exec 9>"$cache/lock"
flock 9

recipe=$(cat "${BASH_SOURCE[0]}" "$here/init" | sha256sum)
recipe=${recipe%% *}
if [[ -f $cache/stamp && -f $cache/initramfs.cpio.gz && -e $cache/vmlinuz ]] &&
	[[ $(<"$cache/stamp") == *"recipe $recipe"* ]]; then
	echo "vm cache up to date: $(head -n1 "$cache/stamp")"
	exit 0
fi

for tool in apt-cache apt-get dpkg depmod modprobe cpio gzip qemu-system-x86_64; do
	command -v "$tool" >/dev/null ||
		skip "$tool is not installed (scripts/install-deps.sh, group \"vm tier\")"
done
# The guest has no libc of its own before it mounts the host root.
busybox=/bin/busybox
[[ $(dpkg -S "$busybox" 2>/dev/null) == busybox-static:* ]] ||
	skip "$busybox is not busybox-static's (Debian: busybox-static)"

# The newest generic-flavour 6.1 image; the anchored name excludes -cloud,
# -rt, -dbg and -unsigned.
pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' |
	awk '{print $1}' | sort -V | tail -n1)
[[ -n $pkg ]] || {
	echo "prepare: no linux-image-6.1.0-N-amd64 in apt-cache (run apt-get update)" >&2
	exit 1
}
kver=${pkg#linux-image-}
echo "prepare: kernel $pkg"

cd "$cache"
if ! compgen -G "${pkg}_*_amd64.deb" >/dev/null; then
	rm -f linux-image-*.deb
	# Sandbox user root: _apt cannot write to a root-owned cache dir.
	apt-get download -q -o APT::Sandbox::User=root "$pkg"
fi
rm -rf root initramfs.d
dpkg -x "${pkg}"_*_amd64.deb root
kmods=root/lib/modules
[[ -d $kmods/$kver ]] || kmods=root/usr/lib/modules
[[ -d $kmods/$kver ]] || { echo "prepare: no modules for $kver in the package" >&2; exit 1; }
# The package ships no modules.dep (the postinst runs depmod).
depmod -b "${kmods%/lib/modules}" "$kver"

# Resolve each module to its ordered insmod list; -C /dev/null ignores this
# machine's modprobe.d. load lists "file params" in load order, once each.
staging=$cache/initramfs.d
mkdir -p "$staging"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,lib/modules,mnt,modules}
declare -A seen=()
: >"$staging/modules/load"
for entry in "${MODULES[@]}"; do
	read -r name params <<<"$entry"
	deps=$(modprobe -d "$cache/${kmods%/lib/modules}" -S "$kver" -C /dev/null \
		--show-depends "$name") || { echo "prepare: module $name not found" >&2; exit 1; }
	while read -r kind path _; do
		[[ $kind == insmod ]] || continue	# "builtin NAME"
		ko=${path##*/}
		ko=${ko%%.ko*}.ko
		[[ -n ${seen[$ko]:-} ]] && continue
		seen[$ko]=1
		case $path in
		*.ko.xz) xz -dc "$path" >"$staging/modules/$ko" ;;
		*.ko.zst) zstd -qdc "$path" >"$staging/modules/$ko" ;;
		*.ko.gz) gzip -dc "$path" >"$staging/modules/$ko" ;;
		*) cp "$path" "$staging/modules/$ko" ;;
		esac
		p=
		[[ $path == */$name.ko* || $path == */${name//_/-}.ko* ]] && p=$params
		echo "$ko${p:+ $p}" >>"$staging/modules/load"
	done <<<"$deps"
done
echo "prepare: modules: $(cut -d' ' -f1 "$staging/modules/load" | tr '\n' ' ')"

cp "$busybox" "$staging/bin/busybox"
cp "$here/init" "$staging/init"
chmod 755 "$staging/init"
(cd "$staging" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -6 >initramfs.cpio.gz.tmp
mv initramfs.cpio.gz.tmp initramfs.cpio.gz
rm -rf "$staging"
ln -sfn "root/boot/vmlinuz-$kver" vmlinuz
ln -sfn "$kmods" kmods
printf 'pkg %s\nkver %s\nrecipe %s\n' "$pkg" "$kver" "$recipe" >stamp
echo "prepare: done: $cache ($(du -h initramfs.cpio.gz | cut -f1) initramfs)"
