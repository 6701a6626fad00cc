#!/usr/bin/env bash
# Installs, from Debian's archive, everything hpn-rdma needs to build, test and
# demonstrate itself. Run as root on Debian 12 (bookworm).
set -euo pipefail

packages=(
	# build, and the static checks of scripts/lint.sh
	build-essential cmake pkg-config clang-format clang-tidy cppcheck
	# fuzz tier: clang with libFuzzer (libclang_rt.fuzzer is in libclang-rt-14-dev);
	# memcheck tests and the stress test's fd checks: valgrind
	clang libclang-rt-14-dev valgrind
	libnl-3-dev libibverbs-dev librdmacm-dev libcjson-dev
	# package tier: cpack's Depends (dpkg-shlibdeps), the man page check (groff)
	dpkg-dev groff-base
	# netns tier and the demo: namespaces, veth, JSON checks, fault injection
	iproute2 jq strace util-linux tcpdump
	# reference CNI plugins (host-local, static, bridge...) and libcni for chaining tests
	containernetworking-plugins golang-go golang-github-appc-cni-dev
	# runtime tier and the bench's runtime rows: containerd 1.6 with runc; the CRI
	# client test/runtime/hpn-cri, generated from our proto at build time and
	# built offline in GOPATH mode against Debian's gRPC and protobuf sources
	containerd runc protobuf-compiler protoc-gen-go protoc-gen-go-grpc
	golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev
	# hpn-rdma-agent: gRPC's C core and protobuf-c (its messages generated from
	# agent/proto at build time); the kubelet stand-in uses the Go gRPC above
	libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
	# its Prometheus metrics over HTTP (libmicrohttpd); the tests scrape them with
	# curl and a real Prometheus server, and check the exposition with promtool
	libmicrohttpd-dev curl prometheus
	# vm tier: QEMU booting Debian's 6.1 kernel and trixie-backports' 7.x
	# (fetched by test/vm/prepare.sh; the 7.x through a private apt trusting
	# Debian's keyring) with a busybox initramfs; ibv_devinfo, rping,
	# ibv_rc_pingpong, ib_write_bw (perftest), sysctl and the rxe provider in the VM
	qemu-system-x86 busybox-static ibverbs-utils rdmacm-utils ibverbs-providers
	perftest procps kmod xz-utils cpio debian-archive-keyring
	# Kubernetes API lookups: libcurl (OpenSSL flavour: the CA and client
	# certificate as memory blobs) and libyaml headers (both dlopen()ed at run
	# time); the stand-in API server's test PKI (openssl) and Python
	libcurl4-openssl-dev libyaml-dev openssl python3
	# test/k8s-manifests.py: the manifests under conf/k8s/ parsed offline
	python3-yaml
	# hpn-rdma's OCI image (scripts/image.sh: patchelf, binutils' strip) and its
	# runtime test (test/runtime/install.sh: inotifywait, readelf, objcopy,
	# podman load into a scratch store)
	patchelf binutils inotify-tools podman
)
# kubectl reads the stand-in API server's pods in the tests: Debian's
# kubernetes-client, unless the machine already has a kubectl (another
# package's /usr/bin/kubectl would conflict with it).
command -v kubectl >/dev/null || packages+=(kubernetes-client)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if ((${#missing[@]})); then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# No package may start a service here (prometheus' postinst would start a
	# server on the machine's network): a policy-rc.d refusing every start,
	# as container images have, for the length of the install when the
	# machine has none of its own.
	rc=/usr/sbin/policy-rc.d
	if [[ ! -e $rc ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$rc"
		chmod 755 "$rc"
		trap 'rm -f "$rc"' EXIT
	fi
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
