package importer

import (
	"fmt"
	"strings"

	"github.com/flashgate/flashgate/config"
)

// swanctl.conf (strongSwan) is a tree of "name { ... }" sections and
// "key = value" settings. connections holds one IKE connection per name,
// each with local/remote authentication rounds and children (the IPsec
// SAs); secrets holds the PSKs, matched to a connection by its IDs or
// addresses. A connection becomes one tunnel; its children's subnets are
// merged when they share proposals and lifetimes.

type swNode struct {
	name     string
	line     int
	settings []swSetting
	children []*swNode
}

type swSetting struct {
	key, value string
	line       int
}

const maxSwanctlDepth = 16

func parseSwanctl(src *source) (*swNode, error) {
	root := &swNode{}
	stack := []*swNode{root}
	for i, l := range src.lines {
		n := i + 1
		text := l.text
		if j := strings.IndexByte(text, '#'); j >= 0 && !strings.Contains(text[:j], `"`) {
			text = text[:j]
		}
		text = strings.TrimSpace(text)
		cur := stack[len(stack)-1]
		switch {
		case text == "":
		case text == "}":
			if len(stack) == 1 {
				src.note(n, "a } without its {")
				continue
			}
			src.use(n)
			stack = stack[:len(stack)-1]
		case strings.HasSuffix(text, "{"):
			name := strings.TrimSpace(strings.TrimSuffix(text, "{"))
			if name == "" || strings.ContainsAny(name, "={}") {
				src.note(n, "not a section: a name, then {")
				continue
			}
			if len(stack) > maxSwanctlDepth {
				return nil, fmt.Errorf("line %d: sections nested more than %d deep", n, maxSwanctlDepth)
			}
			node := &swNode{name: name, line: n}
			cur.children = append(cur.children, node)
			stack = append(stack, node)
		case strings.HasPrefix(text, "include "):
			src.note(n, "includes are not followed: paste the included file's content instead")
		default:
			k, v, ok := strings.Cut(text, "=")
			if !ok {
				src.note(n, "not a key = value line")
				continue
			}
			cur.settings = append(cur.settings, swSetting{strings.TrimSpace(k), strings.TrimSpace(v), n})
		}
	}
	if len(stack) > 1 {
		src.note(stack[len(stack)-1].line, "section %s is not closed with }", stack[len(stack)-1].name)
	}
	return root, nil
}

func (n *swNode) child(name string) *swNode {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (n *swNode) get(key string) (swSetting, bool) {
	for _, s := range n.settings {
		if s.key == key {
			return s, true
		}
	}
	return swSetting{}, false
}

// swSecret is one ike secret of the secrets section.
type swSecret struct {
	psk, why string
	ids      []string
	line     int
	lines    []int
}

func importSwanctl(data []byte) (*Result, error) {
	src := newSource(data)
	root, err := parseSwanctl(src)
	if err != nil {
		return nil, err
	}
	var secrets []*swSecret
	for _, top := range root.children {
		if top.name != "secrets" {
			continue
		}
		for _, s := range top.children {
			if !strings.HasPrefix(s.name, "ike") {
				src.note(s.line, "%s secrets are not used: flashgate tunnels authenticate with a pre-shared key (ike secrets)", s.name)
				continue
			}
			sec := &swSecret{line: s.line}
			for _, st := range s.settings {
				switch {
				case st.key == "secret":
					src.secret(st.line)
					sec.psk, sec.why = pskValue(st.value)
					if sec.why != "" {
						src.note(st.line, "%s", sec.why)
					}
				case st.key == "id" || strings.HasPrefix(st.key, "id-") || strings.HasPrefix(st.key, "id_"):
					sec.ids = append(sec.ids, unquote(st.value))
				default:
					src.note(st.line, "%s has no flashgate equivalent in a secret", st.key)
				}
				sec.lines = append(sec.lines, st.line)
			}
			secrets = append(secrets, sec)
		}
	}

	res := &Result{}
	taken := map[string]bool{}
	for _, top := range root.children {
		switch top.name {
		case "secrets":
			src.use(top.line)
			continue
		case "connections":
			src.use(top.line)
		default:
			src.note(top.line, "section %s has no flashgate equivalent (only connections and secrets are imported)", top.name)
			continue
		}
		for _, s := range top.settings {
			src.note(s.line, "a setting outside any connection")
		}
		for _, conn := range top.children {
			stop := src.record()
			t, ok := swanctlConnection(src, conn, secrets, taken)
			read := stop()
			if !ok {
				src.unuse(read)
				src.note(conn.line, "connection %s is not imported (see the reasons on its lines)", conn.name)
				continue
			}
			res.Tunnels = append(res.Tunnels, t)
		}
	}
	res.Unmapped = src.unmapped(func(text string) bool {
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		return strings.TrimSpace(text) != ""
	}, func(n int) string { return "not part of any imported tunnel" })
	return res, nil
}

func swanctlConnection(src *source, conn *swNode, secrets []*swSecret, taken map[string]bool) (config.Tunnel, bool) {
	src.use(conn.line)
	t := config.NewTunnel(uniqueName(conn.name, map[string]bool{}))
	ok := true
	version := config.IKEv2
	if v, has := conn.get("version"); has {
		src.use(v.line)
		switch v.value {
		case "1":
			version = config.IKEv1
		case "2":
		case "0":
			src.note(v.line, "version 0 (either): a flashgate tunnel speaks one version; imported as IKEv2 (set ike_version 1 if the peer only speaks IKEv1)")
		default:
			src.note(v.line, "not an IKE version")
			ok = false
		}
	}
	t.IKEVersion = version
	t.IKEProposals = nil
	t.StartAction = config.StartRespond
	var remoteAddrLine int
	for _, s := range conn.settings {
		src.use(s.line)
		switch s.key {
		case "version":
		case "local_addrs", "remote_addrs":
			a, why := address(s.value)
			if why != "" {
				src.note(s.line, "%s", why)
			}
			if s.key == "local_addrs" {
				t.LocalAddress = config.Addr{Addr: a}
			} else {
				t.RemoteAddress = config.Addr{Addr: a}
				remoteAddrLine = s.line
			}
		case "proposals":
			props, problems := proposalList(s.value, true, version)
			for _, p := range problems {
				src.note(s.line, "%s", p)
			}
			t.IKEProposals = props
			if len(props) == 0 {
				src.note(s.line, "none of these proposals can be imported")
				ok = false
			}
		case "rekey_time":
			if d, good := parseDuration(s.value); good && d.Duration > 0 {
				t.IKELifetime = d
			} else {
				src.note(s.line, "not a duration flashgate can use (e.g. 4h)")
			}
		case "dpd_delay":
			if d, good := parseDuration(s.value); good {
				t.DPDInterval = d
				if d.Duration > t.DPDTimeout.Duration {
					t.DPDTimeout = config.Duration{Duration: 5 * d.Duration}
				}
			} else {
				src.note(s.line, "not a duration")
			}
		case "dpd_timeout":
			if d, good := parseDuration(s.value); good {
				t.DPDTimeout = d
			} else {
				src.note(s.line, "not a duration")
			}
		case "aggressive":
			if s.value == "yes" {
				src.note(s.line, "aggressive mode is refused: its pre-shared-key hash can be cracked offline by anyone who sees the exchange; use main mode")
				ok = false
			}
		case "encap", "mobike", "fragmentation", "over_time", "rand_time", "reauth_time", "unique", "keyingtries", "send_cert", "send_certreq", "pull", "dscp", "if_id_in", "if_id_out", "mediation":
			src.note(s.line, "%s has no flashgate equivalent (flashgate does NAT-T by itself and keeps its own retry and rekey timing)", s.key)
		default:
			src.note(s.line, "%s has no flashgate equivalent", s.key)
		}
	}
	if len(t.IKEProposals) == 0 {
		if version == config.IKEv1 {
			// flashgate's default is AEAD, which IKEv1 has not.
			t.IKEProposals = []string{"aes128-sha256-modp2048"}
		} else {
			t.IKEProposals = []string{config.DefaultIKEProposal}
		}
	}
	// Authentication rounds: local* and remote* sections.
	for _, sub := range conn.children {
		side := ""
		switch {
		case strings.HasPrefix(sub.name, "local"):
			side = "local"
		case strings.HasPrefix(sub.name, "remote"):
			side = "remote"
		case sub.name == "children":
			continue
		default:
			src.note(sub.line, "section %s has no flashgate equivalent", sub.name)
			continue
		}
		src.use(sub.line)
		for _, s := range sub.settings {
			src.use(s.line)
			switch s.key {
			case "auth":
				if s.value != "psk" {
					src.note(s.line, "authentication by %s: flashgate tunnels use a pre-shared key (auth = psk)", s.value)
					ok = false
				}
			case "id":
				id := unquote(s.value)
				if id == "%any" {
					src.note(s.line, "%%any: flashgate needs the peer's ID or address")
					continue
				}
				if side == "local" {
					t.LocalID = id
				} else {
					t.RemoteID = id
				}
			default:
				src.note(s.line, "%s has no flashgate equivalent (flashgate tunnels authenticate with a pre-shared key)", s.key)
			}
		}
	}
	// Children.
	var child *swNode
	if ch := conn.child("children"); ch != nil {
		src.use(ch.line)
		var espKey string
		for _, c := range ch.children {
			props, local, remote, lifetime, start, cok := swanctlChild(src, c, version)
			key := strings.Join(props, ",") + "|" + lifetime.String()
			switch {
			case !cok:
				src.note(c.line, "child %s is not imported", c.name)
				continue
			case child == nil:
				child, espKey = c, key
				t.ESPProposals = props
				if len(props) == 0 {
					t.ESPProposals = []string{config.DefaultESPProposal}
				}
				if lifetime.Duration > 0 {
					t.ChildLifetime = lifetime
				}
			case key != espKey:
				src.note(c.line, "child %s has other proposals or lifetimes than child %s; a flashgate tunnel has one set: import it as a tunnel of its own", c.name, child.name)
				continue
			}
			for _, p := range local {
				t.LocalSubnets = appendPrefix(t.LocalSubnets, p.Prefix)
			}
			for _, p := range remote {
				t.RemoteSubnets = appendPrefix(t.RemoteSubnets, p.Prefix)
			}
			if start != "" && (t.StartAction == config.StartRespond || start == config.StartInitiate) {
				t.StartAction = start
			}
		}
	}
	if child == nil {
		src.note(conn.line, "connection %s has no child that flashgate can import (children { name { local_ts, remote_ts } })", conn.name)
		ok = false
	}
	if !t.RemoteAddress.IsValid() && t.StartAction != config.StartRespond {
		src.note(max(remoteAddrLine, conn.line), "no peer address: the tunnel can only wait for the peer (start_action respond)")
		t.StartAction = config.StartRespond
	}
	// The PSK: the secret whose IDs name this connection's remote ID or
	// address, else its local ID, else the only secret without IDs.
	var match *swSecret
	want := []string{t.RemoteID, t.RemoteAddress.String(), t.LocalID, t.LocalAddress.String()}
	for _, w := range want {
		if w == "" || match != nil {
			continue
		}
		for _, s := range secrets {
			for _, id := range s.ids {
				if id == w {
					match = s
				}
			}
		}
	}
	if match == nil {
		for _, s := range secrets {
			if len(s.ids) == 0 {
				match = s
			}
		}
	}
	if match == nil || match.psk == "" {
		src.note(conn.line, "no usable ike secret for connection %s (secrets { ike-%s { id = ...; secret = ... } })", conn.name, conn.name)
		ok = false
	} else {
		t.PSK = config.NewSecret(match.psk)
		src.use(match.line)
		for _, n := range match.lines {
			src.use(n)
		}
	}
	t.Name = uniqueName(conn.name, taken)
	finish(&t)
	return t, ok
}

func swanctlChild(src *source, c *swNode, version config.IKEVersion) (props []string, local, remote []config.Prefix, lifetime config.Duration, start string, ok bool) {
	src.use(c.line)
	ok = true
	for _, s := range c.settings {
		src.use(s.line)
		switch s.key {
		case "local_ts", "remote_ts":
			ps, problems := subnetList(s.value)
			for _, p := range problems {
				src.note(s.line, "%s", p)
			}
			if s.key == "local_ts" {
				local = ps
			} else {
				remote = ps
			}
		case "esp_proposals":
			var problems []string
			props, problems = proposalList(s.value, false, version)
			for _, p := range problems {
				src.note(s.line, "%s", p)
			}
			if len(props) == 0 {
				src.note(s.line, "none of these proposals can be imported")
				ok = false
			}
		case "ah_proposals":
			src.note(s.line, "AH is not supported: flashgate protects traffic with ESP")
			ok = false
		case "rekey_time":
			if d, good := parseDuration(s.value); good && d.Duration > 0 {
				lifetime = d
			} else {
				src.note(s.line, "not a duration flashgate can use (e.g. 1h)")
			}
		case "mode":
			if s.value != "tunnel" {
				src.note(s.line, "mode %s: flashgate tunnels run in tunnel mode", s.value)
				ok = false
			}
		case "start_action":
			switch s.value {
			case "start":
				start = config.StartInitiate
			case "trap":
				start = config.StartOnTraffic
			case "none":
				start = config.StartRespond
			case "trap|start", "start|trap":
				start = config.StartInitiate
			default:
				src.note(s.line, "start_action %s is not start, trap or none", s.value)
			}
		case "dpd_action", "close_action":
			src.note(s.line, "flashgate restarts an initiating tunnel whose peer went away by itself; %s is not imported", s.key)
		default:
			src.note(s.line, "%s has no flashgate equivalent in a child", s.key)
		}
	}
	if len(local) == 0 || len(remote) == 0 {
		src.note(c.line, "child %s needs local_ts and remote_ts with subnets flashgate can use", c.name)
		ok = false
	}
	return props, local, remote, lifetime, start, ok
}
