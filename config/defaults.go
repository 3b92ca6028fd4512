package config

import (
	"reflect"

	"github.com/flashgate/flashgate/boards"
)

// Tunnel defaults, chosen to match strongSwan's so that a peer configured
// with its defaults agrees with ours: rekey the IKE_SA every 4 h and the
// CHILD_SA every hour.
const (
	DefaultIKEProposal = "aes128gcm16-prfsha256-ecp256"
	DefaultESPProposal = "aes128gcm16-ecp256"
)

// Default is the configuration of a fresh box with the classic two ports:
// eth0 on the WAN with DHCP, eth1 on the LAN as 192.168.1.1/24, LAN traffic
// masqueraded out of the WAN, no admin account (the console asks for a
// password on first boot) and no tunnels. On the appliance configd uses
// DefaultForNICs with the board's ports; Default is its fallback for a
// board it does not know.
func Default() *Config {
	return DefaultForNICs([]NIC{
		{Name: "eth0", Role: RoleWAN},
		{Name: "eth1", Role: RoleLAN},
	})
}

// NIC is a network port as a board definition lists it (boards.NIC carries
// the same two fields; config does not import boards so that the schema
// stays a leaf package every service can use).
type NIC struct {
	Name string // kernel name, eth0
	Role string // wan, lan or opt
}

// DefaultForNICs is Default for a board's own ports: every port gets the
// role the board definition gives it; the first LAN port gets
// 192.168.1.1/24, other LAN and opt ports start disabled.
func DefaultForNICs(nics []NIC) *Config {
	c := &Config{
		System: System{
			Hostname:   "flashgate",
			Timezone:   "UTC",
			Admins:     []Admin{},
			NTPServers: []string{"pool.ntp.org"},
		},
		Interfaces: []Interface{},
		Routes:     []Route{},
		Firewall: Firewall{
			Rules:        []Rule{},
			NAT:          NAT{Masquerade: []Masquerade{}, Exemptions: []NATExemption{}},
			PortForwards: []PortForward{},
		},
		Tunnels: []Tunnel{},
	}
	lanDone := false
	for _, n := range nics {
		ifc := Interface{Name: n.Name, Role: n.Role, Enabled: true, Addressing: AddressingStatic, Addresses: []Prefix{}}
		switch n.Role {
		case RoleWAN:
			ifc.Addressing = AddressingDHCP
			c.Firewall.NAT.Masquerade = append(c.Firewall.NAT.Masquerade,
				Masquerade{Name: "lan-out-" + n.Name, Interface: n.Name})
		case RoleLAN:
			if !lanDone {
				ifc.Addresses = []Prefix{MustPrefix("192.168.1.1/24")}
				lanDone = true
			} else {
				ifc.Enabled = false
			}
		default:
			ifc.Enabled = false
		}
		c.Interfaces = append(c.Interfaces, ifc)
	}
	return c
}

// NewTunnel returns a tunnel called name with the defaults filled in; the
// caller adds the addresses, the PSK and the subnets.
func NewTunnel(name string) Tunnel {
	return Tunnel{
		Name:          name,
		Enabled:       true,
		IKEProposals:  []string{DefaultIKEProposal},
		ESPProposals:  []string{DefaultESPProposal},
		LocalSubnets:  []Prefix{},
		RemoteSubnets: []Prefix{},
		IKELifetime:   Seconds(4 * 3600),
		ChildLifetime: Seconds(3600),
		DPDInterval:   Seconds(30),
		DPDTimeout:    Seconds(150),
		StartAction:   StartInitiate,
		DataPlane:     DataPlaneAuto,
		IKEVersion:    IKEv2,
	}
}

// newElement returns a new list element with its defaults, for path edits
// that create an element by naming it ("set tunnels branch ...").
func newElement(list string, name string) (any, bool) {
	switch list {
	case "tunnels":
		t := NewTunnel(name)
		return &t, true
	case "interfaces":
		return &Interface{Name: name, Role: RoleOpt, Enabled: true, Addressing: AddressingStatic, Addresses: []Prefix{}}, true
	case "routes":
		return &Route{Name: name, Enabled: true}, true
	case "rules":
		return &Rule{Name: name, Enabled: true, Chain: ChainForward, Protocol: "any", Action: ActionDrop}, true
	case "port_forwards":
		return &PortForward{Name: name, Enabled: true, In: RoleWAN, Protocol: "tcp"}, true
	case "masquerade":
		return &Masquerade{Name: name}, true
	case "exemptions":
		return &NATExemption{Name: name, Destinations: []Prefix{}}, true
	case "admins":
		return &Admin{Name: name}, true
	}
	return nil, false
}

// Clone returns a deep copy. The schema holds only values, strings and
// slices (netip values are immutable), so copying every slice is enough.
func (c *Config) Clone() *Config {
	out := new(Config)
	v := reflect.ValueOf(out).Elem()
	v.Set(reflect.ValueOf(c).Elem())
	copySlices(v)
	return out
}

// copySlices replaces every slice reachable from v by a copy.
// (The leaf types, Prefix, Addr, Secret and the like, hold none.)
func copySlices(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for _, i := range walkOf(v.Type()).fields {
			copySlices(v.Field(i))
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		n := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(n, v)
		v.Set(n)
		if walkOf(v.Type().Elem()).holdsSlices {
			for i := 0; i < n.Len(); i++ {
				copySlices(n.Index(i))
			}
		}
	}
}

// BoardDefaults is the configuration of a fresh box, a set-aside database
// and a factory reset on board b: every port the board definition lists,
// with the role it gives it (DefaultForNICs says what each role
// starts as). It is what netd falls back to and what the console's recovery
// writes, so the first boot and a rescue agree on the ports. A board
// without NICs in its definition gets Default's eth0/eth1.
func BoardDefaults(b boards.Board) *Config {
	if len(b.NICs) == 0 {
		return Default()
	}
	nics := make([]NIC, len(b.NICs))
	for i, n := range b.NICs {
		nics[i] = NIC{Name: n.Name, Role: n.Role}
	}
	return DefaultForNICs(nics)
}
