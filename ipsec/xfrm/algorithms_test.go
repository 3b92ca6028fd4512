package xfrm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/ipsec"
)

func key(n int) []byte { return bytes.Repeat([]byte{0xab}, n) }

func TestAlgorithms(t *testing.T) {
	tests := []struct {
		name     string
		tr       ipsec.Transform
		enc, int []byte
		// expected attributes, as "name/keybytes/bits"; "" for absent
		aead, crypt, auth string
		err               string
	}{
		{name: "aes128gcm16", tr: ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128, ICVBits: 128}, enc: key(20),
			aead: "rfc4106(gcm(aes))/20/128"},
		{name: "aes256gcm16 default ICV", tr: ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 256}, enc: key(36),
			aead: "rfc4106(gcm(aes))/36/128"},
		{name: "aes128gcm8", tr: ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128, ICVBits: 64}, enc: key(20),
			aead: "rfc4106(gcm(aes))/20/64"},
		{name: "gcm key without salt", tr: ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128}, enc: key(16),
			err: "want 20"},
		{name: "gcm with integrity", tr: ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128, Integrity: "hmac(sha256)"}, enc: key(20), int: key(32),
			err: "must be empty"},
		{name: "gcm odd ICV", tr: ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128, ICVBits: 80}, enc: key(20),
			err: "ICV 80"},
		{name: "chacha20poly1305", tr: ipsec.Transform{Encryption: "rfc7539esp(chacha20,poly1305)", EncKeyBits: 256}, enc: key(36),
			aead: "rfc7539esp(chacha20,poly1305)/36/128"},
		{name: "chacha20poly1305 short ICV", tr: ipsec.Transform{Encryption: "rfc7539esp(chacha20,poly1305)", EncKeyBits: 256, ICVBits: 96}, enc: key(36),
			err: "ICV 96"},
		{name: "aes128ccm16", tr: ipsec.Transform{Encryption: "rfc4309(ccm(aes))", EncKeyBits: 128}, enc: key(19),
			aead: "rfc4309(ccm(aes))/19/128"},
		{name: "aes128-sha256", tr: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha256)"}, enc: key(16), int: key(32),
			crypt: "cbc(aes)/16/0", auth: "hmac(sha256)/32/128"},
		{name: "aes256-sha1", tr: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 256, Integrity: "hmac(sha1)"}, enc: key(32), int: key(20),
			crypt: "cbc(aes)/32/0", auth: "hmac(sha1)/20/96"},
		{name: "aes192-sha384", tr: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 192, Integrity: "hmac(sha384)"}, enc: key(24), int: key(48),
			crypt: "cbc(aes)/24/0", auth: "hmac(sha384)/48/192"},
		{name: "aes256-sha512", tr: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 256, Integrity: "hmac(sha512)"}, enc: key(32), int: key(64),
			crypt: "cbc(aes)/32/0", auth: "hmac(sha512)/64/256"},
		{name: "sha256_96 (old Linux peers)", tr: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha256)", ICVBits: 96}, enc: key(16), int: key(32),
			crypt: "cbc(aes)/16/0", auth: "hmac(sha256)/32/96"},
		{name: "3des-sha1", tr: ipsec.Transform{Encryption: "cbc(des3_ede)", EncKeyBits: 192, Integrity: "hmac(sha1)"}, enc: key(24), int: key(20),
			crypt: "cbc(des3_ede)/24/0", auth: "hmac(sha1)/20/96"},
		{name: "aes128ctr-xcbc", tr: ipsec.Transform{Encryption: "rfc3686(ctr(aes))", EncKeyBits: 128, Integrity: "xcbc(aes)"}, enc: key(20), int: key(16),
			crypt: "rfc3686(ctr(aes))/20/0", auth: "xcbc(aes)/16/96"},
		{name: "cbc without integrity", tr: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128}, enc: key(16),
			err: "without integrity"},
		{name: "wrong integrity key", tr: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha256)"}, enc: key(16), int: key(20),
			err: "want 32"},
		{name: "truncation longer than the hash", tr: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha1)", ICVBits: 192}, enc: key(16), int: key(20),
			err: "truncation to 192"},
		{name: "aes key size mismatch", tr: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 256, Integrity: "hmac(sha256)"}, enc: key(16), int: key(32),
			err: "want 32"},
		{name: "unknown cipher", tr: ipsec.Transform{Encryption: "cbc(blowfish)", EncKeyBits: 128, Integrity: "hmac(sha256)"}, enc: key(16), int: key(32),
			err: "not supported"},
	}
	show := func(a *algorithm) string {
		if a == nil {
			return ""
		}
		return fmt.Sprintf("%s/%d/%d", a.Name, len(a.Key), a.Bits)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aead, crypt, auth, err := algorithms(tt.tr, tt.enc, tt.int)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("expected an error containing %q, got %v", tt.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got := [3]string{show(aead), show(crypt), show(auth)}; got != [3]string{tt.aead, tt.crypt, tt.auth} {
				t.Errorf("expected aead=%q crypt=%q auth=%q, got aead=%q crypt=%q auth=%q", tt.aead, tt.crypt, tt.auth, got[0], got[1], got[2])
			}
		})
	}
}
