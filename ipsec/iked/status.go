package iked

import (
	"fmt"
	"time"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/esp"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// Stats returns the daemon-wide counters.
func (d *Daemon) Stats() ikedapi.Stats {
	send, queue, natIKE := d.tr.Drops()
	s := ikedapi.Stats{DataPlane: d.dp.Name(), HalfOpen: d.ep.HalfOpen(), IKE: ikedapi.IKECounters(d.ep.Stats.Snapshot()),
		SendDrops: send, NATIKEDrops: natIKE, QueueDrops: queue}
	if dev, ok := d.dp.(interface {
		CounterSnapshot() esp.DeviceCounterSnapshot
	}); ok {
		c := ikedapi.ESPCounters(dev.CounterSnapshot())
		s.ESP = &c
	}
	return s
}

// Status reports every configured tunnel, sorted by name.
func (d *Daemon) Status() []ipsec.TunnelStatus {
	out, _ := d.StatusPage(ikedapi.TunnelQuery{})
	return out
}

// StatusPage reports the tunnels q selects, sorted by name, and how many
// matched before q's offset and limit. Only the tunnels on the page are
// asked for their SAs and counters: a head office's thousand tunnels cost
// a listing only when all of them are asked for.
func (d *Daemon) StatusPage(q ikedapi.TunnelQuery) ([]ipsec.TunnelStatus, int) {
	d.mu.Lock()
	type snap struct {
		t    ipsec.TunnelStatus
		sa   *ike.IKESA
		gone ipsec.SAStats
		alg  string
	}
	var snaps []snap
	matched := 0
	for _, t := range d.sortedTunnels() {
		remote := ""
		if t.peer != nil && t.peer.Remote.IsValid() {
			remote = t.peer.Remote.String()
		}
		if !q.Matches(t.cfg.Name, t.state, remote, t.statusReason()) {
			continue
		}
		matched++
		if matched <= q.Offset || q.Limit > 0 && matched > q.Offset+q.Limit {
			continue
		}
		s := ipsec.TunnelStatus{
			Name: t.cfg.Name, State: t.state, Reason: t.statusReason(), Since: t.since,
			DataPlane: d.dp.Name(),
			Events:    t.history(), EventsTotal: t.eventsTotal,
		}
		if t.cfg.IsRoute() {
			s.Interface = t.cfg.Interface
		}
		for _, w := range t.cfg.WeakProposals() {
			s.Weak = append(s.Weak, w.Kind+" "+w.Proposal+": "+w.Algorithms())
		}
		if t.peer != nil {
			s.LocalAddr = t.peer.Local.Addr().String()
			if t.peer.Remote.IsValid() {
				s.RemoteAddr = t.peer.Remote.String()
			}
		}
		snaps = append(snaps, snap{t: s, sa: t.sa})
	}
	d.mu.Unlock()

	now := d.now()
	drivers := map[string]string{} // by ESP proposal: DriverFor reads /proc/crypto
	driverFor := func(proposal string) string {
		drv, ok := drivers[proposal]
		if !ok {
			drv = d.driverFor(proposal)
			drivers[proposal] = drv
		}
		return drv
	}
	out := make([]ipsec.TunnelStatus, 0, len(snaps))
	for _, sn := range snaps {
		s := sn.t
		if sn.sa != nil {
			st := sn.sa.Status()
			s.RemoteAddr = st.Remote.String()
			if st.State == ike.StateEstablished || st.State == ike.StateRekeyed {
				s.IKE = &ipsec.IKESAStatus{
					InitiatorSPI: fmt.Sprintf("%016x", st.SPIi),
					ResponderSPI: fmt.Sprintf("%016x", st.SPIr),
					Initiator:    st.Initiator,
					Proposal:     st.Proposal,
					NATT:         st.Remote.Port() != 500,
					Established:  st.Established,
					RekeyIn:      until(now, st.RekeyAt),
				}
			}
			for _, c := range st.Children {
				in, _ := d.dp.Stats(c.InSPI)
				outStats, _ := d.dp.Stats(c.OutSPI)
				cs := ipsec.ChildSAStatus{
					InboundSPI: fmt.Sprintf("%08x", c.InSPI), OutboundSPI: fmt.Sprintf("%08x", c.OutSPI),
					Proposal: c.Proposal, LocalTS: strs(c.LocalTS), RemoteTS: strs(c.RemoteTS),
					BytesIn: in.Bytes, PacketsIn: in.Packets, BytesOut: outStats.Bytes, PacketsOut: outStats.Packets,
					Drops:       in.ReplayDrops + in.AuthFailures,
					Established: c.Established, RekeyIn: until(now, c.RekeyAt),
				}
				s.Children = append(s.Children, cs)
				if s.Driver == "" {
					s.Driver = driverFor(c.Proposal)
				}
			}
		}
		out = append(out, s)
	}
	return out, matched
}

// Counters reports every configured tunnel's CHILD_SA byte counters,
// sorted by name, and nothing else: the web UI's throughput sampler reads
// them every 5 s while someone is logged in, and a full StatusPage of a
// thousand tunnels builds strings and copies it would throw away.
func (d *Daemon) Counters() []ikedapi.TunnelCounters {
	d.mu.Lock()
	tunnels := d.sortedTunnels()
	out := make([]ikedapi.TunnelCounters, len(tunnels))
	sas := make([]*ike.IKESA, len(tunnels))
	for i, t := range tunnels {
		out[i].Name, sas[i] = t.cfg.Name, t.sa
	}
	d.mu.Unlock()

	var spis []ike.ChildSPIs
	for i, sa := range sas {
		if sa == nil {
			continue
		}
		spis = sa.AppendChildSPIs(spis[:0])
		for _, p := range spis {
			in, _ := d.dp.Stats(p.In)
			outStats, _ := d.dp.Stats(p.Out)
			out[i].Children = append(out[i].Children, ikedapi.ChildCounters{InboundSPI: p.In, BytesIn: in.Bytes, BytesOut: outStats.Bytes})
		}
	}
	return out
}

// driverFor names what does the ESP crypto of a CHILD_SA with the given
// ESP proposal: the kernel's driver (from /proc/crypto) for XFRM, Go's
// implementation for userspace ESP.
func (d *Daemon) driverFor(proposal string) string {
	switch d.dp.Name() {
	case "userspace":
		return "go (userspace ESP)"
	case "xfrm":
	default:
		return "" // a twin of tests
	}
	p, err := ike.ParseProposal(ike.ProtoESP, proposal)
	if err != nil {
		return ""
	}
	tr, err := p.ESPTransform()
	if err != nil {
		return ""
	}
	drv, err := hwcrypto.DriverFor(hwcrypto.KernelAlgorithm(tr.Encryption, tr.Integrity))
	if err != nil {
		return ""
	}
	return drv
}

func until(now, t time.Time) time.Duration {
	if t.IsZero() || t.Before(now) {
		return 0
	}
	return t.Sub(now).Round(time.Second)
}

func strs[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
