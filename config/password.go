package config

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Passwords are stored as argon2id hashes in the PHC string format
// ($argon2id$v=19$m=19456,t=2,p=1$salt$hash). The parameters are OWASP's
// minimum for argon2id: 19 MiB fits a 256 MB ALIX board next to the
// services, and a login costs a few hundred milliseconds on a 500 MHz Geode.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16

	// Upper bounds on parameters read back from a hash (a restored
	// backup, a pasted configuration), so that a crafted one cannot make
	// a login allocate more than a 128 MB board can spare: 256 MiB used to
	// be accepted, and one login with such a hash ran the box out of
	// memory. Our own hashes use 19 MiB; other tools' defaults (64 MiB)
	// are refused, with a message.
	maxArgonMemoryKiB = 32 * 1024
	maxArgonTime      = 8
	maxArgonThreads   = 4

	// MinPasswordLen is the shortest admin password accepted.
	MinPasswordLen = 8
	// MaxPasswordLen is the longest, everywhere (console, web UI,
	// configd): 72 bytes is what the console's bcrypt fallback can use,
	// and one limit means a password set in one place works in the other.
	MaxPasswordLen = 72
)

// HashPassword returns the PHC-format argon2id hash of password.
func HashPassword(password string) (string, error) {
	if len(password) < MinPasswordLen {
		return "", fmt.Errorf("password too short: at least %d characters", MinPasswordLen)
	}
	if len(password) > MaxPasswordLen {
		return "", fmt.Errorf("password too long: at most %d bytes", MaxPasswordLen)
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key := argonKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemoryKiB, argonTime, argonThreads, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// SetPassword replaces the account's password hash.
func (a *Admin) SetPassword(password string) error {
	h, err := HashPassword(password)
	if err != nil {
		return err
	}
	a.PasswordHash = NewSecret(h)
	return nil
}

// VerifyPassword reports whether password matches the account's hash. The
// comparison is constant-time; a malformed hash never matches.
func (a *Admin) VerifyPassword(password string) bool {
	ok, err := verifyPHC(a.PasswordHash.Reveal(), password)
	return ok && err == nil
}

var errBadHash = errors.New("not an argon2id PHC string")

type argonParams struct {
	memory  uint32
	time    uint32
	threads uint8
	salt    []byte
	key     []byte
}

func parsePHC(hash string) (argonParams, error) {
	var p argonParams
	f := strings.Split(hash, "$")
	if len(f) != 6 || f[0] != "" || f[1] != "argon2id" {
		return p, errBadHash
	}
	var v int
	if _, err := fmt.Sscanf(f[2], "v=%d", &v); err != nil || v != argon2.Version {
		return p, fmt.Errorf("argon2id version %q not supported", f[2])
	}
	var m, t, th uint32
	if _, err := fmt.Sscanf(f[3], "m=%d,t=%d,p=%d", &m, &t, &th); err != nil {
		return p, errBadHash
	}
	if m == 0 || m > maxArgonMemoryKiB || t == 0 || t > maxArgonTime || th == 0 || th > maxArgonThreads {
		return p, fmt.Errorf("argon2id parameters m=%d,t=%d,p=%d out of bounds (at most m=%d,t=%d,p=%d: the board's memory)",
			m, t, th, maxArgonMemoryKiB, maxArgonTime, maxArgonThreads)
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(f[4])
	key, err2 := enc.DecodeString(f[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) < 16 || len(key) > 64 {
		return p, errBadHash
	}
	return argonParams{memory: m, time: t, threads: uint8(th), salt: salt, key: key}, nil
}

func verifyPHC(hash, password string) (bool, error) {
	p, err := parsePHC(hash)
	if err != nil {
		return false, err
	}
	got := argonKey([]byte(password), p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(got, p.key) == 1, nil
}

// argonKey runs argon2id and then hands its 19 MiB of work memory back to
// the kernel at once. Go's runtime would otherwise keep the grown heap for
// minutes, and on a 256 MB board every process that checks a password (the
// console, the web UI, configd) would hold some 20-40 MB it no longer uses.
func argonKey(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
	key := argon2.IDKey(password, salt, time, memory, threads, keyLen)
	debug.FreeOSMemory()
	return key
}
