#!/bin/bash
# Hostile input, the runtime's environment: CNI_CONTAINERID of 1000 bytes
# (valid: hashed into the journal name); CNI_NETNS that is a file, a
# directory, a FIFO, another kind of namespace, a dangling symlink; hostile
# CNI_ARGS.
# The contract of every case (exit 1, one CNI error object naming the field,
# nothing changed) and its helpers are in hostile-lib.sh.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=hostile-lib.sh
source "$(dirname "$0")/hostile-lib.sh"
hostile_init

# A 1000-byte container ID is valid: the journal's name is cut to 150 bytes
# plus a hash of the whole ID, so two IDs that differ only at the end get two
# journals, and each DEL undoes only its own attachment.
long_container_id() {
	setup
	local base cid_a cid_b pod_b res_a res_b j
	mk_nic "$HOST_NS" nic1 peer1
	take_snapshots
	pod_b=${HPNT_PREFIX}q$SCEN
	ip netns add "$pod_b"
	base=$(head -c 999 /dev/zero | tr '\0' c)
	cid_a=${base}a cid_b=${base}b
	echo "accepted: CNI_CONTAINERID of 1000 bytes (two of them)" >>"$CASES"
	run_plugin ADD "$good" CNI_CONTAINERID="$cid_a"
	expect_result "ADD with a 1000-byte CNI_CONTAINERID"
	res_a=$OUT
	run_plugin ADD "$(jq -c '.device = "nic1"' <<<"$good")" CNI_CONTAINERID="$cid_b" \
		CNI_NETNS="$(ns_path "$pod_b")"
	expect_result "ADD with another 1000-byte CNI_CONTAINERID, same first 999 bytes"
	res_b=$OUT
	[[ $(state_count) == 2 ]] || fail "expected 2 journals, have: $(state_files)"
	for j in $(state_files); do
		j=${j##*/}
		((${#j} <= 255)) || fail "journal name of ${#j} bytes"
	done
	run_plugin DEL "$(with_prev "$good" "$res_a")" CNI_CONTAINERID="$cid_a"
	expect_ok "DEL of the first"
	has_link "$pod_b" hpn0 || fail "DEL of the first took the second's interface"
	has_link "$HOST_NS" nic0 || fail "DEL of the first did not return nic0"
	[[ $(state_count) == 1 ]] || fail "expected 1 journal, have: $(state_files)"
	run_plugin DEL "$(with_prev "$good" "$res_b")" CNI_CONTAINERID="$cid_b"
	expect_ok "DEL of the second"
	ip netns del "$pod_b"
	nothing_changed "two 1000-byte container IDs"
}
timed_scenario "CNI_CONTAINERID of 1000 bytes (valid, hashed)" long_container_id

# ---- CNI_NETNS that is not a network namespace ------------------------------

netns_paths() {
	setup
	ln -s /nonexistent/hpnt "$T/dangling"
	mkfifo "$T/fifo"
	refused 4 CNI_NETNS "CNI_NETNS a regular file" "$good" CNI_NETNS="$T/decoy"
	refused 4 CNI_NETNS "CNI_NETNS a directory" "$good" CNI_NETNS="$T"
	refused 4 CNI_NETNS "CNI_NETNS /dev/null" "$good" CNI_NETNS=/dev/null
	refused 4 CNI_NETNS "CNI_NETNS a mount namespace" "$good" CNI_NETNS=/proc/self/ns/mnt
	refused 4 CNI_NETNS "CNI_NETNS a user namespace" "$good" CNI_NETNS=/proc/self/ns/user
	refused 4 CNI_NETNS "CNI_NETNS the plugin's own, by /proc/self" "$good" CNI_NETNS=/proc/self/ns/net
	refused 4 CNI_NETNS "CNI_NETNS relative" "$good" CNI_NETNS=run/netns/x
	refused 4 CNI_NETNS "CNI_NETNS of 5000 bytes" "$good" \
		CNI_NETNS="/$(head -c 5000 /dev/zero | tr '\0' a)"
	refused 3 'does not exist' "CNI_NETNS a dangling symlink" "$good" CNI_NETNS="$T/dangling"
	refused 3 'does not exist' "CNI_NETNS does not exist" "$good" CNI_NETNS="$T/nonexistent"
	# A FIFO with no writer: open(O_RDONLY) would block for ever (holding the
	# state lock). SIGKILL after 10 s, so a hang is a failed case, not a hung test.
	RUN_WRAP=(timeout -s KILL 10)
	refused 4 CNI_NETNS "CNI_NETNS a FIFO" "$good" CNI_NETNS="$T/fifo"
	RUN_WRAP=()
	all_done "CNI_NETNS"
}
timed_scenario "CNI_NETNS that is not a network namespace (codes 4 and 3)" netns_paths

# ---- CNI_ARGS ---------------------------------------------------------------

cni_args() {
	setup
	local many long
	many=$(for i in $(seq 1000); do printf 'k%d=v;' "$i"; done)
	long="K8S_POD_NAME=$(head -c 9000 /dev/zero | tr '\0' a)"
	refused 4 CNI_ARGS "CNI_ARGS without =" "$good" CNI_ARGS=abc
	refused 4 CNI_ARGS "CNI_ARGS with an empty key" "$good" CNI_ARGS==v
	refused 4 CNI_ARGS "CNI_ARGS with an empty key after a good pair" "$good" 'CNI_ARGS=K8S_POD_NAME=a;=v'
	refused 4 CNI_ARGS "CNI_ARGS of 1000 pairs" "$good" "CNI_ARGS=IgnoreUnknown=1;$many"
	refused 4 CNI_ARGS "CNI_ARGS of 9000 bytes" "$good" CNI_ARGS="$long"
	refused 4 CNI_ARGS "CNI_ARGS with a duplicate key" "$good" 'CNI_ARGS=K8S_POD_NAME=a;K8S_POD_NAME=b'
	refused 4 CNI_ARGS "CNI_ARGS with IgnoreUnknown twice" "$good" 'CNI_ARGS=IgnoreUnknown=1;IgnoreUnknown=1'
	refused 4 CNI_ARGS "CNI_ARGS IgnoreUnknown=maybe" "$good" 'CNI_ARGS=IgnoreUnknown=maybe;Foo=1'
	refused 4 CNI_ARGS "CNI_ARGS IgnoreUnknown empty" "$good" 'CNI_ARGS=IgnoreUnknown=;Foo=1'
	refused 4 CNI_ARGS "CNI_ARGS unknown key" "$good" 'CNI_ARGS=Foo=1'
	refused 4 CNI_ARGS "CNI_ARGS key with a newline" "$good" CNI_ARGS=$'K8S_POD_NAME\n=a'
	accepted "CNI_ARGS of only separators" "$good" 'CNI_ARGS=;;;'
	accepted "CNI_ARGS unknown keys with IgnoreUnknown=1" "$good" 'CNI_ARGS=IgnoreUnknown=1;Foo=bar;Baz='
	all_done "CNI_ARGS"
}
timed_scenario "hostile CNI_ARGS (code 4)" cni_args

hostile_done
