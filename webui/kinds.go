package webui

import (
	"strings"

	"github.com/flashgate/flashgate/config"
)

// The kinds of element the UI edits, with their form fields. Field keys are
// config paths below the element (see forms.go); labels and help are what
// the admin reads.

var kindTunnels = &kind{
	Name: "tunnels", Singular: "tunnel", Path: "tunnels", Base: "/tunnels", Back: "/tunnels",
	Fields: []field{
		{Key: "enabled", Label: "Enabled", Kind: fCheck, Section: "Peer"},
		{Key: "remote_address", Label: "Peer address", Placeholder: "203.0.113.7",
			Help: "The other gateway's public IP address. May be empty only when this side only responds."},
		{Key: "local_address", Label: "Local address", Placeholder: "automatic",
			Help: "Empty: the box's address on the route to the peer, as the kernel picks it (usually the WAN's)."},
		{Key: "remote_id", Label: "Peer ID", Placeholder: "the peer address", Help: "Empty: the peer's address."},
		{Key: "local_id", Label: "Local ID", Placeholder: "the local address", Help: "Empty: our address."},
		{Key: "auth", Label: "Authenticate with", Kind: fSelect, Options: []string{config.AuthPSK, config.AuthCert},
			Default: func(*config.Config, string) string { return config.AuthPSK },
			Help:    "psk: the pre-shared key below; cert: this box's certificate (Certificates page)."},
		{Key: "remote_auth", Label: "Peer authenticates with", Kind: fSelect, Options: []string{"", config.AuthPSK, config.AuthCert},
			Help: "Empty: the same as this box."},
		{Key: "psk", Label: "Pre-shared key", Kind: fSecret,
			Help: "At least 16 characters; a generated one is best. Give the peer the same key over a safe channel. Not needed when both sides use certificates."},
		{Key: "local_cert", Label: "Our certificate", Kind: fSelect, Choices: certificateChoices(false),
			Help: "With cert: a certificate of this box (with its key). Empty Local ID: its subject name."},
		{Key: "trusted_cas", Label: "Trusted CAs", Kind: fList, Choices: certificateChoices(true),
			Help: "With a peer certificate: the CAs it must chain to, one per line. Empty Peer ID: any identity its certificate holds."},
		{Key: "mode", Label: "Mode", Kind: fSelect, Section: "Networks", Options: []string{config.ModePolicy, config.ModeRoute},
			Help: "policy: the networks below go through the tunnel. route: the tunnel is an interface (ipsecN), routes decide " +
				"what goes into it (add them on the Routes page), and the networks are only what it accepts (empty: everything; AWS, Azure)."},
		{Key: "local_subnets", Label: "Local networks", Kind: fList, Placeholder: "192.168.1.0/24",
			Help: "Networks behind this box, one per line."},
		{Key: "remote_subnets", Label: "Remote networks", Kind: fList, Placeholder: "10.20.0.0/16",
			Help: "Networks behind the peer, one per line."},
		{Key: "interface", Label: "Interface", Placeholder: "ipsec0",
			Help: "Route mode only: ipsec0 to ipsec9999, one per tunnel. Routes, firewall rules and port forwards can name it."},
		{Key: "inner_addresses", Label: "Inner addresses", Kind: fList, Placeholder: "169.254.10.2/30",
			Help: "Route mode only, optional: this end's address on the tunnel's /30 or /31 (the cloud's inside IP)."},
		{Key: "mtu", Label: "Interface MTU", Kind: fNumber, Placeholder: "automatic",
			Help: "Route mode only. Empty: sized for the ESP overhead (1438 for AES-GCM). AWS asks for 1399, Azure for 1400."},
		{Key: "ike_proposals", Label: "IKE proposals", Kind: fProposals, Proposals: "ike", Section: "Encryption",
			Help: "The peer must accept at least one. ⚡ marks what this board's crypto engine speeds up."},
		{Key: "esp_proposals", Label: "ESP proposals", Kind: fProposals, Proposals: "esp"},
		{Key: "legacy_algorithms", Label: "Allow legacy algorithms", Kind: fCheck,
			Help: "For old peers only: lets the proposals use 3des, md5, modp1024 and modp1536, which are shown as weak. DES and Blowfish stay refused."},
		{Key: "ike_version", Label: "IKE version", Kind: fSelect, Options: []string{"2", "1"},
			Help: "2 unless the peer only speaks IKEv1 (main mode with a pre-shared key)."},
		{Key: "start_action", Label: "Start", Kind: fSelect, Section: "Behaviour",
			Options: []string{config.StartInitiate, config.StartRespond, config.StartOnTraffic},
			Help:    "initiate: bring it up now and keep it up; respond: wait for the peer; on-traffic: when a packet for the remote subnets needs it (that first packet is dropped), and again after it goes down."},
		{Key: "data_plane", Label: "Data plane", Kind: fSelect,
			Options: []string{config.DataPlaneAuto, config.DataPlaneXFRM, config.DataPlaneUserspace},
			Help:    "auto: the kernel's ESP when it has it, else flashgate's own."},
		{Key: "ike_lifetime", Label: "IKE rekey", Placeholder: "4h", Help: "Like 30m, 4h; 10s to 24h."},
		{Key: "child_lifetime", Label: "ESP rekey", Placeholder: "1h"},
		{Key: "dpd_interval", Label: "Dead peer check every", Placeholder: "30s", Help: "0s turns checks off."},
		{Key: "dpd_timeout", Label: "Dead peer after", Placeholder: "150s"},
		{Key: "ike_fragment_size", Label: "IKE fragment size", Kind: fNumber, Placeholder: "1280",
			Help: "IKEv2: the largest IP packet an IKE message goes out in; a larger one (a certificate exchange) is sent as RFC 7383 fragments when the peer announces them. 576 to 9000; empty: 1280. Lower it when a certificate tunnel stays down behind a path that drops IP fragments."},
	},
}

var zoneHelp = "A zone (" + strings.Join(config.Zones, ", ") + ") or an interface (eth0). Empty: any."

var kindRules = &kind{
	Name: "rules", Singular: "rule", Path: "firewall.rules", Base: "/firewall/rules", Back: "/firewall",
	Fields: []field{
		{Key: "enabled", Label: "Enabled", Kind: fCheck},
		{Key: "chain", Label: "Traffic", Kind: fSelect, Options: []string{config.ChainForward, config.ChainInput},
			Help: "forward: through the box; input: to the box itself."},
		{Key: "action", Label: "Action", Kind: fSelect, Options: []string{config.ActionAccept, config.ActionDrop, config.ActionReject}},
		{Key: "in", Label: "Coming in on", Placeholder: "any", Help: zoneHelp},
		{Key: "out", Label: "Going out on", Placeholder: "any", Help: "Forward rules only. " + zoneHelp},
		{Key: "protocol", Label: "Protocol", Kind: fSelect, Options: config.Protocols},
		{Key: "sources", Label: "From networks", Kind: fList, Placeholder: "any", Help: "One per line; empty: any."},
		{Key: "destinations", Label: "To networks", Kind: fList, Placeholder: "any"},
		{Key: "source_ports", Label: "From ports", Kind: fList, Placeholder: "any", Help: "tcp or udp only: 443 or 1000-2000."},
		{Key: "destination_ports", Label: "To ports", Kind: fList, Placeholder: "any"},
		{Key: "log", Label: "Log matches", Kind: fCheck},
	},
}

var kindForwards = &kind{
	Name: "port-forwards", Singular: "port forward", Path: "firewall.port_forwards", Base: "/firewall/port-forwards", Back: "/firewall",
	Fields: []field{
		{Key: "enabled", Label: "Enabled", Kind: fCheck},
		{Key: "in", Label: "Coming in on", Placeholder: "wan",
			Help: "Usually wan. A zone (" + strings.Join(config.PortForwardZones, ", ") + ") or an interface (eth0)."},
		{Key: "protocol", Label: "Protocol", Kind: fSelect, Options: []string{"tcp", "udp"}},
		{Key: "external_ports", Label: "External ports", Placeholder: "8443", Help: "One port or a range: 8000-8010."},
		{Key: "destination", Label: "To host", Placeholder: "192.168.1.20"},
		{Key: "destination_port", Label: "To port", Kind: fNumber, Placeholder: "same", Help: "Empty: the same port."},
		{Key: "sources", Label: "Only from", Kind: fList, Placeholder: "anywhere", Help: "Networks allowed to connect, one per line."},
		{Key: "log", Label: "Log", Kind: fCheck},
	},
}

var kindMasquerade = &kind{
	Name: "masquerade", Singular: "masquerade", Path: "firewall.nat.masquerade", Base: "/firewall/masquerade", Back: "/firewall",
	Fields: []field{
		{Key: "interface", Label: "Out of interface", Placeholder: "eth0",
			Help: "Traffic leaving this interface gets its address. Tunnel traffic is never masqueraded."},
		{Key: "sources", Label: "From networks", Kind: fList, Placeholder: "any"},
	},
}

var kindExemptions = &kind{
	Name: "nat-exemptions", Singular: "NAT exemption", Path: "firewall.nat.exemptions", Base: "/firewall/nat-exemptions", Back: "/firewall",
	Fields: []field{
		{Key: "sources", Label: "From networks", Kind: fList, Placeholder: "any", Help: "One per line; empty: any."},
		{Key: "destinations", Label: "To networks", Kind: fList, Placeholder: "172.16.0.0/12",
			Help: "Traffic to these keeps its source address. Tunnel networks are exempt without being listed."},
	},
}

var kindInterfaces = &kind{
	Name: "interfaces", Singular: "interface", Path: "interfaces", Base: "/interfaces", Back: "/interfaces",
	NameExample: "eth2", NameHelp: "The port's kernel name (eth2, or enx… for some USB NICs); it cannot be changed later.",
	Fields: []field{
		{Key: "description", Label: "Description"},
		{Key: "enabled", Label: "Enabled", Kind: fCheck},
		{Key: "role", Label: "Role", Kind: fSelect, Options: []string{config.RoleWAN, config.RoleLAN, config.RoleOpt},
			Help: "wan faces the internet; the built-in firewall policy follows the roles."},
		{Key: "addressing", Label: "Addressing", Kind: fSelect, Options: []string{config.AddressingStatic, config.AddressingDHCP}},
		{Key: "addresses", Label: "Addresses", Kind: fList, Placeholder: "192.168.1.1/24", Help: "Static only; address/prefix, one per line."},
		{Key: "mtu", Label: "MTU", Kind: fNumber, Placeholder: "driver default"},
		{Key: "dhcp_server.enabled", Label: "DHCP server", Kind: fCheck, Section: "DHCP server", Default: dhcpServerDefault,
			Help: "For lan and opt interfaces with a static IPv4 address: on for a LAN unless turned off, on for opt (a guest network, a DMZ) only when ticked, which lets that network reach the box's DHCP server and nothing more. Turn it off when another DHCP server already serves this network."},
		{Key: "dhcp_server.range_start", Label: "First address", Placeholder: "automatic",
			Help: "Addresses handed out to any client. Empty (both): the upper half of the network, like 192.168.1.128 to .254 on a /24."},
		{Key: "dhcp_server.range_end", Label: "Last address", Placeholder: "automatic"},
		{Key: "dhcp_server.lease_time", Label: "Lease time", Placeholder: "12h", Help: "Like 30m, 12h; 2m to 168h (7 days)."},
		{Key: "dhcp_server.static_leases", Label: "Static leases", Kind: fList, Lines: true, Get: staticLeaseLines,
			Placeholder: "02:00:5e:10:00:01,192.168.1.20,printer",
			Help:        "One per line: MAC,address or MAC,address,host name. That client always gets that address; no other client does."},
	},
}

// dhcpServerDefault is whether an interface's DHCP server runs when its
// configuration does not say: on for a LAN, as before the setting existed;
// off for opt and wan.
func dhcpServerDefault(c *config.Config, name string) string {
	if ifc := c.Interface(name); ifc != nil && ifc.DHCPServerByDefault() {
		return "true"
	}
	return "false"
}

// staticLeaseLines are an interface's static leases in their one-line form.
func staticLeaseLines(c *config.Config, name string) []string {
	ifc := c.Interface(name)
	if ifc == nil {
		return nil
	}
	out := make([]string, 0, len(ifc.DHCPServer.StaticLeases))
	for _, l := range ifc.DHCPServer.StaticLeases {
		b, _ := l.MarshalText()
		out = append(out, string(b))
	}
	return out
}

var kindRoutes = &kind{
	Name: "routes", Singular: "route", Path: "routes", Base: "/routes", Back: "/routes",
	Fields: []field{
		{Key: "enabled", Label: "Enabled", Kind: fCheck},
		{Key: "destination", Label: "Destination", Placeholder: "10.20.0.0/16",
			Help: "The network this route reaches. 0.0.0.0/0 is a default route."},
		{Key: "gateway", Label: "Gateway", Placeholder: "none",
			Help: "The router to send the traffic to, on the network of one of the interfaces. Empty: the destination is directly on the interface."},
		{Key: "interface", Label: "Interface", Placeholder: "by the gateway",
			Help: "Like eth1, or a route tunnel's ipsec0 (the route is then there only while the tunnel is up). Empty: the interface the gateway is on. Give a gateway, an interface or both."},
		{Key: "metric", Label: "Metric", Kind: fNumber, Placeholder: "0",
			Help: "0 to 65535; of two routes to the same destination the lower metric wins."},
	},
}

var kindSystem = &kind{
	Name: "system", Singular: "system settings", Path: "system", Base: "/system/settings", Back: "/system", Single: true,
	Fields: []field{
		{Key: "hostname", Label: "Host name", Placeholder: "flashgate"},
		{Key: "timezone", Label: "Time zone", Placeholder: "UTC", Help: "Like UTC or Europe/Berlin."},
		{Key: "ntp_servers", Label: "NTP servers", Kind: fList, Placeholder: "pool.ntp.org", Help: "One per line."},
		{Key: "remote_syslog.host", Label: "Remote syslog host", Placeholder: "off", Help: "Empty: off."},
		{Key: "remote_syslog.port", Label: "Syslog port", Kind: fNumber, Placeholder: "514"},
		{Key: "remote_syslog.protocol", Label: "Syslog protocol", Kind: fSelect, Options: []string{"", "udp", "tcp"}},
	},
}

// kinds are the kinds the JSON API edits, by API name.
var kinds = map[string]*kind{
	kindTunnels.Name: kindTunnels, kindRules.Name: kindRules, kindForwards.Name: kindForwards,
	kindMasquerade.Name: kindMasquerade, kindExemptions.Name: kindExemptions, kindInterfaces.Name: kindInterfaces,
	kindRoutes.Name: kindRoutes,
}
