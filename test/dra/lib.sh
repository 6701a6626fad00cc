# shellcheck shell=bash
# The unit tier's DRA scripts' common start (align.sh, share.sh): python3-yaml
# or a skip (77), a scratch directory $tmp removed at exit, ok/bad counting,
# dra_done's summary and status.

# dra_start NAME: the checks above; $tmp is /tmp/hpn-dra-NAME-XXXXXX.
dra_start() {
	if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
		echo "skipped: python3-yaml is not installed (scripts/install-deps.sh installs it)"
		exit 77
	fi
	tmp=$(mktemp -d "/tmp/hpn-dra-$1-XXXXXX")
	# shellcheck disable=SC2064 # $tmp is known now
	trap "rm -rf '$tmp'" EXIT
	passed=0 failed=0
}

ok() {
	echo "ok: $*"
	passed=$((passed + 1))
}

bad() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}

# dra_done: the counts; the status, 0 when nothing failed.
dra_done() {
	echo "$passed passed, $failed failed"
	((failed == 0))
}
