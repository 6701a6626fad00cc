#!/bin/bash
# run.sh [--kernel K] [--nics N] [--append WORD]... SCENARIO.sh [ARGS...]:
# boot the vm tier's QEMU VM on kernel K (6.1, the default, or 7: see
# prepare.sh; from its cache) and run `bash SCENARIO.sh ARGS` inside it;
# print its output and exit with its status (0 pass, 77 skip, anything else
# fail).
#
# A scenario file says how it wants to be booted in lines of its own, read
# before the options (which override them):
#   # hpn-vm: kernel=7 nics=4 append=ib_core.netns_mode=0
# kernel= and nics= as the options; each append= adds one word to the kernel
# command line, such as a module parameter (the guest init hands
# module.param=value words to insmod: busybox insmod does not read them).
# One file may hold many scenarios run in one boot (lib.sh, run_scenarios).
#
# The guest sees this machine's root read-only at / (9p, under a tmpfs
# overlay), so absolute paths -- the source and build trees, HPN_PLUGIN,
# /usr/lib/cni -- are the same inside; the scenario runs as root with cwd =
# its own directory. Its environment is HPN_*, PATH, LANG, LC_ALL and
# ASAN/UBSAN/LSAN_OPTIONS as set here, plus HOME=/root and
# HPN_VM_OUT=/hpn-vm-out, a writable share whose files stay on the host in
# the run's results dir. Writes anywhere else land in the overlay and vanish
# at poweroff; /run and /var/lib/cni start empty. N virtio-net NICs (default
# 2, at most 8): NIC i has MAC 52:54:00:12:34:5<i> and PCI address
# 0000:00:0<4+i>.0 (i = 0..7: 50..57, 04.0..0b.0), named eth<i> by the
# guest kernel in that order; they sit on one QEMU hub whose only other port
# drops every frame: nothing reaches this machine's network. The guest
# console (kernel warnings and worse, the scenario's output) is kept in the
# results dir as console.log. A guest whose kernel panics before the scenario
# starts is booted once more, and only once, saying so (the first boot's
# console kept as console-1.log); once the scenario has started, a failure,
# a panic included, is the run's result. The 7.x guest's two vCPUs run on one
# host thread (see accel below).
#
# Environment: HPN_VM_CACHE (default /var/cache/hpn-rdma/vm), HPN_VM_TIMEOUT
# (seconds, default 600; QEMU is killed and the run fails), HPN_VM_VERBOSE=1
# (stream the guest console to stderr), HPN_VM_KEEP=1 (keep the results dir;
# it is always kept on failure).
set -euo pipefail

root=${HPN_VM_CACHE:-/var/cache/hpn-rdma/vm}
limit=${HPN_VM_TIMEOUT:-600}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=kernels.sh
source "$here/kernels.sh"	# vm_kernel_dir, vm_recipe

usage() {
	echo "usage: run.sh [--kernel 6.1|7] [--nics N] [--append WORD]... SCENARIO.sh [ARGS...]" >&2
	exit 2
}
opt_kernel= opt_nics=
opt_append=()
while (($#)); do
	case $1 in
	--kernel | --nics | --append) (($# >= 2)) || usage ;;&
	--kernel) opt_kernel=$2 ;;
	--nics) opt_nics=$2 ;;
	--append) opt_append+=("$2") ;;
	-*) usage ;;
	*) break ;;
	esac
	shift 2
done
(($# >= 1)) || usage
scen=$1
shift
[[ -f $scen || ! -f $here/$scen ]] || scen=$here/$scen
[[ -f $scen ]] || { echo "run.sh: no scenario $scen" >&2; exit 2; }
scen=$(realpath "$scen")
name=$(basename "$scen" .sh)

# The scenario's own boot settings, then the options.
kernel=6.1 nics=2
append=()
while read -r line; do
	for kv in ${line#"# hpn-vm:"}; do
		case $kv in
		kernel=*) kernel=${kv#*=} ;;
		nics=*) nics=${kv#*=} ;;
		append=*) append+=("${kv#*=}") ;;
		*) echo "run.sh: $scen: unknown '# hpn-vm:' setting '$kv'" >&2; exit 2 ;;
		esac
	done
done < <(grep '^# hpn-vm:' "$scen" || true)
kernel=${opt_kernel:-$kernel}
nics=${opt_nics:-$nics}
append+=("${opt_append[@]}")
[[ $nics =~ ^[1-8]$ ]] || { echo "run.sh: --nics $nics: 1 to 8" >&2; exit 2; }
for w in "${append[@]}"; do
	[[ $w =~ ^[A-Za-z0-9_.=,:/-]+$ ]] || { echo "run.sh: bad --append word '$w'" >&2; exit 2; }
done
cache=$(vm_kernel_dir "$root" "$kernel") || exit 2

command -v qemu-system-x86_64 >/dev/null ||
	{ echo "SKIP: qemu-system-x86_64 is not installed (Debian: qemu-system-x86)"; exit 77; }
if [[ ! -f $cache/stamp || ! -f $cache/initramfs.cpio.gz || ! -e $cache/vmlinuz ]]; then
	why=
	[[ -f $cache/skip-reason ]] && why=": $(<"$cache/skip-reason")"
	echo "SKIP: no kernel $kernel VM image in $cache (its prepare skipped$why;" \
		"test/vm/prepare.sh --kernel $kernel $root)"
	exit 77
fi
# An image built from another init or prepare.sh would test that one.
[[ $(<"$cache/stamp") == *"recipe $(vm_recipe "$kernel")"* ]] || {
	echo "run.sh: FAIL: the kernel $kernel image in $cache predates test/vm/init," \
		"prepare.sh or kernels.sh: test/vm/prepare.sh --kernel $kernel $root (ctest runs it)"
	exit 1
}
kmods=$(realpath "$cache/kmods")

out=$(mktemp -d "${TMPDIR:-/tmp}/hpn-vm.XXXXXX")
# QEMU takes commas in option values as separators, the kernel command line
# splits on spaces.
[[ $out$kmods != *[,\ ]* ]] || { echo "run.sh: FAIL: comma or space in $out or $kmods" >&2; exit 1; }

# The command the guest init runs with bash inside the chroot (env -i).
{
	echo "# run.sh: the guest runs this inside the chroot"
	for v in $(compgen -e); do
		case $v in
		HPN_* | PATH | LANG | LC_ALL | ASAN_OPTIONS | UBSAN_OPTIONS | LSAN_OPTIONS)
			printf 'export %s=%q\n' "$v" "${!v}"
			;;
		esac
	done
	echo 'export HOME=/root HPN_VM_OUT=/hpn-vm-out'
	# shellcheck disable=SC2016 # expanded in the guest
	echo 'export PATH=${PATH:-/usr/local/bin:/usr/bin:/bin}:/usr/local/sbin:/usr/sbin:/sbin'
	printf 'cd %q\n' "$(dirname "$scen")"
	printf 'exec bash %q' "$scen"
	(($# == 0)) || printf ' %q' "$@"
	echo
} >"$out/cmd"

# The 7.x guest, with its two vCPUs emulated on two host threads (TCG's
# default, one thread per vCPU), now and then died early in boot with "Oops:
# int3" in hot code the other vCPU was patching (sched_clock_cpu in CI,
# ktime_get_update_offsets_now here): x86 rewrites live code through a
# temporary int3 and IPIs, which QEMU's multi-threaded TCG does not make
# safe against the other vCPU running that code. thread=single runs both
# vCPUs in turn on one host thread, where no vCPU runs while another writes;
# the guest still has two CPUs, and every scenario keeps its concurrency.
# The panic counts and the cost, measured on this machine: doc/building.md
# (vm7). 6.1 was never seen to panic and keeps its threads.
accel=tcg
[[ $kernel == 6.1 ]] || accel=tcg,thread=single

# shellcheck disable=SC2054 # the commas are QEMU's
qemu=(
	qemu-system-x86_64 -accel "$accel" -m 1536 -smp 2 -nographic -vga none -no-reboot
	-kernel "$cache/vmlinuz" -initrd "$cache/initramfs.cpio.gz"
	-append "console=ttyS0 panic=-1 loglevel=5 hpn_vm=1 hpn_vm_kmods=$kmods${append[*]:+ ${append[*]}}"
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
	-virtfs "local,path=$out,mount_tag=hpnout,security_model=none"
	# A sink on the hub, like a wire: a port that always takes a frame. The
	# hub accepts a NIC's frame only if another port can; with the other NIC
	# down in the guest none could, so QEMU would hold the frame and never
	# complete the transmit. The guest's skb, and the sending socket with it
	# (say a gratuitous ARP from a pod), would then live on and keep the pod's
	# netns -- and its NIC -- from ever being freed. The sink sends to a unix
	# socket path nobody binds, so every frame is dropped; no network.
	-netdev "dgram,id=sink,local.type=unix,local.path=$out/sink.sock,remote.type=unix,remote.path=$out/nowhere.sock"
	-netdev hubport,id=hps,hubid=0,netdev=sink
)
# Fixed MACs and PCI slots: the guest's PCI addresses never change.
# romfile= (none): no iPXE boot ROM to load and run.
for ((i = 0; i < nics; i++)); do
	qemu+=(-netdev "hubport,id=hp$i,hubid=0"
		-device "virtio-net-pci,netdev=hp$i,mac=52:54:00:12:34:5$i,addr=$(printf %02x $((4 + i))),romfile=")
done

# boot SECONDS: run QEMU for at most SECONDS, the guest console to
# console.log; sets qrc (QEMU's exit status, 124/137 when killed).
# timeout(1) puts QEMU in its own process group, out of reach of whoever
# kills this script (ctest on its own timeout): forward the signal.
qpid=
trap '[[ -n $qpid ]] && kill "$qpid" 2>/dev/null; exit 1' TERM INT HUP
boot() {
	rm -f "$out/sink.sock"
	timeout -k 10 "$1" "${qemu[@]}" </dev/null >"$out/console.log" 2>&1 &
	qpid=$!
	if [[ ${HPN_VM_VERBOSE:-} == 1 ]]; then
		tail -n +1 -f --pid="$qpid" "$out/console.log" >&2 &
	fi
	qrc=0
	wait "$qpid" || qrc=$?
	qpid=
}

# early_panic: the guest kernel panicked (or oopsed) before init printed
# "hpn-vm: running", i.e. before the scenario's first line could run; prints
# the kernel's first such line.
early_panic() {
	local line
	[[ ! -f $out/status ]] || return 1
	! grep -a -q 'hpn-vm: running' "$out/console.log" || return 1
	line=$(grep -a -m 1 -E 'Kernel panic|Oops|BUG:' "$out/console.log" | tr -d '\r') || return 1
	echo "${line#\[*\] }"
}

# A guest that panicked before its scenario started is booted once more:
# nothing of the scenario ran, and under TCG a boot may still race (see
# accel above). Once the scenario has started a failure is its own, never
# retried; nor is an init failure (hpn-vm: FATAL) the kernel did not cause,
# nor a timeout. The first boot's console stays as console-1.log; the second
# boot has what is left of HPN_VM_TIMEOUT.
start=$SECONDS
boot "$limit"
retried=
if why=$(early_panic) && ((SECONDS - start < limit)); then
	echo "run.sh: $name: guest panicked before the scenario started ($why): booting once more"
	mv "$out/console.log" "$out/console-1.log"
	rm -f "$out/output"
	retried="booted twice, the first boot's console is console-1.log"
	boot $((limit - (SECONDS - start)))
fi
secs=$((SECONDS - start))

# The kernel's verdict first (a panic's first line scrolls out of the tail).
console_tail() {
	echo "--- guest console, full log: $out/console.log"
	grep -a -m 5 -E 'Kernel panic|BUG:|Oops|hpn-vm: FATAL' "$out/console.log" | tr -d '\r' || true
	echo "--- guest console (tail)"
	tail -n 40 "$out/console.log" | tr -d '\r'
}

# The boot facts (NICs, PCI addresses, kernel), then the scenario's output.
sed -n 's/\r$//; s/.*\(hpn-vm: \(nic\|running\)\)/\1/p' "$out/console.log"
[[ -f $out/output ]] && cat "$out/output"
sed -n 's/\r$//; s/.*\(hpn-vm: done\)/\1/p' "$out/console.log"
if ((qrc == 124 || qrc == 137)); then
	echo "run.sh: FAIL: $name: no result after ${limit}s (HPN_VM_TIMEOUT), QEMU killed${retried:+ ($retried)}"
	console_tail
	exit 1
fi
status=$(cat "$out/status" 2>/dev/null || true)
if [[ ! $status =~ ^[0-9]+$ ]]; then
	echo "run.sh: FAIL: $name: the guest wrote no exit status (QEMU exit $qrc:" \
		"kernel panic, init failure or crash${retried:+; $retried})"
	console_tail
	exit 1
fi
echo "run.sh: $name: exit $status after ${secs}s (boot and run, kernel $kernel, $nics NICs${append[*]:+, ${append[*]}}${retried:+; $retried})"
if [[ $status != 0 && $status != 77 ]]; then
	echo "run.sh: results kept in $out"
elif [[ ${HPN_VM_KEEP:-} != 1 ]]; then
	rm -rf "$out"
fi
exit "$status"
