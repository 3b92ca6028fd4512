// Package spokes plays many IKEv2 branch offices at once against one hub:
// N independent initiators, each from its own source address with its own
// identity and PSK, each bringing up one IKE_SA with one CHILD_SA and then
// sending one ICMP echo through it and waiting for the answer.
//
// Every spoke is a real initiator of ipsec/ike's engine (one Endpoint holds
// all of them, as iked's does for its tunnels); ESP is the real thing too,
// ipsec/esp's SA encapsulating the echo request in UDP (RFC 3948, the
// initiator forces encapsulation as strongSwan's encap = yes does) and
// checking the echo reply's ICV, replay window and inner addresses. Nothing
// in it depends on which responder answers: the hub may be flashgate's iked,
// strongSwan or anything else that speaks IKEv2 with PSK and NAT-T.
//
// A run is bounded: at most Window setups are in flight at once, and the run
// ends at Timeout whatever state the spokes are in.
package spokes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/ipsec/esp"
	"github.com/flashgate/flashgate/ipsec/ike"
	"golang.org/x/net/ipv4"
)

// Spoke is one branch office.
type Spoke struct {
	Addr netip.Addr   // its WAN address: the IKE and ESP source
	ID   string       // its IKE identity (strongSwan syntax)
	PSK  string       // its pre-shared key, shared with the hub alone
	LAN  netip.Prefix // its side's traffic selector; the echo comes from LAN.Addr()
}

// Numbered makes n spokes with consecutive WAN and LAN addresses from
// firstWAN and firstLAN (one /32 LAN each), identities spoke-N.example and
// PSKs derived from secret and N, so that each spoke has its own.
func Numbered(n int, firstWAN, firstLAN netip.Addr, secret string) []Spoke {
	out := make([]Spoke, n)
	wan, lan := firstWAN, firstLAN
	for i := range out {
		out[i] = Spoke{Addr: wan, ID: fmt.Sprintf("spoke-%d.example", i), PSK: fmt.Sprintf("%s-%d", secret, i),
			LAN: netip.PrefixFrom(lan, lan.BitLen())}
		wan, lan = wan.Next(), lan.Next()
	}
	return out
}

// Config is one run against one hub.
type Config struct {
	Hub    netip.Addr   // the hub's WAN address (IKE on 500, NAT-T on 4500)
	HubID  string       // the identity the hub authenticates as
	HubLAN netip.Prefix // the hub's side's traffic selector
	// Target is the address inside HubLAN the echo requests go to; the hub
	// must answer it (an address of the hub itself, or a host behind it).
	Target netip.Addr
	Spokes []Spoke

	IKEProposals, ESPProposals string // strongSwan syntax; empty: the engine's defaults

	// Window bounds the setups in flight at once (default 50), Timeout the
	// whole run (default 2 minutes), PingTries the echo requests per spoke
	// (default 3, one a second until answered).
	Window    int
	Timeout   time.Duration
	PingTries int

	// IKEPort is the spokes' and the hub's IKE port (default 500); the
	// NAT-T port is 4500 on both sides.
	IKEPort uint16

	// AllAnswered, if set, is called once every spoke was answered, while
	// every SA is still up (to measure the hub in that state).
	AllAnswered func()

	Logf func(format string, args ...any)
}

// SpokeResult is what became of one spoke.
type SpokeResult struct {
	Spoke     Spoke
	Started   time.Duration // from the run's start to its IKE_SA_INIT
	Up        time.Duration // to its CHILD_SA; 0 if it never came up
	Answered  time.Duration // to the echo reply through it; 0 if none came
	Err       error         // the last failure the engine reported, if any
	PingsSent int
}

// Result is a whole run.
type Result struct {
	Spokes []SpokeResult
	// AllUp is the time from the start to the last CHILD_SA up, AllAnswered
	// to the last echo reply; both are the run's length when some spoke
	// never got there.
	AllUp, AllAnswered time.Duration
	Up, Answered       int
	IKE                ike.StatsSnapshot
	// IKEQueueDrops counts IKE datagrams from the hub dropped because the
	// generator's own workers were behind (the hub retransmits them).
	IKEQueueDrops uint64
}

// Err summarizes the spokes that did not come up or were not answered.
func (r *Result) Err() error {
	if r.Up == len(r.Spokes) && r.Answered == len(r.Spokes) {
		return nil
	}
	var first []string
	for _, s := range r.Spokes {
		if s.Answered != 0 || len(first) >= 5 {
			continue
		}
		switch {
		case s.Up == 0 && s.Err != nil:
			first = append(first, fmt.Sprintf("%s: %v", s.Spoke.ID, s.Err))
		case s.Up == 0:
			first = append(first, fmt.Sprintf("%s: no CHILD_SA", s.Spoke.ID))
		default:
			first = append(first, fmt.Sprintf("%s: up, but %d echo requests unanswered", s.Spoke.ID, s.PingsSent))
		}
	}
	return fmt.Errorf("%d of %d spokes up, %d answered (IKE retransmits %d); first: %v",
		r.Up, len(r.Spokes), r.Answered, r.IKE.Retransmits, first)
}

// spoke is one spoke's state during a run.
type spoke struct {
	Spoke
	index int
	peer  *ike.PeerConfig
	local [2]netip.AddrPort // IKE port, NAT-T port

	// Guarded by run.mu.
	res        SpokeResult
	in, out    *esp.SA
	nextPing   time.Time
	inFlight   bool // holds a place in the window
	outEncapTo netip.AddrPort
}

type run struct {
	cfg   Config
	start time.Time
	ep    *ike.Endpoint
	sock  map[uint16]*ipv4.PacketConn // by local port

	mu      sync.Mutex
	byPeer  map[*ike.PeerConfig]*spoke
	byAddr  map[netip.Addr]*spoke
	bySPI   map[uint32]*spoke // inbound ESP SPI
	window  chan struct{}
	pending atomic.Int64 // spokes not answered yet
	// ikeQueue feeds the IKE workers, by the spoke address the datagram
	// came to; queueDrops counts what a full queue refused.
	ikeQueue   []chan datagram
	queueDrops atomic.Uint64
	done       chan struct{}
	once       sync.Once
	logf       func(string, ...any)
}

// Run plays the spokes against cfg.Hub from the current network namespace,
// whose interfaces must already carry every spoke's address. It returns when
// every spoke was answered, at cfg.Timeout, or when ctx ends; the result
// says what each spoke reached. Every IKE SA is deleted before it returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if len(cfg.Spokes) == 0 {
		return nil, errors.New("spokes: no spokes")
	}
	if !cfg.Hub.Is4() || !cfg.Target.Is4() {
		return nil, errors.New("spokes: the hub and the echo target must be IPv4 addresses")
	}
	if cfg.Window <= 0 {
		cfg.Window = 50
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.PingTries <= 0 {
		cfg.PingTries = 3
	}
	if cfg.IKEPort == 0 {
		cfg.IKEPort = 500
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	var ikeProps, espProps []ike.Proposal
	var err error
	if cfg.IKEProposals != "" {
		if ikeProps, err = ike.ParseProposals(ike.ProtoIKE, cfg.IKEProposals); err != nil {
			return nil, fmt.Errorf("spokes: IKE proposals: %w", err)
		}
	}
	if cfg.ESPProposals != "" {
		if espProps, err = ike.ParseProposals(ike.ProtoESP, cfg.ESPProposals); err != nil {
			return nil, fmt.Errorf("spokes: ESP proposals: %w", err)
		}
	}
	hubID, err := ike.ParseIdentity(cfg.HubID)
	if err != nil {
		return nil, fmt.Errorf("spokes: hub identity: %w", err)
	}

	r := &run{cfg: cfg, sock: map[uint16]*ipv4.PacketConn{}, byPeer: map[*ike.PeerConfig]*spoke{},
		byAddr: map[netip.Addr]*spoke{}, bySPI: map[uint32]*spoke{}, window: make(chan struct{}, cfg.Window),
		done: make(chan struct{}), logf: cfg.Logf}
	spokes := make([]*spoke, len(cfg.Spokes))
	for i, sp := range cfg.Spokes {
		if !sp.Addr.Is4() || !sp.LAN.Addr().Is4() {
			return nil, fmt.Errorf("spokes: spoke %d (%s): IPv4 addresses only", i, sp.ID)
		}
		id, err := ike.ParseIdentity(sp.ID)
		if err != nil {
			return nil, fmt.Errorf("spokes: spoke %d: %w", i, err)
		}
		if _, dup := r.byAddr[sp.Addr]; dup {
			return nil, fmt.Errorf("spokes: spoke %d (%s): address %v used twice", i, sp.ID, sp.Addr)
		}
		s := &spoke{Spoke: sp, index: i}
		s.local = [2]netip.AddrPort{netip.AddrPortFrom(sp.Addr, cfg.IKEPort), netip.AddrPortFrom(sp.Addr, 4500)}
		s.peer = &ike.PeerConfig{
			Name: sp.ID, Local: s.local[0], Remote: netip.AddrPortFrom(cfg.Hub, cfg.IKEPort),
			LocalID: id, RemoteID: hubID, PSK: []byte(sp.PSK),
			IKEProposals: ikeProps, ESPProposals: espProps,
			LocalTS: []netip.Prefix{sp.LAN}, RemoteTS: []netip.Prefix{cfg.HubLAN},
			ForceEncap: true,
		}
		s.res.Spoke = sp
		spokes[i] = s
		r.byPeer[s.peer] = s
		r.byAddr[sp.Addr] = s
	}
	r.pending.Store(int64(len(spokes)))

	for _, port := range []uint16{cfg.IKEPort, 4500} {
		pc, err := listen(port)
		if err != nil {
			r.closeSockets()
			return nil, err
		}
		r.sock[port] = pc
	}
	defer r.closeSockets()

	r.ep, err = ike.NewEndpoint(ike.EndpointConfig{
		Send: r.send,
		Events: ike.Events{
			ChildUp:   r.childUp,
			IKEDown:   r.ikeDown,
			ChildDown: func(*ike.IKESA, uint32, error) {},
			Failure:   r.failure,
		},
	})
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	r.start = time.Now()
	var wg, workers sync.WaitGroup
	for range max(2, runtime.NumCPU()) {
		q := make(chan datagram, 256)
		r.ikeQueue = append(r.ikeQueue, q)
		workers.Add(1)
		go func() { defer workers.Done(); r.ikeWorker(q) }()
	}
	for port, pc := range r.sock {
		wg.Add(1)
		go func() { defer wg.Done(); r.read(pc, port) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); r.timers(ctx) }()

	// Start the spokes, at most Window in flight.
start:
	for _, s := range spokes {
		select {
		case r.window <- struct{}{}:
		case <-ctx.Done():
			break start
		case <-r.done:
			break start
		}
		r.mu.Lock()
		s.inFlight = true
		s.res.Started = time.Since(r.start)
		r.mu.Unlock()
		if _, err := r.ep.Initiate(s.peer); err != nil {
			r.mu.Lock()
			s.res.Err = err
			r.release(s)
			r.mu.Unlock()
		}
	}
	select {
	case <-ctx.Done():
	case <-r.done:
	}
	elapsed := time.Since(r.start)
	if r.pending.Load() == 0 && cfg.AllAnswered != nil {
		cfg.AllAnswered()
	}

	res := &Result{Spokes: make([]SpokeResult, len(spokes))}
	r.mu.Lock()
	for i, s := range spokes {
		res.Spokes[i] = s.res
		if s.res.Up != 0 {
			res.Up++
			res.AllUp = max(res.AllUp, s.res.Up)
		}
		if s.res.Answered != 0 {
			res.Answered++
			res.AllAnswered = max(res.AllAnswered, s.res.Answered)
		}
	}
	r.mu.Unlock()
	if res.Up < len(spokes) {
		res.AllUp = elapsed
	}
	if res.Answered < len(spokes) {
		res.AllAnswered = elapsed
	}
	res.IKE = r.ep.Stats.Snapshot()
	res.IKEQueueDrops = r.queueDrops.Load()

	// Delete every IKE SA (the hub sees the spokes leave) and give the
	// DELETEs a moment to go out before the sockets close.
	for _, sa := range r.ep.SAs() {
		sa.Delete()
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	r.closeSockets()
	wg.Wait()
	for _, q := range r.ikeQueue {
		close(q)
	}
	workers.Wait()
	r.mu.Lock()
	for _, s := range spokes {
		if s.in != nil {
			s.in.Zero()
			s.out.Zero()
		}
	}
	r.mu.Unlock()
	return res, nil
}

// listen opens the wildcard UDP socket of port: every spoke's address
// shares it, IP_PKTINFO telling which one a datagram came to and choosing
// the one it leaves from.
func listen(port uint16) (*ipv4.PacketConn, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{Port: int(port)})
	if err != nil {
		return nil, fmt.Errorf("spokes: listen on UDP port %d: %w", port, err)
	}
	c.SetReadBuffer(4 << 20)
	c.SetWriteBuffer(4 << 20)
	pc := ipv4.NewPacketConn(c)
	if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
		c.Close()
		return nil, fmt.Errorf("spokes: IP_PKTINFO on port %d: %w", port, err)
	}
	return pc, nil
}

func (r *run) closeSockets() {
	for _, pc := range r.sock {
		pc.Close()
	}
}

// send is the engine's Send: from the spoke's address on the local port.
func (r *run) send(pkt []byte, local, remote netip.AddrPort) error {
	pc := r.sock[local.Port()]
	if pc == nil {
		return fmt.Errorf("spokes: no socket on port %d", local.Port())
	}
	cm := &ipv4.ControlMessage{Src: local.Addr().AsSlice()}
	_, err := pc.WriteTo(pkt, cm, net.UDPAddrFromAddrPort(remote))
	return err
}

// read hands IKE to the engine and ESP to the spoke whose SPI it carries.
// IKE is handled on a goroutine per datagram, bounded by the window: the
// engine locks per IKE SA, so spokes negotiate in parallel.
func (r *run) read(pc *ipv4.PacketConn, port uint16) {
	buf := make([]byte, 65535)
	for {
		n, cm, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		ua, ok := from.(*net.UDPAddr)
		if !ok || cm == nil {
			continue
		}
		remote := ua.AddrPort()
		remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
		dst, _ := netip.AddrFromSlice(cm.Dst)
		local := netip.AddrPortFrom(dst.Unmap(), port)
		pkt := buf[:n]
		if port == 4500 {
			kind, body := ike.ClassifyNATT(pkt)
			switch kind {
			case ike.NATTESP:
				r.esp(body, local.Addr())
				continue
			case ike.NATTIKE:
				pkt = body
			default:
				continue
			}
		}
		// One spoke's messages go to one worker, in the order they came.
		h := local.Addr().As4()
		select {
		case r.ikeQueue[int(h[3])%len(r.ikeQueue)] <- datagram{append([]byte(nil), pkt...), local, remote}:
		default:
			r.queueDrops.Add(1) // the hub's retransmission comes again
		}
	}
}

type datagram struct {
	pkt           []byte
	local, remote netip.AddrPort
}

// ikeWorker runs the engine on the IKE that came to its share of the spokes.
func (r *run) ikeWorker(q <-chan datagram) {
	for d := range q {
		r.ep.HandleMessage(d.pkt, d.local, d.remote)
	}
}

// timers ticks the engine and repeats unanswered echo requests.
func (r *run) timers(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.ep.Tick()
			var due []*spoke
			r.mu.Lock()
			for _, s := range r.bySPI {
				if s.res.Answered == 0 && s.res.PingsSent < r.cfg.PingTries && !now.Before(s.nextPing) {
					due = append(due, s)
				}
			}
			r.mu.Unlock()
			for _, s := range due {
				r.ping(s)
			}
		}
	}
}

func (r *run) childUp(c ike.ChildUp) {
	r.mu.Lock()
	s := r.byPeer[c.Peer]
	r.mu.Unlock()
	if s == nil {
		c.In.Zero()
		c.Out.Zero()
		return
	}
	in, err := esp.NewSA(c.In, nil)
	if err != nil {
		r.fail(s, fmt.Errorf("inbound ESP SA: %w", err))
		return
	}
	out, err := esp.NewSA(c.Out, nil)
	if err != nil {
		in.Zero()
		r.fail(s, fmt.Errorf("outbound ESP SA: %w", err))
		return
	}
	if c.Out.EncapDstPort == 0 {
		r.fail(s, errors.New("the hub did not agree to UDP encapsulation; the generator sends ESP in UDP only"))
		return
	}
	r.mu.Lock()
	if s.in != nil {
		delete(r.bySPI, s.in.SPI)
		s.in.Zero()
		s.out.Zero()
	}
	s.in, s.out = in, out
	s.outEncapTo = netip.AddrPortFrom(c.Out.Dst, c.Out.EncapDstPort)
	r.bySPI[in.SPI] = s
	if s.res.Up == 0 {
		s.res.Up = time.Since(r.start)
	}
	r.mu.Unlock()
	r.ping(s)
}

func (r *run) ikeDown(sa *ike.IKESA, reason error) {
	if reason != nil {
		r.mu.Lock()
		s := r.byPeer[sa.Config()]
		r.mu.Unlock()
		if s != nil {
			r.fail(s, reason)
		}
	}
}

func (r *run) failure(peer *ike.PeerConfig, reason error) {
	r.mu.Lock()
	s := r.byPeer[peer]
	r.mu.Unlock()
	if s != nil {
		r.fail(s, reason)
	}
}

// fail records why a spoke did not get through and frees its place in the
// window; the spoke is not retried (a hub that refuses it is measured as
// such).
func (r *run) fail(s *spoke, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.res.Err = err
	if s.res.Answered == 0 {
		r.logf("spokes: %s: %v", s.ID, err)
	}
	r.release(s)
}

// release gives s's place in the window back; called with r.mu held.
func (r *run) release(s *spoke) {
	if s.inFlight {
		s.inFlight = false
		<-r.window
	}
}

// ping sends one ICMP echo request from the spoke's LAN address to the
// target through its CHILD_SA.
func (r *run) ping(s *spoke) {
	buf := make([]byte, esp.Headroom+echoLen+esp.Tailroom)
	r.mu.Lock()
	if s.res.Answered != 0 || s.out == nil {
		r.mu.Unlock()
		return
	}
	s.res.PingsSent++
	seq := uint16(s.res.PingsSent)
	s.nextPing = time.Now().Add(time.Second)
	out, to := s.out, s.outEncapTo
	r.mu.Unlock()
	writeEcho(buf[esp.Headroom:], s.LAN.Addr(), r.cfg.Target, uint16(s.index), seq)
	pkt, err := out.Encap(buf, esp.Headroom, echoLen)
	if err != nil {
		r.logf("spokes: %s: ESP encapsulation: %v", s.ID, err)
		return
	}
	if err := r.send(pkt, s.local[1], to); err != nil {
		r.logf("spokes: %s: send the echo request: %v", s.ID, err)
	}
}

// esp takes an ESP datagram that came to one spoke's address.
func (r *run) esp(pkt []byte, to netip.Addr) {
	spi := esp.SPIOf(pkt)
	r.mu.Lock()
	s := r.bySPI[spi]
	var in *esp.SA
	if s != nil && s.Addr == to {
		in = s.in
	}
	r.mu.Unlock()
	if in == nil {
		return
	}
	inner, err := in.Decap(pkt)
	if err != nil {
		return
	}
	if !isEchoReply(inner, r.cfg.Target, s.LAN.Addr(), uint16(s.index)) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.res.Answered != 0 {
		return
	}
	s.res.Answered = time.Since(r.start)
	r.release(s)
	if r.pending.Add(-1) == 0 {
		r.once.Do(func() { close(r.done) })
	}
}

// echoLen is the size of the echo request: IPv4 header, ICMP header and 56
// bytes of data, as ping sends.
const echoLen = 20 + 8 + 56

func writeEcho(b []byte, src, dst netip.Addr, id, seq uint16) {
	b = b[:echoLen]
	clear(b)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], echoLen)
	b[8] = 64 // TTL
	b[9] = 1  // ICMP
	s4, d4 := src.As4(), dst.As4()
	copy(b[12:16], s4[:])
	copy(b[16:20], d4[:])
	binary.BigEndian.PutUint16(b[10:], inetChecksum(b[:20]))
	icmp := b[20:]
	icmp[0] = 8 // echo request
	binary.BigEndian.PutUint16(icmp[4:], id)
	binary.BigEndian.PutUint16(icmp[6:], seq)
	for i := 8; i < len(icmp); i++ {
		icmp[i] = byte(i)
	}
	binary.BigEndian.PutUint16(icmp[2:], inetChecksum(icmp))
}

// isEchoReply reports whether pkt is the echo reply from target to dst
// with identifier id.
func isEchoReply(pkt []byte, target, dst netip.Addr, id uint16) bool {
	if len(pkt) < 28 || pkt[0]>>4 != 4 || pkt[9] != 1 {
		return false
	}
	hl := int(pkt[0]&0x0f) * 4
	if hl < 20 || len(pkt) < hl+8 {
		return false
	}
	src, _ := netip.AddrFromSlice(pkt[12:16])
	to, _ := netip.AddrFromSlice(pkt[16:20])
	icmp := pkt[hl:]
	return src == target && to == dst && icmp[0] == 0 && binary.BigEndian.Uint16(icmp[4:]) == id
}

func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
