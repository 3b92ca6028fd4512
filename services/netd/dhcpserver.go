package netd

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
)

// DHCPServer hands out addresses on one LAN interface: the upper half of
// the interface's subnet (without the box's own address and the broadcast
// address), the box as router, and the WAN's DNS servers when there are
// any. Leases live in memory: after a reboot clients keep their address if
// it is still free, since they ask for it again.
type DHCPServer struct {
	Link      string
	Address   netip.Prefix // the box's address on Link, e.g. 192.168.1.1/24
	LeaseTime time.Duration
	Now       func() time.Time // for tests; time.Now when nil

	pool     []netip.Addr
	mu       sync.Mutex
	dns      []netip.Addr
	leases   map[string]*ServerLease // by MAC
	byAddr   map[netip.Addr]*ServerLease
	offerTTL time.Duration
}

// ServerLease is one address given out.
type ServerLease struct {
	MAC      string     `json:"mac"`
	Address  netip.Addr `json:"address"`
	Hostname string     `json:"hostname,omitempty"`
	Expires  time.Time  `json:"expires"`
	Offered  bool       `json:"offered"` // offered, not yet requested
}

// DHCPPool returns the range the server gives out on a LAN with the
// given address: the upper half of the subnet, minus the broadcast address
// and the box's own. Subnets smaller than /29 get no server.
func DHCPPool(p netip.Prefix) (first, last netip.Addr, ok bool) {
	if !p.Addr().Is4() || p.Bits() > 29 || p.Bits() < 8 {
		return netip.Addr{}, netip.Addr{}, false
	}
	base := binary.BigEndian.Uint32(p.Masked().Addr().AsSlice())
	size := uint32(1) << (32 - p.Bits())
	lo, hi := base+size/2, base+size-2
	if hi-lo > 1022 { // a big LAN gets the last 1023 addresses, ending at .254
		lo = hi - 1022
	}
	return u32Addr(lo), u32Addr(hi), true
}

func u32Addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// NewDHCPServer prepares a server for a LAN address; it fails if the subnet
// is too small for a pool.
func NewDHCPServer(link string, addr netip.Prefix) (*DHCPServer, error) {
	first, last, ok := DHCPPool(addr)
	if !ok {
		return nil, fmt.Errorf("dhcp server on %s: %s leaves no room for a pool (IPv4, /8 to /29)", link, addr)
	}
	s := &DHCPServer{Link: link, Address: addr, LeaseTime: 12 * time.Hour, offerTTL: 30 * time.Second,
		leases: map[string]*ServerLease{}, byAddr: map[netip.Addr]*ServerLease{}}
	for a := first; a.Compare(last) <= 0; a = a.Next() {
		if a != addr.Addr() {
			s.pool = append(s.pool, a)
		}
	}
	return s, nil
}

// SetDNS changes the DNS servers given to clients from now on.
func (s *DHCPServer) SetDNS(dns []netip.Addr) {
	s.mu.Lock()
	s.dns = append([]netip.Addr(nil), dns...)
	s.mu.Unlock()
}

// Leases lists the current leases by address.
func (s *DHCPServer) Leases() []ServerLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ServerLease, 0, len(s.leases))
	for _, l := range s.leases {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address.Less(out[j].Address) })
	return out
}

func (s *DHCPServer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Serve answers on UDP port 67 of Link until ctx ends. It must be called
// in the network namespace the link is in.
func (s *DHCPServer) Serve(ctx context.Context) error {
	conn, err := server4.NewIPv4UDPConn(s.Link, &net.UDPAddr{Port: dhcpv4.ServerPort})
	if err != nil {
		return fmt.Errorf("dhcp server on %s: %w", s.Link, err)
	}
	srv, err := server4.NewServer(s.Link, nil, func(c net.PacketConn, peer net.Addr, req *dhcpv4.DHCPv4) {
		reply := s.Reply(req)
		if reply == nil {
			return
		}
		if _, err := c.WriteTo(reply.ToBytes(), replyAddr(req, peer)); err != nil {
			log.Printf("netd: dhcp server on %s: answer %s: %v", s.Link, req.ClientHWAddr, err)
		}
	}, server4.WithConn(conn))
	if err != nil {
		conn.Close()
		return fmt.Errorf("dhcp server on %s: %w", s.Link, err)
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err = srv.Serve()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("dhcp server on %s: %w", s.Link, err)
}

// replyAddr follows RFC 2131 4.1: through the relay if there is one, to
// the client's address if it has one, else broadcast.
func replyAddr(req *dhcpv4.DHCPv4, peer net.Addr) net.Addr {
	switch {
	case req.GatewayIPAddr != nil && !req.GatewayIPAddr.IsUnspecified():
		return &net.UDPAddr{IP: req.GatewayIPAddr, Port: dhcpv4.ServerPort}
	case req.ClientIPAddr != nil && !req.ClientIPAddr.IsUnspecified():
		return &net.UDPAddr{IP: req.ClientIPAddr, Port: dhcpv4.ClientPort}
	}
	return &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
}

// Reply computes the answer to one client message, or nil when there is
// none to give. It holds the whole server logic and touches no socket.
func (s *DHCPServer) Reply(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	if req == nil || req.OpCode != dhcpv4.OpcodeBootRequest || len(req.ClientHWAddr) != 6 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mac := req.ClientHWAddr.String()
	now := s.now()
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		addr, ok := s.pick(mac, req.RequestedIPAddress(), now)
		if !ok {
			return nil // pool exhausted: stay silent, another server may answer
		}
		s.bind(mac, addr, hostname(req), now.Add(s.offerTTL), true)
		return s.answer(req, dhcpv4.MessageTypeOffer, addr)
	case dhcpv4.MessageTypeRequest:
		// Selecting another server's offer: forget ours.
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(net.IP(s.Address.Addr().AsSlice())) {
			if l := s.leases[mac]; l != nil && l.Offered {
				s.release(mac)
			}
			return nil
		}
		want := req.RequestedIPAddress()
		if want == nil || want.IsUnspecified() {
			want = req.ClientIPAddr // renewing or rebinding
		}
		a, ok := netip.AddrFromSlice(want.To4())
		if !ok || !s.inPool(a) {
			return s.nak(req)
		}
		if l := s.byAddr[a]; l != nil && l.MAC != mac && l.Expires.After(now) {
			return s.nak(req)
		}
		s.bind(mac, a, hostname(req), now.Add(s.LeaseTime), false)
		return s.answer(req, dhcpv4.MessageTypeAck, a)
	case dhcpv4.MessageTypeRelease:
		if l := s.leases[mac]; l != nil && net.IP(l.Address.AsSlice()).Equal(req.ClientIPAddr) {
			s.release(mac)
		}
		return nil
	case dhcpv4.MessageTypeDecline:
		// The client found the address in use: keep it out of the pool
		// for a lease time, held by nobody.
		if a, ok := netip.AddrFromSlice(req.RequestedIPAddress().To4()); ok && s.inPool(a) {
			s.release(mac)
			s.bind("declined:"+a.String(), a, "", now.Add(s.LeaseTime), false)
		}
		return nil
	}
	return nil
}

func (s *DHCPServer) inPool(a netip.Addr) bool {
	i := sort.Search(len(s.pool), func(i int) bool { return !s.pool[i].Less(a) })
	return i < len(s.pool) && s.pool[i] == a
}

// pick chooses an address for mac: the one it has, the one it asks for
// if free, else the first free one.
func (s *DHCPServer) pick(mac string, requested net.IP, now time.Time) (netip.Addr, bool) {
	if l := s.leases[mac]; l != nil {
		return l.Address, true
	}
	free := func(a netip.Addr) bool {
		l := s.byAddr[a]
		return l == nil || !l.Expires.After(now)
	}
	if a, ok := netip.AddrFromSlice(requested.To4()); ok && s.inPool(a) && free(a) {
		return a, true
	}
	for _, a := range s.pool {
		if free(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (s *DHCPServer) bind(mac string, a netip.Addr, host string, exp time.Time, offered bool) {
	if old := s.byAddr[a]; old != nil && old.MAC != mac {
		delete(s.leases, old.MAC)
	}
	if l := s.leases[mac]; l != nil && l.Address != a {
		delete(s.byAddr, l.Address)
	}
	l := &ServerLease{MAC: mac, Address: a, Hostname: host, Expires: exp, Offered: offered}
	s.leases[mac], s.byAddr[a] = l, l
}

func (s *DHCPServer) release(mac string) {
	if l := s.leases[mac]; l != nil {
		delete(s.byAddr, l.Address)
		delete(s.leases, mac)
	}
}

func (s *DHCPServer) answer(req *dhcpv4.DHCPv4, t dhcpv4.MessageType, a netip.Addr) *dhcpv4.DHCPv4 {
	self := net.IP(s.Address.Addr().AsSlice())
	mods := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(t),
		dhcpv4.WithYourIP(a.AsSlice()),
		dhcpv4.WithServerIP(self),
		dhcpv4.WithNetmask(net.CIDRMask(s.Address.Bits(), 32)),
		dhcpv4.WithRouter(self),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(self)),
		dhcpv4.WithLeaseTime(uint32(s.LeaseTime / time.Second)),
	}
	if len(s.dns) > 0 {
		ips := make([]net.IP, len(s.dns))
		for i, d := range s.dns {
			ips[i] = d.AsSlice()
		}
		mods = append(mods, dhcpv4.WithDNS(ips...))
	}
	reply, err := dhcpv4.NewReplyFromRequest(req, mods...)
	if err != nil {
		return nil
	}
	return reply
}

func (s *DHCPServer) nak(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	reply, err := dhcpv4.NewReplyFromRequest(req,
		dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(s.Address.Addr().AsSlice())))
	if err != nil {
		return nil
	}
	return reply
}

func hostname(req *dhcpv4.DHCPv4) string {
	h := req.HostName()
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}
