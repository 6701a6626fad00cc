#!/usr/bin/env bash
# The whole test suite: static checks (scripts/lint.sh: clang-format, cppcheck,
# clang-tidy), a -Werror build, every ctest
# tier, then the same tests again under AddressSanitizer + UBSan. The bench
# label (scripts/bench.sh --quick: every row runs, the JSON is valid; timings
# are not asserted) runs in the release pass only: an ASan plugin's figures
# would mean nothing. So do the vm7 tier's floor boots (vm7.shared,
# vm7.exclusive: no binary of ours but the agent, in vm7.shared's agent
# scenario, about 20 s of its boot: its counters on a real rxe rising with
# ib_write_bw; its memory the ASan pass checks in netns.agent-metrics and
# runtime.agent-gc) and vm7.hpn-shared (the plugin with softRoce in shared
# mode, about 4-6 minutes: its rails code runs under the sanitizers in
# netns.rails); vm7.hpn-exclusive (the plugin in exclusive mode, about 1-2
# minutes) runs in both passes, the only sanitizer run of softroce.c, which
# needs a kernel with RDMA (test/vm/CMakeLists.txt).
# The runtime label (test/runtime: the plugin under a real
# containerd 1.6, driven through the CRI) runs in both passes, about 50 s in
# each (4 s of it the seed's Deployment opted in by label through a stand-in
# Kubernetes API server): under ASan it checks the plugin's memory along containerd's own call
# patterns (8 ADDs at once, DEL without netns or prevResult, DEL after a failed
# ADD, DEL after a containerd restart); building its CRI client adds about
# 30 s of Go per build directory. The agent (test/agent: hpn-rdma-agent
# against the kubelet stand-in hpn-kubelet) runs netns.agent in both passes,
# about 15 s in each, and runtime.devices (its Allocate answer in a runc
# container) about 7 s in each; netns.agent-metrics (a real Prometheus
# scraping it, promtool, the dashboard's expressions, the health loop)
# 25-40 s in each, and runtime.agent-gc (its GC against containerd's
# sandboxes) about 20 s in each (under ASan it checks the agent's in-process
# GC); runtime.install (the cluster install from
# hpn-rdma's OCI image: the DaemonSet's containers under containerd, the image
# built twice for its digest, podman load) about 35 s, release pass only
# (test/runtime/CMakeLists.txt says why); memcheck.agent (the agent, and the plugin's
# lookup, under valgrind: about 33 s) in the release pass only; building
# hpn-kubelet adds about 60 s of Go per build directory (cold cache), the
# agent's C about 20 s; fuzz.alloc is one more fuzz target. netns.kube (ADD reading the pod from the
# stand-in API server) is 10-16 s in each pass; its memcheck run, release
# only, about 150 s (valgrind under libcurl and OpenSSL). Run as root
# (the netns and runtime tiers skip, saying why, without root). Extra
# arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)

scripts/lint.sh

echo "== ASan+UBSan build and tests"
cmake -S . -B build-asan -DHPN_WERROR=ON -DHPN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ctest --output-on-failure -j1 -LE bench "$@")

echo "== fuzz tier (clang, libFuzzer, ${HPN_FUZZ_SECONDS:-60} s per target)"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DHPN_FUZZ=ON -DHPN_WERROR=ON \
	-DCMAKE_BUILD_TYPE=Debug -DHPN_FUZZ_SECONDS="${HPN_FUZZ_SECONDS:-60}" >/dev/null
cmake --build build-fuzz -j"$jobs"
(cd build-fuzz && ctest -L fuzz --output-on-failure -j"$jobs")
grep -H 'stat::number_of_executed_units' build-fuzz/test/fuzz/*/fuzz.log

echo "== release build and tests"
cmake -S . -B build -DHPN_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
# The memcheck tier first, $jobs at a time: valgrind runs one plugin at a
# time per test, each test in its own namespaces (netns/lib.sh names them by
# PID), so two cores halve its 19 minutes; everything else one at a time, as
# the runtime, vm and bench tiers share the machine's CPU with their guests.
cd build
ctest --output-on-failure -j"$jobs" -L memcheck "$@"
ctest --output-on-failure -j1 -LE memcheck "$@"
