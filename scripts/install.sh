#!/usr/bin/env bash
# hpn-rdma from this tree onto a node or into a node image (DESTDIR): a thin
# wrapper. hpn-rdma-agent install does all of it (the manifest, refusals,
# upgrades, --dry-run; uninstall: hpn-rdma-agent uninstall; doc/install.md,
# hpn-rdma-agent(8)); this finds the build (or makes one in build-install/)
# and hands the agent this tree's plugin, conflist, man page and examples,
# which any option given here overrides (the later option wins).
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build_dir= cmd=install args=()
while (($#)); do
	case $1 in
	--build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
	--uninstall) cmd=uninstall ;;
	-h | --help)
		cat <<EOT
usage: scripts/install.sh [--build-dir DIR] [--uninstall] [hpn-rdma-agent install options]
                                   (DESTDIR=/image/root in the environment too)
  --build-dir DIR   take plugin/hpn-rdma and agent/hpn-rdma-agent from DIR (default:
                    build both with cmake in build-install/, test hooks off)
  --uninstall       hpn-rdma-agent uninstall: remove what the manifest lists
Passed on: hpn-rdma-agent install --prefix /usr/local --plugin DIR/plugin/hpn-rdma
  --conf conf/10-hpn-rdma.conflist --man doc/hpn-rdma.8 --examples conf [OPTIONS]
(--destdir, --prefix, --cni-bin-dir, --cni-conf-dir, --conf, --no-conf,
--netns-mode, --apply-now, --force, --dry-run: hpn-rdma-agent install --help).
EOT
		exit 0 ;;
	*) args+=("$1") ;;
	esac
	shift
done

if [[ -z $build_dir ]]; then
	build_dir=$src/build-install
	echo "building in $build_dir"
	cmake -S "$src" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHPN_TEST_HOOKS=OFF \
		-DBUILD_TESTING=OFF >/dev/null
	cmake --build "$build_dir" --target hpn-rdma hpn-rdma-agent -j"$(nproc)" >/dev/null
fi
agent=$build_dir/agent/hpn-rdma-agent
[[ -x $agent ]] || {
	echo "install.sh: no $agent: the agent installs, and it builds only with libgrpc-dev," \
		"libprotobuf-c-dev, protobuf-c-compiler and libmicrohttpd-dev (scripts/install-deps.sh)" >&2
	exit 1
}
base=(--prefix /usr/local ${DESTDIR:+--destdir "$DESTDIR"})
if [[ $cmd == uninstall ]]; then
	exec "$agent" uninstall "${base[@]}" "${args[@]}"
fi
exec "$agent" install "${base[@]}" --plugin "$build_dir/plugin/hpn-rdma" \
	--conf "$src/conf/10-hpn-rdma.conflist" --man "$src/doc/hpn-rdma.8" --examples "$src/conf" \
	"${args[@]}"
