#!/bin/bash
# prepare.sh [--kernel K] CACHE_DIR: fetch a Debian kernel and build the
# initramfs the vm tier boots (see run.sh). K is one of
#   6.1  (default) Debian 12's newest linux-image-6.1.0-N-amd64, from the apt
#        sources this machine already has; kept in CACHE_DIR itself.
#   7    the newest 7.x kernel of Debian's trixie-backports: <v> is the
#        linux-image-<v> that suite's linux-image-amd64 depends on, fetched as
#        linux-binary-<v> (vmlinuz) and linux-modules-<v> (.ko.xz) with
#        `apt-get download` under a private APT_CONFIG (CACHE_DIR/7/apt: its
#        own sources list naming $HPN_VM_MIRROR, default
#        http://deb.debian.org/debian, suite trixie-backports, main, trusted
#        with Debian's archive keyring; its own lists, cache and state).
#        /etc/apt is never written and its sources are not used; nothing is
#        installed. Kept in CACHE_DIR/7.
# Idempotent: a stamp records the packages and a hash of this script and of
# the guest init; when both match, nothing is done (and apt is not asked, so
# no network is needed). To move to a newer kernel, delete the kernel's stamp.
# When the kernel cannot be had (no network, no such package), exit 77 with a
# SKIP line saying why; the reason is also left in the kernel's dir as
# skip-reason, for run.sh to repeat.
#
# The kernel's dir afterwards:
#   *.deb               the packages (apt-get download)
#   root/               dpkg -x of them, plus modules.dep (depmod)
#   vmlinuz             -> the kernel image in root/
#   initramfs.cpio.gz   busybox-static, the boot modules (decompressed), /init
#   kmods               the guest's /lib/modules (for autoload)
#   stamp
set -euo pipefail

# Loaded at boot, in this order, each after its dependencies (from
# modules.dep); built-in ones are skipped. Words after the name are module
# parameters; the guest init adds any `module.param=value` of the kernel
# command line (run.sh --append), which busybox insmod does not read itself.
#
# 6.1: crc32_generic must come before rdma_rxe: rxe asks the crypto layer for
# "crc32" only at `rdma link add`, and without the module loaded that fails
# with ENOENT (nothing autoloads it). numdummies=0: no dummy0.
MODULES_6_1=(
	"virtio_pci" "virtio_net" "9p" "9pnet_virtio" "netfs" "fscache" "overlay"
	"af_packet" "crc32_generic"
	"ib_core" "ib_uverbs" "ib_cm" "iw_cm" "rdma_cm" "rdma_ucm" "rdma_rxe"
	"macvlan" "ipvlan" "dummy numdummies=0" "veth" "8021q"
)
# 7.x: virtio_pci, af_packet and rxe's crc32 are built in; its modules
# package ships no modules.builtin, so a built-in name here would fail as
# "not found". overlay is for init's root; macvlan, ipvlan and 8021q for the
# scenarios (nothing autoloads a link kind created over netlink here).
MODULES_7=(
	"netfs" "9pnet" "9p" "9pnet_virtio" "failover" "net_failover" "virtio_net"
	"udp_tunnel" "ip6_udp_tunnel" "ib_core" "rdma_rxe" "configfs" "ib_cm" "iw_cm"
	"rdma_cm" "ib_uverbs_support" "ib_uverbs" "rdma_ucm" "ib_umad"
	"veth" "dummy numdummies=0" "overlay" "macvlan" "ipvlan" "8021q"
)

# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"	# skip
# shellcheck source=../debs.sh
source "$(dirname "${BASH_SOURCE[0]}")/../debs.sh"	# debs_apt, debs_get
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=kernels.sh
source "$here/kernels.sh"	# vm_kernel_dir, vm_recipe

kernel=6.1
if [[ ${1:-} == --kernel ]]; then
	kernel=${2:?usage: prepare.sh [--kernel 6.1|7] CACHE_DIR}
	shift 2
fi
root=${1:?usage: prepare.sh [--kernel 6.1|7] CACHE_DIR}
cache=$(vm_kernel_dir "$root" "$kernel") || exit 2
{ mkdir -p "$cache" && [[ -w $cache ]]; } 2>/dev/null ||
	skip "cannot write the vm cache $cache (set HPN_VM_CACHE)"
cache=$(cd "$cache" && pwd)
# Two build trees may run their vm.prepare at once.
exec 9>"$cache/lock"
flock 9

# skip_why MESSAGE: skip, leaving the reason for run.sh.
skip_why() {
	echo "$*" >"$cache/skip-reason"
	skip "$*"
}

recipe=$(vm_recipe "$kernel")
if [[ -f $cache/stamp && -f $cache/initramfs.cpio.gz && -e $cache/vmlinuz ]] &&
	[[ $(<"$cache/stamp") == *"recipe $recipe"* ]]; then
	echo "vm cache up to date: $(head -n1 "$cache/stamp")"
	exit 0
fi

for tool in apt-cache apt-get dpkg depmod modprobe cpio gzip xz qemu-system-x86_64; do
	command -v "$tool" >/dev/null ||
		skip_why "$tool is not installed (scripts/install-deps.sh, group \"vm tier\")"
done
# The guest has no libc of its own before it mounts the host root.
busybox=/bin/busybox
[[ $(dpkg -S "$busybox" 2>/dev/null) == busybox-static:* ]] ||
	skip_why "$busybox is not busybox-static's (Debian: busybox-static)"

cd "$cache"

# fetch_6_1: sets pkgs, kver, kroot (the dir holding lib/modules/<kver>) and
# vmlinuz from the machine's own apt sources.
fetch_6_1() {
	# The newest generic-flavour 6.1 image; the anchored name excludes -cloud,
	# -rt, -dbg and -unsigned.
	local pkg
	pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' |
		awk '{print $1}' | sort -V | tail -n1)
	[[ -n $pkg ]] || {
		echo "prepare: no linux-image-6.1.0-N-amd64 in apt-cache (run apt-get update)" >&2
		exit 1
	}
	kver=${pkg#linux-image-}
	pkgs=("$pkg")
	echo "prepare: kernel $pkg"
	if ! compgen -G "${pkg}_*_amd64.deb" >/dev/null; then
		rm -f linux-image-*.deb
		# Sandbox user root: _apt cannot write to a root-owned cache dir.
		apt-get download -q -o APT::Sandbox::User=root "$pkg"
	fi
	rm -rf root
	dpkg -x "${pkg}"_*_amd64.deb root
	kroot=root
	[[ -d root/lib/modules/$kver ]] || kroot=root/usr
	vmlinuz=root/boot/vmlinuz-$kver
}

# fetch_7: the same from trixie-backports through a private apt (test/debs.sh).
fetch_7() {
	local dep='' log
	# A suite that cannot be reached is judged by what apt-cache finds in the
	# index (lists of an earlier update count).
	if debs_apt "$cache/apt" "trixie-backports main"; then
		log=$DEBS_LOG
		# "  Depends: linux-image-7.3.4+deb13-amd64": the versioned image.
		dep=$(apt-cache depends linux-image-amd64 2>/dev/null |
			sed -n 's/^ *Depends: linux-image-\([0-9][^ ]*-amd64\)$/\1/p' | head -n1) || dep=
		[[ -n $dep || $log == *"W: Failed to fetch"* ]] ||
			log="trixie-backports has no linux-image-amd64 depending on a linux-image-<v>"
	else
		log=$DEBS_LOG
	fi
	if [[ -n $dep ]]; then
		kver=$dep
	else
		# Offline: keep the kernel already fetched, if any.
		local have
		have=$(compgen -G 'linux-binary-*_amd64.deb' | head -n1 || true)
		have=${have#linux-binary-}
		kver=${have%%_*}
		[[ -n $kver && -n $(compgen -G "linux-modules-${kver}_*_amd64.deb") ]] ||
			skip_why "cannot fetch the trixie-backports kernel from $DEBS_MIRROR:" \
				"$(debs_errors "$log")"
		echo "prepare: trixie-backports unreachable ($(tail -n1 <<<"$log")); keeping $kver"
	fi
	pkgs=("linux-binary-$kver" "linux-modules-$kver")
	echo "prepare: kernel $kver (${pkgs[*]})"
	# Another version's packages go: debs_get keeps what is there by name.
	compgen -G "linux-binary-${kver}_*_amd64.deb" >/dev/null || rm -f linux-binary-*.deb linux-modules-*.deb
	debs_get . "${pkgs[@]}" || skip_why "$DEBS_LOG"
	# Everything is under usr/lib; depmod and modprobe -d look in lib/.
	ln -s usr/lib root/lib
	kroot=root
	vmlinuz=root/usr/lib/modules/$kver/vmlinuz
}

pkgs=() kver= kroot= vmlinuz=
case $kernel in
6.1) fetch_6_1; modules=("${MODULES_6_1[@]}") ;;
7) fetch_7; modules=("${MODULES_7[@]}") ;;
esac
rm -f skip-reason
[[ -d $kroot/lib/modules/$kver ]] || { echo "prepare: no modules for $kver in the package" >&2; exit 1; }
[[ -f $vmlinuz ]] || { echo "prepare: no kernel image $vmlinuz in the package" >&2; exit 1; }
# The packages ship no modules.dep (the postinst runs depmod). Without
# modules.order and modules.builtin (7.x) depmod warns; harmless here.
depmod -b "$kroot" "$kver" 2>&1 | grep -v 'could not open modules\.' >&2 || true
[[ -s $kroot/lib/modules/$kver/modules.dep ]] || { echo "prepare: depmod made no modules.dep" >&2; exit 1; }

# Resolve each module to its ordered insmod list; -C /dev/null ignores this
# machine's modprobe.d. load lists "file params" in load order, once each;
# busybox insmod cannot read compressed modules, so they are decompressed.
staging=$cache/initramfs.d
rm -rf "$staging"
mkdir -p "$staging"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,lib/modules,mnt,modules}
declare -A seen=()
: >"$staging/modules/load"
for entry in "${modules[@]}"; do
	read -r name params <<<"$entry"
	deps=$(modprobe -d "$cache/$kroot" -S "$kver" -C /dev/null \
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
ln -sfn "$vmlinuz" vmlinuz
ln -sfn "$kroot/lib/modules" kmods
printf 'pkg %s\nkver %s\nrecipe %s\n' "${pkgs[*]}" "$kver" "$recipe" >stamp
echo "prepare: done: $cache ($(du -h initramfs.cpio.gz | cut -f1) initramfs)"
