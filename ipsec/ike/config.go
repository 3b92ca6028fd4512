package ike

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Identity is an IKE identity (the content of IDi/IDr).
type Identity struct {
	Type IDType
	Data []byte
}

// ParseIdentity reads an identity the way strongSwan does: an IP address is
// ID_IPV4_ADDR/ID_IPV6_ADDR, "C=CH, O=Example, CN=gw" is ID_DER_ASN1_DN,
// "user@host" is ID_RFC822_ADDR, "@name" forces ID_FQDN, "@#hex" is
// ID_KEY_ID, anything else is ID_FQDN.
func ParseIdentity(s string) (Identity, error) {
	if s == "" {
		return Identity{}, fmt.Errorf("empty identity")
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Is4() {
			return Identity{IDIPv4, a.AsSlice()}, nil
		}
		return Identity{IDIPv6, a.AsSlice()}, nil
	}
	if looksLikeDN(s) {
		der, err := parseDN(s)
		if err != nil {
			return Identity{}, err
		}
		return Identity{IDDERDN, der}, nil
	}
	if strings.HasPrefix(s, "@#") {
		var b []byte
		if _, err := fmt.Sscanf(s[2:], "%x", &b); err != nil {
			return Identity{}, fmt.Errorf("identity %q: bad key id: %w", s, err)
		}
		return Identity{IDKeyID, b}, nil
	}
	if strings.HasPrefix(s, "@") {
		return Identity{IDFQDN, []byte(s[1:])}, nil
	}
	if strings.Contains(s, "@") {
		return Identity{IDRFC822, []byte(s)}, nil
	}
	return Identity{IDFQDN, []byte(s)}, nil
}

func (id Identity) String() string {
	switch id.Type {
	case IDIPv4, IDIPv6:
		if a, ok := netip.AddrFromSlice(id.Data); ok {
			return a.String()
		}
	case IDFQDN, IDRFC822:
		return string(id.Data)
	case IDKeyID:
		return fmt.Sprintf("@#%x", id.Data)
	case IDDERDN:
		if s := dnString(id.Data); s != "" {
			return s
		}
	}
	return fmt.Sprintf("id(%d:%x)", id.Type, id.Data)
}

// CertIdentity is the identity a certificate's subject DN gives: what we
// call ourselves when a tunnel authenticates with a certificate and sets no
// local_id (strongSwan does the same).
func CertIdentity(c *x509.Certificate) Identity {
	return Identity{IDDERDN, c.RawSubject}
}

// IsZero reports whether no identity is set.
func (id Identity) IsZero() bool { return id.Type == 0 && len(id.Data) == 0 }

func (id Identity) equal(p *ID) bool {
	if p != nil && p.IDType == IDDERDN && id.Type == IDDERDN {
		return dnEqual(p.Data, id.Data)
	}
	return p != nil && p.IDType == id.Type && bytes.Equal(p.Data, id.Data)
}

func (id Identity) payload(responder bool) *ID {
	return &ID{Responder: responder, IDType: id.Type, Data: id.Data}
}

// PeerConfig is one tunnel: who the peer is, how to authenticate, what to
// offer and accept, and the timers. The engine never modifies it; give a
// changed tunnel a new PeerConfig.
type PeerConfig struct {
	Name string

	// Version is the IKE version: 2 (also when 0) or 1 (IKEv1 main mode
	// with a pre-shared key, then quick mode per selector pair).
	Version int

	// Local is our address and IKE port (500); Remote is the peer's.
	Local, Remote netip.AddrPort
	// RemoteNATTPort is the peer's NAT-T port we float to (default 4500).
	RemoteNATTPort uint16

	LocalID, RemoteID Identity // RemoteID zero: accept any identity (with a certificate: any it vouches for)
	PSK               []byte

	// LocalAuth is how we authenticate, RemoteAuth how the peer must: a
	// pre-shared key (the zero value) or a certificate signature. They may
	// differ (strongSwan's local/remote auth).
	LocalAuth, RemoteAuth AuthKind
	// LocalCert is our certificate and key, for LocalAuth = AuthByCert.
	// LocalID zero then means the certificate's subject DN.
	LocalCert *Credential
	// SignRSAPSS signs with RSASSA-PSS rather than PKCS#1 v1.5 when our key
	// is RSA and the peer supports RFC 7427 (strongSwan's rsa_pss = yes).
	SignRSAPSS bool
	// TrustedCAs are the CAs the peer's certificate must chain to (for
	// RemoteAuth = AuthByCert); CRLs the admin's revocation lists.
	TrustedCAs []*x509.Certificate
	CRLs       []*x509.RevocationList

	IKEProposals, ESPProposals []Proposal // empty: the defaults
	Ranking                    Ranking    // nil: configured order

	LocalTS, RemoteTS []netip.Prefix

	// ForceEncap sends ESP in UDP even without a NAT, by faking our NAT
	// detection hash (strongSwan's encap = yes).
	ForceEncap bool

	// IKELifetime and ChildLifetime are the times after which the SAs are
	// rekeyed (minus up to 10% jitter); 0 disables rekeying.
	IKELifetime, ChildLifetime time.Duration
	// DPDDelay is the idle time after which we check the peer is alive; 0 = never.
	DPDDelay time.Duration
	// KeepaliveInterval is the NAT keepalive interval when we are behind a NAT.
	KeepaliveInterval time.Duration
	// RetransmitTimeout is the first retransmission timeout, doubled each
	// time, and RetransmitTries how many times a request is sent in all.
	RetransmitTimeout time.Duration
	RetransmitTries   int

	ReplayWindow uint32

	// FragmentSize is the IP datagram size IKE fragments fill (RFC 7383),
	// when the peer supports them and a message is larger; 0 means
	// DefaultFragmentSize (1280, which fits any IPv6 path).
	FragmentSize int
}

// localID is who we say we are: LocalID, or our certificate's subject.
func (c *PeerConfig) localID() Identity {
	if c.LocalID.IsZero() && c.LocalAuth == AuthByCert && c.LocalCert != nil {
		return CertIdentity(c.LocalCert.Cert)
	}
	return c.LocalID
}

// usesCerts says whether either side authenticates with a certificate.
func (c *PeerConfig) usesCerts() bool { return c.LocalAuth == AuthByCert || c.RemoteAuth == AuthByCert }

// ikeProposals and espProposals are what we offer and accept, in our
// order of preference. Without a Ranking they are the configured slices
// themselves (or the defaults, parsed once), shared by every SA of the
// peer: read-only, a caller that needs to change one copies it. A Ranking
// is applied per call; Rank applies it once for a config many SAs share.
func (c *PeerConfig) ikeProposals() []Proposal {
	return c.proposals(c.IKEProposals, defaultIKE)
}

func (c *PeerConfig) espProposals() []Proposal {
	return c.proposals(c.ESPProposals, defaultESP)
}

func (c *PeerConfig) proposals(configured []Proposal, defaults func() []Proposal) []Proposal {
	p := configured
	if len(p) == 0 {
		p = defaults()
	}
	if c.Ranking != nil {
		p = c.Ranking(slices.Clone(p)) // the Ranking may reorder in place
	}
	return p
}

// Rank puts the proposals in the Ranking's order once (the defaults, when
// none are configured) and clears the Ranking, so that the SAs of a peer
// share one ranked list instead of ranking it again for every exchange (a
// hub's thousand setups each did, twice or more). Call it before the
// config is in use.
func (c *PeerConfig) Rank() {
	if c.Ranking == nil {
		return
	}
	c.IKEProposals, c.ESPProposals = c.ikeProposals(), c.espProposals()
	c.Ranking = nil
}

// The defaults, parsed once: read-only (DefaultIKEProposals and
// DefaultESPProposals give a caller its own copy).
var (
	defaultIKE = sync.OnceValue(DefaultIKEProposals)
	defaultESP = sync.OnceValue(DefaultESPProposals)
)

func (c *PeerConfig) retransmitTimeout() time.Duration {
	if c.RetransmitTimeout > 0 {
		return c.RetransmitTimeout
	}
	return 500 * time.Millisecond
}

func (c *PeerConfig) retransmitTries() int {
	if c.RetransmitTries > 0 {
		return c.RetransmitTries
	}
	return 5
}

func (c *PeerConfig) keepalive() time.Duration {
	if c.KeepaliveInterval > 0 {
		return c.KeepaliveInterval
	}
	return 20 * time.Second
}

func (c *PeerConfig) replayWindow() uint32 {
	if c.ReplayWindow > 0 {
		return c.ReplayWindow
	}
	return 1024
}

func (c *PeerConfig) nattPort() uint16 {
	if c.RemoteNATTPort != 0 {
		return c.RemoteNATTPort
	}
	return 4500
}

func selectorsOf(ps []netip.Prefix) []Selector {
	s := make([]Selector, len(ps))
	for i, p := range ps {
		s[i] = SelectorFromPrefix(p)
	}
	return s
}

func prefixesOf(ss []Selector) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, s.Prefixes()...)
	}
	return out
}

func selectorsString(ss []Selector) string {
	if len(ss) == 0 {
		return "nothing"
	}
	s := make([]string, len(ss))
	for i, x := range ss {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}
