#!/bin/bash
# record.sh PLUGIN CALLS_DIR: runs PLUGIN as the CNI plugin it stands in for
# (same stdin, stdout, stderr and exit status) and records the call as one
# JSON file in CALLS_DIR: the CNI_* variables containerd set, the config it
# sent, the exit status, the result or error printed, and stderr. The runtime
# tier installs it as hpn-rdma in containerd's CNI bin_dir (node.sh
# rtn_plugin) to check what containerd passes, and when.
set -u
plugin=$1 dir=$2
f=$dir/$(date +%s%N).$$
cat >"$f.in"
"$plugin" <"$f.in" >"$f.out" 2>"$f.err"
rc=$?
cat "$f.out"
cat "$f.err" >&2
env | grep '^CNI_' | sort >"$f.env"
# shellcheck disable=SC2016 # jq program
jq -n --rawfile env "$f.env" --rawfile in "$f.in" --rawfile out "$f.out" \
	--rawfile err "$f.err" --argjson rc "$rc" --arg t "${f##*/}" '
	def js: . as $s | try fromjson catch $s;
	($env | split("\n") | map(select(. != "") | capture("^(?<key>[^=]*)=(?<value>.*)$"))
		| from_entries) as $e |
	{t: $t, cmd: $e.CNI_COMMAND, cid: $e.CNI_CONTAINERID, netns: ($e.CNI_NETNS // ""),
	 ifname: $e.CNI_IFNAME, args: ($e.CNI_ARGS // ""), path: $e.CNI_PATH,
	 conf: ($in | js), rc: $rc, out: ($out | js), err: $err}' >"$f.tmp"
mv "$f.tmp" "$f.json"
rm -f "$f.in" "$f.out" "$f.err" "$f.env"
exit "$rc"
