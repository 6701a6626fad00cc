#!/usr/bin/env bash
# The whole suite (what CI runs): scripts/lint.sh beside the builds, every
# unit, netns and runtime test under ASan+UBSan (build-asan/, with the one vm
# boot that reaches softroce.c), the fuzz tier (build-fuzz/, the fuzzers
# alone), then the release build (build/): valgrind's sample (memcheck), one
# containerd version and the vm tier side by side, then bench and package. --quick: lint beside
# the release build and its unit and netns tiers, stress shrunk (about 4
# minutes on 2 cores once built). Which tier runs in which pass, and for how
# long: doc/building.md, "The whole suite". Run as root (the netns and
# runtime tiers skip, saying why, without). Extra arguments go to ctest (e.g.
# -R hostile). The first failure stops the run; either way it ends with a
# line per tier and pass, then the total.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=
if [[ ${1:-} == --quick ]]; then
	quick=1
	shift
fi
jobs=$(nproc)
tiers=$(mktemp)
step=	# what runs now, named if the run fails there
lint=	# --quick: lint's pid, and its output
lintlog=

# At exit: the tiers' lines, then "total: N passed, N failed, N skipped" as
# the very last line. A run that failed where no test did (lint, a build)
# counts one failed, so that its total never reads clean.
summary() {
	local rc=$? lrc=0
	if [[ -n $lint ]]; then
		wait "$lint" || lrc=$?
		echo "== lint (beside the build and the tests)"
		cat "$lintlog"
		rm -f "$lintlog"
		if ((lrc != 0 && rc == 0)); then
			rc=$lrc step=lint
		fi
	fi
	echo "== summary"
	cat "$tiers"
	((rc == 0)) || echo "failed: $step (exit $rc)"
	awk -v rc="$rc" '{p += $3; f += $5; s += $7}
		END {printf "total: %d passed, %d failed, %d skipped\n", p, (rc && !f) ? 1 : f, s}' "$tiers"
	rm -f "$tiers"
	exit "$rc"
}
trap summary EXIT

# build DIR CMAKE_OPTIONS... [--target TARGET]: configure DIR, and build it
# (TARGET alone when given).
build() {
	local dir=$1
	local -a opts=() target=()
	shift
	while (($#)); do
		if [[ $1 == --target ]]; then
			target=(--target "$2")
			shift 2
		else
			opts+=("$1")
			shift
		fi
	done
	step="the build of $dir/"
	cmake -S . -B "$dir" "${opts[@]}" >/dev/null
	cmake --build "$dir" -j"$jobs" "${target[@]}"
}

# run_ctest PASS DIR CTEST_ARGS...: ctest in DIR, its tests tallied by label
# for PASS (scripts/ctest-tiers.py); a failure stops the run after the tally.
run_ctest() {
	local pass=$1 dir=$2 rc=0
	shift 2
	step="ctest in $dir/"
	(cd "$dir" && ctest --output-on-failure --output-junit "$PWD/junit.xml" "$@") || rc=$?
	(cd "$dir" && ctest --show-only=json-v1) >"$dir/tests.json"
	scripts/ctest-tiers.py "$pass" "$dir/junit.xml" "$dir/tests.json" >>"$tiers"
	rm -f "$dir/junit.xml" "$dir/tests.json"
	return "$rc"
}

# lint_start: scripts/lint.sh in the background, its output kept for the
# summary. It takes the CPU while the netns tests mostly wait on the kernel
# and on each other's plugin runs.
lint_start() {
	lintlog=$(mktemp)
	scripts/lint.sh >"$lintlog" 2>&1 &
	lint=$!
}

if [[ -n $quick ]]; then
	# Both at once, the tests two per core (each in its own namespaces,
	# named by its PID). The stress test's sizes are cut; the whole suite
	# runs it whole.
	echo "== lint in the background; release build, unit and netns tiers (--quick)"
	lint_start
	build build -DHPN_WERROR=ON
	HPN_STRESS_CYCLES=200 HPN_STRESS_ROUNDS=1 \
		run_ctest release build -j$((2 * jobs)) -L '^(unit|netns)$' "$@"
	exit 0
fi

echo "== lint in the background"
lint_start

# Every unit, netns and runtime test once, under the sanitizers, and the one
# vm boot that reaches code nothing else runs (vm7.hpn-exclusive: softroce.c):
# the tests wait more than they compute (on the kernel, on containerd, on each
# other's plugin runs), each in namespaces named by its PID, $jobs at a time;
# a guest (TCG, one host thread) holds the lock hpn-vm, so never two at once.
echo "== ASan+UBSan build and tests"
build build-asan -DHPN_WERROR=ON -DHPN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_ctest asan build-asan -j"$jobs" -L '^(unit|netns|runtime|vm)$' "$@"
unset ASAN_OPTIONS UBSAN_OPTIONS

# The fuzzers alone (the rest of the tree is not the fuzz tier's): each
# replays its seeds and regressions, then fuzzes for a bounded time. Every
# build replays them too (unit.replay-<target>).
fuzz_s=${HPN_FUZZ_SECONDS:-20}
echo "== fuzz tier (clang, libFuzzer, $fuzz_s s per target)"
build build-fuzz -DCMAKE_C_COMPILER=clang -DHPN_FUZZ=ON -DHPN_WERROR=ON \
	-DCMAKE_BUILD_TYPE=Debug -DHPN_FUZZ_SECONDS="$fuzz_s" --target hpn-fuzzers
run_ctest clang build-fuzz -L fuzz -j"$jobs"
step="the fuzz logs"
grep -H 'stat::number_of_executed_units' build-fuzz/test/fuzz/*/fuzz.log

# The shipped binaries, $jobs at a time: valgrind's sample, one containerd
# version (1.7: the others ran under ASan) with the install from the image,
# and the vm tier's guests one at a time beside them; then the bench and the
# package alone, as they want the CPU.
echo "== release build and tests"
build build -DHPN_WERROR=ON
run_ctest release build -j"$jobs" -L '^(memcheck|runtime|vm)$' \
	-E '^runtime[.].*-(1[.]6|2[.]1)$' "$@"
run_ctest release build -j1 -L '^(bench|package)$' "$@"
