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

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"

	"github.com/flashgate/flashgate/config"
)

// DHCPServer hands out addresses on one LAN or opt interface: a range of the
// interface's subnet (without the box's own address and the addresses
// reserved for static leases) to any client, each reserved address only to
// its MAC, the box as router, and the WAN's DNS servers when there are
// any. Leases live in memory: after a reboot clients keep their address if
// it is still free, since they ask for it again.
type DHCPServer struct {
	Link      string
	Address   netip.Prefix // the box's address on Link, e.g. 192.168.1.1/24
	LeaseTime time.Duration
	Now       func() time.Time // for tests; time.Now when nil

	scope    DHCPScope
	first    uint32 // the range, as numbers
	last     uint32
	reserved map[string]Reservation     // by MAC (net.HardwareAddr.String)
	reserver map[netip.Addr]Reservation // the same, by address
	mu       sync.Mutex
	dns      []netip.Addr
	leases   map[string]*netdapi.ServerLease // by MAC
	byAddr   map[netip.Addr]*netdapi.ServerLease
	offerTTL time.Duration
}

// NewDHCPServer prepares a server with the automatic pool and the default
// lease time for a LAN address; it fails if the subnet is too small for a
// pool.
func NewDHCPServer(link string, addr netip.Prefix) (*DHCPServer, error) {
	first, last, ok := config.DefaultDHCPRange(addr)
	if !ok {
		return nil, fmt.Errorf("dhcp server on %s: %s leaves no room for a pool (IPv4, /8 to /29)", link, addr)
	}
	return NewScopeServer(DHCPScope{Link: link, Address: addr, First: first, Last: last, LeaseTime: config.DefaultLeaseTime})
}

// NewScopeServer prepares a server for a scope. config has validated the
// scope already; the checks here keep a bad one from reaching the wire.
func NewScopeServer(sc DHCPScope) (*DHCPServer, error) {
	if err := sc.check(); err != nil {
		return nil, fmt.Errorf("dhcp server on %s: %w", sc.Link, err)
	}
	s := &DHCPServer{Link: sc.Link, Address: sc.Address, LeaseTime: sc.LeaseTime, offerTTL: 30 * time.Second,
		scope: sc, first: u32(sc.First), last: u32(sc.Last),
		reserved: map[string]Reservation{}, reserver: map[netip.Addr]Reservation{},
		leases: map[string]*netdapi.ServerLease{}, byAddr: map[netip.Addr]*netdapi.ServerLease{}}
	for _, r := range sc.Reservations {
		s.reserved[r.MAC] = r
		s.reserver[r.Address] = r
	}
	return s, nil
}

// Scope is what the server was made for.
func (s *DHCPServer) Scope() DHCPScope { return s.scope }

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func u32Addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// Adopt takes over the leases of the server this one replaces (the range,
// the lease time or the static leases changed): a client keeps its
// address if it is still in the pool, and a client with a static lease
// now gets that instead at its next renewal.
func (s *DHCPServer) Adopt(leases []netdapi.ServerLease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, l := range leases {
		if l.Offered || l.Static || !l.Expires.After(now) || !s.inPool(l.Address) || s.byAddr[l.Address] != nil {
			continue
		}
		if _, static := s.reserved[l.MAC]; static {
			continue
		}
		s.bind(l.MAC, l.Address, l.Hostname, l.Expires, false)
	}
}

// SetDNS changes the DNS servers given to clients from now on.
func (s *DHCPServer) SetDNS(dns []netip.Addr) {
	s.mu.Lock()
	s.dns = append([]netip.Addr(nil), dns...)
	s.mu.Unlock()
}

// Leases lists the current leases by address.
func (s *DHCPServer) Leases() []netdapi.ServerLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]netdapi.ServerLease, 0, len(s.leases))
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
		if r, static := s.reserved[mac]; static {
			// A client with a static lease gets that address and no other.
			if !ok || a != r.Address {
				return s.nak(req)
			}
		} else if !ok || !s.inPool(a) {
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

// inPool reports whether a is in the dynamic pool: inside the range, not
// the box's own and not reserved for a static lease.
func (s *DHCPServer) inPool(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	n := u32(a)
	_, reserved := s.reserver[a]
	return n >= s.first && n <= s.last && a != s.Address.Addr() && !reserved
}

// pick chooses an address for mac: its static lease, the one it has, the
// one it asks for if free, else the first free one.
func (s *DHCPServer) pick(mac string, requested net.IP, now time.Time) (netip.Addr, bool) {
	if r, ok := s.reserved[mac]; ok {
		return r.Address, true
	}
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
	// Every address passed over is held by a lease or reserved, so the
	// walk ends after at most len(leases)+len(reserved)+2 steps.
	for n := s.first; n <= s.last && n >= s.first; n++ {
		if a := u32Addr(n); s.inPool(a) && free(a) {
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
	r, static := s.reserved[mac]
	if static && r.Hostname != "" {
		host = r.Hostname // the admin's name for it beats the client's
	}
	l := &netdapi.ServerLease{MAC: mac, Address: a, Hostname: host, Expires: exp, Offered: offered, Static: static}
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
	if r, ok := s.reserved[req.ClientHWAddr.String()]; ok && r.Hostname != "" {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptHostName(r.Hostname)))
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
