#!/bin/bash
# retry.sh: run.sh's one retry, on the 7.x kernel (ctest vm7.retry). Runs on
# the host, not in the VM; two boots that panic for real, no test knob:
#  early  the kernel told to start an init that does not exist
#         (rdinit=/hpn-vm-no-such-init) panics before the scenario could
#         start: run.sh says so, boots once more, and only once (the second
#         boot panics the same way), then fails with both consoles kept and
#         nothing of the scenario run.
#  late   a scenario that prints its first line and then crashes the kernel
#         (sysrq c): a failure after the scenario started is never retried.
# Each takes one or two boots of 5-30 s under TCG.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "$0")/../common.sh"	# skip, fail, info

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/hpn-vm-retry.XXXXXX")
trap 'rm -rf "$T"' EXIT
export HPN_VM_TIMEOUT=300	# a hang is a failure here, not a 20-minute wait

# vm NAME BODY [RUN.SH OPTION...]: write scenario NAME.sh (booted on kernel
# 7) holding BODY, run it through run.sh; RC and OUT are its status and
# output. Skips when run.sh does.
vm() {
	local name=$1 body=$2
	shift 2
	printf '#!/bin/bash\n# hpn-vm: kernel=7 nics=1\n%s\n' "$body" >"$T/$name.sh"
	RC=0
	OUT=$(bash "$here/run.sh" "$@" "$T/$name.sh" 2>&1) || RC=$?
	[[ $RC != 77 ]] || skip "run.sh skipped: $OUT"
	printf '%s\n' "$OUT" | sed "s/^/  [$name] /"
}

# kept: the results dir run.sh named for the last run.
kept() {
	local dir
	dir=$(sed -n 's/^--- guest console, full log: \(.*\)\/console\.log$/\1/p' <<<"$OUT")
	[[ -n $dir && -d $dir ]] || fail "run.sh named no results dir"
	echo "$dir"
}

vm early 'echo "early: the scenario started"' --append rdinit=/hpn-vm-no-such-init
[[ $RC == 1 ]] || fail "early: run.sh exited $RC, expected 1 (two panicked boots)"
n=$(grep -c '^run.sh: early: guest panicked before the scenario started (Kernel panic - not syncing: .*): booting once more$' <<<"$OUT" || true)
[[ $n == 1 ]] || fail "early: run.sh said it booted once more $n times, expected exactly once"
[[ $OUT != *"early: the scenario started"* ]] ||
	fail "early: the scenario ran, though the kernel never started init"
[[ $OUT == *"the guest wrote no exit status"*"booted twice"* ]] ||
	fail "early: the failure does not say the guest was booted twice"
dir=$(kept)
for log in console-1.log console.log; do
	grep -a -q 'Kernel panic' "$dir/$log" || fail "early: $dir/$log shows no kernel panic"
	! grep -a -q 'hpn-vm: running' "$dir/$log" || fail "early: $dir/$log shows the scenario starting"
done
rm -rf "$dir"
info "early: a panic before the scenario started was retried once, then failed"

# sync: the line is written back to the host's output file before the crash
# (without it the crash could lose it, which is not what this tests).
vm late 'echo "late: the scenario started"
sync
echo c >/proc/sysrq-trigger
echo "late: still running after the crash"'
[[ $RC == 1 ]] || fail "late: run.sh exited $RC, expected 1 (the kernel crashed)"
[[ $OUT == *"late: the scenario started"* ]] || fail "late: the scenario's first line is missing"
[[ $OUT != *"booting once more"* ]] || fail "late: a guest that crashed after its scenario started was booted again"
[[ $OUT != *"still running after the crash"* ]] || fail "late: sysrq c did not crash the guest"
dir=$(kept)
grep -a -q 'Kernel panic' "$dir/console.log" || fail "late: $dir/console.log shows no kernel panic"
[[ ! -e $dir/console-1.log ]] || fail "late: $dir holds a first boot's console-1.log"
rm -rf "$dir"
info "late: a panic after the scenario started was not retried"

echo "PASS: retry.sh"
