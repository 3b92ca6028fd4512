package webui

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/internal/atomicfile"

	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// The certificate is self-signed: the box has no name a public CA could
// vouch for. What makes it trustworthy is its SHA-256 fingerprint, which
// the serial console shows next to the login prompt, so that the admin can
// compare it with what the browser shows the first time.
const (
	certFile = "webui-cert.pem"
	keyFile  = "webui-key.pem"
	// certValidity is long because nothing renews it: the box may sit in a
	// cupboard for years, and a browser exception is tied to the
	// certificate, not to its dates.
	certValidity = 20 * 365 * 24 * time.Hour
)

// Names of the pair in configd's file store. The key is stored first: a
// power cut between the two writes leaves a key without its certificate,
// which the next start replaces, never a certificate without its key.
const (
	storedCertName = "webui.crt"
	storedKeyName  = "webui.key"
)

// Certificate is the server's key pair and its fingerprint.
type Certificate struct {
	TLS         tls.Certificate
	Fingerprint string // SHA-256 of the DER certificate, colon-separated hex
	// Dir is the directory the pair is kept in, "" when it is kept by
	// configd or when none could be written (it then changes at every
	// start).
	Dir string
	// Stored tells whether the pair is kept where it survives a reboot:
	// configd's file store on the card, or the first directory asked for,
	// not a fallback under /run.
	Stored bool
	// Note says why the pair does not survive a reboot although configd
	// keeps it (configd runs without a config partition).
	Note string
}

// CertificateStore is where the pair is kept across reboots: configd's
// file store (*client.Client).
type CertificateStore interface {
	File(ctx context.Context, name string) ([]byte, error)
	PutFile(ctx context.Context, name string, data []byte) (configdapi.FileInfo, error)
}

// LoadStoredCertificate reads the pair from configd's file store or, on
// first start, makes an ECDSA P-256 pair and stores it there. An error
// means configd could not keep it (unreachable, or the card refused the
// write); the caller then falls back to LoadOrCreateCertificate.
//
// A stored pair that cannot be used (half written by a power cut between
// the two writes, or damaged) is replaced by a new one; logf says so, since
// the fingerprint the admin trusted changes. Unlike a pair in a directory,
// the admin could not remove it by hand: the partition is read-only.
func LoadStoredCertificate(ctx context.Context, store CertificateStore, hostname string, now time.Time, logf func(string, ...any)) (*Certificate, error) {
	certPEM, cerr := store.File(ctx, storedCertName)
	keyPEM, kerr := store.File(ctx, storedKeyName)
	defer clear(keyPEM)
	for _, err := range []error{cerr, kerr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read TLS certificate from configd: %w", err)
		}
	}
	if cerr == nil && kerr == nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		var c *Certificate
		if err == nil {
			if c, err = newCertificate(pair, "", true); err == nil {
				return c, nil
			}
		}
		logf("the TLS certificate kept by configd cannot be used (%v): making a new one, with a new fingerprint", err)
	} else if cerr == nil || kerr == nil {
		logf("configd keeps only half of the TLS key pair (a power cut while it was stored?): making a new one, with a new fingerprint")
	}
	newCert, newKey, err := makeSelfSigned(hostname, now)
	if err != nil {
		return nil, err
	}
	defer clear(newKey) // the parsed key lives on in pair; this copy need not
	pair, err := tls.X509KeyPair(newCert, newKey)
	if err != nil {
		return nil, fmt.Errorf("new TLS certificate: %w", err)
	}
	if _, err := store.PutFile(ctx, storedKeyName, newKey); err != nil {
		return nil, fmt.Errorf("store TLS key in configd: %w", err)
	}
	info, err := store.PutFile(ctx, storedCertName, newCert)
	if err != nil {
		return nil, fmt.Errorf("store TLS certificate in configd: %w", err)
	}
	c, err := newCertificate(pair, "", info.Storage != "ram")
	if err != nil {
		return nil, err
	}
	c.Note = info.Note
	return c, nil
}

// LoadOrCreateCertificate is how the pair is kept when configd cannot keep
// it (and in tests): it reads the pair from the first of dirs that holds
// one or, on first start, makes an ECDSA P-256 pair and keeps it in the
// first of dirs that can be written (key mode 0600). The first directory
// is the persistent one (on the card); later ones are fallbacks such as a
// directory under /run, which at least keep the certificate across
// restarts of the service. When none can be written the new pair is used
// anyway: the UI must not be unreachable because the card is read-only,
// but the caller says so.
func LoadOrCreateCertificate(hostname string, now time.Time, dirs ...string) (*Certificate, error) {
	for i, dir := range dirs {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
		switch {
		case err == nil:
			return newCertificate(pair, dir, i == 0)
		case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			// A damaged pair is not silently replaced: the admin trusted
			// its fingerprint, so a new one must be a visible event.
			return nil, fmt.Errorf("load TLS certificate from %s: %w (remove both files to make a new one)", dir, err)
		}
	}
	certPEM, keyPEM, err := makeSelfSigned(hostname, now)
	if err != nil {
		return nil, err
	}
	defer clear(keyPEM) // the parsed key lives on in pair; this copy need not
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("new TLS certificate: %w", err)
	}
	for i, dir := range dirs {
		if atomicfile.WriteFile(filepath.Join(dir, keyFile), keyPEM, 0o600) == nil &&
			atomicfile.WriteFile(filepath.Join(dir, certFile), certPEM, 0o644) == nil {
			return newCertificate(pair, dir, i == 0)
		}
		os.Remove(filepath.Join(dir, keyFile)) // never leave half a pair
	}
	return newCertificate(pair, "", false)
}

func newCertificate(pair tls.Certificate, dir string, stored bool) (*Certificate, error) {
	if len(pair.Certificate) == 0 {
		return nil, errors.New("TLS certificate file holds no certificate")
	}
	return &Certificate{TLS: pair, Fingerprint: Fingerprint(pair.Certificate[0]), Dir: dir, Stored: stored}, nil
}

// Fingerprint formats the SHA-256 of a DER certificate the way browsers
// show it: upper-case hex pairs separated by colons.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

func makeSelfSigned(hostname string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("certificate serial: %w", err)
	}
	if hostname == "" {
		hostname = "flashgate"
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: hostname, Organization: []string{"flashgate appliance (self-signed)"}},
		NotBefore:             now.Add(-time.Hour), // tolerate a clock slightly behind
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{hostname},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create TLS certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode TLS key: %w", err)
	}
	defer clear(kder)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// TLSConfig returns the server's TLS settings. Every knob is set explicitly:
// the busybox build of the firmware does not get the GODEBUG defaults of a
// recent go.mod, and old defaults allowed TLS 1.0 and CBC-SHA suites. The
// suites are forward-secret AEADs only; TLS 1.3 suites are not configurable
// in Go and are all AEADs. It offers HTTP/1.1 only: the firmware's
// net/http is built without its HTTP/2 (images: the nethttpomithttp2 tag),
// about 300 KB of the multi-call binary that every process mapped for a UI
// whose pages are a document, a style sheet, a script and an icon, which a
// browser fetches over a few kept-alive HTTP/1.1 connections (within
// MaxConnsPerClient).
func TLSConfig(cert *Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert.TLS},
		MinVersion:   tls.VersionTLS12,
		MaxVersion:   tls.VersionTLS13,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		},
		CurvePreferences:       []tls.CurveID{tls.X25519, tls.CurveP256},
		SessionTicketsDisabled: false,
		NextProtos:             []string{"http/1.1"},
	}
}
