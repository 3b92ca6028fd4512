package ike

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Reason classifies why an SA failed or went away, for the tunnel status.
type Reason int

const (
	ReasonNoProposalChosen Reason = iota + 1
	ReasonAuthenticationFailed
	ReasonTSUnacceptable
	ReasonPeerTimeout
	ReasonPeerDeleted
	ReasonPeerRestarted
	ReasonProtocol // any other error notify or malformed exchange
	// ReasonWrongVersion: the peer speaks the other IKE version than the
	// tunnel is set to.
	ReasonWrongVersion
)

func (r Reason) String() string {
	switch r {
	case ReasonNoProposalChosen:
		return "NO_PROPOSAL_CHOSEN"
	case ReasonAuthenticationFailed:
		return "AUTHENTICATION_FAILED"
	case ReasonTSUnacceptable:
		return "TS_UNACCEPTABLE"
	case ReasonPeerTimeout:
		return "PEER_TIMEOUT"
	case ReasonPeerDeleted:
		return "PEER_DELETED"
	case ReasonPeerRestarted:
		return "PEER_RESTARTED"
	case ReasonProtocol:
		return "PROTOCOL_ERROR"
	case ReasonWrongVersion:
		return "IKE_VERSION_MISMATCH"
	}
	return "UNKNOWN"
}

// Failure is a failed negotiation or a lost SA, with what is needed to say
// in plain words what went wrong. ByPeer is true when the peer reported it
// in a notify, false when we decided it.
type Failure struct {
	Reason   Reason
	ByPeer   bool
	Peer     netip.AddrPort
	Exchange ExchangeType
	Notify   NotifyType // the notify received or sent, if any

	OurProposals, PeerProposals []Proposal

	// Traffic selectors from our point of view: what we are configured
	// with and (when we are the responder) what the peer proposed for its
	// side (PeerLocalTS) and ours (PeerRemoteTS).
	OurLocalTS, OurRemoteTS   []Selector
	PeerLocalTS, PeerRemoteTS []Selector

	// Stage names the IKEv1 exchange or message in words ("main mode
	// message 5", "quick mode 10.1.0.0/24 to 10.2.0.0/24"); it replaces
	// Exchange in the text when set.
	Stage string

	Tries int
	After time.Duration

	// OurAuth is how we authenticated, for AUTHENTICATION_FAILED from the peer.
	OurAuth AuthKind

	Detail string
}

func (f *Failure) exchange() string {
	if f.Stage != "" {
		return f.Stage
	}
	return f.Exchange.String()
}

func (f *Failure) Error() string {
	switch f.Reason {
	case ReasonWrongVersion:
		return fmt.Sprintf("peer %v: %s", f.Peer, f.Detail)
	case ReasonNoProposalChosen:
		if f.ByPeer {
			return fmt.Sprintf("peer %v answered NO_PROPOSAL_CHOSEN to %v: we offered %s", f.Peer, f.exchange(), ProposalsString(f.OurProposals))
		}
		msg := fmt.Sprintf("NO_PROPOSAL_CHOSEN in %v from %v: peer offered %s, we accept %s", f.exchange(), f.Peer, ProposalsString(f.PeerProposals), ProposalsString(f.OurProposals))
		if f.Stage != "" && f.Detail != "" {
			msg += " (" + f.Detail + ")"
		}
		return msg
	case ReasonAuthenticationFailed:
		if f.ByPeer {
			if f.OurAuth == AuthByCert {
				return fmt.Sprintf("peer %v answered AUTHENTICATION_FAILED: it rejected our certificate, its CA, our signature scheme or our identity (%s)", f.Peer, f.Detail)
			}
			return fmt.Sprintf("peer %v answered AUTHENTICATION_FAILED: it rejected our pre-shared key or our identity (%s)", f.Peer, f.Detail)
		}
		return fmt.Sprintf("AUTHENTICATION_FAILED for peer %v: %s", f.Peer, f.Detail)
	case ReasonTSUnacceptable:
		if f.ByPeer {
			return fmt.Sprintf("peer %v answered TS_UNACCEPTABLE to %v: we proposed local %s, remote %s", f.Peer, f.exchange(),
				selectorsString(f.OurLocalTS), selectorsString(f.OurRemoteTS))
		}
		return fmt.Sprintf("TS_UNACCEPTABLE in %v from %v: peer proposed its side %s and ours %s; we are configured with local %s, remote %s",
			f.exchange(), f.Peer, selectorsString(f.PeerLocalTS), selectorsString(f.PeerRemoteTS), selectorsString(f.OurLocalTS), selectorsString(f.OurRemoteTS))
	case ReasonPeerTimeout:
		return fmt.Sprintf("no answer from peer %v to %v after %d tries in %v", f.Peer, f.exchange(), f.Tries, f.After.Round(time.Millisecond))
	case ReasonPeerDeleted:
		return fmt.Sprintf("peer %v deleted the %s", f.Peer, f.Detail)
	case ReasonPeerRestarted:
		return fmt.Sprintf("peer %v restarted (it sent INITIAL_CONTACT on a new IKE SA)", f.Peer)
	}
	if f.ByPeer {
		return fmt.Sprintf("peer %v answered %v to %v: %s", f.Peer, f.Notify, f.exchange(), f.Detail)
	}
	return fmt.Sprintf("%v with %v failed: %s", f.exchange(), f.Peer, f.Detail)
}

// DeadPeer reports whether the failure is dead peer detection giving up:
// IKEv2's liveness check or IKEv1's R-U-THERE (RFC 3706) unanswered.
func (f *Failure) DeadPeer() bool {
	return f.Reason == ReasonPeerTimeout && (f.Exchange == INFORMATIONAL || strings.HasPrefix(f.Stage, "DPD"))
}
