package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/internal/pki"
)

// TestCertCommand: the store from the console against a real configd: a CA,
// this box's certificate, a peer's bundle to a file, a revocation, the CRL
// exported and imported back, and the listing without any key.
func TestCertCommand(t *testing.T) {
	term, cd := newCLI(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "hq.pem")
	for _, step := range []struct{ cmd, says string }{
		{"cert ca office-ca OfficeCA", "CA office-ca created."},
		{"cert issue office-ca box gw.example.net gw.example.net", "Certificate box issued for this box."},
		{"cert issue-peer office-ca hq hq.example.net " + bundle + " hq.example.net", "give it to the peer"},
		{"cert revoke hq", "revoked; its CA's CRL lists it"},
		{"cert export office-ca.crl " + filepath.Join(dir, "ca.crl"), "Wrote"},
		{"cert import office-ca " + filepath.Join(dir, "ca.crl"), "Imported office-ca."},
		{"cert issue nosuch x x", `no CA "nosuch" in the store`},
	} {
		term.send(step.cmd + "\r")
		if got := term.expect(prompt); !strings.Contains(got, step.says) {
			t.Fatalf("%s:\n%s", step.cmd, got)
		}
	}
	term.send("cert\r")
	got := term.expect(prompt)
	for _, want := range []string{"office-ca        CA (issues here)", "box              this box", "hq               issued to a peer, revoked", "gw.example.net"} {
		if !strings.Contains(got, want) {
			t.Errorf("cert list lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "PRIVATE KEY") {
		t.Error("cert list shows a key")
	}
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	certs, key, _, err := pki.ParsePEM(data)
	if err != nil || len(certs) != 2 || key == nil || certs[0].DNSNames[0] != "hq.example.net" {
		t.Fatalf("peer bundle: %d certs, key %v, %v", len(certs), key != nil, err)
	}
	if st, _ := os.Stat(bundle); st.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode %v", st.Mode().Perm())
	}
	c, _ := cd.store.Candidate()
	if box := c.Certificate("box"); box == nil || !box.Key.IsSet() {
		t.Error("the box's key is not in the candidate")
	}
}
