package configdapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/upgrade"
)

// The wire types of configd's local API (docs/config.md has the routes).
// configd builds its handlers from them and Client sends and reads them.

// Status is GET /v1/status.
type Status struct {
	Revision uint64          `json:"revision"`
	Pending  *config.Pending `json:"pending,omitempty"`
	// CandidateChanged: the candidate differs from the running
	// configuration (a commit has something to write). Cheaper to ask
	// here than GET /v1/candidate's Changed, which sends the whole
	// candidate and validates it.
	CandidateChanged bool   `json:"candidate_changed"`
	Schema           int    `json:"schema"`
	Database         string `json:"database"`
	Storage          string `json:"storage"`             // "card" or "ram"
	Recovered        string `json:"recovered,omitempty"` // why the database was set aside at start
	Note             string `json:"note,omitempty"`      // e.g. no config partition: changes are lost on reboot
}

// RunningResponse is GET /v1/running.
type RunningResponse struct {
	Revision uint64         `json:"revision"`
	Config   *config.Config `json:"config"`
}

// RunningSystemResponse is GET /v1/running/system: the running
// configuration's system section alone (on the restricted API, its
// password hashes are redaction marks as in every configuration).
type RunningSystemResponse struct {
	Revision uint64        `json:"revision"`
	System   config.System `json:"system"`
}

// CandidateResponse is GET /v1/candidate.
type CandidateResponse struct {
	Etag    string              `json:"etag"`
	Changed bool                `json:"changed"` // differs from running
	Errors  []config.FieldError `json:"errors"`  // what Validate says about it now
	Config  *config.Config      `json:"config"`
}

// EtagResponse answers every candidate edit.
type EtagResponse struct {
	Etag string `json:"etag"`
}

// SetRequest is POST /v1/candidate/set: values are in the text form
// ("192.0.2.1", "10.0.0.0/24", "true", "30s"); a list takes any number.
type SetRequest struct {
	Etag   string   `json:"etag,omitempty"`
	Path   string   `json:"path"`
	Values []string `json:"values"`
}

// DeleteRequest is POST /v1/candidate/delete.
type DeleteRequest struct {
	Etag string `json:"etag,omitempty"`
	Path string `json:"path"`
}

// PasswordRequest is POST /v1/candidate/password: configd hashes the
// password (argon2id) into system.admins[Admin], creating the account.
type PasswordRequest struct {
	Etag     string `json:"etag,omitempty"`
	Admin    string `json:"admin"`
	Password string `json:"password"`
}

// CommitRequest is POST /v1/commit. ConfirmTimeout ("5m"), when set, makes
// it a commit-confirmed.
type CommitRequest struct {
	Etag           string `json:"etag,omitempty"`
	Who            string `json:"who"`
	Message        string `json:"message"`
	ConfirmTimeout string `json:"confirm_timeout,omitempty"`
}

// RollbackRequest is POST /v1/rollback.
type RollbackRequest struct {
	Revision uint64 `json:"revision"`
	Who      string `json:"who"`
}

// DiffLine is one line of GET /v1/diff.
type DiffLine struct {
	Op   string `json:"op"` // "+" or "-"
	Line string `json:"line"`
}

// DiffResponse is GET /v1/diff.
type DiffResponse struct {
	From  string     `json:"from"`
	To    string     `json:"to"`
	Lines []DiffLine `json:"lines"`
}

// RevisionResponse is GET /v1/history/{rev}.
type RevisionResponse struct {
	Info   config.RevisionInfo `json:"info"`
	Config *config.Config      `json:"config"`
}

// ExportRequest is POST /v1/export; Secrets is included, omitted or
// encrypted (with Passphrase).
type ExportRequest struct {
	Secrets    string `json:"secrets"`
	Passphrase string `json:"passphrase,omitempty"`
}

// ImportRequest is POST /v1/import: Backup is a backup document or a bare
// config; it becomes the candidate.
type ImportRequest struct {
	Etag       string          `json:"etag,omitempty"`
	Backup     json.RawMessage `json:"backup"`
	Passphrase string          `json:"passphrase,omitempty"`
}

// FactoryResetRequest is POST /v1/factory-reset; Confirm must be
// "factory-reset" so that a stray request cannot wipe the box.
type FactoryResetRequest struct {
	Who     string `json:"who"`
	Confirm string `json:"confirm"`
	// KeepSettings erases only the secrets: the admin accounts, the
	// tunnels, the history and the stored files; the other settings
	// stay (config.Store.EraseSecrets).
	KeepSettings bool `json:"keep_settings,omitempty"`
}

// FileInfo answers PUT /v1/files/{name}. Storage is "ram" when there is
// no config partition: the file is then lost on reboot, and Note says so.
type FileInfo struct {
	Name    string `json:"name"`
	Size    int    `json:"size"`
	Storage string `json:"storage"`
	Note    string `json:"note,omitempty"`
}

// ErrorResponse is the body of every error.
type ErrorResponse struct {
	Error  string              `json:"error"`
	Code   string              `json:"code"`
	Fields []config.FieldError `json:"fields,omitempty"`
}

// Error codes.
const (
	CodeBadRequest       = "bad_request"
	CodeTooLarge         = "too_large"
	CodeCandidateChanged = "candidate_changed"
	CodeValidation       = "validation"
	CodeNoChanges        = "no_changes"
	CodeNothingPending   = "nothing_pending"
	CodeNotFound         = "not_found"
	CodeNoFile           = "no_file" // GET /v1/files/{name} of a file never stored
	CodeInternal         = "internal"
	CodeForbidden        = "forbidden"  // a secret, asked for on the restricted API
	CodeHandedOff        = "handed_off" // a write after POST /v1/handoff: the database is the other slot's firmware's
)

// HandOffRequest is POST /v1/handoff (configd.sock only): make the
// database one that the firmware in the other slot reads, for the reboot
// into it, and commit nothing more. That firmware reads database formats
// DBFormats and configuration schemas up to Schema (from its manifest).
type HandOffRequest struct {
	DBFormats []int `json:"db_formats"`
	Schema    int   `json:"schema"`
}

// HandOffResponse says what the other firmware will run with.
type HandOffResponse struct {
	// Converted: the database was rewritten in format 2; false: the other
	// firmware reads it as it is.
	Converted bool `json:"converted"`
	// Running is the revision it will run.
	Running config.RevisionInfo `json:"running"`
}

// VerifyPasswordRequest is POST /v1/verify-password.
type VerifyPasswordRequest struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// VerifyPasswordResponse says whether the password is the user's. An
// unknown user and a wrong password read the same and cost the same.
type VerifyPasswordResponse struct {
	OK bool `json:"ok"`
}

// Re-authentication on the restricted API: a factory reset, an import, an
// export with secrets and a firmware install need an admin's current
// password in the request (ReauthUserHeader, ReauthPasswordHeader), which
// configd checks itself. The web UI asks the admin for it (and counts
// wrong ones against its login limiter) and passes it on, so that a web UI
// taken over cannot do these without the password either.
const (
	ReauthUserHeader     = "Flashgate-Reauth-User"
	ReauthPasswordHeader = "Flashgate-Reauth-Password" // percent-encoded (url.PathEscape)
)

// CodeWrongPassword is the code of the restricted API's refusal of a
// request whose re-authentication is missing or wrong.
const CodeWrongPassword = "wrong_password"

// FirmwareView is GET /v1/firmware (and the web UI's GET /api/v1/upgrade).
type FirmwareView struct {
	Running         upgrade.Running   `json:"running"`
	DefaultSlot     string            `json:"default_slot"`
	Slots           []upgrade.Slot    `json:"slots"`
	AcceptsUnsigned bool              `json:"accepts_unsigned"`
	TrustedKeys     []string          `json:"trusted_keys"`
	Boot            *bootslot.Status  `json:"boot,omitempty"` // what PID 1 found and is checking
	Message         string            `json:"message,omitempty"`
	Upload          *upgrade.Progress `json:"upload,omitempty"` // an upload being written now
	Error           string            `json:"error,omitempty"`
}

// FirmwarePlan answers a check and an upload.
type FirmwarePlan struct {
	Version   string `json:"version"`
	Board     string `json:"board"`
	Built     int64  `json:"built"`
	Signer    string `json:"signer"`
	Target    string `json:"target_slot,omitempty"`
	Downgrade bool   `json:"downgrade"`
	Size      int64  `json:"size"`
	Error     string `json:"error,omitempty"` // why the box refuses it
	Rebooting bool   `json:"rebooting,omitempty"`
	// Config says what configuration the firmware will run with when it
	// is not simply the database as it is (it reads only an older format).
	Config string `json:"config,omitempty"`
}

// CodeFirmwareRefused is the code of an APIError for a refused firmware
// file; its status says why (FirmwareStatus).
const CodeFirmwareRefused = "firmware_refused"

// MaxFileSize bounds one stored file: the store is for keys and
// certificates, not for data.
const MaxFileSize = 64 << 10

// Errors of the file store a caller may tell apart.
var (
	ErrBadFileName = errors.New("file name must be 1 to 64 of a-z 0-9 . _ - and not . or ..")
	ErrFileTooBig  = fmt.Errorf("file larger than %d bytes", MaxFileSize)
)

// ValidFileName reports whether name may name a stored file: it must be a
// plain file name in the directory, and never one of the store's temporary
// files (which have a '~').
func ValidFileName(name string) bool {
	if len(name) == 0 || len(name) > 64 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// PSKMarkPrefix begins every redaction mark the restricted API puts where
// a pre-shared key is.
const PSKMarkPrefix = "redacted:"

// IsPSKMark reports whether psk is a redaction mark of the restricted API
// rather than a key.
func IsPSKMark(psk string) bool { return strings.HasPrefix(psk, PSKMarkPrefix) }
