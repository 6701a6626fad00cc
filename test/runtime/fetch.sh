#!/bin/bash
# fetch.sh CACHE_DIR: what the runtime tier needs beyond Debian 12's
# containerd 1.6, from newer Debian suites through a private apt
# (test/debs.sh), unpacked, never installed:
#   containerd-1.7/root   trixie's containerd (1.7.x; its shims, ctr)
#   containerd-2.1/root   forky's containerd (2.1.x)
#   cni-1.9/root          forky's containernetworking-plugins (1.9.x, CNI 1.1.0)
#   nccl/root             trixie's libnccl2 (contrib; it carries the CUDA
#                         runtime it needs: no libcudart12) with the trixie
#                         libc6, libstdc++6 and libgcc-s1 it needs (glibc 2.38+),
#                         for the NCCL probe image
# Each has a stamp naming its packages and their files; a part whose stamp
# matches is not fetched again (no network needed). Debian 12's runc is used by every
# containerd (forky's needs glibc 2.38). A part that cannot be had leaves
# CACHE_DIR/<part>/skip-reason, which the tests that need it repeat when they
# skip; the others are still fetched. Exit 0 when every part is there, 77
# (SKIP line) when none could be had.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../common.sh
source "$here/../common.sh"	# skip
# shellcheck source=../debs.sh
source "$here/../debs.sh"

root=${1:?usage: fetch.sh CACHE_DIR}
{ mkdir -p "$root" && [[ -w $root ]]; } 2>/dev/null ||
	skip "cannot write the runtime cache $root (set HPN_RUNTIME_CACHE)"
root=$(cd "$root" && pwd)
exec 9>"$root/lock"	# two build trees may fetch at once
flock 9

# Each part's packages, the first one naming its version.
declare -A PARTS=(
	[containerd-1.7]="containerd/trixie"
	[containerd-2.1]="containerd/forky"
	[cni-1.9]="containernetworking-plugins/forky"
	[nccl]="libnccl2/trixie libc6/trixie libstdc++6/trixie libgcc-s1/trixie"
)
# version_of PART: the version of the part's first package (its .deb).
version_of() {
	local pkg=${PARTS[$1]%%[/ ]*} deb
	deb=$(compgen -G "$root/$1/${pkg}_*.deb" | head -n1) && dpkg-deb -f "$deb" Version
}
# wanted PART: the version line its name promises.
wanted() {
	case $1 in
	nccl) echo 2 ;;
	*) echo "${1#*-}" ;;
	esac
}

apt_ok=
have=0
for part in containerd-1.7 containerd-2.1 cni-1.9 nccl; do
	d=$root/$part
	mkdir -p "$d"
	rm -f "$d/skip-reason"
	# shellcheck disable=SC2086 # a word list
	read -r -a pkgs <<<"${PARTS[$part]}"
	if [[ -f $d/stamp && -d $d/root ]] &&
		[[ $(<"$d/stamp") == "${PARTS[$part]} $(cd "$d" && ls -1 ./*.deb 2>/dev/null)" ]]; then
		echo "fetch: $part up to date ($(version_of "$part"))"
		have=$((have + 1))
		continue
	fi
	if [[ -z $apt_ok ]]; then
		if debs_apt "$root/apt" "trixie main contrib" "forky main"; then
			apt_ok=1
		else
			apt_ok=0
			echo "fetch: no package index: $(debs_errors "$DEBS_LOG")"
		fi
	fi
	rm -f "$d/stamp"
	if ! debs_get "$d" "${pkgs[@]}"; then
		echo "$DEBS_LOG" >"$d/skip-reason"
		echo "fetch: $part: $DEBS_LOG"
		continue
	fi
	v=$(version_of "$part" || true)
	w=$(wanted "$part")
	if [[ $v != "$w".* ]]; then
		echo "the suite's ${pkgs[0]%%/*} is now $v, not $w.x: the tests named $part need a new suite" \
			>"$d/skip-reason"
		echo "fetch: $part: $(<"$d/skip-reason")"
		continue
	fi
	echo "${PARTS[$part]} $(cd "$d" && ls -1 ./*.deb)" >"$d/stamp"
	echo "fetch: $part $v"
	have=$((have + 1))
done
((have > 0)) || skip "nothing could be fetched: $(cat "$root"/*/skip-reason | head -n 1)"
