package config

import "testing"

func TestCloneIsDeep(t *testing.T) {
	a := sampleConfig(2)
	b := a.Clone()
	b.Tunnels[0].RemoteSubnets[0] = MustPrefix("10.99.0.0/16")
	b.Tunnels[1].IKEProposals[0] = "changed"
	b.System.NTPServers[0] = "changed"
	b.Firewall.Rules[0].DestinationPorts[0] = Port(1)
	if a.Tunnels[0].RemoteSubnets[0].String() != "10.1.0.0/16" || a.Tunnels[1].IKEProposals[0] == "changed" ||
		a.System.NTPServers[0] == "changed" || a.Firewall.Rules[0].DestinationPorts[0] != Port(22) {
		t.Error("editing a clone changed the original")
	}
	if string(a.Clone().JSON()) != string(a.JSON()) {
		t.Error("clone differs from the original")
	}
}
