# shellcheck shell=bash
# The VM section of scripts/bench.sh (--vm; needs QEMU and the vm7 tier's
# kernel image, which test/vm/prepare.sh --kernel 7 fetches and which is kept
# current here): RDMA on the current kernel in one boot (test/vm/vm7-bench.sh;
# alone: test/vm/run.sh test/vm/vm7-bench.sh) -- ib_write_bw pod to pod over
# two virtio NICs on one QEMU hub, the two pods made by hand (the floor:
# iproute2, rdma link add inside each pod) and through hpn-rdma with softRoce,
# run by run in turn, and the floor over a veth pair; then ADD's latency with
# the RDMA proof (softRoce) and with rdmaRequired false, in turn, and DEL's.

# vm_section: vm, the VM section's JSON (or why it was skipped or failed).
vm_section() {
	local vcache
	vm='{"skipped": "not requested (--vm)"}'
	if ((VM)); then
		vcache=${HPN_VM_CACHE:-/var/cache/hpn-rdma/vm}
		echo "# VM: RDMA on the current kernel, the floor and hpn-rdma (test/vm/vm7-bench.sh, one boot)"
		if ! bash "$SRC/test/vm/prepare.sh" --kernel 7 "$vcache" >"$W/vm-prepare.out" 2>&1; then
			vm=$(jq -cn --arg why "$(tail -n 3 "$W/vm-prepare.out")" '{skipped: $why}')
		elif HPN_VM_CACHE=$vcache HPN_VM_BENCH_ITERS=$VM_ITERS HPN_VM_BENCH_RUNS=$VM_RUNS \
			HPN_VM_BENCH_ADDS=$VM_ADDS HPN_PLUGIN=$PLUGIN \
			HPN_VM_TIMEOUT=$((600 + 3 * VM_RUNS * VM_ITERS / 10 + 30 * VM_RUNS + 20 * VM_ADDS)) \
			bash "$SRC/test/vm/run.sh" "$SRC/test/vm/vm7-bench.sh" >"$W/vm.out" 2>&1 &&
			grep -q '^BENCH-JSON: ' "$W/vm.out"; then
			vm=$(sed -n 's/^BENCH-JSON: //p' "$W/vm.out" | tail -n1)
			vm=$(jq -c --arg boot "$(sed -n 's/^run\.sh: .* after \([0-9]*\)s .*/\1/p' "$W/vm.out")" \
				'. + {boot_and_run_s: ($boot | tonumber? // null)}' <<<"$vm")
		else
			echo "bench.sh: the VM section failed:" >&2
			tail -n 30 "$W/vm.out" >&2
			vm=$(jq -cn --arg why "$(grep -m1 -E '^(FAIL|SKIP|run\.sh: FAIL)' "$W/vm.out")" '{failed: $why}')
		fi
	fi
}
