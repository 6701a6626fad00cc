#!/bin/bash
# hpn-rdma-agent install and uninstall with a manifest (--prefix, --destdir:
# node images), into scratch DESTDIRs (no privileges, nothing outside them is
# touched; the binaries come from this build tree): a fresh install, the same
# again (nothing changed, said so, every file byte- and mtime-identical), an
# upgrade of a file it installed, a file changed since it was installed
# refused and then kept by uninstall, a different existing conflist refused
# without --force (exit 1, nothing changed) and replaced with it, --dry-run,
# uninstall leaving no file and no directory behind, the refusals (--apply-now
# with --destdir, a conflist without hpn-rdma, a missing one), a DESTDIR that
# does not exist yet, --no-plugin beside a plugin it did not install (the
# .deb's), and scripts/install.sh, the wrapper, giving the same tree.
set -euo pipefail
src=${HPN_SRC:?run through ctest}
build=${HPN_BUILD:?run through ctest}
agent=${HPN_AGENT:-}
if [[ -z $agent || ! -x $agent ]]; then
	echo "SKIP: ${HPN_AGENT_WHY:-hpn-rdma-agent was not built}"
	exit 77
fi
T=$(mktemp -d /tmp/hpn-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
failed=0
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}
ok() { echo "ok: $*"; }
# This tree's files, as scripts/install.sh hands them over.
defaults=(--prefix /usr/local --plugin "$build/plugin/hpn-rdma" --conf "$src/conf/10-hpn-rdma.conflist"
	--man "$src/doc/hpn-rdma.8" --examples "$src/conf")
run() { # run DESTDIR [args]: install; sets OUT and RC
	local d=$1
	shift
	RC=0
	OUT=$("$agent" install --destdir "$d" "${defaults[@]}" "$@" 2>&1) || RC=$?
}
unrun() { # unrun DESTDIR [args]: uninstall; sets OUT and RC
	local d=$1
	shift
	RC=0
	OUT=$("$agent" uninstall --destdir "$d" "$@" 2>&1) || RC=$?
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
# The manifest's sums are sha256sum's, its paths without DESTDIR.
m=$D/usr/local/share/hpn-rdma/install.manifest
grep -qx "file $(sha256sum <"$build/plugin/hpn-rdma" | cut -d' ' -f1) /opt/cni/bin/hpn-rdma" "$m" &&
	grep -qx 'dir /etc/modprobe.d' "$m" && ! grep -q "$D" "$m" &&
	ok "the manifest: SHA-256 and paths without DESTDIR" || fail "manifest: $(cat "$m")"

before=$(snap "$D")
run "$D" --netns-mode exclusive
[[ $RC == 0 && $OUT == *"nothing changed"* && $OUT != *installed\ \ * ]] &&
	ok "second run: nothing changed, and says so" || fail "second run: exit $RC: $OUT"
[[ $(snap "$D") == "$before" ]] && ok "second run: tree identical (content, modes, mtimes)" ||
	fail "second run changed the tree"

# An upgrade: a new binary over the one it installed (unchanged since) is no conflict.
cp "$build/plugin/hpn-rdma" "$T/hpn-rdma.new"
echo >>"$T/hpn-rdma.new"
run "$D" --netns-mode exclusive --plugin "$T/hpn-rdma.new"
[[ $RC == 0 && $OUT == *"update     /opt/cni/bin/hpn-rdma"* ]] &&
	cmp -s "$D/opt/cni/bin/hpn-rdma" "$T/hpn-rdma.new" &&
	ok "upgrade of a file it installed" || fail "upgrade: exit $RC: $OUT"
run "$D" --netns-mode exclusive # back to this build's binary

# A file changed since it was installed is in the way, and uninstall keeps it.
echo '{"changed": true}' >"$D/etc/cni/net.d/10-hpn-rdma.conflist"
before=$(snap "$D")
run "$D"
[[ $RC == 1 && $OUT == *"refused    /etc/cni/net.d/10-hpn-rdma.conflist"* ]] &&
	ok "a conflist changed by hand is refused" || fail "changed conflist: exit $RC: $OUT"
[[ $(snap "$D") == "$before" ]] && ok "refused: nothing changed" || fail "refused run changed the tree"
unrun "$D"
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
unrun "$D" --prefix /usr --dry-run
[[ $RC == 0 && $OUT == *"dry run"*"removed    /opt/cni/bin/hpn-rdma"* &&
	-f $D/opt/cni/bin/hpn-rdma ]] && ok "uninstall --dry-run: says what, removes nothing" ||
	fail "uninstall --dry-run: exit $RC: $OUT"
unrun "$D" --prefix /usr
[[ $RC == 0 ]] || fail "uninstall: exit $RC: $OUT"
echo "$OUT"
[[ -z $(find "$D" -mindepth 1) ]] && ok "uninstall leaves an empty tree" ||
	fail "left after uninstall: $(find "$D" -mindepth 1)"
unrun "$D" --prefix /usr
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
[[ $RC == 1 && $OUT == *"hpn-rdma"* && -z $(find "$D" -mindepth 1) ]] &&
	ok "a --conf without hpn-rdma: refused" || fail "bridge conf: exit $RC: $OUT"
run "$D" --conf /nonexistent.conf
[[ $RC == 1 && -z $(find "$D" -mindepth 1) ]] && ok "a missing --conf: refused" ||
	fail "missing conf: exit $RC: $OUT"
# The DaemonSet's options and the manifest's do not mix.
run "$D" --kubeconfig /etc/cni/net.d/hpn-rdma.d/kc
[[ $RC == 2 && -z $(find "$D" -mindepth 1) ]] && ok "--kubeconfig with --destdir: a usage error" ||
	fail "--kubeconfig with --destdir: exit $RC: $OUT"

# A DESTDIR that does not exist yet (two levels) is created, as make install
# DESTDIR= does; a dry run creates nothing, not even it.
N=$T/new/image-root
run "$N" --dry-run
[[ $RC == 0 && ! -e $T/new ]] && ok "--dry-run into a missing DESTDIR creates nothing" ||
	fail "dry run into a missing DESTDIR: exit $RC: $OUT"
run "$N"
[[ $RC == 0 && -x $N/opt/cni/bin/hpn-rdma && -f $N/etc/cni/net.d/10-hpn-rdma.conflist ]] &&
	ok "install into a DESTDIR that did not exist" || fail "missing DESTDIR: exit $RC: $OUT"
unrun "$N" --prefix /usr/local
[[ $RC == 0 && -z $(find "$N" -mindepth 1) ]] && ok "uninstall leaves the DESTDIR empty" ||
	fail "uninstall from the created DESTDIR: exit $RC: $OUT $(find "$N" -mindepth 1)"

# Beside the .deb: its plugin is in place and not ours; --no-plugin installs
# the config and the netns mode only, and uninstall leaves the plugin.
D=$T/deb
mkdir -p "$D/opt/cni/bin"
cp "$build/plugin/hpn-rdma" "$D/opt/cni/bin/hpn-rdma"
RC=0
OUT=$("$agent" install --destdir "$D" --prefix /usr --no-plugin \
	--conf "$src/conf/10-hpn-rdma.conflist" --netns-mode exclusive 2>&1) || RC=$?
[[ $RC == 0 && $OUT != *"/opt/cni/bin/hpn-rdma"* ]] &&
	! grep -q /opt/cni/bin "$D/usr/share/hpn-rdma/install.manifest" &&
	ok "--no-plugin: the .deb's plugin neither touched nor listed" || fail "--no-plugin: exit $RC: $OUT"
unrun "$D" --prefix /usr
[[ $RC == 0 && $(cd "$D" && find . -mindepth 1 | sort | tr '\n' ' ') == "./opt ./opt/cni ./opt/cni/bin ./opt/cni/bin/hpn-rdma " ]] &&
	ok "uninstall beside the .deb: only the .deb's plugin is left" ||
	fail "uninstall beside the .deb: exit $RC: $OUT: $(cd "$D" && find . -mindepth 1)"

# scripts/install.sh, the wrapper: the same tree as the agent with its defaults.
W=$T/wrapper
RC=0
OUT=$(DESTDIR=$W bash "$src/scripts/install.sh" --build-dir "$build" --netns-mode exclusive 2>&1) || RC=$?
run "$T/direct" --netns-mode exclusive
[[ $RC == 0 && $(cd "$W" && find . -printf '%p %m\n' | sort && find . -type f -exec sha256sum {} + | sort) == \
	$(cd "$T/direct" && find . -printf '%p %m\n' | sort && find . -type f -exec sha256sum {} + | sort) ]] &&
	ok "scripts/install.sh: the same files, modes and manifest" || fail "wrapper: exit $RC: $OUT"
RC=0
OUT=$(DESTDIR=$W bash "$src/scripts/install.sh" --build-dir "$build" --uninstall 2>&1) || RC=$?
[[ $RC == 0 && -z $(find "$W" -mindepth 1) ]] && ok "scripts/install.sh --uninstall: nothing left" ||
	fail "wrapper uninstall: exit $RC: $OUT"

((failed == 0)) || { echo "$failed failed"; exit 1; }
echo "all passed"
