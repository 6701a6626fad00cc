#!/bin/bash
# The documentation stays true: README.md and doc/*.md.
#
# (a) Every ```json block that is an hpn-rdma network config (an object of
#     "type": "hpn-rdma", or a conflist with an hpn-rdma plugin) passes the
#     plugin's own validation, exactly as the examples under conf/ do
#     (conf-lib.sh: ADD with a missing netns must end with code 3). A block
#     that is intentionally partial is marked by an HTML comment on the line
#     before its fence, <!-- fragment: why -->, and is skipped and counted;
#     any other ```json block must at least be JSON.
# (b) Every relative link resolves to a file of the tree, and every #anchor to
#     a heading of the page it names, by GitHub's heading slugs (lower case,
#     ASCII punctuation but - and _ dropped, each space a -, a repeated slug
#     gets -1, -2...; headings are kept to ASCII, where those rules are exact).
# (c) Every page under doc/ is linked from the README's map.
# (d) A block marked <!-- golden: PATH --> (a test's golden output, shown in a
#     page) is a piece of that file, so a page never shows stale output.
# No privileges; nothing outside a scratch directory is written.
set -euo pipefail
: "${HPN_PLUGIN:?run through ctest}"
src=${HPN_SRC:?run through ctest}
# shellcheck source-path=SCRIPTDIR source=conf-lib.sh
source "$(dirname "$0")/conf-lib.sh"

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$src"
shopt -s nullglob
docs=(README.md doc/*.md)

# One pass over a Markdown file, printing records (tab-separated):
#   H slug            a heading's anchor
#   L line target     a link or image target, or a reference definition
#   J line frag path  a ```json block, written to path; frag 1 when marked
#   E line message    a problem with the file itself
# Fenced code is skipped for headings and links; code spans are dropped
# before links are looked for.
# shellcheck disable=SC2016 # awk, not shell, expands $ here
scan_awk='
function slug(t,   r, c, i) {
	sub(/^[ \t]+/, "", t); sub(/[ \t]+#+[ \t]*$/, "", t); sub(/[ \t]+$/, "", t)
	while (match(t, /\]\([^)]*\)/))
		t = substr(t, 1, RSTART) substr(t, RSTART + RLENGTH)
	t = tolower(t); r = ""
	for (i = 1; i <= length(t); i++) {
		c = substr(t, i, 1)
		if (c == " ") r = r "-"
		else if (c !~ /[!-,.\/:-@[-^`{-~]/) r = r c
	}
	return r
}
function anchor(t,   s, n, k) {
	s = slug(t)
	if (!(s in seen)) { seen[s] = 0; print "H\t" s; return }
	k = seen[s]
	do { k++; n = s "-" k } while (n in seen)
	seen[s] = k; seen[n] = 0
	print "H\t" n
}
BEGIN { fence = ""; marker = 0; nblock = 0 }
{
	line = $0
	if (fence != "") {
		if (line ~ /^ *(```+|~~~+)[ \t]*$/ && index(line, fence) > 0) {
			if (json) close(path)
			fence = ""; json = 0
		} else if (json)
			print line > path
		next
	}
	if (line ~ /^ *(```|~~~)/) {
		f = line; sub(/^ +/, "", f); lang = f
		match(f, /^(`+|~+)/); fence = substr(f, 1, RLENGTH)
		lang = substr(f, RLENGTH + 1); sub(/^[ \t]+/, "", lang); sub(/[ \t].*/, "", lang)
		json = (lang == "json")
		if (json) {
			nblock++; path = out "." nblock ".json"; printf "" > path
			print "J\t" FNR "\t" (marker ? 1 : 0) "\t" path
		} else if (marker)
			print "E\t" marker "\ta fragment marker not followed by a ```json block"
		marker = 0; start = FNR
		next
	}
	if (line ~ /^[ \t]*$/) next
	if (marker) print "E\t" marker "\ta fragment marker not followed by a ```json block"
	marker = 0
	if (line ~ /^<!-- *fragment/) { marker = FNR; next }
	if (line ~ /^ *#+ /) {
		sub(/^ *#+ /, "", line)
		if (line ~ /[^\t -~]/)
			print "E\t" FNR "\ta heading outside ASCII, whose anchor this check cannot compute"
		anchor(line)
		next
	}
	gsub(/`[^`]*`/, "", line)
	if (match(line, /^ *\[[^]]+\]:[ \t]*/)) {
		t = substr(line, RSTART + RLENGTH); sub(/[ \t].*/, "", t)
		print "L\t" FNR "\t" t
		next
	}
	while (match(line, /\]\([^)]*\)/)) {
		t = substr(line, RSTART + 2, RLENGTH - 3); sub(/[ \t].*/, "", t)
		sub(/^</, "", t); sub(/>$/, "", t)
		print "L\t" FNR "\t" t
		line = substr(line, RSTART + RLENGTH)
	}
}
END {
	if (fence != "") print "E\t" start "\ta code block opened here is never closed"
	if (marker) print "E\t" marker "\ta fragment marker not followed by a ```json block"
}'

mkdir -p "$T/scan"
scan() { # scan FILE: its records, cached
	local key=$T/scan/${1//\//_}
	[[ -f $key ]] || awk -v out="$key" "$scan_awk" "$1" >"$key.rec"
	touch "$key"
	cat "$key.rec"
}

bad() { echo "FAIL: $*"; problems=$((problems + 1)); }

links=0 goldens=0 frags=0 others=0 problems=0
for doc in "${docs[@]}"; do
	dir=$(dirname "$doc")
	while IFS=$'\t' read -r kind a b c; do
		case $kind in
		E) bad "$doc:$a: $b" ;;
		L)
			line=$a target=$b
			case $target in [a-zA-Z]*:*) continue ;; esac # http:, mailto:...
			links=$((links + 1))
			path=${target%%#*} frag=
			[[ $target == *'#'* ]] && frag=${target#*#}
			if [[ -z $path ]]; then
				rel=$doc
			else
				rel=$(realpath -m --relative-to=. "$dir/$path")
			fi
			if [[ $rel == ../* || $rel == /* ]]; then
				bad "$doc:$line: $target leaves the source tree"
			elif [[ ! -e $rel ]]; then
				bad "$doc:$line: $target: no such file ($rel)"
			elif [[ -n $frag ]]; then
				if [[ $rel != *.md ]]; then
					bad "$doc:$line: $target: an anchor in a file that is not Markdown"
				elif ! scan "$rel" | grep -qxF "H	$frag"; then
					bad "$doc:$line: $target: no heading in $rel has the anchor #$frag"
				fi
			fi
			;;
		J)
			line=$a
			if [[ $b == 1 ]]; then
				frags=$((frags + 1))
				echo "skip: $doc:$line: a fragment"
				continue
			fi
			if ! json=$(jq -c . "$c" 2>&1); then
				bad "$doc:$line: a json block that is not JSON (mark it <!-- fragment -->" \
					"if it is partial on purpose): ${json%%$'\n'*}"
				continue
			fi
			case $(conf_kind "$json") in
			conf) conf_check_conf "$doc:$line" "$json" ;;
			list) conf_check_list "$doc:$line" "$json" ;;
			*)
				others=$((others + 1))
				echo "json: $doc:$line: not an hpn-rdma config (left as is)"
				;;
			esac
			;;
		esac
	done < <(scan "$doc")
done

# A block marked <!-- golden: PATH --> on the line before its fence is output
# a test compares (the doctor's goldens): it must be a piece of that file.
for doc in "${docs[@]}"; do
	while IFS=$'\t' read -r line gold; do
		awk -v from="$line" 'NR > from && /^```/ { if (on) exit; on = 1; next } on' "$doc" \
			>"$T/golden.block"
		if [[ ! -f $gold ]]; then
			bad "$doc:$line: golden file $gold does not exist"
		elif [[ ! -s $T/golden.block || $(<"$gold") != *"$(<"$T/golden.block")"* ]]; then
			bad "$doc:$line: the block is not a piece of $gold (output changed: update the page)"
		else
			goldens=$((goldens + 1))
		fi
	done < <(awk '/^<!-- golden: [^ ]* -->$/ { print NR "\t" $3 }' "$doc")
done

# The README's map names every page.
for p in doc/*.md; do
	scan README.md | awk -F'\t' -v p="$p" '$1 == "L" { sub(/#.*/, "", $3); if ($3 == p) f = 1 }
		END { exit !f }' || bad "README.md does not link to $p"
done

((links > 0 && checked > 0)) || bad "found no links or no configs in ${docs[*]}"
echo "$links links and anchors checked, $goldens golden outputs, $problems problems;" \
	"$((checked - failed)) configs" \
	"valid, $failed invalid; $frags fragments skipped, $others other json blocks"
((failed == 0 && problems == 0))
