# shellcheck shell=bash disable=SC2034 # globals for the scripts that source it
# The NCCL probe's side of the tests that run a real NCCL (doc/nccl.md, "A
# real NCCL in a pod"): runtime.nccl (nccl.sh) and vm7.hpn-shared's nccl
# scenario source it after their tier's lib.sh (skip and fail). Bash builtins
# only past the start: under the VM's TCG every process costs 0.15-0.4 s.
#
# NCCL comes from the runtime cache test/runtime/fetch.sh fills: Debian
# trixie's libnccl2 2.22.3 with trixie's libc, libstdc++ and libgcc, unpacked
# under $NCCL_ROOT, run through trixie's loader (NCCL needs glibc 2.38+,
# Debian 12 has 2.36). The probe ($HPN_BUILD/test/runtime/ncclprobe) makes
# the one call that needs no GPU, ncclGetUniqueId, which reads NCCL's files
# and picks the bootstrap interface; NCCL_DEBUG=INFO makes it say so.

NCCL_CACHE=${HPN_RUNTIME_CACHE:-/var/cache/hpn-rdma/runtime}/nccl
NCCL_ROOT=$NCCL_CACHE/root
NCCL_LIBDIR=$NCCL_ROOT/usr/lib/x86_64-linux-gnu
NCCL_LOADER=$NCCL_LIBDIR/ld-linux-x86-64.so.2
NCCL_PROBE=${HPN_BUILD:-}/test/runtime/ncclprobe

# The keys NCCL 2.22 reads from its files up to and at bootstrap (the
# ncclGetUniqueId call) and logs as "KEY set by environment to VALUE",
# measured: a file setting every NCCL_* name libnccl.so.2.22.3 holds (124)
# made it log these and no other. Integer parameters are logged as %lld and
# a period. NCCL_COMM_ID (a job's rendezvous address, never a node's hint)
# also replaces the interface lookup, so NCCL_SOCKET_IFNAME is not logged
# with it. NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE are read then
# too, unlogged: their effect shows. Everything else, NCCL_IB_* among it, is
# read at communicator init, which needs a GPU.
declare -A NCCL_BOOT_KEYS=(
	[NCCL_SOCKET_IFNAME]=str [NCCL_SOCKET_FAMILY]=str [NCCL_COMM_ID]=str
	[NCCL_GDRCOPY_ENABLE]=int [NCCL_SET_THREAD_NAME]=int
)
NCCL_BOOT_VERSION=2.22	# the version they were measured on

# ncclprobe_why_not: why NCCL cannot run here (empty: it can).
ncclprobe_why_not() {
	if [[ -f $NCCL_CACHE/skip-reason ]]; then
		echo "no NCCL in the runtime cache: $(<"$NCCL_CACHE/skip-reason")"
	elif [[ ! -x $NCCL_LOADER || ! -e $NCCL_LIBDIR/libnccl.so.2 ]]; then
		echo "no NCCL in the runtime cache $NCCL_CACHE (bash test/runtime/fetch.sh ${NCCL_CACHE%/nccl}; HPN_RUNTIME_CACHE)"
	elif [[ ! -x $NCCL_PROBE ]]; then
		echo "the probe $NCCL_PROBE is not built (HPN_BUILD)"
	fi
}

# nccl_sort ARRAY: the array's lines in byte order (an empty one stays empty).
nccl_sort() {
	local -n a=$1
	((${#a[@]} < 2)) || mapfile -t a < <(printf '%s\n' "${a[@]}" | LC_ALL=C sort)
}

# nccl_expect HINTS_TEXT: NCCL_WANT, the lines NCCL must log when it reads
# HINTS_TEXT (a hints file) as its only file: one per bootstrap key the file
# sets (the first setting of a key: NCCL's setenv(..., 0)), sorted; NCCL_IF,
# the file's NCCL_SOCKET_IFNAME.
NCCL_WANT=()
NCCL_IF=
nccl_expect() {
	local line k v
	local -A seen=()
	NCCL_WANT=() NCCL_IF=''
	while IFS= read -r line; do
		[[ $line == *=* && $line != \#* ]] || continue
		k=${line%%=*} v=${line#*=}
		[[ -z ${seen[$k]:-} ]] || continue
		seen[$k]=1
		[[ $k == NCCL_SOCKET_IFNAME ]] && NCCL_IF=$v
		case ${NCCL_BOOT_KEYS[$k]:-} in
		str) NCCL_WANT+=("$k set by environment to $v") ;;
		# Decimal only here: NCCL's strtoll(..., 0) would read 010 as 8.
		int) [[ $v =~ ^(0|-?[1-9][0-9]*)$ ]] && NCCL_WANT+=("$k set by environment to $v.") ;;
		esac
	done <<<"$1"
	nccl_sort NCCL_WANT
}

# nccl_read LOG: from the probe's output, NCCL_GOT (NCCL's "... set by
# environment to ..." lines without their "host:pid:tid [dev] NCCL INFO "
# prefix, sorted), NCCL_BOOT (its "Bootstrap : Using IF:ADDR<port>" line,
# likewise), NCCL_VERSION and NCCL_RESULT (the probe's own lines).
NCCL_GOT=()
NCCL_BOOT=
NCCL_VERSION=
NCCL_RESULT=
nccl_read() {
	local line
	NCCL_GOT=() NCCL_BOOT='' NCCL_VERSION='' NCCL_RESULT=''
	while IFS= read -r line; do
		case $line in
		*" NCCL INFO "*" set by environment to "*) NCCL_GOT+=("${line#* NCCL INFO }") ;;
		*" NCCL INFO Bootstrap : Using "*) NCCL_BOOT=${line#* NCCL INFO } ;;
		"ncclprobe: NCCL "*) NCCL_VERSION=${line#ncclprobe: NCCL } ;;
		"ncclprobe: ncclGetUniqueId: "*) NCCL_RESULT=${line#ncclprobe: ncclGetUniqueId: } ;;
		esac
	done <<<"$1"
	nccl_sort NCCL_GOT
}

# nccl_took LOG HINTS_TEXT ADDR: NCCL's log (the probe's output, NCCL_DEBUG
# INFO) shows it took every bootstrap setting of HINTS_TEXT from the file and
# nothing else (NCCL_WANT == NCCL_GOT, exactly), and bootstrapped on the
# interface the file names, whose address in the pod is ADDR. Otherwise
# returns 1 with NCCL_WHY saying why (the caller fails, or expects it to).
# Call it outside $(...): NCCL_WANT, NCCL_GOT and the others stay set.
NCCL_WHY=
nccl_took() {
	local log=$1 hints=$2 addr=$3
	NCCL_WHY=
	nccl_expect "$hints"
	nccl_read "$log"
	if [[ $NCCL_VERSION != "$NCCL_BOOT_VERSION".* ]]; then
		NCCL_WHY="NCCL is ${NCCL_VERSION:-not reported}; NCCL_BOOT_KEYS were measured on $NCCL_BOOT_VERSION (measure again: test/runtime/ncclprobe.sh)"
		return 1
	fi
	if [[ $NCCL_RESULT != "0 "* ]]; then
		NCCL_WHY="ncclGetUniqueId failed: ${NCCL_RESULT:-no result}"
		return 1
	fi
	if [[ -z $NCCL_IF ]] || ((${#NCCL_WANT[@]} == 0)); then
		NCCL_WHY="the hints name no bootstrap setting: nothing to check"
		return 1
	fi
	if [[ $(printf '%s\n' "${NCCL_WANT[@]}") != "$(printf '%s\n' ${NCCL_GOT[@]+"${NCCL_GOT[@]}"})" ]]; then
		NCCL_WHY="NCCL's settings at bootstrap are not the hints': wanted [$(printf '%s; ' "${NCCL_WANT[@]}")], logged [$(printf '%s; ' ${NCCL_GOT[@]+"${NCCL_GOT[@]}"})]"
		return 1
	fi
	if [[ $NCCL_BOOT != "Bootstrap : Using $NCCL_IF:$addr<"* ]]; then
		NCCL_WHY="NCCL bootstrapped with '${NCCL_BOOT:-no Bootstrap line}', not on $NCCL_IF:$addr"
		return 1
	fi
}
