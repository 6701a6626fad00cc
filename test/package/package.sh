#!/bin/bash
# The Debian package: cpack -G DEB from this (release) build tree, its contents
# and control fields (dpkg-deb), then a real dpkg -i, the installed plugin run
# (--version, doctor), and dpkg -P leaving nothing behind. Root only.
#
# Safe on a development machine: skipped (77, saying why) without root or
# dpkg, when an hpn-rdma package is already installed, when something not from
# dpkg already owns a path the package would install, or while another dpkg
# holds the lock. Everything it installs it purges again, even on failure.
set -euo pipefail
build=${HPN_BUILD:?run through ctest}
skip() {
	echo "SKIP: $*"
	exit 77
}
((EUID == 0)) || skip "needs root (dpkg -i)"
for t in dpkg dpkg-deb dpkg-query cpack; do
	command -v "$t" >/dev/null || skip "no $t"
done
if st=$(dpkg-query -W -f='${Status}' hpn-rdma 2>/dev/null) && [[ $st != *not-installed* ]]; then
	skip "an hpn-rdma package is already installed ($st): not touching it"
fi

T=$(mktemp -d /tmp/hpn-package.XXXXXX)
installed=0
cleanup() {
	((installed)) && dpkg -P hpn-rdma >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
failed=0
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}
ok() { echo "ok: $*"; }

start=$(date +%s%N)
(cd "$build" && cpack -G DEB -B "$T/out") >"$T/cpack.log" 2>&1 || {
	cat "$T/cpack.log"
	echo "FAIL: cpack"
	exit 1
}
deb=$(ls "$T"/out/hpn-rdma_*.deb)
echo "built $(basename "$deb"): $(stat -c %s "$deb") bytes in $((($(date +%s%N) - start) / 1000000)) ms"

dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|; s|/$||' | grep -v '^$' >"$T/paths"
for p in /opt/cni/bin/hpn-rdma /usr/share/man/man8/hpn-rdma.8.gz /usr/share/doc/hpn-rdma/README.md \
	/usr/share/doc/hpn-rdma/doc/configuration.md /usr/share/doc/hpn-rdma/doc/results.md \
	/usr/share/doc/hpn-rdma/copyright /usr/share/hpn-rdma/examples/10-hpn-rdma.conflist \
	/usr/share/hpn-rdma/examples/hpn-rdma.conf /usr/share/hpn-rdma/examples/hpn-rdma-pci.conf; do
	grep -qx "$p" "$T/paths" && ok "package has $p" || fail "package lacks $p"
done
! grep -q '^/etc' "$T/paths" && ok "nothing under /etc (no config is activated)" ||
	fail "package installs under /etc"
dpkg-deb -c "$deb" | grep 'rwxr-xr-x root/root.*\./opt/cni/bin/hpn-rdma$' >/dev/null &&
	ok "plugin is root:root 0755" || fail "plugin mode/owner: $(dpkg-deb -c "$deb" | grep hpn-rdma$)"
dep=$(dpkg-deb -f "$deb" Depends)
# libibverbs, librdmacm, libcurl and libyaml are dlopen()ed (named in the
# package by hand); libnl only when the binary links it dynamically
# (HPN_STATIC_LIBNL off or no .a).
libs=(libibverbs1 librdmacm1 libcurl4 libyaml-0-2 libcjson1)
# dlopen()ed, so the binary must not link them (or shlibdeps would name them).
for so in libcurl libyaml; do
	! readelf -d "$build/plugin/hpn-rdma" | grep -q "NEEDED.*$so" && ok "$so is not linked" ||
		fail "the plugin links $so: it should dlopen() it (lib/dl.h)"
done
readelf -d "$build/plugin/hpn-rdma" | grep -q 'NEEDED.*libnl-3' &&
	libs+=(libnl-3-200)
for lib in "${libs[@]}"; do
	# Each entry is "name" or "name (>= version)".
	[[ ", $dep," == *", $lib ("* || ", $dep," == *", $lib,"* ]] && ok "Depends: $lib" ||
		fail "Depends lacks $lib: $dep"
done
[[ $(dpkg-deb -f "$deb" Package) == hpn-rdma ]] || fail "package name"
gzip -dc <(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/share/man/man8/hpn-rdma.8.gz) \
	>"$T/man.8"
if command -v groff >/dev/null; then
	w=$(groff -man -Tutf8 -ww -z "$T/man.8" 2>&1)
	[[ -z $w ]] && ok "man page renders without warnings" || fail "groff: $w"
fi

# Nothing on this machine may be overwritten or left behind: every path the
# package has must either be absent now, or be a directory.
while read -r p; do
	if [[ -e $p && ! -d $p ]]; then
		skip "$p exists and is not from an hpn-rdma package: not overwriting it"
	fi
	[[ -e $p ]] && echo "$p" >>"$T/existed"
done <"$T/paths"
touch "$T/existed"

for try in 1 2 3 4 5 6; do
	out=$(dpkg -i "$deb" 2>&1) && break
	if [[ $out == *lock* ]]; then
		((try < 6)) || skip "the dpkg lock stayed held by another process"
		sleep 5
		continue
	fi
	echo "$out"
	installed=1 # half-installed: purge it
	fail "dpkg -i"
	exit 1
done
installed=1
ok "dpkg -i"
[[ $(dpkg-query -W -f='${Status}' hpn-rdma) == "install ok installed" ]] && ok "dpkg says installed" ||
	fail "status: $(dpkg-query -W -f='${Status}' hpn-rdma)"
v=$(/opt/cni/bin/hpn-rdma --version) && [[ $v == "hpn-rdma "* ]] && ok "installed plugin runs: $v" ||
	fail "installed plugin --version: $v"
rc=0
out=$(/opt/cni/bin/hpn-rdma doctor --config /usr/share/hpn-rdma/examples/hpn-rdma-pci.conf --json) || rc=$?
jq -e '.config.valid and (.ready | type == "boolean")' >/dev/null <<<"$out" && [[ $rc == 0 || $rc == 1 ]] &&
	ok "installed doctor runs on an installed example (exit $rc)" || fail "doctor: exit $rc: $out"
VERSION_OUT=$(CNI_COMMAND=VERSION /opt/cni/bin/hpn-rdma </dev/null) &&
	jq -e '.supportedVersions | index("1.1.0")' >/dev/null <<<"$VERSION_OUT" &&
	ok "installed plugin answers VERSION" || fail "VERSION: $VERSION_OUT"

dpkg -r hpn-rdma >/dev/null && ok "dpkg -r" || fail "dpkg -r"
dpkg -P hpn-rdma >/dev/null && ok "dpkg -P" || fail "dpkg -P"
installed=0
[[ $(dpkg-query -W -f='${Status}' hpn-rdma 2>/dev/null) == *'install ok'* ]] &&
	fail "still installed after purge" || ok "not installed after purge"
left=()
while read -r p; do
	[[ -e $p ]] && ! grep -qx "$p" "$T/existed" && left+=("$p")
done <"$T/paths"
((${#left[@]} == 0)) && ok "purge left nothing behind" || fail "left behind: ${left[*]}"

((failed == 0)) || { echo "$failed failed"; exit 1; }
echo "all passed"
