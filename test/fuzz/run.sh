#!/usr/bin/env bash
# run.sh FUZZER SEEDS REGRESS DICT WORKDIR SECONDS: one bounded libFuzzer run,
# for ctest (fuzz.<target>). The seeds are copied into WORKDIR/corpus, which
# keeps growing across runs; the source tree is never written. libFuzzer's own
# output goes to WORKDIR/fuzz.log; the test prints the executions and coverage,
# and on a crash the report and the input saved under WORKDIR/artifacts/.
set -euo pipefail
fuzzer=$1 seeds=$2 regress=$3 dict=$4 work=$5 seconds=$6

mkdir -p "$work/corpus" "$work/artifacts"
cp -f "$seeds"/* "$work/corpus/"
# Regression inputs run first, from a copy of their own (README* is not an
# input): libFuzzer adds what it finds to the first directory only.
inputs=()
for f in "$regress"/*; do
	case ${f##*/} in README*) ;; *) [[ -f $f ]] && inputs+=("$f") ;; esac
done
rm -rf "$work/regress"
if ((${#inputs[@]})); then
	mkdir -p "$work/regress"
	cp -f "${inputs[@]}" "$work/regress/"
	set -- "$work/regress"
else
	set --
fi

# Scratch files (fuzz_journal's stateDir, fsync'ed on every input) on tmpfs when
# there is one, removed even when the fuzzer dies on a crash.
shm=/dev/shm
[[ -d $shm && -w $shm ]] || shm=$work
scratch=$(mktemp -d "$shm/hpn-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

rc=0
TMPDIR=$scratch ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	-dict="$dict" -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
	"$work/corpus" "$@" >"$work/fuzz.log" 2>&1 || rc=$?

grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb):' \
	"$work/fuzz.log" || true
grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)' "$work/fuzz.log" | tail -n 1 || true
echo "corpus: $(find "$work/corpus" -type f | wc -l) inputs in $work/corpus"
if ((rc != 0)); then
	echo "FAILED: ${fuzzer##*/} exited $rc; libFuzzer's report (all of it in $work/fuzz.log):"
	# From the first report line on, without ASan's shadow byte map.
	awk '/==[0-9]+==ERROR|runtime error|^fuzz: |deadly signal|ALARM|out-of-memory|LeakSanitizer/ { on = 1 }
	     /^Shadow bytes around/ { skip = 1 } /==[0-9]+==ABORTING/ { skip = 0 }
	     on && !skip' "$work/fuzz.log" | head -n 150
	echo "saved inputs:" && ls -l "$work/artifacts/"
	if ((${#inputs[@]})); then
		echo "(the ${#inputs[@]} input(s) of $regress run first: a known bug fails here until fixed)"
	fi
	echo "new crash? minimise: $fuzzer -minimize_crash=1 -runs=100000 -exact_artifact_path=OUT"
	echo "ARTIFACT; keep OUT in test/fuzz/regress/<target>/: unit.replay-<target> then fails until fixed"
	exit 1
fi
echo "no crash, leak, UB or broken invariant in $seconds s"
