#!/usr/bin/env bash
# test.sh: the test phase of `make test` (after setup, tidy and vet).
#
# On a fresh machine the board kernels are most of the time: two classes of
# ~1 500 files each, CPU-bound. The packages that boot no VM need no kernel,
# and many of their tests wait on timers and peers (strongSwan rekeys,
# retransmissions), so they run at once while the kernels build beside them
# at the lowest priority, filling the idle CPU without slowing the tests.
# Then the VM packages run; each waits (on the kernel class's lock) only for
# the kernel it boots, and the qemu boards' kernels are built first.
# With warm caches the kernels are all in the cache and this is the plain
# `go test ./...` of before, in two steps.
set -uo pipefail
cd "$(dirname "$0")/.."

go=${GO:-go}
out=${OUT:-out}
# Packages whose tests are mostly images booted in qemu. A package left out
# of this list is still right (it waits for its kernel), only slower:
# ipsec/iked stays in the first step for its many tests in namespaces, and
# its one VM test (TestLibreswanVM) waits for the qemu-x86_64 kernel, which
# is built first in its class.
vm_pkgs=(./e2e ./images ./firmware/vmtest ./ipsec/xfrm/vmcheck)

mkdir -p "$out/test"
"$go" build -o "$out/test/flashgate-host" ./cmd/flashgate || exit 1

start=$SECONDS
nice -n 19 "$out/test/flashgate-host" kernels > >(sed -u 's/^/kernels: /') 2>&1 &
kernels=$!
stop_kernels() {
	if kill -0 "$kernels" 2>/dev/null; then
		kill -TERM "$kernels" 2>/dev/null # it stops its make process groups itself
		wait "$kernels" 2>/dev/null
	fi
}
trap stop_kernels EXIT
# renice_tree N PID: PID and every process under it to priority N.
renice_tree() {
	local all=() pids=("$2")
	while ((${#pids[@]})); do
		all+=("${pids[@]}")
		mapfile -t pids < <(ps -o pid= --ppid "$(IFS=,; echo "${pids[*]}")" | tr -d ' ')
	done
	renice -n "$1" -p "${all[@]}" >/dev/null 2>&1 || true
}

vm_paths=$("$go" list "${vm_pkgs[@]}") || exit 1
unit_pkgs=$("$go" list ./... | grep -v -x -F "$vm_paths") || exit 1

rc=0
echo "== packages without VMs (the kernels build beside them)"
# shellcheck disable=SC2086 # one package path per word
"$go" test -count=1 -timeout 60m -p 2 $unit_pkgs || rc=1
echo "== packages that boot VMs ($((SECONDS - start)) s in; each waits for the kernel it boots)"
# From here on the tests wait for the kernels that are left: they build at
# the tests' priority, not below it.
if kill -0 "$kernels" 2>/dev/null; then
	renice_tree 0 "$kernels"
fi
"$go" test -count=1 -timeout 90m -p 2 "${vm_pkgs[@]}" || rc=1

if ! wait "$kernels"; then
	echo "flashgate kernels failed (its output above, prefixed kernels:)"
	rc=1
fi
trap - EXIT
echo "== tests done in $((SECONDS - start)) s"
exit $rc
