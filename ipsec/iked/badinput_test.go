package iked

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/ike"
	"golang.org/x/sys/unix"
)

// floodSources is how many distinct source addresses the flood comes from.
const floodSources = 1000

// flooder sends datagrams to gwA from many addresses of 10.99.0.0/16: a
// namespace on its own link to gwA whose sockets bind and send from
// addresses it does not own (IP_TRANSPARENT), so that no address has to be
// configured.
type flooder struct {
	socks []*net.UDPConn
}

func newFlooder(t testing.TB, s *testnet.SiteToSite) *flooder {
	t.Helper()
	fl := testnet.NewNS(t, testnet.Prefix()+"-fl")
	testnet.Link(t, s.GwA, "flood0", "10.99.0.1/16", fl, "flood0", "10.99.0.2/16")
	f := &flooder{}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1) })
		return errors.Join(err, serr)
	}}
	err := fl.Do(func() error {
		for i := range floodSources {
			src := netip.AddrFrom4([4]byte{10, 99, byte(1 + i/250), byte(1 + i%250)})
			c, err := lc.ListenPacket(context.Background(), "udp4", netip.AddrPortFrom(src, 500).String())
			if err != nil {
				return fmt.Errorf("bind %v: %w", src, err)
			}
			f.socks = append(f.socks, c.(*net.UDPConn))
		}
		return nil
	})
	t.Cleanup(func() {
		for _, c := range f.socks {
			c.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// send sends pkt from source i to gwA's port, pacing so that the kernel's
// socket buffers, not the flood's shape, are what limit delivery.
func (f *flooder) send(i int, pkt []byte, port uint16) error {
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("10.99.0.1"), port))
	if _, err := f.socks[i%len(f.socks)].WriteToUDP(pkt, dst); err != nil && !isTransient(err) {
		return err
	}
	if i%32 == 31 {
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// isTransient: a full socket buffer or an ICMP error from an earlier
// datagram is part of flooding, not a failure of the test.
func isTransient(err error) bool {
	return errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ECONNREFUSED)
}

// initRequest builds a well-formed IKE_SA_INIT request offering the
// roadwarrior tunnel's proposal with a valid ECP-256 public key, so each
// one costs us a real half-open SA (or a COOKIE once they pile up).
func initRequest(t testing.TB, pub []byte) []byte {
	t.Helper()
	prop, err := ike.ParseProposal(ike.ProtoIKE, lifecycleIKE)
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, 32)
	rand.Read(nonce)
	m := &ike.Message{
		Header:   ike.Header{SPIi: mrand.Uint64() | 1, Version: ike.Version, Exchange: ike.IKE_SA_INIT, Flags: ike.FlagInitiator},
		Payloads: []ike.Payload{&ike.SA{Proposals: []ike.WireProposal{prop.ToWire(1, nil)}}, &ike.KE{Group: ike.ECP256, Data: pub}, &ike.Nonce{Data: nonce}},
	}
	return m.Encode()
}

// TestBadInput: while a tunnel to strongSwan carries traffic, gwA's IKE
// ports get a flood: well-formed IKE_SA_INIT from 1000 addresses (a
// tunnel accepting any peer makes each one a candidate half-open SA),
// replays of one of them, random bytes, truncated messages, oversized
// datagrams, and junk on the NAT-T port. Everything must be dropped and
// counted, half-open SAs held down by COOKIEs, memory bounded, and the
// tunnel must keep its SAs and keep passing traffic.
func TestBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	testnet.StartCharon(t, s.GwB, charonConn(s, lifecycleIKE, lifecycleESP, "none"))
	s2s := tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartInitiate)
	rw := config.NewTunnel("roadwarrior")
	rw.LocalID = "gwA"
	rw.PSK = config.NewSecret(testPSK)
	rw.IKEProposals, rw.ESPProposals = []string{lifecycleIKE}, []string{lifecycleESP}
	rw.LocalSubnets = []config.Prefix{config.MustPrefix(s.LANA.String())}
	rw.RemoteSubnets = []config.Prefix{config.MustPrefix("10.98.0.0/16")}
	rw.StartAction = config.StartRespond
	validTunnels(t, s2s, rw)
	d := startIked(t, s.GwA, s2s, rw)
	before := waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatal(err)
	}
	f := newFlooder(t, s)

	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.PublicKey().Bytes()[1:] // x||y without the 0x04 prefix
	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	stats0 := d.Stats()

	// Ping through the tunnel for the whole flood.
	pingErr := make(chan error, 1)
	go func() { pingErr <- testnet.Ping(s.HostA, s.HostBIP, 15) }()

	rnd := mrand.New(mrand.NewPCG(1, 2))
	sent := map[string]int{}
	send := func(kind string, i int, pkt []byte, port uint16) {
		if err := f.send(i, pkt, port); err != nil {
			t.Fatalf("flood (%s): %v", kind, err)
		}
		sent[kind]++
	}
	valid := initRequest(t, pub)
	start := time.Now()
	for i := range 4000 {
		send("init", i, initRequest(t, pub), 500)
	}
	for range 200 {
		send("replay", 7, valid, 500)
	}
	for i := range 1000 {
		junk := make([]byte, rnd.IntN(1500))
		for j := range junk {
			junk[j] = byte(rnd.Uint32())
		}
		send("junk", i, junk, 500)
	}
	for i := range 1000 {
		send("truncated", i, valid[:rnd.IntN(len(valid))], 500)
	}
	big := make([]byte, 65000)
	copy(big, valid)
	binary.BigEndian.PutUint32(big[24:], uint32(len(big))) // header claims it all
	for i := range 20 {
		send("oversized", i, big, 500)
	}
	for i := range 1000 {
		esp := make([]byte, 16+rnd.IntN(200))
		binary.BigEndian.PutUint32(esp, rnd.Uint32()|1) // an SPI we never gave out
		send("esp", i, esp, 4500)
	}
	for i := range 500 {
		pkt := append([]byte{0, 0, 0, 0}, valid[:rnd.IntN(len(valid))]...) // non-ESP marker, broken IKE
		send("natt-ike", i, pkt, 4500)
	}
	floodTime := time.Since(start)

	// Let the daemon drain its sockets, then compare.
	time.Sleep(500 * time.Millisecond)
	stats := d.Stats()
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	t.Logf("flood of %v datagrams in %v", sent, floodTime.Round(time.Millisecond))
	t.Logf("engine before: %+v", stats0.IKE)
	t.Logf("engine after:  %+v, half-open %d", stats.IKE, stats.HalfOpen)
	t.Logf("ESP device after: %+v; IKE sends dropped %d, NAT-T IKE queue drops %d", *stats.ESP, stats.SendDrops, stats.NATIKEDrops)
	t.Logf("heap in use %d KiB -> %d KiB", ms0.HeapInuse>>10, ms1.HeapInuse>>10)

	delta := func(a, b uint64) uint64 { return b - a }
	to500 := uint64(sent["init"] + sent["replay"] + sent["junk"] + sent["truncated"] + sent["oversized"])
	// All of them, unless the reader stalls (it did, blocked sending
	// answers to the spoofed addresses, until sends stopped waiting).
	if got := delta(stats0.IKE.Received, stats.IKE.Received); got < to500*9/10 {
		t.Errorf("the engine saw %d of the %d datagrams sent to port 500", got, to500)
	}
	// Truncated IKE_SA_INIT and junk could by chance decode; the
	// oversized ones (a valid message padded to 65000 bytes) must not.
	bad := sent["junk"] + sent["truncated"] + sent["oversized"] + sent["natt-ike"]
	if got, want := delta(stats0.IKE.Malformed, stats.IKE.Malformed), uint64(bad)*95/100; got < want {
		t.Errorf("%d counted malformed, want at least %d (of %d junk, truncated, oversized)", got, want, bad)
	}
	if delta(stats0.IKE.CookiesSent, stats.IKE.CookiesSent) == 0 {
		t.Errorf("no COOKIE was sent during a flood of %d IKE_SA_INIT", sent["init"])
	}
	if stats.HalfOpen > 128 {
		t.Errorf("%d half-open SAs after the flood: COOKIEs should hold them near 64", stats.HalfOpen)
	}
	if got := delta(0, stats.ESP.UnknownSPI) + delta(0, stats.ESP.Truncated); got < uint64(sent["esp"])*9/10 {
		t.Errorf("ESP with unknown SPIs: %d counted, %d sent", got, sent["esp"])
	}
	if grew := int64(ms1.HeapInuse) - int64(ms0.HeapInuse); grew > 16<<20 {
		t.Errorf("heap grew by %d KiB during the flood, want under 16 MiB", grew>>10)
	}
	if err := <-pingErr; err != nil {
		t.Errorf("ping through the tunnel during the flood: %v", err)
	}
	after := waitState(t, d, "s2s", ipsec.StateUp, time.Second)
	if after.IKE == nil || after.IKE.InitiatorSPI != before.IKE.InitiatorSPI || len(after.Children) != 1 ||
		after.Children[0].InboundSPI != before.Children[0].InboundSPI {
		t.Errorf("the tunnel's SAs changed during the flood: before %+v %+v, after %+v %+v", before.IKE, before.Children, after.IKE, after.Children)
	}
	if err := tcpCopy(s, 1<<20, 10*time.Second); err != nil {
		t.Errorf("TCP through the tunnel after the flood: %v", err)
	}
}
