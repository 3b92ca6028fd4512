package hwcrypto

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CryptoAlg is one entry of /proc/crypto: an implementation (driver) of an
// algorithm (name) registered with the kernel crypto API.
type CryptoAlg struct {
	Name     string // algorithm, e.g. "cbc(aes)"
	Driver   string // implementation, e.g. "cbc-aes-geode"
	Module   string // "kernel" when built in
	Priority int    // the crypto API picks the highest
	Refcnt   int    // 1 while registered; more while transforms use it
	Selftest string // "passed", or "unknown" when the self-test did not pass
	Internal bool   // helper used by other drivers, not selectable by name
	Type     string // "skcipher", "aead", "shash", "cipher", ...
}

// Usable reports whether the crypto API would hand this implementation out:
// it passed its self-test and is not an internal helper.
func (a CryptoAlg) Usable() bool { return a.Selftest == "passed" && !a.Internal }

// InUse reports whether some transform holds a reference. Registration
// itself holds one reference, so in-use means more than one.
func (a CryptoAlg) InUse() bool { return a.Refcnt > 1 }

// CryptoTable is a parsed /proc/crypto.
type CryptoTable []CryptoAlg

// ErrNoDriver is returned when no usable implementation of an algorithm is
// registered.
var ErrNoDriver = errors.New("no usable driver registered")

// ParseProcCrypto parses /proc/crypto: blocks of "key : value" lines
// separated by blank lines. Entries without a name or driver are dropped;
// a priority or refcnt that is not a number is an error, since choosing the
// driver depends on it.
func ParseProcCrypto(r io.Reader) (CryptoTable, error) {
	var (
		table CryptoTable
		cur   CryptoAlg
		lines int
	)
	flush := func() {
		if cur.Name != "" && cur.Driver != "" {
			table = append(table, cur)
		}
		cur = CryptoAlg{}
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		lines++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("/proc/crypto line %d: no colon in %q", lines, line)
		}
		key = strings.TrimSpace(key)
		value = strings.TrimSpace(value)
		switch key {
		case "name":
			if cur.Name != "" {
				flush() // a block without the blank separator
			}
			cur.Name = value
		case "driver":
			cur.Driver = value
		case "module":
			cur.Module = value
		case "type":
			cur.Type = value
		case "selftest":
			cur.Selftest = value
		case "internal":
			cur.Internal = value == "yes"
		case "priority", "refcnt":
			n, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("/proc/crypto line %d: %s %q: %w", lines, key, value, err)
			}
			if key == "priority" {
				cur.Priority = n
			} else {
				cur.Refcnt = n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("/proc/crypto: %w", err)
	}
	flush()
	return table, nil
}

// ReadCryptoTable parses <root>/proc/crypto.
func ReadCryptoTable(root string) (CryptoTable, error) {
	f, err := os.Open(filepath.Join(root, "proc/crypto"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseProcCrypto(f)
}

// Lookup returns the implementation of alg the kernel hands out: the usable
// entry with the highest priority. On equal priority the first registered
// wins, as in the kernel's lookup.
func (t CryptoTable) Lookup(alg string) (CryptoAlg, error) {
	var best CryptoAlg
	found := false
	for _, a := range t {
		if a.Name != alg || !a.Usable() {
			continue
		}
		if !found || a.Priority > best.Priority {
			best, found = a, true
		}
	}
	if !found {
		return CryptoAlg{}, fmt.Errorf("%s: %w", alg, ErrNoDriver)
	}
	return best, nil
}

// DriverFor says which driver serves alg (a crypto API name such as
// "cbc(aes)" or "authenc(hmac(sha256),cbc(aes))") on this system, from
// /proc/crypto.
func DriverFor(alg string) (string, error) {
	t, err := ReadCryptoTable("/")
	if err != nil {
		return "", fmt.Errorf("driver for %s: %w", alg, err)
	}
	a, err := t.Lookup(alg)
	if err != nil {
		return "", err
	}
	return a.Driver, nil
}

// KernelAlgorithm is the name under which the kernel instantiates the ESP
// transform of an SA: the AEAD itself ("rfc4106(gcm(aes))"), or the authenc
// template combining integrity and cipher. This is the name to pass to
// DriverFor for an installed SA.
func KernelAlgorithm(encryption, integrity string) string {
	if integrity == "" {
		return encryption
	}
	return "authenc(" + integrity + "," + encryption + ")"
}
