// Package ike is an IKEv2 protocol engine (RFC 7296) for flashgate's iked,
// with IKEv1 (RFC 2407/2408/2409: main mode with PSK, quick mode) for peers
// that speak nothing else (v1*.go):
// the message and payload codec, proposals in strongSwan's syntax, the
// cryptographic suites (PRFs, Diffie-Hellman groups, SK payload protection,
// key derivation, PSK authentication) and the IKE/CHILD SA state machines
// with their timers (retransmission, rekeying, DPD, NAT keepalives).
//
// The package does no I/O of its own. An Endpoint is handed every datagram
// that arrives on the IKE sockets (HandleMessage), told the time through an
// injected clock (Tick), and sends through an injected function. Negotiated
// CHILD_SAs leave the package as ipsec.ChildSA pairs through callbacks; the
// daemon decides what to do with them. This keeps the engine deterministic
// and testable in one process without sockets (see network_test.go).
package ike
