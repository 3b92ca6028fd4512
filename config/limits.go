package config

import (
	"fmt"
	"unicode"
)

// Bounds on what one configuration may hold. A box has a few ports and
// at most a few hundred tunnels and rules; the bounds are far above that
// and far below what would strain a 128 MB board or the 1 MiB document
// limit (MaxDocumentSize), which every edit is checked against too.
const (
	MaxInterfaces     = 64
	MaxRoutes         = 1024
	MaxRules          = 1024
	MaxPortForwards   = 512
	MaxNATEntries     = 512 // masquerade and exemptions, each
	MaxTunnels        = 1024
	MaxAdmins         = 16
	MaxListItems      = 64 // addresses, sources, ports, subnets, proposals, NTP servers of one element
	MaxDescriptionLen = 256
	MaxStaticLeases   = 256 // per interface
)

// limits checks the counts of every list and the free-text fields.
func (v *validator) limits() {
	c := v.c
	count := func(path string, n, max int) {
		if n > max {
			v.add(path, "%d entries, at most %d", n, max)
		}
	}
	count("system.admins", len(c.System.Admins), MaxAdmins)
	count("system.ntp_servers", len(c.System.NTPServers), MaxListItems)
	count("interfaces", len(c.Interfaces), MaxInterfaces)
	count("routes", len(c.Routes), MaxRoutes)
	count("firewall.rules", len(c.Firewall.Rules), MaxRules)
	count("firewall.port_forwards", len(c.Firewall.PortForwards), MaxPortForwards)
	count("firewall.nat.masquerade", len(c.Firewall.NAT.Masquerade), MaxNATEntries)
	count("firewall.nat.exemptions", len(c.Firewall.NAT.Exemptions), MaxNATEntries)
	count("tunnels", len(c.Tunnels), MaxTunnels)
	for i := range c.Interfaces {
		ifc := &c.Interfaces[i]
		path := fmt.Sprintf("interfaces[%s]", ifc.Name)
		count(path+".addresses", len(ifc.Addresses), MaxListItems)
		count(path+".dhcp_server.static_leases", len(ifc.DHCPServer.StaticLeases), MaxStaticLeases)
		switch d := ifc.Description; {
		case len(d) > MaxDescriptionLen:
			v.add(path+".description", "%d bytes, at most %d", len(d), MaxDescriptionLen)
		case !printable(d):
			v.add(path+".description", "control characters are not allowed")
		}
	}
	for i := range c.Firewall.Rules {
		r := &c.Firewall.Rules[i]
		path := fmt.Sprintf("firewall.rules[%s]", r.Name)
		count(path+".sources", len(r.Sources), MaxListItems)
		count(path+".destinations", len(r.Destinations), MaxListItems)
		count(path+".source_ports", len(r.SourcePorts), MaxListItems)
		count(path+".destination_ports", len(r.DestinationPorts), MaxListItems)
	}
	for i := range c.Firewall.PortForwards {
		f := &c.Firewall.PortForwards[i]
		count(fmt.Sprintf("firewall.port_forwards[%s].sources", f.Name), len(f.Sources), MaxListItems)
	}
	for i := range c.Firewall.NAT.Masquerade {
		m := &c.Firewall.NAT.Masquerade[i]
		count(fmt.Sprintf("firewall.nat.masquerade[%d].sources", i), len(m.Sources), MaxListItems)
	}
	for i := range c.Firewall.NAT.Exemptions {
		e := &c.Firewall.NAT.Exemptions[i]
		count(fmt.Sprintf("firewall.nat.exemptions[%d].sources", i), len(e.Sources), MaxListItems)
		count(fmt.Sprintf("firewall.nat.exemptions[%d].destinations", i), len(e.Destinations), MaxListItems)
	}
	for i := range c.Tunnels {
		t := &c.Tunnels[i]
		path := fmt.Sprintf("tunnels[%s]", t.Name)
		count(path+".ike_proposals", len(t.IKEProposals), MaxListItems)
		count(path+".esp_proposals", len(t.ESPProposals), MaxListItems)
		count(path+".local_subnets", len(t.LocalSubnets), MaxListItems)
		count(path+".remote_subnets", len(t.RemoteSubnets), MaxListItems)
	}
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// sizeError refuses a configuration whose document is over
// MaxDocumentSize: the store could write it, but would refuse to read it
// back (decodeRecord), and at the next start configd would set the whole
// database aside and run the defaults, with no admin account. Every edit
// and every commit checks the size of the document it encodes.
func sizeError(n int) error {
	return fmt.Errorf("the configuration would be %d bytes, more than the %d allowed", n, MaxDocumentSize)
}
