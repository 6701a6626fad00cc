#!/usr/bin/env bash
# Installs hpn-rdma on a node or into a node image (DESTDIR): the plugin binary
# into the CNI bin dir, a CNI config into the CNI config dir, the man page and
# the example configs under the prefix, and optionally the RDMA netns mode as
# an ib_core module option. Idempotent: a second run changes nothing and says
# so. Never replaces a file it did not install, or one changed since it
# installed it, without --force; when any target is in the way nothing is
# changed at all. A manifest (<prefix>/share/hpn-rdma/install.manifest) records
# what it installed, so --uninstall removes exactly that (files still as
# installed, directories it created that are empty). See --help.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local
cni_bin_dir=/opt/cni/bin
cni_conf_dir=/etc/cni/net.d
conf=$src/conf/10-hpn-rdma.conflist
build_dir=
netns_mode=
apply_now=0 force=0 dry_run=0 uninstall=0
destdir=${DESTDIR:-}

usage() {
	cat <<EOF
usage: scripts/install.sh [options]         (DESTDIR=/image/root in the environment too)
  --prefix DIR          man page, examples and the manifest under DIR/share ($prefix)
  --cni-bin-dir DIR     where the plugin binary goes ($cni_bin_dir)
  --cni-conf-dir DIR    where the CNI config goes ($cni_conf_dir)
  --conf FILE           the CNI config to install (conf/10-hpn-rdma.conflist)
  --no-conf             install no CNI config
  --build-dir DIR       take the binary from DIR/plugin/hpn-rdma (default: build
                        one with cmake in build-install/, test hooks off)
  --netns-mode MODE     shared or exclusive: write DESTDIR/etc/modprobe.d/hpn-rdma.conf
                        (options ib_core netns_mode=1|0), used when ib_core loads
  --apply-now           also switch the running kernel (rdma system set netns MODE);
                        not with DESTDIR
  --force               replace files that differ and were not installed by this script
  --dry-run             say what would be done, change nothing
  --uninstall           remove what the manifest lists (and is unchanged, unless --force)
  --destdir DIR         same as DESTDIR=DIR
Exit status: 0 done (or nothing to do), 1 refused or failed, 2 usage error.
EOF
}

while (($#)); do
	case $1 in
	--prefix) prefix=${2:?}; shift ;;
	--cni-bin-dir) cni_bin_dir=${2:?}; shift ;;
	--cni-conf-dir) cni_conf_dir=${2:?}; shift ;;
	--conf) conf=${2:?}; shift ;;
	--no-conf) conf= ;;
	--build-dir) build_dir=${2:?}; shift ;;
	--netns-mode) netns_mode=${2:?}; shift ;;
	--apply-now) apply_now=1 ;;
	--force) force=1 ;;
	--dry-run) dry_run=1 ;;
	--uninstall) uninstall=1 ;;
	--destdir) destdir=${2:?}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
for d in "$prefix" "$cni_bin_dir" "$cni_conf_dir"; do
	[[ $d == /* ]] || { echo "install.sh: $d is not an absolute path" >&2; exit 2; }
done
# The plan and the manifest are whitespace-separated.
for d in "$prefix" "$cni_bin_dir" "$cni_conf_dir" "$conf" "$build_dir" "$destdir" "$src"; do
	[[ $d != *[[:space:]]* ]] || { echo "install.sh: no white space in paths: \"$d\"" >&2; exit 2; }
done
case $netns_mode in
'') ;;
shared) mode_opt=1 ;;
exclusive) mode_opt=0 ;;
*) echo "install.sh: --netns-mode is shared or exclusive, not $netns_mode" >&2; exit 2 ;;
esac
if ((apply_now)) && [[ -z $netns_mode ]]; then
	echo "install.sh: --apply-now needs --netns-mode" >&2
	exit 2
fi
if ((apply_now)) && [[ -n $destdir ]]; then
	echo "install.sh: --apply-now changes the running kernel: not with DESTDIR ($destdir)" >&2
	exit 2
fi
destdir=${destdir%/}
manifest=$prefix/share/hpn-rdma/install.manifest

say() { printf '  %-10s %s\n' "$1" "$2"; }
sum() { sha256sum "$1" | cut -d' ' -f1; }

# The manifest: "file <sha256> <path>" and "dir <path>" lines, paths without DESTDIR.
declare -A old_sum=()
old_dirs=()
if [[ -f $destdir$manifest ]]; then
	while read -r kind a b; do
		case $kind in
		file) old_sum[$b]=$a ;;
		dir) old_dirs+=("$a") ;;
		esac
	done <"$destdir$manifest"
fi

if ((uninstall)); then
	echo "hpn-rdma uninstall${destdir:+ (DESTDIR=$destdir)}"
	[[ -f $destdir$manifest ]] || { echo "nothing to do: no manifest at $destdir$manifest"; exit 0; }
	kept=0
	for p in $(printf '%s\n' "${!old_sum[@]}" | sort); do
		f=$destdir$p
		if [[ ! -e $f ]]; then
			say gone "$p"
		elif [[ $(sum "$f") == "${old_sum[$p]}" ]] || ((force)); then
			((dry_run)) || rm -f "$f"
			say removed "$p"
		else
			say kept "$p: changed since it was installed (--force removes it)"
			kept=$((kept + 1))
		fi
	done
	((dry_run)) || rm -f "$destdir$manifest"
	say removed "$manifest"
	# Deepest first: only directories the installer created, and only when empty.
	for ((i = ${#old_dirs[@]} - 1; i >= 0; i--)); do
		if ((dry_run)) || rmdir "$destdir${old_dirs[i]}" 2>/dev/null; then
			say removed "${old_dirs[i]}/"
		elif [[ -d $destdir${old_dirs[i]} ]]; then
			say kept "${old_dirs[i]}/: not empty"
		fi
	done
	((kept)) && echo "done, $kept file(s) kept" || echo "done"
	exit 0
fi

# The binary: a given build tree, or build one.
if [[ -z $build_dir ]]; then
	build_dir=$src/build-install
	echo "building in $build_dir"
	cmake -S "$src" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHPN_TEST_HOOKS=OFF \
		-DBUILD_TESTING=OFF >/dev/null
	cmake --build "$build_dir" --target hpn-rdma -j"$(nproc)" >/dev/null
fi
bin=$build_dir/plugin/hpn-rdma
[[ -x $bin ]] || { echo "install.sh: no plugin binary at $bin" >&2; exit 1; }
if [[ -n $conf ]]; then
	[[ -f $conf ]] || { echo "install.sh: no config file $conf" >&2; exit 1; }
	# jq when there is one (an image builder may have none); a plain look otherwise.
	if command -v jq >/dev/null; then
		jq -e '.type == "hpn-rdma" or any(.plugins[]?; .type == "hpn-rdma")' "$conf" \
			>/dev/null
	else
		grep -Eq '"type"[[:space:]]*:[[:space:]]*"hpn-rdma"' "$conf"
	fi || { echo "install.sh: $conf has no hpn-rdma plugin" >&2; exit 1; }
fi

# What to install: "source mode target" (target without DESTDIR).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plan=("$bin 0755 $cni_bin_dir/hpn-rdma")
[[ -n $conf ]] && plan+=("$conf 0644 $cni_conf_dir/$(basename "$conf")")
plan+=("$src/doc/hpn-rdma.8 0644 $prefix/share/man/man8/hpn-rdma.8")
for f in "$src"/conf/*.conf "$src"/conf/*.conflist; do
	plan+=("$f 0644 $prefix/share/hpn-rdma/examples/$(basename "$f")")
done
if [[ -n $netns_mode ]]; then
	cat >"$tmp/modprobe.conf" <<EOF
# Written by hpn-rdma's scripts/install.sh: the RDMA netns mode ib_core starts in
# (1 shared: every netns sees every RDMA device; 0 exclusive: a device lives in one netns).
options ib_core netns_mode=$mode_opt
EOF
	plan+=("$tmp/modprobe.conf 0644 /etc/modprobe.d/hpn-rdma.conf")
fi

echo "hpn-rdma install${destdir:+ (DESTDIR=$destdir)}, prefix $prefix$( ((dry_run)) && echo ', dry run')"
# First decide for every target; change nothing if any is in the way.
declare -A action=()
conflicts=0
for item in "${plan[@]}"; do
	read -r s m t <<<"$item"
	f=$destdir$t
	if [[ ! -e $f ]]; then
		action[$t]=install
	elif [[ $(sum "$f") == $(sum "$s") ]]; then
		action[$t]=unchanged
	elif [[ ${old_sum[$t]:-} == $(sum "$f") ]]; then
		action[$t]=update # ours, as we left it: an upgrade
	elif ((force)); then
		action[$t]=replace
	else
		say refused "$t: a different file is there that this script did not install (--force replaces it)"
		conflicts=$((conflicts + 1))
	fi
done
if ((conflicts)); then
	echo "nothing changed: $conflicts file(s) in the way"
	exit 1
fi

# A DESTDIR that does not exist yet is created, as make install DESTDIR= does;
# it is not part of what is installed (not in the manifest).
if [[ -n $destdir && ! -d $destdir ]] && ((!dry_run)); then
	mkdir -p -m 0755 "$destdir"
fi

new_dirs=()
mkdirs() { # creates the missing directories of $1, recording each
	local d=$1 missing=()
	while [[ ! -d $destdir$d && $d != / ]]; do
		missing=("$d" "${missing[@]}")
		d=$(dirname "$d")
	done
	for d in "${missing[@]}"; do
		((dry_run)) || mkdir -m 0755 "$destdir$d"
		new_dirs+=("$d")
	done
}

changed=0
declare -A new_sum=()
for p in "${!old_sum[@]}"; do
	# Still there as installed: still ours (e.g. the modprobe file of an earlier run).
	[[ -f $destdir$p && $(sum "$destdir$p") == "${old_sum[$p]}" ]] && new_sum[$p]=${old_sum[$p]}
done
for item in "${plan[@]}"; do
	read -r s m t <<<"$item"
	new_sum[$t]=$(sum "$s")
	a=${action[$t]}
	if [[ $a == unchanged ]]; then
		say unchanged "$t"
		continue
	fi
	if ((!dry_run)); then
		mkdirs "$(dirname "$t")"
		install -m "$m" "$s" "$destdir$t.hpn-new"
		mv -f "$destdir$t.hpn-new" "$destdir$t"
	else
		mkdirs "$(dirname "$t")"
	fi
	say "${a/install/installed}" "$t"
	changed=$((changed + 1))
done
[[ $changed -gt 0 || ! -f $destdir$manifest ]] && mkdirs "$(dirname "$manifest")"

# Write the manifest when it changes (directories: earlier runs' first, in order).
{
	echo "# hpn-rdma install manifest: what scripts/install.sh installed (paths without DESTDIR)"
	for d in "${old_dirs[@]}" "${new_dirs[@]}"; do echo "dir $d"; done
	for p in $(printf '%s\n' "${!new_sum[@]}" | sort); do echo "file ${new_sum[$p]} $p"; done
} >"$tmp/manifest"
if ((!dry_run)) && ! cmp -s "$tmp/manifest" "$destdir$manifest"; then
	install -m 0644 "$tmp/manifest" "$destdir$manifest"
	say written "$manifest"
fi

if ((apply_now && !dry_run)); then
	if rdma system set netns "$netns_mode"; then
		say applied "rdma system set netns $netns_mode"
	else
		echo "rdma system set netns $netns_mode failed (exclusive mode needs no other netns" \
			"to exist); $netns_mode applies when ib_core next loads" >&2
		exit 1
	fi
fi
if [[ -n $netns_mode && -z $destdir ]]; then
	echo "note: if ib_core loads from the initramfs, run update-initramfs -u for the option"
fi
if ((changed)); then
	echo "done: $changed file(s) installed or updated"
else
	echo "nothing changed: everything was already installed"
fi
