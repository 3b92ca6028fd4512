package config

import (
	"strings"
	"testing"
)

// TestTunnelAuthFields: the certificate fields of a tunnel are checked
// against the store, and the fragment size against its bounds.
func TestTunnelAuthFields(t *testing.T) {
	c := sampleConfig(1)
	tun := &c.Tunnels[0]
	tun.Auth, tun.LocalCert, tun.TrustedCAs, tun.IKEFragmentSize = AuthCert, "box", []string{"ca"}, 100
	err := c.Validate()
	if err == nil {
		t.Fatal("valid")
	}
	for _, want := range []string{`local_cert: no certificate "box" in the store`, `trusted_cas[0]: no CA "ca" in the store`, "ike_fragment_size: 100: 576"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
	tun.Auth, tun.LocalCert, tun.TrustedCAs, tun.IKEFragmentSize = "", "", nil, 1400
	if err := c.Validate(); err != nil {
		t.Fatalf("a PSK tunnel with a fragment size: %v", err)
	}
	tun.Auth = "rsa"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `auth: "rsa" is not psk or cert`) {
		t.Errorf("auth rsa: %v", err)
	}
}
