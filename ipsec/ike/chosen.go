package ike

import "sync"

// The proposals SAs run with are interned: every IKE SA and CHILD_SA
// points to one shared, never changed copy of its chosen proposal
// instead of holding a Proposal (128 bytes) and its four or five slices
// of one algorithm each. A hub's thousand branches mostly run one suite,
// so they share one (issue 22).
//
// What is interned is bounded by our configuration: a chosen proposal is
// one of ours (selectProposal picks from ours; what a peer chose in a
// response passes acceptable first), and only those with at most one
// algorithm of each type are, a small set of the algorithms this package
// knows.
var chosen struct {
	mu sync.RWMutex
	m  map[chosenKey]*Proposal
}

// chosenKey is a proposal with at most one algorithm per type: n holds
// how many of each (encryption, integrity, PRF, DH, ESN) it has, 0 or 1.
type chosenKey struct {
	proto ProtocolID
	n     [5]uint8
	encr  Encr
	integ uint16
	prf   uint16
	dh    DHGroup
	esn   uint16
}

func keyOf(p *Proposal) (chosenKey, bool) {
	if len(p.Encryption) > 1 || len(p.Integrity) > 1 || len(p.PRF) > 1 || len(p.DH) > 1 || len(p.ESN) > 1 {
		return chosenKey{}, false
	}
	k := chosenKey{proto: p.Protocol,
		n: [5]uint8{uint8(len(p.Encryption)), uint8(len(p.Integrity)), uint8(len(p.PRF)), uint8(len(p.DH)), uint8(len(p.ESN))}}
	if len(p.Encryption) == 1 {
		k.encr = p.Encryption[0]
	}
	if len(p.Integrity) == 1 {
		k.integ = p.Integrity[0]
	}
	if len(p.PRF) == 1 {
		k.prf = p.PRF[0]
	}
	if len(p.DH) == 1 {
		k.dh = p.DH[0]
	}
	if len(p.ESN) == 1 {
		k.esn = p.ESN[0]
	}
	return k, true
}

// internProposal is the shared copy of p, a chosen proposal. Its slices
// are its own (p's may alias a message or a configuration); nobody may
// change them. A proposal with several algorithms of a type is copied
// instead, unshared.
func internProposal(p Proposal) *Proposal {
	k, ok := keyOf(&p)
	if !ok {
		c := cloneProposal(p)
		return &c
	}
	chosen.mu.RLock()
	s := chosen.m[k]
	chosen.mu.RUnlock()
	if s != nil {
		return s
	}
	chosen.mu.Lock()
	defer chosen.mu.Unlock()
	if s = chosen.m[k]; s == nil {
		if chosen.m == nil {
			chosen.m = map[chosenKey]*Proposal{}
		}
		c := cloneProposal(p)
		s = &c
		chosen.m[k] = s
	}
	return s
}

// cloneProposal copies p's slices, keeping nil slices nil.
func cloneProposal(p Proposal) Proposal {
	p.Encryption = clip(p.Encryption)
	p.Integrity = clip(p.Integrity)
	p.PRF = clip(p.PRF)
	p.DH = clip(p.DH)
	p.ESN = clip(p.ESN)
	return p
}

func clip[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}
