#!/bin/bash
# Hostile input, paths: stateDir / logFile / sysfsRoot relative or with "..";
# symlinks planted as the journal, the network's state dir and the lock; the
# config's own paths (trusted) through a symlink; and that nothing the pod
# side controls (CNI_ARGS, runtimeConfig, args) can choose a path.
# The contract of every case (exit 1, one CNI error object naming the field,
# nothing changed) and its helpers are in hostile-lib.sh.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=hostile-lib.sh
source "$(dirname "$0")/hostile-lib.sh"
hostile_init

# ---- the config's own paths -------------------------------------------------

conf_paths() {
	setup
	local f v
	for f in stateDir logFile sysfsRoot; do
		# shellcheck disable=SC2088 # a literal ~: the plugin must not expand it
		for v in rel ./rel ../rel "$T/../x" "$T/.." /.. "$T/a/../b" '~/x'; do
			refused 7 "$f" "$f \"$v\"" "$(jq -c --arg f "$f" --arg v "$v" '.[$f] = $v' <<<"$good")"
		done
	done
	# Not a parent reference: a name that starts with "..".
	accepted 'stateDir "$T/..x" (no .. component)' "$(jq -c --arg v "$T/..x" '.stateDir = $v' <<<"$good")"
	rm -rf "$T/..x"
	all_done "config path"
}
timed_scenario "stateDir, logFile, sysfsRoot relative or with .. (code 7)" conf_paths

# ---- symlinks where the plugin keeps its state ------------------------------

# Inside the state dir the plugin follows no symlink: a symlink planted as an
# attachment's journal, as the network's directory or as the lock makes ADD,
# DEL and GC fail with code 5 naming it, and the file it points at is
# neither read into nor written. (Only root can write the state dir, so this
# is corruption or an attack already past root; refusing is the safe answer.)
symlinks() {
	setup
	local j=$STATE/$NET/$CID.$IFNAME gc
	gc=$(jq -c '.cniVersion = "1.1.0" | .["cni.dev/valid-attachments"] = []' <<<"$good")

	ln -s "$T/decoy" "$j"
	take_snapshots
	refused 5 'open state' "ADD with the journal a symlink" "$good"
	CASE_CMD=DEL refused 5 'open state' "DEL with the journal a symlink" "$good"
	CASE_CMD=GC refused 5 'state' "GC with a journal a symlink" "$gc" "${GC_ENV[@]}"
	[[ $(readlink "$j") == "$T/decoy" ]] || fail "the planted symlink was replaced"
	rm "$j"

	rmdir "$STATE/$NET"
	mkdir "$T/elsewhere"
	ln -s "$T/elsewhere" "$STATE/$NET"
	take_snapshots
	refused 5 "$NET" "ADD with <stateDir>/<name> a symlink to a directory" "$good"
	CASE_CMD=DEL refused 5 "$NET" "DEL with <stateDir>/<name> a symlink" "$good"
	CASE_CMD=GC refused 5 "$NET" "GC with <stateDir>/<name> a symlink" "$gc" "${GC_ENV[@]}"
	[[ -z $(ls -A "$T/elsewhere") ]] || fail "the plugin wrote through the symlinked directory: $(ls -A "$T/elsewhere")"
	rm "$STATE/$NET"
	mkdir -m 0700 "$STATE/$NET"

	mv "$STATE/lock" "$T/lock.saved"
	ln -s "$T/decoy" "$STATE/lock"
	take_snapshots
	refused 5 lock "ADD with the lock a symlink" "$good"
	CASE_CMD=DEL refused 5 lock "DEL with the lock a symlink" "$good"
	rm "$STATE/lock"
	mv "$T/lock.saved" "$STATE/lock"
	all_done "state symlink"
}
timed_scenario "symlinks planted in the state dir (code 5)" symlinks

# The config's own paths are trusted (root wrote it): a stateDir that is a
# symlink to a directory is followed. logFile is opened without following a
# final symlink, nor blocking on a FIFO: the log is best effort, so ADD goes on
# without it, says so on stderr, and the file the link points at is untouched.
trusted_paths() {
	setup
	local conf
	mkdir "$T/real-state"
	ln -s "$T/real-state" "$T/state-link"
	conf=$(jq -c --arg s "$T/state-link" '.stateDir = $s' <<<"$good")
	echo "accepted: stateDir a symlink" >>"$CASES"
	run_plugin ADD "$conf"
	expect_result "ADD with stateDir a symlink to a directory"
	[[ -f $T/real-state/$NET/$CID.$IFNAME ]] || fail "the journal is not in the symlink's target"
	run_plugin DEL "$conf"
	expect_ok "DEL with stateDir a symlink"
	[[ -z $(find "$T/real-state/$NET" -type f) ]] || fail "journal left in the symlinked stateDir"

	ln -s "$T/decoy" "$T/log-link"
	mkfifo "$T/log-fifo"
	for log in "$T/log-link" "$T" "$T/log-fifo"; do
		echo "accepted: logFile $log" >>"$CASES"
		conf=$(jq -c --arg l "$log" '.logFile = $l' <<<"$good")
		RUN_WRAP=(timeout -s KILL 10)
		run_plugin ADD "$conf"
		RUN_WRAP=()
		expect_result "ADD with logFile $log"
		grep -q 'cannot open logFile' "$T/err" || fail "ADD with logFile $log: no warning on stderr"
		run_plugin DEL "$conf"
		expect_ok "DEL with logFile $log"
	done
	nothing_changed "trusted paths"
}
timed_scenario "stateDir a symlink (followed), logFile a symlink or FIFO (not used)" trusted_paths

# Nothing a pod or device plugin controls picks a path: stateDir, logFile or
# sysfsRoot given in runtimeConfig, args or CNI_ARGS are ignored.
pod_paths() {
	setup
	local conf e=$T/evil
	conf=$(jq -c --arg e "$e" '
		.runtimeConfig = {stateDir: ($e + "-rc"), logFile: ($e + "-rc.log"), sysfsRoot: ($e + "-sys")} |
		.args = {cni: {stateDir: ($e + "-args"), logFile: ($e + "-args.log")},
			 "io.kubernetes.cri": {stateDir: ($e + "-cri")}}' <<<"$good")
	echo "accepted: pod-controlled paths ignored" >>"$CASES"
	run_plugin ADD "$conf" "CNI_ARGS=IgnoreUnknown=1;stateDir=$e-env;logFile=$e-env.log;K8S_POD_NAME=../../../etc/passwd;K8S_POD_NAMESPACE=/etc"
	expect_result "ADD with paths in runtimeConfig, args and CNI_ARGS"
	[[ -f $STATE/$NET/$CID.$IFNAME ]] || fail "the journal is not in the config's stateDir"
	[[ -z $(compgen -G "$e*" || true) ]] || fail "a pod-controlled value chose a path: $(compgen -G "$e*" || true)"
	run_plugin DEL "$conf" "CNI_ARGS=IgnoreUnknown=1;stateDir=$e-env"
	expect_ok "DEL"
	[[ -z $(compgen -G "$e*" || true) ]] || fail "a pod-controlled value chose a path: $(compgen -G "$e*" || true)"
	nothing_changed "pod-controlled paths"
}
timed_scenario "values from the pod side never pick a path" pod_paths

hostile_done
