package importer

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/config"
)

// isakmpd.conf (OpenBSD, isakmpd.conf(5)) is an INI file whose values name
// other sections: [Phase 2] Connections lists IPsec connections, each names
// its ISAKMP peer (phase 1: address, PSK, main-mode configuration with its
// Transforms) and its quick-mode configuration (Suites) and the Local-ID
// and Remote-ID sections with the subnets. Transform and suite names such
// as AES-SHA or QM-ESP-AES-SHA-PFS-SUITE are predefined by isakmpd: a main
// mode transform or a PFS suite without a -GRPn uses group 2 (MODP 1024),
// AES means 128-bit keys, and the lifetimes default to 3600 s (phase 1)
// and 1200 s (phase 2) unless [General] says otherwise.

// isaEntry is one Tag=Value.
type isaEntry struct {
	tag, value string
	line       int
}

// isaSection is one [Section] with its entries in order.
type isaSection struct {
	name    string
	line    int
	entries []isaEntry
}

type isaFile struct {
	src      *source
	sections map[string]*isaSection // by lower-case name
	order    []*isaSection
}

func parseISAKMPD(data []byte) *isaFile {
	f := &isaFile{src: newSource(data), sections: map[string]*isaSection{}}
	var cur *isaSection
	lines := f.src.lines
	for i := 0; i < len(lines); i++ {
		n := i + 1
		text := lines[i].text
		// A backslash at the end continues the value on the next line.
		for strings.HasSuffix(text, "\\") && i+1 < len(lines) {
			i++
			f.src.use(i + 1)
			text = strings.TrimSuffix(text, "\\") + lines[i].text
		}
		if j := strings.IndexByte(text, '#'); j >= 0 {
			text = text[:j]
		}
		text = strings.TrimSpace(text)
		switch {
		case text == "":
		case strings.HasPrefix(text, "["):
			name, ok := strings.CutSuffix(text[1:], "]")
			if !ok || name == "" {
				f.src.note(n, "not a section header: it needs a name and a closing ]")
				cur = nil
				continue
			}
			key := strings.ToLower(name)
			if s, dup := f.sections[key]; dup {
				// isakmpd merges a repeated section into the first.
				cur = s
				f.src.use(n)
				continue
			}
			cur = &isaSection{name: name, line: n}
			f.sections[key] = cur
			f.order = append(f.order, cur)
		default:
			tag, value, ok := strings.Cut(text, "=")
			switch {
			case !ok:
				f.src.note(n, "not a Tag=Value line")
			case cur == nil:
				f.src.note(n, "a Tag=Value line before any [section]")
			default:
				cur.entries = append(cur.entries, isaEntry{strings.TrimSpace(tag), strings.TrimSpace(value), n})
			}
		}
	}
	return f
}

// section returns the section called name (any case), or nil.
func (f *isaFile) section(name string) *isaSection {
	return f.sections[strings.ToLower(strings.TrimSpace(name))]
}

// get returns the entry of tag in s (the first; isakmpd keeps the first
// of repeated tags), or nil. A repeat is reported.
func (f *isaFile) get(s *isaSection, tag string) *isaEntry {
	if s == nil {
		return nil
	}
	var first *isaEntry
	for i := range s.entries {
		e := &s.entries[i]
		if !strings.EqualFold(e.tag, tag) {
			continue
		}
		if first == nil {
			first = e
		} else {
			f.src.note(e.line, "%s is given again in [%s]; the first one (line %d) counts", e.tag, s.name, first.line)
		}
	}
	return first
}

// value returns the value of tag in s and marks the line used.
func (f *isaFile) value(s *isaSection, tag string) (string, int, bool) {
	e := f.get(s, tag)
	if e == nil {
		return "", 0, false
	}
	f.src.use(e.line)
	return e.value, e.line, true
}

func splitList(v string) []string {
	var out []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// isaConn is one [Phase 2] connection, read.
type isaConn struct {
	name      string
	peer      *isaSection
	qm        string // quick-mode configuration section name, lower-case
	local     netip.Prefix
	remote    netip.Prefix
	initiate  bool
	ok        bool
	espProps  []string
	qmLifeSec int
	qmLine    int
}

func importISAKMPD(data []byte) (*Result, error) {
	f := parseISAKMPD(data)
	general := f.section("General")
	p1life, p2life := 3600, 1200
	if v, n, ok := f.value(general, "Default-phase-1-lifetime"); ok {
		if s, ok := offerSeconds(v); ok {
			p1life = s
		} else {
			f.src.note(n, "not a lifetime in seconds (e.g. 3600,60:86400)")
		}
	}
	if v, n, ok := f.value(general, "Default-phase-2-lifetime"); ok {
		if s, ok := offerSeconds(v); ok {
			p2life = s
		} else {
			f.src.note(n, "not a lifetime in seconds (e.g. 1200,60:86400)")
		}
	}

	phase2 := f.section("Phase 2")
	type named struct {
		name     string
		initiate bool
		line     int
	}
	var connNames []named
	seen := map[string]bool{}
	for _, tag := range []string{"Connections", "Passive-connections"} {
		v, n, ok := f.value(phase2, tag)
		if !ok {
			continue
		}
		for _, c := range splitList(v) {
			if seen[strings.ToLower(c)] {
				continue
			}
			seen[strings.ToLower(c)] = true
			connNames = append(connNames, named{c, tag == "Connections", n})
		}
	}
	if phase2 != nil {
		f.src.use(phase2.line)
	}

	// Read each connection and its peer.
	peers := map[*isaSection]*isaPeer{}
	var conns []*isaConn
	for _, cn := range connNames {
		s := f.section(cn.name)
		if s == nil {
			f.src.note(cn.line, "connection %s has no [%s] section", cn.name, cn.name)
			continue
		}
		stop := f.src.record()
		c := f.readConnection(s, cn.initiate, peers, p1life, p2life)
		read := stop()
		if c == nil || !c.ok || !peers[c.peer].ok {
			// Nothing of it is imported: its lines are listed.
			f.src.unuse(read)
			f.src.note(s.line, "connection %s is not imported (see the reasons on its lines)", s.name)
			continue
		}
		for _, n := range peers[c.peer].lines {
			f.src.use(n)
		}
		conns = append(conns, c)
	}
	return f.buildTunnels(conns, peers)
}

// readConnection reads an <IPSec-connection> and, the first time it is
// named, its ISAKMP peer.
func (f *isaFile) readConnection(s *isaSection, initiate bool, peers map[*isaSection]*isaPeer, p1life, p2life int) *isaConn {
	f.src.use(s.line)
	c := &isaConn{name: s.name, initiate: initiate, ok: true}
	if v, n, ok := f.value(s, "Phase"); ok && v != "2" {
		f.src.note(n, "a connection listed in [Phase 2] must say Phase=2")
		c.ok = false
	}
	pv, pn, ok := f.value(s, "ISAKMP-peer")
	if !ok {
		f.src.note(s.line, "connection %s names no ISAKMP-peer; flashgate needs the peer's address and key", s.name)
		return nil
	}
	c.peer = f.section(pv)
	if c.peer == nil {
		f.src.note(pn, "no [%s] section for this peer", pv)
		return nil
	}
	if peers[c.peer] == nil {
		stop := f.src.record()
		p := f.readPeer(c.peer, p1life)
		p.lines = stop()
		peers[c.peer] = p
	}
	var ids [2]netip.Prefix
	for i, tag := range []string{"Local-ID", "Remote-ID"} {
		v, n, ok := f.value(s, tag)
		if !ok {
			// isakmpd then negotiates for the hosts themselves.
			addr := peers[c.peer].local
			if i == 1 {
				addr = peers[c.peer].remote
			}
			if addr.IsValid() {
				ids[i] = netip.PrefixFrom(addr, addr.BitLen())
			} else {
				f.src.note(s.line, "connection %s has no %s and the %s address is not given, so there is nothing to route through the tunnel", s.name, tag, map[int]string{0: "local", 1: "peer's"}[i])
				c.ok = false
			}
			continue
		}
		p, ok := f.readNetworkID(v, n)
		if !ok {
			c.ok = false
			continue
		}
		ids[i] = p
	}
	c.local, c.remote = ids[0], ids[1]
	qv, qn, ok := f.value(s, "Configuration")
	if !ok {
		qv = "Default-quick-mode"
		qn = s.line
	}
	c.qm = strings.ToLower(qv)
	c.qmLine = qn
	c.espProps, c.qmLifeSec = f.readQuickMode(qv, qn, p2life)
	if len(c.espProps) == 0 {
		c.ok = false
	}
	for _, e := range s.entries {
		switch strings.ToLower(e.tag) {
		case "phase", "isakmp-peer", "local-id", "remote-id", "configuration":
		case "flags":
			f.src.use(e.line)
			for _, fl := range splitList(e.value) {
				if strings.EqualFold(fl, "Active-only") {
					f.src.note(e.line, "Active-only: flashgate's initiating tunnels also accept the peer's initiations")
				} else {
					f.src.note(e.line, "flag %s has no flashgate equivalent", fl)
				}
			}
		default:
			f.src.note(e.line, "%s has no flashgate equivalent in a connection", e.tag)
		}
	}
	return c
}

// buildTunnels makes the tunnels of the connections that import.
func (f *isaFile) buildTunnels(conns []*isaConn, peers map[*isaSection]*isaPeer) (*Result, error) {
	// One tunnel per peer and quick-mode configuration when its subnet
	// pairs are every local with every remote (what a flashgate tunnel
	// negotiates); otherwise one tunnel per connection.
	res := &Result{}
	taken := map[string]bool{}
	type groupKey struct {
		peer *isaSection
		qm   string
	}
	groups := map[groupKey][]*isaConn{}
	var keys []groupKey
	for _, c := range conns {
		k := groupKey{c.peer, c.qm}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], c)
	}
	for _, k := range keys {
		g := groups[k]
		var parts [][]*isaConn
		if fullProduct(g) {
			parts = [][]*isaConn{g}
		} else {
			for _, c := range g {
				parts = append(parts, []*isaConn{c})
			}
		}
		for _, part := range parts {
			p := peers[k.peer]
			t := config.NewTunnel(uniqueName(part[0].name, taken))
			t.IKEVersion = config.IKEv1
			t.RemoteAddress = config.Addr{Addr: p.remote}
			if p.local.IsValid() {
				t.LocalAddress = config.Addr{Addr: p.local}
			}
			t.LocalID, t.RemoteID = p.localID, p.remoteID
			t.PSK = config.NewSecret(p.psk)
			t.IKEProposals = p.ikeProps
			t.ESPProposals = part[0].espProps
			t.IKELifetime = config.Seconds(p.lifeSec)
			t.ChildLifetime = config.Seconds(part[0].qmLifeSec)
			t.StartAction = config.StartRespond
			for _, c := range part {
				if c.initiate {
					t.StartAction = config.StartInitiate
				}
				t.LocalSubnets = appendPrefix(t.LocalSubnets, c.local)
				t.RemoteSubnets = appendPrefix(t.RemoteSubnets, c.remote)
			}
			if !p.remote.IsValid() && t.StartAction != config.StartRespond {
				f.src.note(p.line, "peer %s has no Address; the tunnel can only wait for it (start_action respond)", p.name)
				t.StartAction = config.StartRespond
			}
			finish(&t)
			res.Tunnels = append(res.Tunnels, t)
		}
	}

	// [Phase 1] maps addresses to peers; the entries of imported peers
	// are carried over with them.
	if ph1 := f.section("Phase 1"); ph1 != nil {
		f.src.use(ph1.line)
		for _, e := range ph1.entries {
			ps := f.section(e.value)
			if p := peers[ps]; p != nil && p.ok {
				f.src.use(e.line)
				if strings.EqualFold(e.tag, "Default") {
					f.src.note(e.line, "a default peer for any address: flashgate's tunnels name their peer; the tunnel imported for %s waits for it by its ID", e.value)
				}
			}
		}
	}
	// A section header counts as carried over when any of its lines is.
	for _, s := range f.order {
		for _, e := range s.entries {
			if f.src.lines[e.line-1].used {
				f.src.use(s.line)
			}
		}
	}
	res.Unmapped = f.src.unmapped(isaMeaningful, func(n int) string { return f.unusedReason(n) })
	return res, nil
}

func isaMeaningful(text string) bool {
	if i := strings.IndexByte(text, '#'); i >= 0 {
		text = text[:i]
	}
	return strings.TrimSpace(text) != ""
}

// unusedReason says why line n was not used: its section is not part of
// any imported tunnel, or what it sets has no flashgate equivalent.
func (f *isaFile) unusedReason(n int) string {
	var in *isaSection
	for _, s := range f.order {
		if s.line <= n && (in == nil || s.line > in.line) {
			in = s
		}
	}
	if in == nil {
		return "outside any section"
	}
	switch strings.ToLower(in.name) {
	case "general":
		return "an isakmpd daemon setting with no flashgate equivalent (flashgate's DPD, retransmissions and lifetimes are per tunnel)"
	case "x509-certificates", "keynote":
		return "flashgate tunnels authenticate with a pre-shared key; certificates and KeyNote policies are not imported"
	case "phase 1":
		return "this peer is not used by any imported connection"
	}
	if n == in.line {
		return fmt.Sprintf("section [%s] is not part of any imported tunnel", in.name)
	}
	return fmt.Sprintf("in [%s], which no imported connection uses", in.name)
}

// fullProduct reports whether the connections' subnet pairs are exactly
// every local subnet with every remote one.
func fullProduct(g []*isaConn) bool {
	locals, remotes := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	pairs := map[[2]netip.Prefix]bool{}
	for _, c := range g {
		locals[c.local] = true
		remotes[c.remote] = true
		pairs[[2]netip.Prefix{c.local, c.remote}] = true
	}
	return len(pairs) == len(locals)*len(remotes)
}

func appendPrefix(list []config.Prefix, p netip.Prefix) []config.Prefix {
	for _, x := range list {
		if x.Prefix == p {
			return list
		}
	}
	return append(list, config.Prefix{Prefix: p})
}

// offerSeconds reads isakmpd's offer/accept syntax "X,Y:Z" (or plain X)
// and returns the offer.
func offerSeconds(v string) (int, bool) {
	offer, _, _ := strings.Cut(v, ",")
	n, err := strconv.Atoi(strings.TrimSpace(offer))
	return n, err == nil && n > 0
}

// isaPeer is one ISAKMP peer (phase 1), read.
type isaPeer struct {
	name              string
	line              int
	remote, local     netip.Addr
	psk               string
	localID, remoteID string
	ikeProps          []string
	lifeSec           int
	ok                bool
	lines             []int // the lines reading it marked used
}

func (f *isaFile) readPeer(s *isaSection, p1life int) *isaPeer {
	p := &isaPeer{name: s.name, line: s.line, ok: true, lifeSec: p1life}
	f.src.use(s.line)
	for _, e := range s.entries {
		n := e.line
		f.src.use(n)
		switch strings.ToLower(e.tag) {
		case "phase":
			if e.value != "1" {
				f.src.note(n, "an ISAKMP peer must say Phase=1")
			}
		case "transport":
			if !strings.EqualFold(e.value, "udp") {
				f.src.note(n, "flashgate speaks IKE over UDP only")
				p.ok = false
			}
		case "port":
			if e.value != "500" && !strings.EqualFold(e.value, "isakmp") {
				f.src.note(n, "flashgate talks IKE on port 500 (and 4500 with NAT-T); the peer must too")
			}
		case "address":
			a, err := netip.ParseAddr(e.value)
			if err != nil {
				f.src.note(n, "%q is not an IP address", e.value)
				p.ok = false
			} else {
				p.remote = a
			}
		case "local-address":
			a, err := netip.ParseAddr(e.value)
			if err != nil {
				f.src.note(n, "%q is not an IP address", e.value)
			} else {
				p.local = a
			}
		case "authentication":
			f.src.secret(n)
			p.psk = e.value
		case "id", "remote-id":
			id, ok := f.readPhase1ID(e.value, n)
			if !ok {
				p.ok = false
			} else if strings.EqualFold(e.tag, "id") {
				p.localID = id
			} else {
				p.remoteID = id
			}
		case "configuration":
			p.ikeProps, p.lifeSec = f.readMainMode(e.value, n, p1life)
			if len(p.ikeProps) == 0 {
				p.ok = false
			}
		case "flags":
			f.src.note(n, "phase 1 flags have no flashgate equivalent")
		default:
			f.src.note(n, "%s has no flashgate equivalent in an ISAKMP peer", e.tag)
		}
	}
	if f.get(s, "Configuration") == nil {
		// isakmpd's Default-phase-1-configuration proposes 3DES-SHA with
		// RSA signatures, which a PSK tunnel cannot use.
		f.src.note(s.line, "peer %s names no Configuration; isakmpd's default (3DES-SHA with RSA signatures) is not a pre-shared-key setup: name a main mode configuration", s.name)
		p.ok = false
	}
	if p.psk == "" {
		f.src.note(s.line, "peer %s has no Authentication (pre-shared key); flashgate tunnels need one", s.name)
		p.ok = false
	}
	if !p.ok {
		f.src.note(s.line, "the connections with peer %s are not imported", s.name)
	}
	return p
}

// readPhase1ID reads a <Phase1-ID> section into flashgate's ID syntax.
func (f *isaFile) readPhase1ID(name string, ref int) (string, bool) {
	s := f.section(name)
	if s == nil {
		f.src.note(ref, "no [%s] section for this ID", name)
		return "", false
	}
	f.src.use(s.line)
	typ, tn, _ := f.value(s, "ID-type")
	switch strings.ToUpper(typ) {
	case "IPV4_ADDR", "IPV6_ADDR":
		v, n, ok := f.value(s, "Address")
		a, err := netip.ParseAddr(v)
		if !ok || err != nil {
			f.src.note(max(n, s.line), "%s needs an Address", typ)
			return "", false
		}
		return a.String(), true
	case "FQDN":
		v, n, ok := f.value(s, "Name")
		if !ok || v == "" {
			f.src.note(max(n, s.line), "FQDN needs a Name")
			return "", false
		}
		return "@" + v, true
	case "USER_FQDN":
		v, n, ok := f.value(s, "Name")
		if !ok || !strings.Contains(v, "@") {
			f.src.note(max(n, s.line), "USER_FQDN needs a Name like user@example.org")
			return "", false
		}
		return v, true
	}
	f.src.note(max(tn, s.line), "ID-type %q: flashgate's phase 1 IDs are IPV4_ADDR, IPV6_ADDR, FQDN or USER_FQDN", typ)
	return "", false
}

// readNetworkID reads an <IPSec-ID> section: the subnet of one side.
func (f *isaFile) readNetworkID(name string, ref int) (netip.Prefix, bool) {
	s := f.section(name)
	if s == nil {
		f.src.note(ref, "no [%s] section for this ID", name)
		return netip.Prefix{}, false
	}
	f.src.use(s.line)
	typ, tn, _ := f.value(s, "ID-type")
	for _, e := range s.entries {
		switch strings.ToLower(e.tag) {
		case "id-type", "network", "netmask", "address":
		case "protocol", "port":
			f.src.use(e.line)
			if e.value != "0" && !strings.EqualFold(e.value, "any") {
				f.src.note(e.line, "flashgate tunnels carry every protocol and port between the subnets; %s=%s is not imported", e.tag, e.value)
			}
		default:
			f.src.note(e.line, "%s has no meaning in an IPsec ID", e.tag)
		}
	}
	switch strings.ToUpper(typ) {
	case "IPV4_ADDR_SUBNET", "IPV6_ADDR_SUBNET":
		nv, nn, ok1 := f.value(s, "Network")
		mv, mn, ok2 := f.value(s, "Netmask")
		if !ok1 || !ok2 {
			f.src.note(s.line, "%s needs a Network and a Netmask", typ)
			return netip.Prefix{}, false
		}
		addr, err := netip.ParseAddr(nv)
		if err != nil {
			f.src.note(nn, "%q is not a network address", nv)
			return netip.Prefix{}, false
		}
		bits, ok := maskBits(mv, addr.BitLen())
		if !ok {
			f.src.note(mn, "%q is not a netmask (contiguous ones)", mv)
			return netip.Prefix{}, false
		}
		p := netip.PrefixFrom(addr, bits)
		if p.Masked() != p {
			f.src.note(nn, "%s has host bits set for netmask %s; imported as %s", nv, mv, p.Masked())
		}
		return p.Masked(), true
	case "IPV4_ADDR", "IPV6_ADDR":
		v, n, ok := f.value(s, "Address")
		a, err := netip.ParseAddr(v)
		if !ok || err != nil {
			f.src.note(max(n, s.line), "%s needs an Address", typ)
			return netip.Prefix{}, false
		}
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	f.src.note(max(tn, s.line), "ID-type %q: flashgate's subnets are IPV4_ADDR_SUBNET, IPV6_ADDR_SUBNET, IPV4_ADDR or IPV6_ADDR (a range is no subnet)", typ)
	return netip.Prefix{}, false
}

// maskBits reads a dotted (or, for IPv6, any) netmask or a plain length.
func maskBits(m string, width int) (int, bool) {
	if n, err := strconv.Atoi(m); err == nil && n >= 0 && n <= width {
		return n, true
	}
	a, err := netip.ParseAddr(m)
	if err != nil || a.BitLen() != width {
		return 0, false
	}
	b := a.AsSlice()
	bits, zero := 0, false
	for _, x := range b {
		for i := 7; i >= 0; i-- {
			if x&(1<<i) != 0 {
				if zero {
					return 0, false
				}
				bits++
			} else {
				zero = true
			}
		}
	}
	return bits, true
}

// readMainMode reads an <ISAKMP-configuration>: its transforms become IKE
// proposals. The lifetime is the first transform's.
func (f *isaFile) readMainMode(name string, ref int, p1life int) ([]string, int) {
	s := f.section(name)
	if s == nil {
		f.src.note(ref, "no [%s] section for this main mode configuration", name)
		return nil, p1life
	}
	f.src.use(s.line)
	var props []string
	life := -1
	for _, e := range s.entries {
		n := e.line
		f.src.use(n)
		switch strings.ToLower(e.tag) {
		case "doi":
			if !strings.EqualFold(e.value, "IPSEC") {
				f.src.note(n, "flashgate knows only the IPSEC DOI")
				return nil, p1life
			}
		case "exchange_type":
			switch strings.ToUpper(e.value) {
			case "ID_PROT":
			case "AGGRESSIVE":
				f.src.note(n, "aggressive mode is refused: its pre-shared-key hash can be cracked offline by anyone who sees the exchange; set the peer to main mode (ID_PROT)")
				return nil, p1life
			default:
				f.src.note(n, "%s is not main mode (ID_PROT)", e.value)
				return nil, p1life
			}
		case "transforms":
			read := func(x string) (string, int, string) { return f.mainModeTransform(x, p1life) }
			props, life = f.proposalsOn(n, e.value, read, props, life, "no transform flashgate can use, so this peer is not imported")
		default:
			f.src.note(n, "%s has no flashgate equivalent in a main mode configuration", e.tag)
		}
	}
	if life < 0 {
		life = p1life
	}
	return props, life
}

// proposalsOn reads the transforms or suites listed on line n (value)
// with read, which returns a proposal, its lifetime, or why it cannot be
// used. Each refused one is noted on the line, and when some were, what
// was imported; with none usable, none. life is the first usable one's
// lifetime (it stays as given, -1 for unset, until one is found).
func (f *isaFile) proposalsOn(n int, value string, read func(string) (string, int, string), props []string, life int, none string) ([]string, int) {
	for _, x := range splitList(value) {
		prop, secs, why := read(x)
		if why != "" {
			f.src.note(n, "%s: %s", x, why)
			continue
		}
		if life < 0 {
			life = secs
		}
		props = appendUnique(props, prop)
	}
	if len(props) == 0 {
		f.src.note(n, "%s", none)
	} else if len(f.src.lines[n-1].reasons) > 0 {
		f.src.note(n, "imported as %s", strings.Join(props, ", "))
	}
	return props, life
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// Algorithm names: isakmpd's (predefined names and section values) to
// strongSwan's tokens; "" with a reason for what flashgate refuses.
var (
	isaCiphers = map[string]string{
		"AES": "aes128", "AES-128": "aes128", "AES-192": "aes192", "AES-256": "aes256", "3DES": "3des",
	}
	isaCipherIDs = map[string]string{ // ENCRYPTION_ALGORITHM / TRANSFORM_ID values
		"AES_CBC": "aes", "AES": "aes", "3DES_CBC": "3des", "3DES": "3des",
	}
	isaRefusedCiphers = map[string]string{
		"DES": "des", "DES_CBC": "des", "BLF": "blowfish", "BLOWFISH": "blowfish", "BLOWFISH_CBC": "blowfish",
		"CAST": "cast", "CAST_CBC": "cast", "NULL": "null",
	}
	isaHashes = map[string]string{
		"MD5": "md5", "SHA": "sha1", "SHA2-256": "sha256", "SHA2-384": "sha384", "SHA2-512": "sha512",
		"HMAC_MD5": "md5", "HMAC_SHA": "sha1", "HMAC_SHA2_256": "sha256", "HMAC_SHA2_384": "sha384", "HMAC_SHA2_512": "sha512",
		"SHA2_256": "sha256", "SHA2_384": "sha384", "SHA2_512": "sha512",
	}
	isaGroups = map[string]string{
		"GRP1": "modp768", "GRP2": "modp1024", "GRP5": "modp1536", "GRP14": "modp2048", "GRP15": "modp3072",
		"GRP16": "modp4096", "GRP19": "ecp256", "GRP20": "ecp384", "GRP21": "ecp521",
		"MODP_768": "modp768", "MODP_1024": "modp1024", "MODP_1536": "modp1536", "MODP_2048": "modp2048",
		"MODP_3072": "modp3072", "MODP_4096": "modp4096", "ECP_256": "ecp256", "ECP_384": "ecp384", "ECP_521": "ecp521",
	}
)

// refusedWhy explains a refused algorithm with config's own words.
func refusedWhy(token string) string {
	if token == "cast" {
		return "CAST is not supported; use aes128 or aes256"
	}
	if err := config.CheckESPProposal(token + "-sha256"); err != nil {
		_, why, _ := strings.Cut(err.Error(), ": ")
		return why
	}
	return token + " is not supported"
}

// mainModeTransform reads one main mode transform: a predefined name such
// as AES-SHA-GRP14 or a section with ENCRYPTION_ALGORITHM and the rest.
func (f *isaFile) mainModeTransform(name string, p1life int) (prop string, secs int, why string) {
	if s := f.section(name); s != nil {
		return f.mainModeSection(s, p1life)
	}
	parts := strings.Split(strings.ToUpper(name), "-")
	// The cipher may itself have a dash (AES-128).
	cipher := parts[0]
	rest := parts[1:]
	if cipher == "AES" && len(rest) > 0 && (rest[0] == "128" || rest[0] == "192" || rest[0] == "256") {
		cipher, rest = "AES-"+rest[0], rest[1:]
	}
	enc, ok := isaCiphers[cipher]
	if !ok {
		if tok, refused := isaRefusedCiphers[cipher]; refused {
			return "", 0, refusedWhy(tok)
		}
		return "", 0, "not a transform isakmpd predefines (cipher-hash[-GRPn]) and no section of that name"
	}
	if len(rest) == 0 {
		return "", 0, "no hash"
	}
	hash := rest[0]
	rest = rest[1:]
	if hash == "SHA2" && len(rest) > 0 {
		hash, rest = "SHA2-"+rest[0], rest[1:]
	}
	integ, ok := isaHashes[hash]
	if !ok {
		return "", 0, fmt.Sprintf("hash %s is not supported; use SHA or SHA2-256", hash)
	}
	group := "modp1024" // isakmpd's default for main mode: group 2
	for _, r := range rest {
		switch {
		case strings.HasPrefix(r, "GRP"):
			g, ok := isaGroups[r]
			if !ok {
				return "", 0, fmt.Sprintf("group %s is not supported; use GRP14 (modp2048)", r)
			}
			group = g
		case r == "DSS" || r == "RSA_SIG":
			return "", 0, "authentication by " + r + " signatures: flashgate tunnels use a pre-shared key"
		default:
			return "", 0, fmt.Sprintf("%s is not part of a predefined transform name", r)
		}
	}
	prop = enc + "-" + integ + "-" + group
	if err := (config.ProposalRules{IKEVersion: config.IKEv1, Legacy: true}).CheckIKE(prop); err != nil {
		_, why, _ := strings.Cut(err.Error(), ": ")
		return "", 0, why
	}
	return prop, p1life, ""
}

// mainModeSection reads a hand-written <ISAKMP-transform> section.
func (f *isaFile) mainModeSection(s *isaSection, p1life int) (string, int, string) {
	f.src.use(s.line)
	var enc, integ, group string
	keyLen := 0
	secs := p1life
	for _, e := range s.entries {
		f.src.use(e.line)
		v := strings.ToUpper(e.value)
		switch strings.ToLower(e.tag) {
		case "encryption_algorithm":
			if tok, refused := isaRefusedCiphers[v]; refused {
				return "", 0, refusedWhy(tok)
			}
			enc = isaCipherIDs[v]
			if enc == "" {
				return "", 0, fmt.Sprintf("encryption %s is not supported", e.value)
			}
		case "key_length":
			n, ok := offerSeconds(e.value)
			if !ok {
				return "", 0, "KEY_LENGTH is not a number"
			}
			keyLen = n
		case "hash_algorithm", "prf":
			h, ok := isaHashes[v]
			if !ok {
				return "", 0, fmt.Sprintf("%s %s is not supported", e.tag, e.value)
			}
			if strings.EqualFold(e.tag, "hash_algorithm") {
				integ = h
			}
		case "authentication_method":
			if v != "PRE_SHARED" {
				return "", 0, "authentication " + e.value + ": flashgate tunnels use a pre-shared key (PRE_SHARED)"
			}
		case "group_description":
			g, ok := isaGroups[v]
			if !ok {
				return "", 0, fmt.Sprintf("group %s is not supported; use MODP_2048", e.value)
			}
			group = g
		case "life":
			if n, ok := f.lifeSeconds(e.value); ok {
				secs = n
			}
		default:
			f.src.note(e.line, "%s has no flashgate equivalent in a transform", e.tag)
		}
	}
	if enc == "" || integ == "" {
		return "", 0, fmt.Sprintf("[%s] needs ENCRYPTION_ALGORITHM and HASH_ALGORITHM", s.name)
	}
	if enc == "aes" {
		var why string
		if enc, why = aesKeyword(keyLen); why != "" {
			return "", 0, why
		}
	}
	if group == "" {
		group = "modp1024"
	}
	prop := enc + "-" + integ + "-" + group
	if err := (config.ProposalRules{IKEVersion: config.IKEv1, Legacy: true}).CheckIKE(prop); err != nil {
		_, why, _ := strings.Cut(err.Error(), ": ")
		return "", 0, why
	}
	return prop, secs, ""
}

// lifeSeconds reads a list of <Lifetime> sections: the SECONDS one.
func (f *isaFile) lifeSeconds(list string) (int, bool) {
	for _, name := range splitList(list) {
		s := f.section(name)
		if s == nil {
			continue
		}
		f.src.use(s.line)
		typ, _, _ := f.value(s, "LIFE_TYPE")
		if typ == "" {
			typ, _, _ = f.value(s, "SA_LIFE_TYPE")
		}
		d, dn, ok := f.value(s, "LIFE_DURATION")
		if !ok {
			d, dn, ok = f.value(s, "SA_LIFE_DURATION")
		}
		if !strings.EqualFold(typ, "SECONDS") {
			f.src.note(max(dn, s.line), "flashgate's lifetimes are times; a %s lifetime is not imported", typ)
			continue
		}
		if n, good := offerSeconds(d); ok && good {
			return n, true
		}
		f.src.note(max(dn, s.line), "not a lifetime in seconds")
	}
	return 0, false
}

// readQuickMode reads an <IPSec-configuration>: its suites become ESP
// proposals.
func (f *isaFile) readQuickMode(name string, ref int, p2life int) ([]string, int) {
	s := f.section(name)
	if s == nil {
		f.src.note(ref, "no [%s] section for this quick mode configuration", name)
		return nil, p2life
	}
	f.src.use(s.line)
	var props []string
	life := -1
	for _, e := range s.entries {
		n := e.line
		f.src.use(n)
		switch strings.ToLower(e.tag) {
		case "doi":
			if !strings.EqualFold(e.value, "IPSEC") {
				f.src.note(n, "flashgate knows only the IPSEC DOI")
				return nil, p2life
			}
		case "exchange_type":
			if !strings.EqualFold(e.value, "QUICK_MODE") {
				f.src.note(n, "%s is not QUICK_MODE", e.value)
				return nil, p2life
			}
		case "suites":
			read := func(x string) (string, int, string) { return f.quickModeSuite(x, p2life) }
			props, life = f.proposalsOn(n, e.value, read, props, life, "no suite flashgate can use, so connections with this configuration are not imported")
		default:
			f.src.note(n, "%s has no flashgate equivalent in a quick mode configuration", e.tag)
		}
	}
	if life < 0 {
		life = p2life
	}
	return props, life
}

// quickModeSuite reads QM-{ESP,AH}[-TRP]-{cipher}[-{hash}][-PFS[-{group}]]-SUITE
// or a suite section (Protocols naming protocol sections with Transforms).
func (f *isaFile) quickModeSuite(name string, p2life int) (string, int, string) {
	if s := f.section(name); s != nil {
		return f.quickModeSection(s, p2life)
	}
	up := strings.ToUpper(name)
	body, ok := strings.CutPrefix(up, "QM-")
	if ok {
		body, ok = strings.CutSuffix(body, "-SUITE")
	}
	if !ok {
		return "", 0, "not a suite isakmpd predefines (QM-ESP-cipher-hash[-PFS[-GRPn]]-SUITE) and no section of that name"
	}
	parts := strings.Split(body, "-")
	switch parts[0] {
	case "ESP":
	case "AH":
		return "", 0, "AH is not supported: flashgate protects traffic with ESP"
	default:
		return "", 0, parts[0] + " is neither ESP nor AH"
	}
	parts = parts[1:]
	if len(parts) > 0 && parts[0] == "TRP" {
		return "", 0, "transport mode: flashgate tunnels run in tunnel mode between subnets"
	}
	if len(parts) == 0 {
		return "", 0, "no cipher"
	}
	cipher := parts[0]
	parts = parts[1:]
	if cipher == "AES" && len(parts) > 0 && (parts[0] == "128" || parts[0] == "192" || parts[0] == "256") {
		cipher, parts = "AES-"+parts[0], parts[1:]
	}
	enc, ok := isaCiphers[cipher]
	if !ok {
		if tok, refused := isaRefusedCiphers[cipher]; refused {
			return "", 0, refusedWhy(tok)
		}
		return "", 0, fmt.Sprintf("cipher %s is not supported", cipher)
	}
	integ, group := "", ""
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		if p == "SHA2" && i+1 < len(parts) {
			p = "SHA2-" + parts[i+1]
			i++
		}
		switch {
		case isaHashes[p] != "":
			integ = isaHashes[p]
		case p == "RIPEMD":
			return "", 0, "HMAC-RIPEMD is not supported; use SHA or SHA2-256"
		case p == "PFS":
			group = "modp1024" // isakmpd's default for PFS: group 2
		case strings.HasPrefix(p, "GRP") && group != "":
			g, ok := isaGroups[p]
			if !ok {
				return "", 0, fmt.Sprintf("group %s is not supported; use GRP14 (modp2048)", p)
			}
			group = g
		default:
			return "", 0, fmt.Sprintf("%s is not part of a predefined suite name", p)
		}
	}
	if integ == "" {
		return "", 0, "ESP without integrity is refused: AES-CBC and 3DES need a hash (use e.g. QM-ESP-AES-SHA2-256-SUITE)"
	}
	prop := enc + "-" + integ
	if group != "" {
		prop += "-" + group
	}
	if err := (config.ProposalRules{IKEVersion: config.IKEv1, Legacy: true}).CheckESP(prop); err != nil {
		_, why, _ := strings.Cut(err.Error(), ": ")
		return "", 0, why
	}
	return prop, p2life, ""
}

// quickModeSection reads a hand-written suite: Protocols=, each protocol
// section with PROTOCOL_ID and Transforms=, each transform section with
// TRANSFORM_ID, ENCAPSULATION_MODE, AUTHENTICATION_ALGORITHM,
// GROUP_DESCRIPTION, KEY_LENGTH and Life. Only single-ESP suites map.
func (f *isaFile) quickModeSection(s *isaSection, p2life int) (string, int, string) {
	f.src.use(s.line)
	pv, _, ok := f.value(s, "Protocols")
	protos := splitList(pv)
	if !ok || len(protos) != 1 {
		return "", 0, "a suite must name exactly one protocol (ESP) for flashgate"
	}
	ps := f.section(protos[0])
	if ps == nil {
		return "", 0, fmt.Sprintf("no [%s] section for its protocol", protos[0])
	}
	f.src.use(ps.line)
	if id, _, _ := f.value(ps, "PROTOCOL_ID"); !strings.EqualFold(id, "IPSEC_ESP") {
		return "", 0, "protocol " + id + ": flashgate protects traffic with ESP (IPSEC_ESP)"
	}
	tv, _, _ := f.value(ps, "Transforms")
	xfs := splitList(tv)
	if len(xfs) != 1 {
		return "", 0, "flashgate imports one transform per protocol"
	}
	xs := f.section(xfs[0])
	if xs == nil {
		return "", 0, fmt.Sprintf("no [%s] section for its transform", xfs[0])
	}
	f.src.use(xs.line)
	var enc, integ, group string
	keyLen, secs := 0, p2life
	for _, e := range xs.entries {
		f.src.use(e.line)
		v := strings.ToUpper(e.value)
		switch strings.ToLower(e.tag) {
		case "transform_id":
			if tok, refused := isaRefusedCiphers[v]; refused {
				return "", 0, refusedWhy(tok)
			}
			enc = isaCipherIDs[v]
			if enc == "" {
				return "", 0, "transform " + e.value + " is not supported"
			}
		case "key_length":
			n, ok := offerSeconds(e.value)
			if !ok {
				return "", 0, "KEY_LENGTH is not a number"
			}
			keyLen = n
		case "encapsulation_mode":
			if v != "TUNNEL" {
				return "", 0, "transport mode: flashgate tunnels run in tunnel mode between subnets"
			}
		case "authentication_algorithm":
			h, ok := isaHashes[v]
			if !ok {
				return "", 0, "authentication " + e.value + " is not supported; use HMAC_SHA2_256"
			}
			integ = h
		case "group_description":
			g, ok := isaGroups[v]
			if !ok {
				return "", 0, "group " + e.value + " is not supported; use MODP_2048"
			}
			group = g
		case "life":
			if n, ok := f.lifeSeconds(e.value); ok {
				secs = n
			}
		default:
			f.src.note(e.line, "%s has no flashgate equivalent in a transform", e.tag)
		}
	}
	if enc == "" || integ == "" {
		return "", 0, fmt.Sprintf("[%s] needs TRANSFORM_ID and AUTHENTICATION_ALGORITHM", xs.name)
	}
	if enc == "aes" {
		var why string
		if enc, why = aesKeyword(keyLen); why != "" {
			return "", 0, why
		}
	}
	prop := enc + "-" + integ
	if group != "" {
		prop += "-" + group
	}
	if err := (config.ProposalRules{IKEVersion: config.IKEv1, Legacy: true}).CheckESP(prop); err != nil {
		_, why, _ := strings.Cut(err.Error(), ": ")
		return "", 0, why
	}
	return prop, secs, ""
}

// aesKeyword is flashgate's name for AES with keyLen bits (0: isakmpd's
// default, 128), or why there is none.
func aesKeyword(keyLen int) (string, string) {
	switch keyLen {
	case 0, 128:
		return "aes128", ""
	case 192, 256:
		return "aes" + strconv.Itoa(keyLen), ""
	}
	return "", fmt.Sprintf("AES with a %d-bit key", keyLen)
}
