package netd

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/internal/testnet"
)

// bigFirewall is a large branch-office box: 50 tunnels with two remote
// subnets each, 100 user rules and 20 port forwards.
func bigFirewall() *Firewall {
	fw := twoPortFirewall()
	for i := range 50 {
		fw.Tunnels = append(fw.Tunnels, Tunnel{Name: fmt.Sprintf("t%d", i),
			Peer: netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}),
			RemoteSubnets: []netip.Prefix{
				netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 24),
				netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 1, 0}), 24)}})
	}
	for i := range 100 {
		fw.Rules = append(fw.Rules, Rule{Name: fmt.Sprintf("r%d", i), Chain: ChainForward, In: RoleLAN, Protocol: "tcp",
			Destinations:     []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16, byte(i), 0}), 24)},
			DestinationPorts: []PortRange{{uint16(1000 + i), uint16(1000 + i)}}, Action: ActionDrop})
	}
	for i := range 20 {
		fw.PortForwards = append(fw.PortForwards, PortForward{Name: fmt.Sprintf("f%d", i), In: RoleWAN, Protocol: "tcp",
			External: PortRange{uint16(8000 + i), uint16(8000 + i)}, Destination: netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + i)})})
	}
	return &fw
}

// BenchmarkBuild measures the pure rule builder and the translation into
// nftables expressions for bigFirewall.
func BenchmarkBuild(b *testing.B) {
	fw := bigFirewall()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		specs := Build(fw)
		for _, s := range specs {
			if _, err := Exprs(s); err != nil {
				b.Fatal(err)
			}
		}
		n = len(specs)
	}
	b.ReportMetric(float64(n), "rules")
}

// BenchmarkApply measures one atomic replacement of the whole ruleset of
// bigFirewall in the kernel (in a namespace of its own).
func BenchmarkApply(b *testing.B) {
	testnet.RequireRoot(b)
	ns := testnet.NewNS(b, testnet.Prefix()+"-bench")
	fd, err := unix.Open("/run/netns/"+ns.Name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	nft := NewNFTables(nftables.WithNetNSFd(fd))
	specs := Build(bigFirewall())
	b.ReportAllocs()
	for b.Loop() {
		if err := nft.Apply(specs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(specs)), "rules")
}
