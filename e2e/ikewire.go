package e2e

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// IKEWire records the IKE messages crossing one port of the lab's switch
// (an appliance's WAN TAP), with the host's time of each, so a timeline can
// say when an initiation went out, whether it was answered, and how long
// each exchange took on the wire. It reads an AF_PACKET socket in the
// switch namespace: nothing is sent.
type IKEWire struct {
	fd   int
	done chan struct{}

	mu   sync.Mutex
	msgs []ikeMessage
}

// ikeMessage is what the timeline says about one IKE message.
type ikeMessage struct {
	at       time.Time
	src, dst netip.AddrPort
	exchange uint8 // 34 IKE_SA_INIT, 35 IKE_AUTH, 36 CREATE_CHILD_SA, 37 INFORMATIONAL
	response bool
	msgID    uint32
}

var exchangeNames = map[uint8]string{34: "IKE_SA_INIT", 35: "IKE_AUTH", 36: "CREATE_CHILD_SA", 37: "INFORMATIONAL"}

func (m ikeMessage) String() string {
	name, ok := exchangeNames[m.exchange]
	if !ok {
		name = fmt.Sprintf("exchange %d", m.exchange)
	}
	dir := "request"
	if m.response {
		dir = "response"
	}
	return fmt.Sprintf("wire: %s %s #%d %v -> %v", name, dir, m.msgID, m.src, m.dst)
}

// WatchIKE starts recording on port (a link in the switch namespace).
func (l *Lab) WatchIKE(port string) (*IKEWire, error) {
	ifc, err := l.ifIndex(port)
	if err != nil {
		return nil, err
	}
	w := &IKEWire{done: make(chan struct{})}
	err = l.Switch.Do(func() error {
		// ETH_P_ALL: packet taps see a port's transmitted frames only
		// with it. SOCK_DGRAM: the frames come without their Ethernet
		// header.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind AF_PACKET socket to %s: %w", port, err)
		}
		// A bounded read, so that Stop is noticed.
		tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(fd)
			return err
		}
		w.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("watch IKE on %s: %w", port, err)
	}
	go w.read()
	return w, nil
}

func (l *Lab) ifIndex(name string) (int, error) {
	var idx int
	err := l.Switch.Do(func() error {
		ifc, err := net.InterfaceByName(name)
		if err == nil {
			idx = ifc.Index
		}
		return err
	})
	return idx, err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (w *IKEWire) read() {
	defer unix.Close(w.fd)
	buf := make([]byte, 2048)
	for {
		select {
		case <-w.done:
			return
		default:
		}
		n, _, err := unix.Recvfrom(w.fd, buf, 0)
		at := time.Now()
		if err != nil {
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			return
		}
		if m, ok := parseIKEPacket(buf[:n]); ok {
			m.at = at
			w.mu.Lock()
			w.msgs = append(w.msgs, m)
			w.mu.Unlock()
		}
	}
}

// Seen returns the messages recorded so far, in order; the recording goes on.
func (w *IKEWire) Seen() []ikeMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ikeMessage(nil), w.msgs...)
}

// Stop ends the recording and returns the messages seen, in order.
func (w *IKEWire) Stop() []ikeMessage {
	close(w.done)
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ikeMessage(nil), w.msgs...)
}

// parseIKEPacket reads an IPv4 packet and, if it carries an IKE message
// (UDP 500, or UDP 4500 after the four zero bytes that tell IKE from ESP),
// its addresses and IKE header (RFC 7296 section 3.1).
func parseIKEPacket(p []byte) (ikeMessage, bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_UDP {
		return ikeMessage{}, false
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 || len(p) < ihl+8 {
		return ikeMessage{}, false
	}
	if binary.BigEndian.Uint16(p[6:8])&0x1fff != 0 {
		return ikeMessage{}, false // a later fragment: no UDP header
	}
	src := netip.AddrFrom4([4]byte(p[12:16]))
	dst := netip.AddrFrom4([4]byte(p[16:20]))
	udp := p[ihl:]
	sport, dport := binary.BigEndian.Uint16(udp[0:2]), binary.BigEndian.Uint16(udp[2:4])
	ike := udp[8:]
	switch {
	case sport == 500 || dport == 500:
	case sport == 4500 || dport == 4500:
		if len(ike) < 4 || binary.BigEndian.Uint32(ike[:4]) != 0 {
			return ikeMessage{}, false // ESP in UDP, or a NAT keepalive
		}
		ike = ike[4:]
	default:
		return ikeMessage{}, false
	}
	if len(ike) < 28 || ike[17] != 0x20 { // version 2.0
		return ikeMessage{}, false
	}
	return ikeMessage{
		src: netip.AddrPortFrom(src, sport), dst: netip.AddrPortFrom(dst, dport),
		exchange: ike[18], response: ike[19]&0x20 != 0, msgID: binary.BigEndian.Uint32(ike[20:24]),
	}, true
}
