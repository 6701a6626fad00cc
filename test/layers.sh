#!/bin/bash
# layers.sh [--self-test] [--build DIR] [ROOT]: the layer rules of
# doc/architecture.md hold in ROOT (default: this source tree).
#
# Two tables are the rule: lib/'s between <!-- layers --> and <!-- /layers -->,
# the agent's between <!-- agent-layers --> and <!-- /agent-layers -->. Each
# file of lib/ (of agent/) is in exactly one row of its table, and every name a
# row gives is a file. Then, by what files INCLUDE (read from the sources):
# a file includes only headers of its own layer and of the layers its row
# names (agent files may include any public lib/ header too); module includes
# (foo.c and foo.h are one module) form no loop; programs (plugin/, agent/)
# never include lib/session.h. And, with --build DIR, by what files DEFINE and
# USE (read with nm from the objects the build made, listed by cmake in
# DIR/layers-objects.txt): a file calls functions (or reads globals) only of
# its own layer and of the layers its row names; no two files use each other,
# directly or around a loop (lib/ and agent/ together, as they are linked);
# lib/ never uses a program's file; agent/ never uses lib/session.c. Last,
# doc/layout.md has a line for every file of lib/, plugin/ and agent/ and
# names none that is gone. Exit 0 when all hold, 1 with a FAIL line for each
# break.
#
# layers.sh --self-test first proves the check can fail: it breaks a copy of
# the tree (and of the objects list) in each way above and expects each break
# to add its own FAIL line to what the unbroken copy prints.
set -euo pipefail

fails=0
declare -A layer_of=() may=() edge=()

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# read_table ROOT DIR MARK: the rows between <!-- MARK --> and <!-- /MARK -->
# of doc/architecture.md give layer_of[DIR/name] and may[DIR/layer] (" layer
# and the layers it may use ").
read_table() {
	local root=$1 dir=$2 mark=$3 row layer files allowed f n=0
	while IFS= read -r row; do
		IFS='|' read -r _ layer files allowed _ <<<"$row"
		layer=$(xargs <<<"$layer")
		[[ $layer && $layer != layer && $layer != ---* ]] || continue
		may[$dir/$layer]=" $layer $(tr -d ' ' <<<"$allowed" | tr ',' ' ' | sed 's/^-$//') "
		for f in $(grep -o '`[a-z_]*`' <<<"$files" | tr -d '`'); do
			[[ -z ${layer_of[$dir/$f]:-} ]] ||
				fail "$dir/$f is in two layers (${layer_of[$dir/$f]}, $layer)"
			layer_of[$dir/$f]=$layer
			n=$((n + 1))
			[[ -e $root/$dir/$f.h || -e $root/$dir/$f.c ]] ||
				fail "$dir/ layer $layer names $f, but $dir/$f.[ch] does not exist"
		done
	done < <(sed -n "/<!-- $mark -->/,/<!-- \/$mark -->/p" "$root/doc/architecture.md" | grep '^|')
	((n)) || fail "no table between <!-- $mark --> and <!-- /$mark --> in doc/architecture.md"
}

# allowed DIR FROM TO: TO's layer is FROM's own or one FROM's row names.
allowed() {
	[[ ${may[$1/${layer_of[$2]}]} == *" ${layer_of[$3]} "* ]]
}

# only DIR FROM VERB: "FROM's layer may VERB only ...", for a FAIL line.
only() {
	echo "${layer_of[$2]} may $3 only$(sed 's/ \+/ /g; s/ $//' <<<"${may[$1/${layer_of[$2]}]}")"
}

# loops WHAT: "a b" edges on stdin; a FAIL line for each loop tsort finds. tsort
# names one loop at a time on stderr, in the order its edges run, and breaks it
# to look for the next. edge["a b"] is what makes a use b (a symbol, for calls).
loops() {
	local what=$1 line m=() err
	err=$(tsort 2>&1 >/dev/null || true)
	while IFS= read -r line; do
		if [[ $line == *'input contains a loop:' ]]; then
			((${#m[@]} == 0)) || say_loop "$what" "${m[@]}"
			m=()
		elif [[ $line == 'tsort: '* ]]; then
			m+=("${line#tsort: }")
		fi
	done <<<"$err"
	((${#m[@]} == 0)) || say_loop "$what" "${m[@]}"
}

say_loop() {
	local what=$1 i n s r=()
	shift
	local m=("$@")
	n=${#m[@]}
	# Should the list not run the way the edges do, it runs backwards.
	for ((i = 0; i < n; i++)); do
		[[ -n ${edge[${m[i]} ${m[(i + 1) % n]}]:-} ]] || break
	done
	if ((i < n)); then
		for ((i = n - 1; i >= 0; i--)); do r+=("${m[i]}"); done
		m=("${r[@]}")
	fi
	s=${m[0]}
	for ((i = 0; i < n; i++)); do
		if [[ $what == calls ]]; then
			s+=" calls ${edge[${m[i]} ${m[(i + 1) % n]}]:-?} of ${m[(i + 1) % n]}"
			((i == n - 1)) || s+=", which"
		else
			s+=" → ${m[(i + 1) % n]}"
		fi
	done
	fail "$what form a loop: $s"
}

# check_includes ROOT DIR: DIR's files are in its table and include per it.
check_includes() {
	local root=$1 dir=$2 f name inc to edges=""
	edge=()
	for f in "$root/$dir"/*.[ch]; do
		[[ -e $f ]] || continue
		name=$(basename "$f")
		name=${name%.[ch]}
		if [[ -z ${layer_of[$dir/$name]:-} ]]; then
			fail "$dir/$(basename "$f") is in no layer of doc/architecture.md"
			continue
		fi
		for inc in $(sed -n 's/^#include "\([a-z_]*\)\.h".*/\1/p' "$f"); do
			[[ $inc == "$name" ]] && continue
			# As the compiler looks: the file's own directory first, then lib/.
			if [[ -e $root/$dir/$inc.h || ($dir == lib && -n ${layer_of[lib/$inc]:-}) ]]; then
				to=$dir/$inc
			elif [[ -e $root/lib/$inc.h ]]; then
				continue # a program's include of lib/: session.h is checked below
			else
				to=$dir/$inc
			fi
			if [[ -z ${layer_of[$to]:-} ]]; then
				fail "$dir/$(basename "$f") includes $inc.h, which is in no layer"
			elif ! allowed "$dir" "$dir/$name" "$to"; then
				fail "$dir/$(basename "$f") (${layer_of[$dir/$name]}) includes $inc.h" \
					"(${layer_of[$to]}): $(only "$dir" "$dir/$name" include)"
			fi
			edges+="$dir/$name $to"$'\n'
			edge[$dir/$name $to]=1
		done
	done
	loops "$dir/ includes" <<<"$edges"
}

# check_calls LIST: LIST's lines are "lib OBJECT" or "agent OBJECT" (the
# objects of lib/'s and the agent's targets), or "# skipped: WHY" for a
# target that was not built. OBJECT is <file>.c.o; protobuf's generated
# *.pb-c.c.o are not ours. nm -A gives each object's global symbols: defined
# (T, D, B, R, ...) or used and undefined (U). A uses B when B defines a
# symbol A uses; symbols of outside libraries are defined by none of them.
check_calls() {
	local root=$1 list=$2 dir obj src a b sym la lb objs=() map="" uses gone=() old=()
	edge=()
	while read -r dir obj; do
		if [[ $dir == '#' ]]; then
			echo "skip: ${obj#skipped: }"
			continue
		fi
		[[ $dir && $obj != *.pb-c.c.o ]] || continue
		src=$dir/$(basename "$obj" .o)
		[[ -f $obj ]] || { gone+=("$src"); continue; }
		[[ ! $root/$src -nt $obj ]] || old+=("$src")
		objs+=("$obj")
		map+="$obj $src"$'\n'
	done <"$list"
	((${#gone[@]} == 0)) || fail "not built (build before this check): ${gone[*]}"
	# Symbols of an object older than its source may be gone from the source.
	((${#old[@]} == 0)) || fail "changed since they were built (build again): ${old[*]}"
	((${#objs[@]})) || { fail "$list names no object"; return; }

	uses=$(nm -A "${objs[@]}" | awk '
		NR == FNR { src[$1] = $2; next }
		{ p = $1; sub(/:[0-9a-f]*$/, "", p); s = src[p] }
		s == "" { next }
		$2 == "U" { n++; user[n] = s; used[n] = $3; next }
		$2 ~ /^[A-Z]$/ { def[$3] = s }
		END {
			for (i = 1; i <= n; i++)
				if ((used[i] in def) && def[used[i]] != user[i])
					print user[i], def[used[i]], used[i]
		}' <(printf '%s' "$map") - | sort | awk '!seen[$1 " " $2]++')

	while read -r a b sym; do
		[[ $a ]] || continue
		edge[$a $b]=$sym
		if [[ $a == lib/* && $b != lib/* ]]; then
			fail "$a calls $sym of $b: lib/ never uses a program's file"
			continue
		elif [[ $a != lib/* && $b == lib/session.c ]]; then
			fail "$a calls $sym of $b, which is internal to lib/'s commands"
			continue
		fi
		dir=${a%%/*}
		[[ $dir == "${b%%/*}" ]] || continue # a program may call any public lib/ file
		la=${layer_of[${a%.c}]:-} lb=${layer_of[${b%.c}]:-}
		[[ $la && $lb ]] || continue # a file in no layer fails already
		allowed "$dir" "${a%.c}" "${b%.c}" ||
			fail "$a ($la) calls $sym of $b ($lb): $(only "$dir" "${a%.c}" call)"
	done <<<"$uses"
	loops calls < <(cut -d' ' -f1,2 <<<"$uses")
}

check_layout() {
	local root=$1 layout=$1/doc/layout.md f
	[[ -f $layout ]] || { fail "$layout is missing"; return; }
	for f in "$root"/lib/*.[ch] "$root"/plugin/*.c "$root"/agent/*.[ch]; do
		[[ -e $f ]] || continue
		f=${f#"$root"/}
		# A line may name a pair: lib/foo.c, .h
		grep -qE "(^|[ \`])${f%.[ch]}\.(c|h|\[ch\])\b" "$layout" ||
			fail "doc/layout.md has no line for $f"
	done
	for f in $(grep -oE '\b(lib|plugin|agent)/[a-z_]+\.(c|h|\[ch\])' "$layout" | sort -u); do
		compgen -G "$root/${f/\[ch\]/[ch]}" >/dev/null ||
			fail "doc/layout.md names $f, which does not exist"
	done
}

# check ROOT [LIST]: every rule above; LIST is the objects list (no calls
# checked without it).
check() {
	local root=$1 list=${2:-} f
	fails=0
	layer_of=() may=()
	[[ -f $root/doc/architecture.md ]] || { fail "$root/doc/architecture.md is missing"; return 1; }
	read_table "$root" lib layers
	read_table "$root" agent agent-layers
	check_includes "$root" lib
	check_includes "$root" agent
	for f in "$root"/plugin/*.c "$root"/agent/*.[ch]; do
		[[ -e $f ]] || continue
		! grep -q '^#include "session.h"' "$f" ||
			fail "${f#"$root"/} includes session.h, which is internal to lib/'s commands"
	done
	if [[ -z $list ]]; then
		echo "skip: no --build DIR: the calls between files were not checked"
	elif [[ ! -f $list ]]; then
		fail "$list is missing: configure the build with cmake first"
	else
		check_calls "$root" "$list"
	fi
	check_layout "$root"
	((fails == 0))
}

# expect WHAT PATTERN...: the broken copy's check prints, for each PATTERN, a
# FAIL line matching it that the unbroken copy did not print.
expect() {
	local what=$1 p new
	shift
	new=$(comm -13 <(sort <<<"$base") <(check "$t" "$tl" | sort || true))
	for p in "$@"; do
		grep -qE "^FAIL: .*$p" <<<"$new" || { echo "FAIL: self-test: $what went unnoticed"; bad=1; }
	done
	# Repaired for the next case: the tree from its copy, the list from the build's.
	rm -rf "${t:?}/lib" "${t:?}/agent"
	cp -rp "$t/orig/lib" "$t/orig/agent" "$t/"
	cp "$t/orig/list" "$t/list"
}

# tiny FILE DEFINES USES: FILE (e.g. lib/store.c) gets one more object, which
# defines function DEFINES and calls function USES.
tiny() {
	local o
	o=$t/o/$((++n))/$(basename "$1").o
	mkdir -p "${o%/*}"
	printf 'void %s(void);\nvoid %s(void);\nvoid %s(void) { %s(); }\n' "$3" "$2" "$2" "$3" |
		"${HPN_CC:-cc}" -c -x c -o "$o" -
	echo "${1%%/*} $o" >>"$t/list"
}

self_test() {
	local src=$1 list=$2 t tl base bad=0 n=0
	t=$(mktemp -d)
	trap 'rm -rf "$t"' RETURN
	tl=${list:+$t/list}
	# cp -p: a source newer than its object fails the check.
	mkdir -p "$t/doc" "$t/orig" "$t/agent" && cp -rp "$src/lib" "$src/plugin" "$t/" &&
		{ [[ ! -d $src/agent ]] || cp -rp "$src/agent" "$t/"; } &&
		cp -rp "$t/lib" "$t/agent" "$t/orig/" &&
		cp "$src/doc/architecture.md" "$src/doc/layout.md" "$t/doc/"
	if [[ $list && -f $list ]]; then cp "$list" "$t/orig/list"; else : >"$t/orig/list"; fi
	cp "$t/orig/list" "$t/list"
	base=$(check "$t" "$tl" || true)

	# A mechanism that knows the protocol's types.
	sed -i 's/^#include "types.h"/#include "cni.h"\n#include "types.h"/' "$t/lib/addr.h"
	expect "addr.h including cni.h" 'lib/addr.h \(kernel\) includes cni.h \(protocol\)'

	# Two files of one layer that include each other.
	sed -i 's/^#include "err.h"/#include "err.h"\n#include "store.h"/' "$t/lib/nccl.h"
	expect "a store <-> nccl include loop" 'lib/ includes form a loop: lib/(store|nccl) → '

	# New files nobody placed, and the file list that misses them.
	echo '#include "types.h"' >"$t/lib/stray.c"
	echo '#include "loop.h"' >"$t/agent/stray.c"
	expect "a file in no layer" 'lib/stray.c is in no layer' 'no line for lib/stray.c' \
		'agent/stray.c is in no layer' 'no line for agent/stray.c'

	# The loop at the bottom that knows gRPC.
	echo '#include "rpc.h"' >>"$t/agent/devices.h"
	expect "devices.h including rpc.h" 'agent/devices.h \(loop\) includes rpc.h \(core\)'

	if [[ -z $list ]]; then
		echo "skip: self-test of calls: no --build DIR"
	else
		# Two files that call each other.
		tiny lib/store.c hpn_selftest_store hpn_selftest_nccl
		tiny lib/nccl.c hpn_selftest_nccl hpn_selftest_store
		expect "a store <-> nccl call loop" \
			'calls form a loop: lib/(store|nccl).c calls [a-z_]+ of lib/(store|nccl).c, which calls [a-z_]+ of lib/(store|nccl).c$'

		# A mechanism that calls the protocol, a service that calls main.c.
		tiny lib/conf.c hpn_selftest_conf hpn_selftest_none
		tiny lib/addr.c hpn_selftest_addr hpn_selftest_conf
		tiny agent/main.c agent_selftest_main agent_selftest_none
		tiny agent/devices.c agent_selftest_devices agent_selftest_main
		expect "a layer crossed by a call" \
			'lib/addr.c \(kernel\) calls hpn_selftest_conf of lib/conf.c \(protocol\)' \
			'agent/devices.c \(loop\) calls agent_selftest_main of agent/main.c \(program\)'

		# lib/ that calls its program.
		tiny agent/main.c agent_selftest_main2 agent_selftest_none
		tiny lib/util.c hpn_selftest_util agent_selftest_main2
		expect "lib/ calling agent/" 'lib/util.c calls agent_selftest_main2 of agent/main.c'
	fi

	[[ $(check "$t" "$tl" || true) == "$base" ]] ||
		{ echo "FAIL: self-test: the repaired copy fails otherwise than the unbroken one"; bad=1; }
	((bad == 0)) && echo "ok: the check catches crossed layers, loops and files in no layer," \
		"by includes and by calls"
	return "$bad"
}

self=false build=""
while (($#)); do
	case $1 in
	--self-test) self=true ;;
	--build) build=$(cd "$2" && pwd) && shift ;;
	*) break ;;
	esac
	shift
done
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
list=${build:+$build/layers-objects.txt}
if $self; then
	self_test "$root" "$list"
fi
check "$root" "$list"
echo "ok: lib/ and agent/ follow the layers of doc/architecture.md; doc/layout.md lists every file"
