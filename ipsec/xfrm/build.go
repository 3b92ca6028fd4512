package xfrm

import (
	"fmt"
	"net/netip"

	"github.com/flashgate/flashgate/ipsec"
)

// state is one kernel SA as we install it.
type state struct {
	Src, Dst                   netip.Addr
	SPI, ReqID                 uint32
	AEAD, Crypt, Auth          *algorithm
	EncapSrcPort, EncapDstPort uint16
	ReplayWindow               uint32 // packets; 0 for outbound SAs
	SoftBytes, HardBytes       uint64 // 0 = no limit
	SoftSeconds, HardSeconds   uint64 // 0 = no limit
	Seq                        uint32 // of the acquire this SA answers, 0 for none
	IfID                       uint32 // XFRM interface (route tunnels), 0 for none
}

// policy is one kernel policy with its single ESP tunnel template.
type policy struct {
	Sel              selector
	Dir              uint8
	Priority         uint32
	TmplSrc, TmplDst netip.Addr
	ReqID            uint32
	IfID             uint32 // XFRM interface (route tunnels), 0 for none
}

// minReplayWindow is the smallest anti-replay window we install on inbound
// SAs; RFC 4303 recommends 64, ours must absorb reordering from multi-queue
// NICs and the userspace plane's workers on the peer.
const minReplayWindow = 1024

// buildState maps one direction of a CHILD_SA to a kernel SA.
func buildState(c *ipsec.ChildSA) (*state, error) {
	if c.SPI == 0 {
		return nil, fmt.Errorf("SA with SPI 0")
	}
	if !c.Src.IsValid() || !c.Dst.IsValid() || c.Src.Is4() != c.Dst.Is4() {
		return nil, fmt.Errorf("SA %08x: outer addresses %v -> %v", c.SPI, c.Src, c.Dst)
	}
	if (c.EncapSrcPort == 0) != (c.EncapDstPort == 0) {
		return nil, fmt.Errorf("SA %08x: UDP encapsulation needs both ports, got %d -> %d", c.SPI, c.EncapSrcPort, c.EncapDstPort)
	}
	aead, crypt, auth, err := algorithms(c.Transform, c.EncKey, c.IntegKey)
	if err != nil {
		return nil, fmt.Errorf("SA %08x: %w", c.SPI, err)
	}
	st := &state{
		Src: c.Src.Unmap(), Dst: c.Dst.Unmap(),
		SPI: c.SPI, ReqID: c.ReqID, IfID: c.IfID,
		AEAD: aead, Crypt: crypt, Auth: auth,
		EncapSrcPort: c.EncapSrcPort, EncapDstPort: c.EncapDstPort,
		SoftBytes: c.SoftBytes, HardBytes: c.HardBytes,
		SoftSeconds: seconds(c.SoftLifetime.Seconds()), HardSeconds: seconds(c.HardLifetime.Seconds()),
	}
	if c.Inbound {
		st.ReplayWindow = max(c.ReplayWindow, minReplayWindow)
		st.ReplayWindow = min(st.ReplayWindow, replayWindowMax)
	}
	if st.HardSeconds != 0 && st.SoftSeconds >= st.HardSeconds {
		return nil, fmt.Errorf("SA %08x: soft lifetime %v not before hard lifetime %v", c.SPI, c.SoftLifetime, c.HardLifetime)
	}
	if st.HardBytes != 0 && st.SoftBytes >= st.HardBytes {
		return nil, fmt.Errorf("SA %08x: soft byte limit %d not below hard limit %d", c.SPI, c.SoftBytes, c.HardBytes)
	}
	return st, nil
}

func seconds(s float64) uint64 {
	if s <= 0 {
		return 0
	}
	return uint64(s + 0.5)
}

// policyPriority prefers narrower selectors, like the kernel's own longest
// match would if priorities were equal (lower value = tried first).
func policyPriority(sel selector) uint32 {
	return 0x4000 - uint32(sel.Src.Bits()+sel.Dst.Bits())
}

// buildPolicies returns the out, in and fwd policies that steer the
// traffic between in's and out's selectors through the pair: out from
// LocalTS to RemoteTS into the outbound SA, in and fwd (traffic for this box
// and for hosts behind it) from RemoteTS to LocalTS, required to have come
// through the inbound SA. Each pair of selectors of one family gets a set.
func buildPolicies(in, out *ipsec.ChildSA) ([]policy, error) {
	if in.ReqID != out.ReqID {
		return nil, fmt.Errorf("pair %08x/%08x: reqids differ (%d, %d)", in.SPI, out.SPI, in.ReqID, out.ReqID)
	}
	if in.IfID != out.IfID {
		return nil, fmt.Errorf("pair %08x/%08x: if_ids differ (%d, %d)", in.SPI, out.SPI, in.IfID, out.IfID)
	}
	if len(out.LocalTS) == 0 || len(out.RemoteTS) == 0 {
		return nil, fmt.Errorf("pair %08x/%08x: no traffic selectors", in.SPI, out.SPI)
	}
	var ps []policy
	for _, l := range out.LocalTS {
		for _, r := range out.RemoteTS {
			l, r := l.Masked(), r.Masked()
			if l.Addr().Is4() != r.Addr().Is4() {
				continue
			}
			outSel := selector{Src: l, Dst: r}
			inSel := selector{Src: r, Dst: l}
			ps = append(ps,
				policy{Sel: outSel, Dir: policyOut, Priority: policyPriority(outSel), TmplSrc: out.Src.Unmap(), TmplDst: out.Dst.Unmap(), ReqID: out.ReqID, IfID: out.IfID},
				policy{Sel: inSel, Dir: policyIn, Priority: policyPriority(inSel), TmplSrc: in.Src.Unmap(), TmplDst: in.Dst.Unmap(), ReqID: in.ReqID, IfID: in.IfID},
				policy{Sel: inSel, Dir: policyFwd, Priority: policyPriority(inSel), TmplSrc: in.Src.Unmap(), TmplDst: in.Dst.Unmap(), ReqID: in.ReqID, IfID: in.IfID},
			)
		}
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("pair %08x/%08x: local %v and remote %v share no address family", in.SPI, out.SPI, out.LocalTS, out.RemoteTS)
	}
	return ps, nil
}
