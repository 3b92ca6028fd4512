// Package testnet builds the small networks that flashgate's tests and
// benchmarks run on: network namespaces joined by veth pairs, with the
// addresses of ../shared/reference/interop.md, and real peers in them
// (strongSwan's charon, wireguard-go, iperf3).
//
// Everything it creates lives only inside namespaces it made, is named with a
// per-process prefix, and is torn down by name (namespaces) or by PID
// (processes) when the test ends. Traffic never leaves those namespaces.
package testnet
