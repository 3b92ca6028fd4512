package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// TestKeygen makes a key pair, checks both files parse and the private
// one is 0600, and that a second run never overwrites the key.
func TestKeygen(t *testing.T) {
	key := filepath.Join(t.TempDir(), "upgrade.key")
	var out, errb bytes.Buffer
	if rc := realMain([]string{"keygen", "-out", key}, &out, &errb); rc != 0 {
		t.Fatalf("keygen: %d %s", rc, errb.String())
	}
	priv, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	k, err := loadSigningKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(key); fi.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v", fi.Mode().Perm())
	}
	pub, _ := os.ReadFile(key + ".pub")
	trust, err := imagefile.ParseTrust(pub)
	if err != nil || len(trust.Keys) != 1 || !trust.Keys[0].Equal(k.Public()) {
		t.Fatalf("public key file: %v", err)
	}
	if !strings.Contains(out.String(), imagefile.Fingerprint(trust.Keys[0])) {
		t.Errorf("keygen did not print the fingerprint: %s", out.String())
	}
	errb.Reset()
	if rc := realMain([]string{"keygen", "-out", key}, &out, &errb); rc == 0 || !strings.Contains(errb.String(), "never overwritten") {
		t.Errorf("second keygen: %d %s", rc, errb.String())
	}
	if again, _ := os.ReadFile(key); !bytes.Equal(again, priv) {
		t.Fatal("the signing key was overwritten")
	}
	if rc := realMain([]string{"upgrade", "-box", "https://127.0.0.1:1", "-image", key}, &out, &errb); rc == 0 {
		t.Error("upgrade without a password or fingerprint succeeded")
	}
}
