# shellcheck shell=bash
# Packages of newer Debian suites for the tests, never installed: a private
# apt (its own sources list, lists, cache and dpkg status under one directory;
# /etc/apt is never written and its sources are not used, its apt.conf.d still
# is, so a proxy the machine needs applies here too), `apt-get download` and
# `dpkg -x`. Sourced by test/vm/prepare.sh (the 7.x kernel) and
# test/runtime/fetch.sh (containerd 1.7 and 2.1, the CNI plugins 1.9, NCCL).
# Needs `skip` (test/common.sh) or a caller's own skip_why.

DEBS_MIRROR=${HPN_VM_MIRROR:-http://deb.debian.org/debian}
DEBS_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
DEBS_LOG=

# debs_apt DIR "SUITE COMPONENTS..."...: a private apt in DIR naming each
# suite of $DEBS_MIRROR; exports APT_CONFIG. Then `apt-get update` into
# DEBS_LOG; returns non-zero when no index could be had (one fetched earlier
# counts: apt-get update only warns when a suite is unreachable).
debs_apt() {
	local apt=$1 s
	shift
	[[ -r $DEBS_KEYRING ]] || {
		DEBS_LOG="no $DEBS_KEYRING (Debian: debian-archive-keyring)"
		return 1
	}
	mkdir -p "$apt"/{lists/partial,archives/partial,state,parts,prefs}
	: >"$apt/state/status"
	for s in "$@"; do
		echo "deb [signed-by=$DEBS_KEYRING] $DEBS_MIRROR $s"
	done >"$apt/sources.list"
	cat >"$apt/apt.conf" <<-EOF
		Dir::Etc::SourceList "$apt/sources.list";
		Dir::Etc::SourceParts "$apt/parts";
		Dir::Etc::Preferences "$apt/prefs/none";
		Dir::Etc::PreferencesParts "$apt/prefs";
		Dir::State "$apt/state";
		Dir::State::Lists "$apt/lists";
		Dir::State::status "$apt/state/status";
		Dir::Cache "$apt";
		Dir::Cache::Archives "$apt/archives";
		Dir::Cache::pkgcache "";
		Dir::Cache::srcpkgcache "";
		APT::Sandbox::User "root";
	EOF
	export APT_CONFIG=$apt/apt.conf
	DEBS_LOG=$(apt-get -q update 2>&1) || return 1
	compgen -G "$apt/lists/*_Packages*" >/dev/null || {
		DEBS_LOG="no package index from $DEBS_MIRROR: $(debs_errors "$DEBS_LOG")"
		return 1
	}
}

# debs_errors LOG: apt's error and warning lines of LOG, on one line.
debs_errors() {
	grep -E '^(E|W|Err):' <<<"$1" | head -n 3 | tr '\n' ' ' || true
}

# debs_get DIR PKG[/SUITE]...: download each package into DIR (kept: a
# package already there is not asked for again) and unpack them all into
# DIR/root (made afresh). Returns non-zero with DEBS_LOG saying why.
debs_get() {
	local dir=$1 p name missing=()
	shift
	mkdir -p "$dir"
	for p in "$@"; do
		name=${p%%/*}
		name=${name%%=*}
		compgen -G "$dir/${name}_*.deb" >/dev/null || missing+=("$p")
	done
	if ((${#missing[@]})); then
		DEBS_LOG=$(cd "$dir" && apt-get download -q "${missing[@]}" 2>&1) || {
			DEBS_LOG="apt-get download ${missing[*]} from $DEBS_MIRROR failed: $(debs_errors "$DEBS_LOG")"
			return 1
		}
	fi
	rm -rf "$dir/root"
	for p in "$@"; do
		name=${p%%/*}
		name=${name%%=*}
		dpkg -x "$(compgen -G "$dir/${name}_*.deb" | head -n1)" "$dir/root"
	done
}
