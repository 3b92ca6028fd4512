package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"

	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// runKeygen makes the Ed25519 key pair that signs firmware upgrades.
func runKeygen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keygen", stderr)
	out := fs.String("out", "upgrade.key", "private key file to write (mode 0600); the public key goes to FILE.pub")
	if err := parse(fs, args); err != nil {
		return err
	}
	key, err := imagefile.GenerateKey()
	if err != nil {
		return err
	}
	// O_EXCL: never overwrite a signing key, the boxes in the field trust it.
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write the private key: %w (an existing key is never overwritten)", err)
	}
	if _, err := f.Write(imagefile.MarshalPrivateKey(key)); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	pub := key.Public().(ed25519.PublicKey)
	if err := os.WriteFile(*out+".pub", imagefile.MarshalPublicKey(pub, imagefile.Fingerprint(pub)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "signing key %s (keep it off the boxes and out of git)\npublic key %s: %s\nbuild signed images with: make image KEY=%s\n",
		*out, *out+".pub", imagefile.Fingerprint(pub), *out)
	return nil
}

// loadSigningKey reads the key -key names; "" is a developer's unsigned
// build.
func loadSigningKey(path string) (ed25519.PrivateKey, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	k, err := imagefile.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
