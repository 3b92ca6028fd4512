package ike

import (
	"net/netip"
	"time"
)

// SAStatus is a snapshot of an IKE SA for status displays (the shape of
// swanctl --list-sas).
type SAStatus struct {
	Name          string
	State         State
	Initiator     bool
	Local, Remote netip.AddrPort
	SPIi, SPIr    uint64
	Proposal      string
	NATLocal      bool
	NATRemote     bool
	Established   time.Time
	RekeyAt       time.Time
	Children      []ChildStatus
	LastError     string
}

// ChildStatus is a snapshot of one CHILD_SA pair.
type ChildStatus struct {
	ReqID             uint32
	InSPI, OutSPI     uint32
	Proposal          string
	LocalTS, RemoteTS []netip.Prefix
	Established       time.Time
	RekeyAt           time.Time
	Encap             bool
}

// Status returns a snapshot of the SA.
func (sa *IKESA) Status() SAStatus {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	now := sa.ep.now()
	s := SAStatus{Name: sa.cfg.Name, State: sa.state, Initiator: sa.initiator, Local: sa.local, Remote: sa.remote,
		SPIi: sa.spiI, SPIr: sa.spiR, NATLocal: sa.natLocal, NATRemote: sa.natRemote,
		Established: sa.established.wall(now), RekeyAt: sa.rekeyAt.wall(now)}
	if sa.prop != nil && len(sa.prop.Encryption) > 0 {
		s.Proposal = sa.prop.String()
	}
	if sa.lastErr != nil {
		s.LastError = sa.lastErr.Error()
	}
	for _, c := range sa.children {
		s.Children = append(s.Children, ChildStatus{ReqID: c.reqID, InSPI: c.inSPI, OutSPI: c.outSPI, Proposal: c.prop.String(),
			LocalTS: prefixesOf(c.localTS), RemoteTS: prefixesOf(c.remoteTS), Established: c.established.wall(now), RekeyAt: c.rekeyAt.wall(now),
			Encap: sa.encapESP()})
	}
	return s
}

// ChildSPIs are a CHILD_SA pair's inbound and outbound SPIs.
type ChildSPIs struct{ In, Out uint32 }

// AppendChildSPIs appends the SPIs of the SA's CHILD_SAs to dst: what a
// reader of the data plane's counters needs, without the rest of a Status.
func (sa *IKESA) AppendChildSPIs(dst []ChildSPIs) []ChildSPIs {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	for _, c := range sa.children {
		dst = append(dst, ChildSPIs{c.inSPI, c.outSPI})
	}
	return dst
}

// State returns the SA's state.
func (sa *IKESA) State() State {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	return sa.state
}
