package imagefile

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// Key file forms, one line each:
//
//	flashgate-ed25519-private <base64 seed>      (the signing key, mode 0600)
//	flashgate-ed25519 <base64 public key> [name]  (upgrade.pub: the card's trusted keys)
//	allow-unsigned                                (upgrade.pub of a developer's box)
const (
	privatePrefix = "flashgate-ed25519-private"
	publicPrefix  = "flashgate-ed25519"
	AllowUnsigned = "allow-unsigned"
)

// GenerateKey makes a new signing key.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	return k, err
}

// MarshalPrivateKey is the private key file's text.
func MarshalPrivateKey(k ed25519.PrivateKey) []byte {
	return []byte(privatePrefix + " " + base64.StdEncoding.EncodeToString(k.Seed()) + "\n")
}

// ParsePrivateKey reads a private key file.
func ParsePrivateKey(b []byte) (ed25519.PrivateKey, error) {
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] != privatePrefix {
		return nil, fmt.Errorf("not a flashgate signing key (want %q and the key on one line; `flashgate keygen` writes one)", privatePrefix)
	}
	seed, err := base64.StdEncoding.DecodeString(f[1])
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("signing key: the seed is not %d bytes of base64", ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// MarshalPublicKey is one line of upgrade.pub.
func MarshalPublicKey(k ed25519.PublicKey, name string) []byte {
	s := publicPrefix + " " + base64.StdEncoding.EncodeToString(k)
	if name = strings.Join(strings.Fields(name), "_"); name != "" {
		s += " " + name
	}
	return []byte(s + "\n")
}

// ParseTrust reads upgrade.pub: the keys a box trusts and whether it takes
// unsigned images. Blank lines and # comments are skipped.
func ParseTrust(b []byte) (Trust, error) {
	var t Trust
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == 0 {
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case AllowUnsigned:
			t.AllowUnsigned = true
		case publicPrefix:
			if len(f) < 2 {
				return Trust{}, fmt.Errorf("upgrade.pub line %d: no key", n)
			}
			k, err := base64.StdEncoding.DecodeString(f[1])
			if err != nil || len(k) != ed25519.PublicKeySize {
				return Trust{}, fmt.Errorf("upgrade.pub line %d: not a %d-byte Ed25519 key", n, ed25519.PublicKeySize)
			}
			t.Keys = append(t.Keys, ed25519.PublicKey(k))
		default:
			return Trust{}, fmt.Errorf("upgrade.pub line %d: %q is neither a key nor %q", n, f[0], AllowUnsigned)
		}
	}
	return t, nil
}

// MarshalTrust is upgrade.pub's text for t.
func MarshalTrust(t Trust) []byte {
	var b []byte
	for _, k := range t.Keys {
		b = append(b, MarshalPublicKey(k, Fingerprint(k))...)
	}
	if t.AllowUnsigned {
		b = append(b, AllowUnsigned+"\n"...)
	}
	return b
}
