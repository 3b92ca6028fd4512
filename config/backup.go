package config

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"
)

// A backup is a JSON document holding a config and saying what it did with
// the secrets (PSKs, password hashes):
//
//	included   in the clear (only for transfers the admin protects otherwise)
//	omitted    left out; a restore keeps the secrets the box has for the
//	           same paths (tunnel PSKs by tunnel name, admins by name)
//	encrypted  left out of the config and sealed separately with a key
//	           derived from a passphrase (argon2id, AES-256-GCM), so that
//	           the rest stays readable without it
type Backup struct {
	Format   string          `json:"format"` // BackupFormat
	Schema   int             `json:"schema"`
	Created  time.Time       `json:"created"`
	Hostname string          `json:"hostname"`
	Revision uint64          `json:"revision,omitempty"`
	Secrets  string          `json:"secrets"`
	Config   json.RawMessage `json:"config"`
	Sealed   *SealedSecrets  `json:"sealed_secrets,omitempty"`
}

// BackupFormat identifies flashgate backups.
const BackupFormat = "flashgate-backup"

// Secret handling in backups.
const (
	SecretsIncluded  = "included"
	SecretsOmitted   = "omitted"
	SecretsEncrypted = "encrypted"
)

// SealedSecrets is the encrypted map of secret paths to values.
type SealedSecrets struct {
	KDF        string `json:"kdf"` // "argon2id"
	Salt       []byte `json:"salt"`
	Time       uint32 `json:"time"`
	MemoryKiB  uint32 `json:"memory_kib"`
	Threads    uint8  `json:"threads"`
	Cipher     string `json:"cipher"` // "aes-256-gcm"
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

// MinPassphraseLen is the shortest backup passphrase accepted.
const MinPassphraseLen = 10

var sealAAD = []byte("flashgate-backup sealed secrets v1")

// secretPaths returns every secret of c by its path (for Config.Set).
func (c *Config) secretPaths() map[string]string {
	out := map[string]string{}
	for _, l := range c.Lines() {
		if l.Value == Redacted {
			out[strings.Join(unquoteAll(l.Path), ".")] = l.key
		}
	}
	return out
}

func unquoteAll(p []string) []string {
	out := make([]string, len(p))
	for i, s := range p {
		out[i] = strings.Trim(s, `"`)
	}
	return out
}

// clearSecrets empties every Secret in c.
func clearSecrets(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == secretType {
			v.Set(reflect.Zero(secretType))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				clearSecrets(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			clearSecrets(v.Index(i))
		}
	}
}

// MakeBackup returns c as a backup document. secrets is one of
// SecretsIncluded, SecretsOmitted or SecretsEncrypted (which needs a
// passphrase).
func MakeBackup(c *Config, revision uint64, secrets, passphrase string, now time.Time) ([]byte, error) {
	b := Backup{Format: BackupFormat, Schema: SchemaVersion, Created: now.UTC(), Hostname: c.System.Hostname,
		Revision: revision, Secrets: secrets}
	out := c.Clone()
	switch secrets {
	case SecretsIncluded:
	case SecretsOmitted:
		clearSecrets(reflect.ValueOf(out).Elem())
	case SecretsEncrypted:
		if len(passphrase) < MinPassphraseLen {
			return nil, fmt.Errorf("backup passphrase too short: at least %d characters", MinPassphraseLen)
		}
		sealed, err := seal(c.secretPaths(), passphrase)
		if err != nil {
			return nil, err
		}
		b.Sealed = sealed
		clearSecrets(reflect.ValueOf(out).Elem())
	default:
		return nil, fmt.Errorf("secrets must be %s, %s or %s, not %q", SecretsIncluded, SecretsOmitted, SecretsEncrypted, secrets)
	}
	b.Config = out.JSON()
	return json.MarshalIndent(b, "", "  ")
}

// Parameters of the backup KDF: heavier than the login hash, since a backup
// is made rarely and may be attacked offline.
const (
	backupKDFTime   = 3
	backupKDFMemKiB = 64 * 1024
)

func seal(secrets map[string]string, passphrase string) (*SealedSecrets, error) {
	plain, err := json.Marshal(secrets)
	if err != nil {
		return nil, err
	}
	s := &SealedSecrets{KDF: "argon2id", Time: backupKDFTime, MemoryKiB: backupKDFMemKiB, Threads: 1, Cipher: "aes-256-gcm",
		Salt: make([]byte, 16), Nonce: make([]byte, 12)}
	if _, err := rand.Read(s.Salt); err != nil {
		return nil, err
	}
	if _, err := rand.Read(s.Nonce); err != nil {
		return nil, err
	}
	aead, key, err := s.aead(passphrase)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	s.Ciphertext = aead.Seal(nil, s.Nonce, plain, sealAAD)
	clear(plain)
	return s, nil
}

func (s *SealedSecrets) aead(passphrase string) (cipher.AEAD, []byte, error) {
	if s.KDF != "argon2id" || s.Cipher != "aes-256-gcm" {
		return nil, nil, fmt.Errorf("sealed secrets use %s/%s; this firmware reads argon2id/aes-256-gcm", s.KDF, s.Cipher)
	}
	// At most what this firmware itself uses: a crafted backup must not
	// make the restore allocate more than the board can spare.
	if s.MemoryKiB == 0 || s.MemoryKiB > backupKDFMemKiB || s.Time == 0 || s.Time > maxArgonTime ||
		s.Threads == 0 || s.Threads > maxArgonThreads || len(s.Salt) < 8 || len(s.Nonce) != 12 {
		return nil, nil, errors.New("sealed secrets: KDF parameters out of bounds")
	}
	key := argon2.IDKey([]byte(passphrase), s.Salt, s.Time, s.MemoryKiB, s.Threads, 32)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, nil, err
	}
	aead, err := cipher.NewGCM(block)
	return aead, key, err
}

func (s *SealedSecrets) open(passphrase string) (map[string]string, error) {
	aead, key, err := s.aead(passphrase)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	plain, err := aead.Open(nil, s.Nonce, s.Ciphertext, sealAAD)
	if err != nil {
		return nil, errors.New("wrong passphrase, or the backup's secrets were altered")
	}
	defer clear(plain)
	var m map[string]string
	if err := json.Unmarshal(plain, &m); err != nil {
		return nil, fmt.Errorf("sealed secrets: %w", err)
	}
	return m, nil
}

// ReadBackup parses a backup document (or a bare config JSON document, taken
// as the current schema), migrates it, puts the secrets back (decrypting
// them with passphrase, or taking them from current for omitted ones) and
// validates the result. On any error it returns nil and the reason.
func ReadBackup(data []byte, passphrase string, current *Config) (*Config, error) {
	if len(data) > MaxDocumentSize {
		return nil, fmt.Errorf("backup is %d bytes, more than the %d allowed", len(data), MaxDocumentSize)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, describeJSONError(data, err)
	}
	if _, ok := probe["format"]; !ok {
		cfg, err := Decode(data)
		if err != nil {
			return nil, err
		}
		return validateImport(cfg)
	}
	var b Backup
	if err := decodeStrict(data, &b); err != nil {
		return nil, err
	}
	if b.Format != BackupFormat {
		return nil, fmt.Errorf("not a flashgate backup (format %q)", b.Format)
	}
	cfg, err := decodeVersioned(b.Config, b.Schema)
	if err != nil {
		return nil, fmt.Errorf("backup config: %w", err)
	}
	switch b.Secrets {
	case SecretsIncluded:
	case SecretsOmitted:
		if current != nil {
			for path, val := range current.secretPaths() {
				if _, err := cfg.resolve(path, false); err == nil {
					cfg.Set(path, val)
				}
			}
		}
	case SecretsEncrypted:
		if b.Sealed == nil {
			return nil, errors.New("backup says its secrets are encrypted but holds none")
		}
		if passphrase == "" {
			return nil, errors.New("this backup's secrets are encrypted: a passphrase is needed")
		}
		secrets, err := b.Sealed.open(passphrase)
		if err != nil {
			return nil, err
		}
		for path, val := range secrets {
			if err := cfg.Set(path, val); err != nil {
				return nil, fmt.Errorf("restore secret: %w", err)
			}
		}
	default:
		return nil, fmt.Errorf("unknown secrets mode %q", b.Secrets)
	}
	return validateImport(cfg)
}

func validateImport(cfg *Config) (*Config, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("the imported configuration is not valid:\n%w", err)
	}
	return cfg, nil
}

// Export returns the running configuration as a backup document.
func (s *Store) Export(secrets, passphrase string) ([]byte, error) {
	cfg, rev := s.Running()
	return MakeBackup(cfg, rev, secrets, passphrase, s.opts.Clock.Now())
}

// Import makes a backup (see ReadBackup) the candidate; commit it to apply
// it. Bad data changes nothing and the error says why.
func (s *Store) Import(etag string, data []byte, passphrase string) (string, error) {
	running, _ := s.Running()
	cfg, err := ReadBackup(data, passphrase, running)
	if err != nil {
		return "", err
	}
	return s.ReplaceCandidate(etag, cfg)
}
