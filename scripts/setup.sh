#!/usr/bin/env bash
# setup.sh: make this Debian 12 machine able to build, run and test flashgate.
#
# Run as root it installs what is missing (apt packages). Run as a user it installs nothing and prints
# exactly what is missing and the command that would install it. It is
# idempotent and fast when everything is already there, so `make run` and
# `make test` call it every time.
set -u

# command -> Debian package that provides it
declare -A need=(
	[qemu-system-i386]=qemu-system-x86
	[qemu-system-x86_64]=qemu-system-x86
	[syslinux]=syslinux
	[mcopy]=mtools
	[mkfs.vfat]=dosfstools
	[sfdisk]=fdisk
	[mke2fs]=e2fsprogs
	[debugfs]=e2fsprogs
	[depmod]=kmod
	[xz]=xz-utils
	[zstd]=zstd
	[cpio]=cpio
	[objdump]=binutils
	[ip]=iproute2
	[ping]=iputils-ping
	[nft]=nftables
	[iperf3]=iperf3
	[swanctl]=strongswan-swanctl
	[chromium]=chromium
	[chromedriver]=chromium-driver
	[wg]=wireguard-tools
	[script]=bsdutils
	# building the kernels from Debian's source package
	[make]=make
	[gcc]=gcc
	[flex]=flex
	[bison]=bison
	[bc]=bc
	[ccache]=ccache
	[tar]=tar
)
# files -> package (things that are not commands)
declare -A needfile=(
	[/usr/lib/syslinux/mbr/mbr.bin]=syslinux-common
	[/usr/lib/ipsec/charon]=strongswan-charon
	[/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so]=libcharon-extra-plugins
	[/usr/lib/ipsec/plugins/libstrongswan-curve25519.so]=libstrongswan-extra-plugins
	[/usr/lib/ipsec/plugins/libstrongswan-openssl.so]=libstrongswan-standard-plugins
	# the kernel's objtool and resolve_btfids link libelf
	[/usr/include/libelf.h]=libelf-dev
	[/usr/include/openssl/ssl.h]=libssl-dev
	# libreswan's pluto (unpacked below, not installed) links these
	[/lib/x86_64-linux-gnu/libnss3.so]=libnss3
	[/usr/bin/certutil]=libnss3-tools
	[/lib/x86_64-linux-gnu/libunbound.so.8]=libunbound8
	[/lib/x86_64-linux-gnu/libldns.so.3]=libldns3
	[/lib/x86_64-linux-gnu/libcurl-nss.so.4]=libcurl3-nss
	[/lib/x86_64-linux-gnu/libevent_core-2.1.so.7]=libevent-core-2.1-7
	[/lib/x86_64-linux-gnu/libevent_pthreads-2.1.so.7]=libevent-pthreads-2.1-7
	[/lib/x86_64-linux-gnu/libldap-2.5.so.0]=libldap-2.5-0
	[/lib/x86_64-linux-gnu/libcap-ng.so.0]=libcap-ng0
)
# libreswan, the second IKEv1 peer of the tests (internal/testnet/libreswan.go):
# Debian's package conflicts with strongswan-starter (installing it would
# remove charon), so it is unpacked here, never installed.
libreswan_dir=/var/cache/flashgate/libreswan
need_libreswan=
[ -x "$libreswan_dir/usr/libexec/ipsec/pluto" ] || need_libreswan=1

missing=()
for cmd in "${!need[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
for f in "${!needfile[@]}"; do
	[ -e "$f" ] || missing+=("${needfile[$f]}")
done
# de-duplicate, stable order
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sed '/^$/d' | sort -u)


if ! command -v go >/dev/null 2>&1; then
	echo "setup: Go is not on PATH: install Go 1.26 (https://go.dev/dl) to /usr/local/go and add /usr/local/go/bin to PATH." >&2
	exit 1
fi

if [ ${#missing[@]} -eq 0 ] && [ -z "$need_libreswan" ]; then
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	echo "setup: missing on this machine:" >&2
	[ ${#missing[@]} -gt 0 ] && echo "  - packages: apt-get install --no-install-recommends ${missing[*]}" >&2
	[ -n "$need_libreswan" ] && echo "  - libreswan unpacked: apt-get download libreswan && dpkg -x libreswan_*.deb $libreswan_dir" >&2
	echo "setup: run 'make setup' as root (or the commands above with sudo), then try again." >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "setup: apt-get update"
# An index of the security suite is sometimes out of sync and makes apt-get
# update exit 100 while the main suite's index loaded fine; what matters is
# that the packages below resolve, which apt-get install checks. The kernel
# source package (kernel.SourceVersion) is fetched by the image builder.
apt-get update -q >/tmp/flashgate-apt-update.log 2>&1 || echo "setup: apt-get update reported errors (see /tmp/flashgate-apt-update.log); going on"
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/flashgate-apt-install.log 2>&1; then
		tail -20 /tmp/flashgate-apt-install.log >&2
		echo "setup: apt-get install failed: see /tmp/flashgate-apt-install.log" >&2
		exit 1
	fi
fi
if [ -n "$need_libreswan" ]; then
	echo "setup: unpacking libreswan into $libreswan_dir"
	tmp=$(mktemp -d)
	if ! (cd "$tmp" && apt-get download -q libreswan >/tmp/flashgate-libreswan.log 2>&1 && mkdir -p "$libreswan_dir" && dpkg -x libreswan_*.deb "$libreswan_dir"); then
		tail -5 /tmp/flashgate-libreswan.log >&2
		echo "setup: could not unpack libreswan (see /tmp/flashgate-libreswan.log)" >&2
		rm -rf "$tmp"
		exit 1
	fi
	rm -rf "$tmp"
fi
echo "setup: done"
