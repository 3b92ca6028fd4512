// Package esp is flashgate's userspace ESP data plane (RFC 4303 tunnel mode,
// RFC 3948 UDP encapsulation), used where the kernel has no ESP. It owns the
// per-SA cryptography (encap, decap, sequence numbers, anti-replay), the TUN
// device with its GSO/GRO offloads, the outer UDP and raw ESP sockets with
// batched I/O, and the Device that ties them together and implements
// ipsec.DataPlane for iked.
//
// The wire format is the kernel's: a strongSwan or Linux XFRM peer cannot tell
// the two data planes apart.
//
// Packet buffers are owned by the caller. Encap works in place on an inner
// packet that has Headroom bytes free before it and Tailroom bytes after it;
// Decap works in place and returns a subslice. Neither allocates in steady
// state, so the per-packet cost is the cipher and the copy the kernel makes.
package esp
