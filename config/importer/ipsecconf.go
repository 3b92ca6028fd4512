package importer

import (
	"strings"

	"github.com/flashgate/flashgate/config"
)

// ipsec.conf (strongSwan's stroke, libreswan's pluto) has "config setup"
// and "conn NAME" sections with indented key=value lines; "conn %default"
// and also= supply shared settings. Left is read as this box and right as
// the peer, the usual convention. PSKs live in ipsec.secrets; lines of
// that form (`ID ID : PSK "secret"`) may be pasted below the connections.

type ipConn struct {
	name     string
	line     int
	settings []swSetting
}

func importIPsecConf(data []byte) (*Result, error) {
	src := newSource(data)
	var conns []*ipConn
	byName := map[string]*ipConn{}
	type secret struct {
		ids      []string
		psk, why string
		line     int
	}
	var secrets []secret
	var cur *ipConn
	inSetup := false
	for i, l := range src.lines {
		n := i + 1
		raw := l.text
		text := raw
		if j := strings.IndexByte(text, '#'); j >= 0 && !strings.Contains(text[:j], `"`) {
			text = text[:j]
		}
		trimmed := strings.TrimSpace(text)
		indented := len(text) > 0 && (text[0] == ' ' || text[0] == '\t')
		switch {
		case trimmed == "":
		case strings.Contains(trimmed, ": PSK") || strings.Contains(trimmed, ":PSK"):
			// ipsec.secrets: IDs : PSK "secret"
			src.secret(n)
			ids, val, _ := strings.Cut(trimmed, ":")
			val = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(val), "PSK"))
			s := secret{ids: strings.Fields(ids), line: n}
			s.psk, s.why = pskValue(val)
			if s.why != "" {
				src.note(n, "%s", s.why)
			}
			secrets = append(secrets, s)
			cur, inSetup = nil, false
		case !indented && strings.HasPrefix(trimmed, "conn "):
			name := strings.TrimSpace(strings.TrimPrefix(trimmed, "conn "))
			cur = &ipConn{name: name, line: n}
			inSetup = false
			if byName[name] != nil {
				src.note(n, "a second conn %s; the first counts", name)
				cur = &ipConn{name: name + " (again)", line: n}
			} else {
				byName[name] = cur
			}
			conns = append(conns, cur)
		case !indented && trimmed == "config setup":
			inSetup, cur = true, nil
		case !indented && (strings.HasPrefix(trimmed, "include ") || strings.HasPrefix(trimmed, "version ")):
			src.note(n, "not followed: paste the included file's content instead")
		case indented && inSetup:
			src.note(n, "a daemon setting (config setup) with no flashgate equivalent")
		case indented && cur != nil:
			k, v, ok := strings.Cut(trimmed, "=")
			if !ok {
				src.note(n, "not a key=value line")
				continue
			}
			cur.settings = append(cur.settings, swSetting{strings.TrimSpace(k), unquote(strings.TrimSpace(v)), n})
		default:
			src.note(n, "not part of a conn or config setup section (settings are indented under them)")
		}
	}

	res := &Result{}
	taken := map[string]bool{}
	for _, c := range conns {
		if strings.HasPrefix(c.name, "%") || strings.HasSuffix(c.name, " (again)") {
			continue // %default is used through the conns that inherit it
		}
		stop := src.record()
		t, auto, ok := ipsecConn(src, c, byName)
		read := stop()
		if auto == "ignore" {
			src.unuse(read)
			src.note(c.line, "auto=ignore: the connection is not in use, so it is not imported")
			continue
		}
		// The PSK: the secret naming the right side's ID or address.
		if ok {
			found := false
			for _, w := range []string{t.RemoteID, t.RemoteAddress.String(), t.LocalID, t.LocalAddress.String()} {
				for _, s := range secrets {
					for _, id := range s.ids {
						if w != "" && !found && (id == w || id == "%any" && len(s.ids) == 1) {
							found = true
							if s.psk != "" {
								t.PSK = config.NewSecret(s.psk)
								src.use(s.line)
							}
						}
					}
				}
			}
			if !found {
				for _, s := range secrets {
					if len(s.ids) == 0 && s.psk != "" {
						t.PSK = config.NewSecret(s.psk)
						src.use(s.line)
						found = true
					}
				}
			}
			if !found {
				src.note(c.line, "no PSK for conn %s: the key is in ipsec.secrets (paste its line below, or set the tunnel's psk after the import)", c.name)
			}
		}
		if !ok {
			src.unuse(read)
			src.note(c.line, "conn %s is not imported (see the reasons on its lines)", c.name)
			continue
		}
		t.Name = uniqueName(c.name, taken)
		finish(&t)
		res.Tunnels = append(res.Tunnels, t)
	}
	// A %default section counts as carried over when a conn used it.
	res.Unmapped = src.unmapped(func(text string) bool {
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		return strings.TrimSpace(text) != ""
	}, func(n int) string { return "not part of any imported tunnel" })
	return res, nil
}

// ipsecSettings resolves a conn's settings: its own, then those of the
// conns it names with also=, then conn %default. Each setting keeps its
// line so that the import can mark it.
func ipsecSettings(c *ipConn, byName map[string]*ipConn, src *source) []swSetting {
	var out []swSetting
	seen := map[string]bool{}
	visited := map[*ipConn]bool{}
	var walk func(c *ipConn, depth int)
	walk = func(c *ipConn, depth int) {
		if c == nil || visited[c] || depth > 16 {
			return
		}
		visited[c] = true
		var alsos []*ipConn
		for _, s := range c.settings {
			if s.key == "also" {
				src.use(s.line)
				a := byName[s.value]
				if a == nil {
					src.note(s.line, "no conn %s", s.value)
				}
				alsos = append(alsos, a)
				continue
			}
			if !seen[s.key] {
				seen[s.key] = true
				out = append(out, s)
			}
		}
		for _, a := range alsos {
			if a != nil {
				src.use(a.line)
			}
			walk(a, depth+1)
		}
	}
	walk(c, 0)
	if d := byName["%default"]; d != nil {
		before := len(out)
		walk(d, 0)
		if len(out) > before {
			src.use(d.line)
		}
	}
	return out
}

func ipsecConn(src *source, c *ipConn, byName map[string]*ipConn) (t config.Tunnel, auto string, ok bool) {
	src.use(c.line)
	t = config.NewTunnel("x")
	ok = true
	settings := ipsecSettings(c, byName, src)
	get := func(k string) (swSetting, bool) {
		for _, s := range settings {
			if s.key == k {
				return s, true
			}
		}
		return swSetting{}, false
	}
	version := config.IKEv2
	if s, has := get("keyexchange"); has {
		switch s.value {
		case "ikev1":
			version = config.IKEv1
		case "ikev2":
		case "ike":
			src.note(s.line, "keyexchange=ike (either): a flashgate tunnel speaks one version; imported as IKEv2")
		}
	}
	if s, has := get("ikev2"); has { // libreswan
		switch s.value {
		case "no", "never":
			version = config.IKEv1
		case "permit", "propose":
			src.note(s.line, "ikev2=%s (either): a flashgate tunnel speaks one version; imported as IKEv2", s.value)
		}
	}
	t.IKEVersion = version
	t.IKEProposals, t.ESPProposals = nil, nil
	t.StartAction = config.StartRespond
	pfs := true
	var pfsGroup string
	var pfsLine int
	for _, s := range settings {
		src.use(s.line)
		v := s.value
		switch s.key {
		case "keyexchange", "ikev2":
			if v != "ikev1" && v != "ikev2" && v != "ike" && v != "no" && v != "never" && v != "permit" && v != "propose" && v != "yes" && v != "insist" {
				src.note(s.line, "%s is not an IKE version", v)
			}
		case "left", "right":
			a, why := address(v)
			if why != "" {
				src.note(s.line, "%s", why)
			}
			if s.key == "left" {
				t.LocalAddress = config.Addr{Addr: a}
			} else {
				t.RemoteAddress = config.Addr{Addr: a}
			}
		case "leftsubnet", "rightsubnet", "leftsubnets", "rightsubnets":
			v = strings.Trim(v, "{}")
			ps, problems := subnetList(strings.ReplaceAll(v, " ", ","))
			for _, p := range problems {
				src.note(s.line, "%s", p)
			}
			for _, p := range ps {
				if strings.HasPrefix(s.key, "left") {
					t.LocalSubnets = appendPrefix(t.LocalSubnets, p.Prefix)
				} else {
					t.RemoteSubnets = appendPrefix(t.RemoteSubnets, p.Prefix)
				}
			}
		case "leftid", "rightid":
			if s.key == "leftid" {
				t.LocalID = v
			} else {
				t.RemoteID = v
			}
		case "authby", "leftauth", "rightauth":
			if v != "secret" && v != "psk" {
				src.note(s.line, "authentication by %s: flashgate tunnels use a pre-shared key (authby=secret)", v)
				ok = false
			}
		case "ike":
			props, problems := proposalList(v, true, version)
			for _, p := range problems {
				src.note(s.line, "%s", p)
			}
			t.IKEProposals = props
			if len(props) == 0 {
				src.note(s.line, "none of these proposals can be imported")
				ok = false
			}
		case "esp", "phase2alg":
			props, problems := proposalList(v, false, version)
			for _, p := range problems {
				src.note(s.line, "%s", p)
			}
			t.ESPProposals = props
			if len(props) == 0 {
				src.note(s.line, "none of these proposals can be imported")
				ok = false
			}
		case "ah":
			src.note(s.line, "AH is not supported: flashgate protects traffic with ESP")
			ok = false
		case "phase2":
			if v != "esp" {
				src.note(s.line, "phase2=%s: flashgate protects traffic with ESP", v)
				ok = false
			}
		case "ikelifetime":
			if d, good := parseDuration(v); good && d.Duration > 0 {
				t.IKELifetime = d
			} else {
				src.note(s.line, "not a duration")
			}
		case "lifetime", "keylife", "salifetime":
			if d, good := parseDuration(v); good && d.Duration > 0 {
				t.ChildLifetime = d
			} else {
				src.note(s.line, "not a duration")
			}
		case "dpddelay":
			if d, good := parseDuration(v); good {
				t.DPDInterval = d
			} else {
				src.note(s.line, "not a duration")
			}
		case "dpdtimeout":
			if d, good := parseDuration(v); good {
				t.DPDTimeout = d
			} else {
				src.note(s.line, "not a duration")
			}
		case "auto":
			auto = v
			switch v {
			case "start":
				t.StartAction = config.StartInitiate
			case "route", "ondemand":
				t.StartAction = config.StartOnTraffic
			case "add", "ignore", "keep":
				t.StartAction = config.StartRespond
			default:
				src.note(s.line, "auto=%s is not start, route, add or ignore", v)
			}
		case "type":
			if v != "tunnel" {
				src.note(s.line, "type=%s: flashgate tunnels run in tunnel mode", v)
				ok = false
			}
		case "aggressive", "aggrmode":
			if v == "yes" {
				src.note(s.line, "aggressive mode is refused: its pre-shared-key hash can be cracked offline by anyone who sees the exchange; use main mode")
				ok = false
			}
		case "pfs":
			pfs = v != "no"
		case "pfsgroup":
			pfsGroup, pfsLine = normalizeProposal(v), s.line
		case "dpdaction", "closeaction", "keyingtries", "rekeymargin", "margintime", "rekeyfuzz", "mobike", "fragmentation", "forceencaps", "encapsulation", "reauth", "compress", "leftfirewall", "rightfirewall", "leftsourceip", "rightsourceip", "leftnexthop", "rightnexthop", "leftupdown", "rightupdown", "ikepad", "nat-ikev1-method", "rekey", "replay_window", "sha2-truncbug", "sha2_truncbug", "remote_peer_type", "leftprotoport", "rightprotoport", "leftcert", "rightcert", "leftrsasigkey", "rightrsasigkey", "leftsendcert", "rightsendcert":
			src.note(s.line, "%s has no flashgate equivalent", s.key)
		default:
			src.note(s.line, "%s has no flashgate equivalent", s.key)
		}
	}
	// libreswan: pfsgroup names the ESP DH group (IKEv1); pfs=no drops it.
	if pfsGroup != "" && pfs {
		rules := config.ProposalRules{IKEVersion: version, Legacy: true}
		for i, p := range t.ESPProposals {
			if strings.Contains(p, "modp") || strings.Contains(p, "ecp") || strings.Contains(p, "curve") {
				continue
			}
			if err := rules.CheckESP(p + "-" + pfsGroup); err != nil {
				_, why, _ := strings.Cut(err.Error(), ": ")
				src.note(pfsLine, "pfsgroup: %s", why)
				ok = false
				break
			}
			t.ESPProposals[i] = p + "-" + pfsGroup
		}
	}
	if len(t.IKEProposals) == 0 {
		if version == config.IKEv1 {
			t.IKEProposals = []string{"aes128-sha256-modp2048"}
		} else {
			t.IKEProposals = []string{config.DefaultIKEProposal}
		}
	}
	if len(t.ESPProposals) == 0 {
		t.ESPProposals = []string{config.DefaultESPProposal}
	}
	if len(t.LocalSubnets) == 0 && t.LocalAddress.IsValid() {
		t.LocalSubnets = appendPrefix(t.LocalSubnets, prefixOf(t.LocalAddress))
	}
	if len(t.RemoteSubnets) == 0 && t.RemoteAddress.IsValid() {
		t.RemoteSubnets = appendPrefix(t.RemoteSubnets, prefixOf(t.RemoteAddress))
	}
	if len(t.LocalSubnets) == 0 || len(t.RemoteSubnets) == 0 {
		src.note(c.line, "conn %s names no subnets (leftsubnet, rightsubnet) and not both addresses", c.name)
		ok = false
	}
	if !t.RemoteAddress.IsValid() && t.StartAction != config.StartRespond {
		src.note(c.line, "no peer address (right): the tunnel can only wait for the peer (start_action respond)")
		t.StartAction = config.StartRespond
	}
	return t, auto, ok
}
