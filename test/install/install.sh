#!/bin/bash
# scripts/install.sh into scratch DESTDIRs (no privileges, nothing outside them
# is touched; the binary comes from this build tree): a fresh install, the same
# again (nothing changed, said so, every file byte- and mtime-identical), a
# different existing conflist refused without --force (exit 1, nothing changed)
# and replaced with it, an upgrade of a file it installed, a file changed since
# it was installed kept by --uninstall, --dry-run, and --uninstall leaving no
# file and no directory behind.
set -euo pipefail
src=${HPN_SRC:?run through ctest}
build=${HPN_BUILD:?run through ctest}
inst=$src/scripts/install.sh
T=$(mktemp -d /tmp/hpn-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
failed=0
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}
ok() { echo "ok: $*"; }
run() { # run DESTDIR [args]: sets OUT and RC
	local d=$1
	shift
	RC=0
	OUT=$(DESTDIR=$d bash "$inst" --build-dir "$build" "$@" 2>&1) || RC=$?
}
snap() { (cd "$1" && find . -printf '%p %y %m %T@\n' | sort && find . -type f -exec sha256sum {} + | sort); }

D=$T/fresh
mkdir "$D"
run "$D" --netns-mode exclusive
[[ $RC == 0 ]] || fail "fresh install: exit $RC: $OUT"
echo "$OUT"
for f in opt/cni/bin/hpn-rdma etc/cni/net.d/10-hpn-rdma.conflist \
	usr/local/share/man/man8/hpn-rdma.8 usr/local/share/hpn-rdma/examples/hpn-rdma.conf \
	usr/local/share/hpn-rdma/examples/10-hpn-rdma.conflist etc/modprobe.d/hpn-rdma.conf \
	usr/local/share/hpn-rdma/install.manifest; do
	[[ -f $D/$f ]] || fail "fresh install: no $f"
done
cmp -s "$D/opt/cni/bin/hpn-rdma" "$build/plugin/hpn-rdma" && [[ -x $D/opt/cni/bin/hpn-rdma ]] &&
	ok "binary installed, executable" || fail "binary differs or is not executable"
cmp -s "$D/etc/cni/net.d/10-hpn-rdma.conflist" "$src/conf/10-hpn-rdma.conflist" &&
	ok "conflist installed" || fail "conflist differs"
grep -qx 'options ib_core netns_mode=0' "$D/etc/modprobe.d/hpn-rdma.conf" &&
	ok "exclusive mode persisted as netns_mode=0" || fail "modprobe file: $(cat "$D/etc/modprobe.d/hpn-rdma.conf")"
[[ $OUT == *"installed  /opt/cni/bin/hpn-rdma"* ]] && ok "says what it installed" ||
	fail "output does not list the binary"

before=$(snap "$D")
run "$D" --netns-mode exclusive
[[ $RC == 0 && $OUT == *"nothing changed"* && $OUT != *installed\ \ * ]] &&
	ok "second run: nothing changed, and says so" || fail "second run: exit $RC: $OUT"
[[ $(snap "$D") == "$before" ]] && ok "second run: tree identical (content, modes, mtimes)" ||
	fail "second run changed the tree"

# An upgrade: a new binary over the one it installed (unchanged since) is no conflict.
mkdir -p "$T/newbuild/plugin"
cp "$build/plugin/hpn-rdma" "$T/newbuild/plugin/hpn-rdma"
echo >>"$T/newbuild/plugin/hpn-rdma"
RC=0
OUT=$(DESTDIR=$D bash "$inst" --build-dir "$T/newbuild" --netns-mode exclusive 2>&1) || RC=$?
[[ $RC == 0 && $OUT == *"update     /opt/cni/bin/hpn-rdma"* ]] &&
	cmp -s "$D/opt/cni/bin/hpn-rdma" "$T/newbuild/plugin/hpn-rdma" &&
	ok "upgrade of a file it installed" || fail "upgrade: exit $RC: $OUT"
run "$D" --netns-mode exclusive # back to this build's binary

# A file changed since it was installed is in the way, and uninstall keeps it.
echo '{"changed": true}' >"$D/etc/cni/net.d/10-hpn-rdma.conflist"
before=$(snap "$D")
run "$D"
[[ $RC == 1 && $OUT == *"refused    /etc/cni/net.d/10-hpn-rdma.conflist"* ]] &&
	ok "a conflist changed by hand is refused" || fail "changed conflist: exit $RC: $OUT"
[[ $(snap "$D") == "$before" ]] && ok "refused: nothing changed" || fail "refused run changed the tree"
run "$D" --uninstall
[[ $RC == 0 && $OUT == *"kept       /etc/cni/net.d/10-hpn-rdma.conflist"* ]] &&
	ok "uninstall keeps a changed file and says so" || fail "uninstall changed: exit $RC: $OUT"
left=$(cd "$D" && find . -type f)
[[ $left == "./etc/cni/net.d/10-hpn-rdma.conflist" ]] && ok "only the changed file is left" ||
	fail "left after uninstall: $left"

# A different conflist that the installer never installed: refused, then --force.
D=$T/other
mkdir -p "$D/etc/cni/net.d"
echo '{"cniVersion": "1.0.0", "name": "theirs", "type": "bridge"}' >"$D/etc/cni/net.d/10-hpn-rdma.conflist"
before=$(snap "$D")
run "$D"
[[ $RC == 1 && $OUT == *"refused"*"--force replaces it"* ]] && ok "a different existing conflist: refused" ||
	fail "different conflist: exit $RC: $OUT"
[[ $(snap "$D") == "$before" ]] && ok "refused: file untouched, nothing installed" ||
	fail "refused run changed $D"
run "$D" --force
[[ $RC == 0 && $OUT == *"replace    /etc/cni/net.d/10-hpn-rdma.conflist"* ]] &&
	cmp -s "$D/etc/cni/net.d/10-hpn-rdma.conflist" "$src/conf/10-hpn-rdma.conflist" &&
	ok "--force replaces it" || fail "--force: exit $RC: $OUT"

# Fresh, then uninstall: nothing left, not even a directory.
D=$T/clean
mkdir "$D"
run "$D" --prefix /usr --cni-conf-dir /etc/cni/net.d --conf "$src/conf/hpn-rdma-pci.conf" \
	--netns-mode shared
[[ $RC == 0 && -f $D/etc/cni/net.d/hpn-rdma-pci.conf && -f $D/usr/share/man/man8/hpn-rdma.8 ]] &&
	grep -qx 'options ib_core netns_mode=1' "$D/etc/modprobe.d/hpn-rdma.conf" &&
	ok "--prefix /usr, --conf, shared mode" || fail "prefix install: exit $RC: $OUT"
run "$D" --prefix /usr --uninstall
[[ $RC == 0 ]] || fail "uninstall: exit $RC: $OUT"
echo "$OUT"
[[ -z $(find "$D" -mindepth 1) ]] && ok "uninstall leaves an empty tree" ||
	fail "left after uninstall: $(find "$D" -mindepth 1)"
run "$D" --prefix /usr --uninstall
[[ $RC == 0 && $OUT == *"nothing to do"* ]] && ok "uninstall again: nothing to do" ||
	fail "second uninstall: exit $RC: $OUT"

# --dry-run changes nothing; --apply-now is refused under DESTDIR.
run "$D" --dry-run
[[ $RC == 0 && $OUT == *"dry run"*"installed  /opt/cni/bin/hpn-rdma"* && -z $(find "$D" -mindepth 1) ]] &&
	ok "--dry-run: says what, changes nothing" || fail "--dry-run: exit $RC: $OUT"
run "$D" --netns-mode exclusive --apply-now
[[ $RC == 2 && -z $(find "$D" -mindepth 1) ]] && ok "--apply-now refused with DESTDIR" ||
	fail "--apply-now under DESTDIR: exit $RC: $OUT"
echo '{"cniVersion": "1.0.0", "name": "b", "type": "bridge"}' >"$T/bridge.conf"
run "$D" --conf "$T/bridge.conf"
[[ $RC == 1 && $OUT == *"has no hpn-rdma plugin"* && -z $(find "$D" -mindepth 1) ]] &&
	ok "a --conf without hpn-rdma: refused" || fail "bridge conf: exit $RC: $OUT"
run "$D" --conf /nonexistent.conf
[[ $RC == 1 && -z $(find "$D" -mindepth 1) ]] && ok "a missing --conf: refused" ||
	fail "missing conf: exit $RC: $OUT"

# A DESTDIR that does not exist yet (two levels) is created, as make install
# DESTDIR= does; a dry run creates nothing, not even it.
N=$T/new/image-root
run "$N" --dry-run
[[ $RC == 0 && ! -e $T/new ]] && ok "--dry-run into a missing DESTDIR creates nothing" ||
	fail "dry run into a missing DESTDIR: exit $RC: $OUT"
run "$N"
[[ $RC == 0 && -x $N/opt/cni/bin/hpn-rdma && -f $N/etc/cni/net.d/10-hpn-rdma.conflist ]] &&
	ok "install into a DESTDIR that did not exist" || fail "missing DESTDIR: exit $RC: $OUT"
run "$N" --uninstall
[[ $RC == 0 && -z $(find "$N" -mindepth 1) ]] && ok "uninstall leaves the DESTDIR empty" ||
	fail "uninstall from the created DESTDIR: exit $RC: $OUT $(find "$N" -mindepth 1)"

((failed == 0)) || { echo "$failed failed"; exit 1; }
echo "all passed"
