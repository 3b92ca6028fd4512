// Package bench holds the side-by-side measurements behind `make bench`
// (../shared/bench.md): Go benchmarks that need root and real peers
// (strongSwan, wireguard-go, iperf3, qemu), and the runner that turns the
// benchmark output of this and other packages into the tables and the
// out/bench/results.json file.
//
// The machine is shared and noisy, so every figure that has a peer is
// measured in the same run as the peer and reported as a ratio.
package bench
