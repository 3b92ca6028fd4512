package xfrm

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// SetESPInUDP marks a UDP socket as the RFC 3948 encapsulation socket: the
// kernel then takes ESP packets arriving on it (those not starting with the
// four zero bytes of the non-ESP marker) into XFRM, and passes IKE packets
// to the application as usual. ESP-in-UDP SAs need such a socket bound to
// their local port (4500) in the same namespace, open for as long as they
// are; iked owns it, since it also sends and receives IKE on port 4500.
func SetESPInUDP(c syscall.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("set UDP_ENCAP: %w", err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_ENCAP, unix.UDP_ENCAP_ESPINUDP)
	}); err != nil {
		return fmt.Errorf("set UDP_ENCAP: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("set UDP_ENCAP ESPINUDP: %w", serr)
	}
	return nil
}
