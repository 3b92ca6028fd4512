package netd

import (
	"encoding/binary"
	"fmt"
	"log"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ARP announcements (RFC 5227 section 2.3): when netd adds an IPv4 address
// to a link it says so on the link, as soon as the link has carrier. A
// neighbour that was already asking for the address (its ARP entry
// incomplete, packets queued behind it) takes our MAC from the
// announcement and sends at once, instead of at its next ARP retry a
// second or more later. At boot that neighbour is typically the peer
// gateway that came up first, with its IKE_SA_INIT waiting for us.
// Neighbours that were not asking are not disturbed: by default Linux only
// updates entries it already has from such a packet.

const (
	// announceCarrierWait bounds the wait for the link to be able to
	// send after the address was added (an emulated e1000 has carrier
	// about a second after link up).
	announceCarrierWait = 10 * time.Second
	// announceNum and announceInterval: RFC 5227 sends 2 announcements,
	// 2 s apart; the second catches a neighbour whose first ARP request
	// crossed the first announcement.
	announceNum      = 2
	announceInterval = 2 * time.Second
)

// announce sends the ARP announcements of addrs on link, in the
// background, once the link has carrier. Failures are logged: an
// announcement only saves neighbours time.
func (n *Netlink) announce(link string, addrs []netip.Addr) {
	go func() {
		if err := n.announceNow(link, addrs); err != nil {
			log.Printf("netd: announce %v on %s: %v", addrs, link, err)
		}
	}()
}

func (n *Netlink) announceNow(link string, addrs []netip.Addr) error {
	var h *netlink.Handle
	var err error
	if n.ns == -1 {
		h, err = netlink.NewHandle()
	} else {
		h, err = netlink.NewHandleAt(n.ns)
	}
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	l, err := waitCarrier(h, link, announceCarrierWait)
	if err != nil {
		return err
	}
	a := l.Attrs()
	if len(a.HardwareAddr) != 6 || a.RawFlags&unix.IFF_NOARP != 0 {
		return nil // not Ethernet-like, or no ARP on it: nothing to announce
	}
	var fd int
	open := func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}
	if n.ns == -1 {
		err = open()
	} else {
		err = inNetNS(n.ns, open)
	}
	if err != nil {
		return fmt.Errorf("AF_PACKET socket: %w", err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: a.Index, Halen: 6,
		Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for i := range announceNum {
		if i > 0 {
			time.Sleep(announceInterval)
		}
		for _, addr := range addrs {
			if err := unix.Sendto(fd, arpAnnouncement(a.HardwareAddr, addr), 0, to); err != nil {
				return fmt.Errorf("send: %w", err)
			}
		}
	}
	return nil
}

// waitCarrier waits until link can send, polling, for at most limit. The
// carrier flag (IFF_LOWER_UP) is not enough: the kernel attaches the
// link's queueing discipline only when it has processed the carrier
// change (linkwatch), and until then everything sent is dropped. The
// operational state turns up at that same moment; links whose driver does
// not report one (unknown) send as soon as they have carrier.
func waitCarrier(h *netlink.Handle, link string, limit time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(limit)
	for {
		l, err := h.LinkByName(link)
		if err != nil {
			return nil, err
		}
		a := l.Attrs()
		carrier := a.RawFlags&unix.IFF_UP != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
		if carrier && (a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown) {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no carrier within %v", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// arpAnnouncement is an ARP request for addr from addr (RFC 5227 2.3: the
// sender and target protocol addresses are both ours, the target hardware
// address zero), without the Ethernet header.
func arpAnnouncement(mac net.HardwareAddr, addr netip.Addr) []byte {
	p := make([]byte, 28)
	binary.BigEndian.PutUint16(p[0:2], 1)      // hardware type Ethernet
	binary.BigEndian.PutUint16(p[2:4], 0x0800) // protocol IPv4
	p[4], p[5] = 6, 4
	binary.BigEndian.PutUint16(p[6:8], 1) // request
	copy(p[8:14], mac)
	a4 := addr.As4()
	copy(p[14:18], a4[:])
	copy(p[24:28], a4[:])
	return p
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
