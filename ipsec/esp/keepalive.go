package esp

import (
	"fmt"
	"net/netip"
)

// SendKeepalive sends a NAT keepalive (RFC 3948 2.3: the single byte 0xFF)
// from the NAT-T port, for iked, whose IKE SAs decide when one is due.
func (d *Device) SendKeepalive(to netip.AddrPort) error {
	if err := d.socks[0].sendTo([]byte{0xff}, to); err != nil {
		return fmt.Errorf("send NAT keepalive to %v: %w", to, err)
	}
	return nil
}
