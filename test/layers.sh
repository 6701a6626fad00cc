#!/bin/bash
# layers.sh [--self-test] [ROOT]: the include rules of doc/architecture.md hold in ROOT
# (default: this source tree). The layer table between <!-- layers --> and
# <!-- /layers --> is the rule: each lib/ file is in exactly one layer and
# includes only headers of its own layer and of the layers its row names;
# module includes (foo.c and foo.h are one module) form no loop; programs
# (plugin/, agent/) never include lib/session.h; doc/layout.md has a line for
# every file of lib/, plugin/ and agent/ and names none that is gone.
# Exit 0 when all hold, 1 with a FAIL line for each break.
#
# layers.sh --self-test [ROOT] first proves the check can fail: it breaks a
# copy of the tree three ways (a layer crossed, a loop, a file in no layer)
# and expects each to be caught.
set -euo pipefail

check() {
	local root=$1 fails=0 row layer files allowed f base inc l
	local arch=$root/doc/architecture.md layout=$root/doc/layout.md
	declare -A layer_of=() may=()

	[[ -f $arch ]] || { echo "FAIL: $arch is missing"; return 1; }
	while IFS= read -r row; do
		IFS='|' read -r _ layer files allowed _ <<<"$row"
		layer=$(xargs <<<"$layer")
		[[ $layer && $layer != layer && $layer != ---* ]] || continue
		may[$layer]=" $layer $(tr -d ' ' <<<"$allowed" | tr ',' ' ' | sed 's/^-$//') "
		for f in $(grep -o '`[a-z_]*`' <<<"$files" | tr -d '`'); do
			if [[ -n ${layer_of[$f]:-} ]]; then
				echo "FAIL: $f is in two layers (${layer_of[$f]}, $layer)"
				fails=$((fails + 1))
			fi
			layer_of[$f]=$layer
			[[ -e $root/lib/$f.h || -e $root/lib/$f.c ]] || {
				echo "FAIL: layer $layer names $f, but lib/$f.[ch] does not exist"
				fails=$((fails + 1))
			}
		done
	done < <(sed -n '/<!-- layers -->/,/<!-- \/layers -->/p' "$arch" | grep '^|')
	((${#layer_of[@]})) || { echo "FAIL: no layer table in $arch"; return 1; }

	local edges=""
	for f in "$root"/lib/*.[ch]; do
		base=$(basename "$f")
		base=${base%.[ch]}
		l=${layer_of[$base]:-}
		if [[ -z $l ]]; then
			echo "FAIL: lib/$(basename "$f") is in no layer of doc/architecture.md"
			fails=$((fails + 1))
			continue
		fi
		for inc in $(sed -n 's/^#include "\([a-z_]*\)\.h".*/\1/p' "$f"); do
			[[ $inc == "$base" ]] && continue
			if [[ -z ${layer_of[$inc]:-} ]]; then
				echo "FAIL: lib/$(basename "$f") includes $inc.h, which is in no layer"
				fails=$((fails + 1))
			elif [[ ${may[$l]} != *" ${layer_of[$inc]} "* ]]; then
				echo "FAIL: lib/$(basename "$f") ($l) includes $inc.h (${layer_of[$inc]}):" \
					"$l may include only$(sed 's/ \+/ /g' <<<"${may[$l]}")"
				fails=$((fails + 1))
			fi
			edges+="$base $inc"$'\n'
		done
	done
	# tsort names a loop on stderr ("input contains a loop").
	if ! tsort <<<"$edges" >/dev/null 2>"$root/.layers.tsort"; then
		echo "FAIL: lib/ includes form a loop: $(tr '\n' ' ' <"$root/.layers.tsort")"
		fails=$((fails + 1))
	fi
	rm -f "$root/.layers.tsort"

	for f in "$root"/plugin/*.c "$root"/agent/*.c "$root"/agent/*.h; do
		[[ -e $f ]] || continue
		if grep -q '^#include "session.h"' "$f"; then
			echo "FAIL: ${f#"$root"/} includes session.h, which is internal to lib/'s commands"
			fails=$((fails + 1))
		fi
	done

	if [[ ! -f $layout ]]; then
		echo "FAIL: $layout is missing"
		fails=$((fails + 1))
	else
		for f in "$root"/lib/*.[ch] "$root"/plugin/*.c "$root"/agent/*.[ch]; do
			[[ -e $f ]] || continue
			f=${f#"$root"/}
			# A line may name a pair: lib/foo.c, .h
			grep -qE "(^|[ \`])${f%.[ch]}\.(c|h|\[ch\])\b" "$layout" ||
				{ echo "FAIL: doc/layout.md has no line for $f"; fails=$((fails + 1)); }
		done
		for f in $(grep -oE '\b(lib|plugin|agent)/[a-z_]+\.(c|h|\[ch\])' "$layout" | sort -u); do
			compgen -G "$root/${f/\[ch\]/[ch]}" >/dev/null ||
				{ echo "FAIL: doc/layout.md names $f, which does not exist"; fails=$((fails + 1)); }
		done
	fi
	((fails == 0))
}

self_test() {
	local src=$1 t out fails=0
	t=$(mktemp -d)
	trap 'rm -rf "$t"' RETURN
	mkdir -p "$t/doc" && cp -r "$src/lib" "$src/plugin" "$t/" &&
		{ [[ ! -d $src/agent ]] || cp -r "$src/agent" "$t/"; } &&
		cp "$src/doc/architecture.md" "$src/doc/layout.md" "$t/doc/"
	check "$t" >/dev/null || { echo "FAIL: self-test: the unbroken copy fails"; return 1; }

	# A mechanism that knows the protocol's types.
	sed -i 's/^#include "types.h"/#include "cni.h"\n#include "types.h"/' "$t/lib/addr.h"
	out=$(check "$t" || true)
	grep -q 'lib/addr.h (kernel) includes cni.h (protocol)' <<<"$out" ||
		{ echo "FAIL: self-test: addr.h including cni.h went unnoticed"; fails=1; }
	sed -i '/^#include "cni.h"/d' "$t/lib/addr.h"

	# Two files of one layer that include each other.
	sed -i 's/^#include "err.h"/#include "err.h"\n#include "store.h"/' "$t/lib/nccl.h"
	out=$(check "$t" || true)
	grep -q 'form a loop' <<<"$out" ||
		{ echo "FAIL: self-test: a store <-> nccl loop went unnoticed"; fails=1; }
	sed -i '/^#include "store.h"/d' "$t/lib/nccl.h"

	# A new file nobody placed, and the file list that misses it.
	echo '#include "types.h"' >"$t/lib/stray.c"
	out=$(check "$t" || true)
	grep -q 'lib/stray.c is in no layer' <<<"$out" && grep -q 'no line for lib/stray.c' <<<"$out" ||
		{ echo "FAIL: self-test: a file in no layer went unnoticed"; fails=1; }
	rm "$t/lib/stray.c"

	check "$t" >/dev/null || { echo "FAIL: self-test: the repaired copy fails"; fails=1; }
	((fails == 0)) && echo "ok: the check catches a crossed layer, a loop, a file in no layer"
	return "$fails"
}

self=false
if [[ ${1:-} == --self-test ]]; then
	self=true
	shift
fi
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
if $self; then
	self_test "$root"
fi
check "$root"
echo "ok: lib/ follows the layers of doc/architecture.md; doc/layout.md lists every file"
