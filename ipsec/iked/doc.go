// Package iked is flashgate's IKE daemon: it takes the tunnels of the
// configuration, runs the IKEv2 engine (ipsec/ike) on the IKE sockets,
// installs every negotiated CHILD_SA into a data plane (kernel XFRM where the
// kernel has ESP, userspace ESP otherwise), and reports each tunnel's state
// with a plain-language reason on its local API.
//
// Data flows one way: configuration in (a file, or configd's watch stream),
// IKE out, SAs down into the data plane; status flows back up through
// Daemon.Status and the API on /run/flashgate/iked.sock.
//
// Keeping tunnels up is the daemon's job, not the engine's: a tunnel with
// start action initiate is initiated again after any failure (1 s doubling
// to a minute), gets a new CHILD_SA when the peer deletes its last one, and
// follows the WAN address when none is configured. The sockets never block
// the engine: IKE sends that the kernel cannot take at once are dropped and
// counted (retransmission recovers them), and IKE arriving on the
// userspace data plane's NAT-T socket is queued off its packet workers.
package iked
