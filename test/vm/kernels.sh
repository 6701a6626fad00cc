# shellcheck shell=bash
# The vm tier's kernels, shared by prepare.sh and run.sh: a kernel's name
# (6.1 or 7; see prepare.sh), where its files live under the cache root
# (HPN_VM_CACHE; 6.1 keeps the root itself, as before there were two), and
# the recipe its image was built from.

# vm_kernel_dir ROOT KERNEL: print KERNEL's dir under the cache ROOT.
vm_kernel_dir() {
	case $2 in
	6.1) echo "$1" ;;
	7) echo "$1/7" ;;
	*)
		echo "unknown vm kernel '$2' (6.1 or 7)" >&2
		return 2
		;;
	esac
}

# vm_recipe KERNEL: print what KERNEL's image is built from: the kernel's
# name and a hash of prepare.sh, init and this file. prepare.sh writes it to
# the stamp; run.sh refuses an image whose stamp says otherwise.
vm_recipe() {
	local d h
	d=$(dirname "${BASH_SOURCE[0]}")
	h=$(cat "$d/prepare.sh" "$d/init" "$d/kernels.sh" | sha256sum)
	echo "$1 ${h%% *}"
}
