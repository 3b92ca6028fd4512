package config

import (
	"strings"
	"testing"
)

func TestTextForm(t *testing.T) {
	c := sampleConfig(1)
	c.Interfaces[1].Description = "office LAN"
	text := c.Text()
	for _, want := range []string{
		"set system hostname hub\n",
		"set system admins admin\n",
		"set system admins admin password_hash <redacted>\n",
		"set interfaces eth1 description \"office LAN\"\n",
		"set interfaces eth1 addresses 10.0.0.1/16\n",
		"set tunnels site00\n",
		"set tunnels site00 remote_address 192.0.2.1\n",
		"set tunnels site00 psk <redacted>\n",
		"set tunnels site00 ike_proposals aes128gcm16-prfsha256-ecp256\n",
		"set tunnels site00 ike_proposals aes256-sha256-modp2048\n",
		"set tunnels site00 remote_subnets 10.1.0.0/16\n",
		"set firewall port_forwards web external_ports 443\n",
		"set firewall rules ssh-from-lan destination_ports 22\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text form lacks %q", want)
		}
	}
	if strings.Contains(text, c.Tunnels[0].PSK.Reveal()) || strings.Contains(text, "$argon2id") {
		t.Errorf("text form shows a secret:\n%s", text)
	}
	if c.Text() != c.Clone().Text() {
		t.Error("text form of a clone differs")
	}
}

func TestSecretsStayOutOfFormatting(t *testing.T) {
	c := sampleConfig(1)
	for _, s := range []string{
		c.Tunnels[0].PSK.String(),
		strings.Join(strings.Fields(sprintf("%v %+v %#v %s", c.Tunnels[0], c.Tunnels[0], c.Tunnels[0].PSK, c.Tunnels[0].PSK)), " "),
	} {
		if strings.Contains(s, c.Tunnels[0].PSK.Reveal()) {
			t.Errorf("secret leaked into %q", s)
		}
	}
}

func TestDiff(t *testing.T) {
	a := sampleConfig(3)
	b := a.Clone()
	b.Tunnels[1].RemoteAddress = MustAddr("198.51.100.7")
	b.Tunnels[2].PSK = NewSecret("a-new-and-long-psk-value")
	b.Firewall.Rules[0], b.Firewall.Rules[1] = b.Firewall.Rules[1], b.Firewall.Rules[0]
	got := DiffText(a, b)
	for _, want := range []string{
		"- set tunnels site01 remote_address 192.0.2.2\n+ set tunnels site01 remote_address 198.51.100.7\n",
		"- set tunnels site02 psk <redacted>\n+ set tunnels site02 psk <redacted>\n",
		"- set firewall rules ssh-from-lan\n", // reordered rules show: order is meaning
		"+ set firewall rules ssh-from-lan\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q; diff:\n%s", want, got)
		}
	}
	if strings.Contains(got, "a-new-and-long") || strings.Contains(got, a.Tunnels[2].PSK.Reveal()) {
		t.Errorf("diff shows a secret:\n%s", got)
	}
	if d := Diff(a, a.Clone()); len(d) != 0 {
		t.Errorf("diff of equal configs: %v", d)
	}
	// Adding a tunnel shows only its lines.
	c := a.Clone()
	nt := NewTunnel("new")
	c.Tunnels = append(c.Tunnels, nt)
	for _, d := range Diff(a, c) {
		if d.Op != '+' || d.Line.Path[0] != "tunnels" || d.Line.Path[1] != "new" {
			t.Errorf("adding a tunnel produced %q", d)
		}
	}
}

func TestChangedSections(t *testing.T) {
	a := sampleConfig(1)
	b := a.Clone()
	b.Tunnels[0].Enabled = false
	b.Routes = nil
	b.normalize()
	got := joined(ChangedSections(a, b))
	if got != "routes,tunnels" {
		t.Errorf("ChangedSections = %s, want routes,tunnels", got)
	}
}

func TestDiffOfVeryDifferentConfigsIsBounded(t *testing.T) {
	a, b := SyntheticConfig(200), Default()
	b.Tunnels = SyntheticConfig(250).Tunnels[50:] // nothing in common in the middle
	for i := range b.Tunnels {
		b.Tunnels[i].Name = "other" + b.Tunnels[i].Name
	}
	d := Diff(a, b)
	plus, minus := 0, 0
	for _, l := range d {
		if l.Op == '+' {
			plus++
		} else {
			minus++
		}
	}
	if want := len(b.Lines()) - commonLines(a, b); plus != want {
		t.Errorf("%d added lines, want %d", plus, want)
	}
	if want := len(a.Lines()) - commonLines(a, b); minus != want {
		t.Errorf("%d removed lines, want %d", minus, want)
	}
}

// commonLines counts lines present in both (as multisets).
func commonLines(a, b *Config) int {
	seen := map[string]int{}
	for _, l := range a.Lines() {
		seen[l.String()+l.key]++
	}
	n := 0
	for _, l := range b.Lines() {
		if seen[l.String()+l.key] > 0 {
			seen[l.String()+l.key]--
			n++
		}
	}
	return n
}

// ike_version and legacy_algorithms are left out of the JSON and the text
// form at their defaults, so that a configuration written before they
// existed reads (and writes back) the same; set, they show and survive a
// round trip, and a path edit sets them.
func TestIKEVersionAndLegacyForms(t *testing.T) {
	c := sampleConfig(1)
	js := string(c.JSON())
	if strings.Contains(js, "ike_version") || strings.Contains(js, "legacy_algorithms") ||
		strings.Contains(c.Text(), "ike_version") {
		t.Fatalf("defaults written out:\n%s", js)
	}
	back, err := Decode([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if back.Tunnels[0].IKEVersion != IKEv2 || back.Tunnels[0].LegacyAlgorithms {
		t.Fatalf("a document without the fields decodes to ike_version %d, legacy %v", back.Tunnels[0].IKEVersion, back.Tunnels[0].LegacyAlgorithms)
	}
	if err := back.Set("tunnels.site00.ike_version", "1"); err != nil {
		t.Fatal(err)
	}
	if err := back.Set("tunnels.site00.legacy_algorithms", "true"); err != nil {
		t.Fatal(err)
	}
	if err := back.Set("tunnels.site00.ike_version", "3"); err == nil || !strings.Contains(err.Error(), "not an IKE version: 1 or 2") {
		t.Errorf("ike_version 3: %v", err)
	}
	text := back.Text()
	for _, want := range []string{"set tunnels site00 ike_version 1\n", "set tunnels site00 legacy_algorithms true\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("text form lacks %q:\n%s", want, text)
		}
	}
	again, err := Decode(back.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if again.Tunnels[0].IKEVersion != IKEv1 || !again.Tunnels[0].LegacyAlgorithms {
		t.Errorf("round trip lost them: %+v", again.Tunnels[0])
	}
}
