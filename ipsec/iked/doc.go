// Package iked is flashgate's IKE daemon: it takes the tunnels of the
// configuration, runs the IKEv2 engine (ipsec/ike) on the IKE sockets,
// installs every negotiated CHILD_SA into a data plane (kernel XFRM where the
// kernel has ESP, userspace ESP otherwise), and reports each tunnel's state
// with a plain-language reason on its local API.
//
// Data flows one way: configuration in (a file, or configd's watch stream),
// IKE out, SAs down into the data plane; status flows back up through
// Daemon.Status and the API on /run/flashgate/iked.sock.
package iked
