package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
)

// import FILE shows the flashboot isakmpd.conf's tunnel, its weak
// proposals and the line not imported, asks, and saves into the
// candidate; the same import pasted at the prompt is refused afterwards
// because the tunnel exists.
func TestImportCommand(t *testing.T) {
	term, cd := newCLI(t)
	file := "../../config/importer/testdata/isakmpd-flashboot-vpn.conf"
	term.send("import " + file + "\r")
	got := term.expect("Type yes to go on")
	for _, want := range []string{"isakmpd.conf: 1 tunnel(s)", "set tunnels VPN-A-B ike_version 1", "set tunnels VPN-A-B psk <redacted>",
		"weak: VPN-A-B ike proposal aes128-sha1-modp1024 (sha1, modp1024)", "40: Transforms=", "BLF-SHA: blowfish is refused"} {
		if !strings.Contains(got, want) {
			t.Errorf("import output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "yoursharedsecret") {
		t.Error("PSK shown")
	}
	term.send("yes\r")
	if got := term.expect(prompt); !strings.Contains(got, "Saved to the candidate") {
		t.Fatalf("after yes:\n%s", got)
	}
	c, _ := cd.store.Candidate()
	tun := c.Tunnel("VPN-A-B")
	if tun == nil || tun.IKEVersion != config.IKEv1 || !tun.LegacyAlgorithms || len(tun.RemoteSubnets) != 1 {
		t.Fatalf("candidate: %+v", tun)
	}

	// Committed, the tunnel's weak proposals show in show tunnels, also
	// while iked does not answer (none runs in this test).
	term.send("commit imported\r")
	if got := term.expect(prompt); !strings.Contains(got, "Committed revision") {
		t.Fatalf("commit:\n%s", got)
	}
	term.send("show tunnels\r")
	if got := term.expect(prompt); !strings.Contains(got, "VPN-A-B weak proposal: ike aes128-sha1-modp1024: sha1, modp1024") {
		t.Errorf("show tunnels:\n%s", got)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	term.send("import\r")
	term.expect("end with a line holding only a dot")
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		term.send(l + "\r")
	}
	term.send(".\r")
	if got := term.expect(prompt); !strings.Contains(got, "already has tunnels called VPN-A-B") {
		t.Errorf("pasted import of an existing tunnel:\n%s", got)
	}
}
