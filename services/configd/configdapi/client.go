// Package configdapi is the contract of configd's local API: its sockets,
// wire types and error codes, and the one Go client, for the web UI, the
// console, hostd, iked and netd. It is a leaf: configd imports it to build
// its handlers, and its clients import it and not configd.
//
// Every Client method maps to one route (see docs/config.md); errors
// from configd come back as *APIError, which matches the config package's
// sentinel errors with errors.Is (config.ErrCandidateChanged, ...) and its
// field errors with errors.As (config.ValidationErrors). Follow and
// WaitRunning are how a service reads its configuration: every service
// waits for configd and follows its changes the same way.
package configdapi

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/localapi"
)

// Client talks to configd over its unix socket.
type Client struct {
	socket string
	hc     *http.Client // requests with a timeout
	stream *http.Client // the watch stream: no timeout
	reauth http.Header  // WithPassword's headers, sent with every request
}

// WithPassword returns a client that sends user's current password with
// every request: the restricted API wants it for a factory reset, an
// import, an export with secrets and a firmware install (see
// ReauthUserHeader), and refuses them without it with an
// *APIError whose Code is CodeWrongPassword. The copy shares c's
// connections.
func (c *Client) WithPassword(user, password string) *Client {
	cp := *c
	cp.reauth = http.Header{}
	cp.reauth.Set(ReauthUserHeader, user)
	cp.reauth.Set(ReauthPasswordHeader, url.PathEscape(password))
	return &cp
}

// New returns a client for the socket at path (DefaultSocket on
// the appliance).
func New(path string) *Client {
	tr := localapi.NewTransport(path)
	return &Client{
		socket: path,
		hc:     &http.Client{Transport: tr, Timeout: 60 * time.Second},
		stream: &http.Client{Transport: tr},
	}
}

// APIError is an error configd answered with.
type APIError struct {
	Status  int
	Code    string // Code*
	Message string
	Fields  config.ValidationErrors // per-field problems, when there are any
}

func (e *APIError) Error() string {
	if len(e.Fields) > 0 && e.Code == CodeValidation {
		return e.Fields.Error()
	}
	return e.Message
}

// Is maps API error codes to the config package's sentinel errors, and a
// file never stored (File) to fs.ErrNotExist.
func (e *APIError) Is(target error) bool {
	switch target {
	case config.ErrCandidateChanged:
		return e.Code == CodeCandidateChanged
	case config.ErrNoChanges:
		return e.Code == CodeNoChanges
	case config.ErrNothingPending:
		return e.Code == CodeNothingPending
	case config.ErrNoRevision:
		return e.Code == CodeNotFound
	case config.ErrHandedOff:
		return e.Code == CodeHandedOff
	case fs.ErrNotExist:
		return e.Code == CodeNoFile
	}
	return false
}

// Unwrap exposes the field errors to errors.As.
func (e *APIError) Unwrap() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e.Fields
}

// do sends a request; in (if not nil) is encoded as JSON (or sent as is
// when it is []byte), out (if not nil) receives the JSON answer (or the raw
// body when it is *[]byte or *string).
func (c *Client) do(ctx context.Context, method, path string, hdr http.Header, in, out any) (http.Header, error) {
	var body io.Reader
	if in != nil {
		if raw, ok := in.([]byte); ok {
			body = bytes.NewReader(raw)
		} else {
			b, err := json.Marshal(in)
			if err != nil {
				return nil, err
			}
			body = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://configd"+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	for k, v := range c.reauth {
		req.Header[k] = v
	}
	if in != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("configd %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4*config.MaxDocumentSize))
	if err != nil {
		return nil, fmt.Errorf("configd %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var er ErrorResponse
		if json.Unmarshal(data, &er) != nil || er.Code == "" {
			return nil, &APIError{Status: resp.StatusCode, Code: CodeInternal,
				Message: fmt.Sprintf("configd %s %s: %s", method, path, resp.Status)}
		}
		return nil, &APIError{Status: resp.StatusCode, Code: er.Code, Message: er.Error, Fields: er.Fields}
	}
	switch o := out.(type) {
	case nil:
	case *[]byte:
		*o = data
	case *string:
		*o = string(data)
	default:
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("configd %s %s: answer: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

func ifMatch(etag string) http.Header {
	if etag == "" {
		return nil
	}
	return http.Header{"If-Match": {`"` + etag + `"`}}
}

// Status returns configd's state: revision, pending confirmation, and why
// the database was set aside at start, if it was.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	_, err := c.do(ctx, "GET", "/v1/status", nil, nil, &s)
	return s, err
}

// Running returns the running configuration and its revision.
func (c *Client) Running(ctx context.Context) (*config.Config, uint64, error) {
	var r RunningResponse
	if _, err := c.do(ctx, "GET", "/v1/running", nil, nil, &r); err != nil {
		return nil, 0, err
	}
	return r.Config, r.Revision, nil
}

// RunningSystem returns the running configuration's system section and
// its revision: the host name and the accounts without the rest.
func (c *Client) RunningSystem(ctx context.Context) (config.System, uint64, error) {
	var r RunningSystemResponse
	if _, err := c.do(ctx, "GET", "/v1/running/system", nil, nil, &r); err != nil {
		return config.System{}, 0, err
	}
	return r.System, r.Revision, nil
}

// RunningText returns the running configuration in the text form.
func (c *Client) RunningText(ctx context.Context) (string, error) {
	var s string
	_, err := c.do(ctx, "GET", "/v1/running?format=text", nil, nil, &s)
	return s, err
}

// Candidate returns the candidate with its etag, whether it differs from
// running, and what validation says about it now.
func (c *Client) Candidate(ctx context.Context) (CandidateResponse, error) {
	var r CandidateResponse
	_, err := c.do(ctx, "GET", "/v1/candidate", nil, nil, &r)
	return r, err
}

// CandidateText returns the candidate in the text form.
func (c *Client) CandidateText(ctx context.Context) (string, error) {
	var s string
	_, err := c.do(ctx, "GET", "/v1/candidate?format=text", nil, nil, &s)
	return s, err
}

func (c *Client) edit(ctx context.Context, method, path, etag string, in any) (string, error) {
	var r EtagResponse
	_, err := c.do(ctx, method, path, ifMatch(etag), in, &r)
	return r.Etag, err
}

// ReplaceCandidate makes cfg the candidate. etag is the one read with the
// candidate ("" skips the check); the new etag is returned.
func (c *Client) ReplaceCandidate(ctx context.Context, etag string, cfg *config.Config) (string, error) {
	return c.edit(ctx, "PUT", "/v1/candidate", etag, cfg.JSON())
}

// PatchCandidate applies a JSON merge patch (RFC 7396) to the candidate.
func (c *Client) PatchCandidate(ctx context.Context, etag string, patch []byte) (string, error) {
	return c.edit(ctx, "PATCH", "/v1/candidate", etag, patch)
}

// Set sets one value of the candidate by path ("tunnels.branch.psk");
// values are in the text form, several for a list.
func (c *Client) Set(ctx context.Context, etag, path string, values ...string) (string, error) {
	return c.edit(ctx, "POST", "/v1/candidate/set", "", SetRequest{Etag: etag, Path: path, Values: values})
}

// Delete deletes one element or value of the candidate by path.
func (c *Client) Delete(ctx context.Context, etag, path string) (string, error) {
	return c.edit(ctx, "POST", "/v1/candidate/delete", "", DeleteRequest{Etag: etag, Path: path})
}

// Discard throws the candidate's changes away.
func (c *Client) Discard(ctx context.Context) (string, error) {
	return c.edit(ctx, "POST", "/v1/candidate/discard", "", struct{}{})
}

// SetPassword sets an admin's password in the candidate (configd hashes
// it), creating the account if needed.
func (c *Client) SetPassword(ctx context.Context, etag, admin, password string) (string, error) {
	return c.edit(ctx, "POST", "/v1/candidate/password", "", PasswordRequest{Etag: etag, Admin: admin, Password: password})
}

// Validate returns what is wrong with the candidate (empty: nothing).
func (c *Client) Validate(ctx context.Context) (config.ValidationErrors, error) {
	var r struct {
		Errors config.ValidationErrors `json:"errors"`
	}
	_, err := c.do(ctx, "GET", "/v1/validate", nil, nil, &r)
	return r.Errors, err
}

// Diff returns the text-form difference between two configurations, each
// "running", "candidate" or a revision number.
func (c *Client) Diff(ctx context.Context, from, to string) ([]DiffLine, error) {
	var r DiffResponse
	_, err := c.do(ctx, "GET", "/v1/diff?from="+url.QueryEscape(from)+"&to="+url.QueryEscape(to), nil, nil, &r)
	return r.Lines, err
}

// Commit commits the candidate. Set req.ConfirmTimeout for a
// commit-confirmed and req.Etag to refuse a candidate changed by someone
// else since it was read.
func (c *Client) Commit(ctx context.Context, req CommitRequest) (config.RevisionInfo, error) {
	var info config.RevisionInfo
	_, err := c.do(ctx, "POST", "/v1/commit", nil, req, &info)
	return info, err
}

// Confirm keeps a commit-confirmed.
func (c *Client) Confirm(ctx context.Context) error {
	_, err := c.do(ctx, "POST", "/v1/confirm", nil, struct{}{}, nil)
	return err
}

// Rollback makes revision rev running again, as a new revision.
func (c *Client) Rollback(ctx context.Context, rev uint64, who string) (config.RevisionInfo, error) {
	var info config.RevisionInfo
	_, err := c.do(ctx, "POST", "/v1/rollback", nil, RollbackRequest{Revision: rev, Who: who}, &info)
	return info, err
}

// HandOff makes the database one that firmware reading req's formats and
// schema reads, for the reboot into it; configd commits nothing more
// until it restarts (see HandOffRequest).
func (c *Client) HandOff(ctx context.Context, req HandOffRequest) (HandOffResponse, error) {
	var resp HandOffResponse
	_, err := c.do(ctx, "POST", "/v1/handoff", nil, req, &resp)
	return resp, err
}

// History lists the revisions, newest first.
func (c *Client) History(ctx context.Context) ([]config.RevisionInfo, error) {
	var h []config.RevisionInfo
	_, err := c.do(ctx, "GET", "/v1/history", nil, nil, &h)
	return h, err
}

// Revision returns one revision's configuration.
func (c *Client) Revision(ctx context.Context, rev uint64) (*config.Config, config.RevisionInfo, error) {
	var r RevisionResponse
	_, err := c.do(ctx, "GET", "/v1/history/"+strconv.FormatUint(rev, 10), nil, nil, &r)
	return r.Config, r.Info, err
}

// Export returns a backup of the running configuration; secrets is
// config.SecretsIncluded, SecretsOmitted or SecretsEncrypted (passphrase).
func (c *Client) Export(ctx context.Context, secrets, passphrase string) ([]byte, error) {
	var b []byte
	_, err := c.do(ctx, "POST", "/v1/export", nil, ExportRequest{Secrets: secrets, Passphrase: passphrase}, &b)
	return b, err
}

// Import makes a backup the candidate (commit to apply). Bad data changes
// nothing; the error says why.
func (c *Client) Import(ctx context.Context, etag string, backup []byte, passphrase string) (string, error) {
	if !json.Valid(backup) {
		return "", errors.New("backup is not JSON")
	}
	return c.edit(ctx, "POST", "/v1/import", "", ImportRequest{Etag: etag, Backup: backup, Passphrase: passphrase})
}

// FactoryReset replaces the configuration with the defaults and erases the
// history.
func (c *Client) FactoryReset(ctx context.Context, who string) (config.RevisionInfo, error) {
	var info config.RevisionInfo
	_, err := c.do(ctx, "POST", "/v1/factory-reset", nil, FactoryResetRequest{Who: who, Confirm: "factory-reset"}, &info)
	return info, err
}

// VerifyPassword asks configd whether password is user's (the web UI
// gets no password hashes). An unknown user reads as a wrong password.
func (c *Client) VerifyPassword(ctx context.Context, user, password string) (bool, error) {
	var resp VerifyPasswordResponse
	_, err := c.do(ctx, "POST", "/v1/verify-password", nil, VerifyPasswordRequest{User: user, Password: password}, &resp)
	return resp.OK, err
}

// EraseSecrets is a factory reset that keeps the settings that are not
// secret: admin accounts, tunnels, the history and the stored files are
// erased, the interfaces, routes, firewall and system settings stay.
func (c *Client) EraseSecrets(ctx context.Context, who string) (config.RevisionInfo, error) {
	var info config.RevisionInfo
	_, err := c.do(ctx, "POST", "/v1/factory-reset", nil,
		FactoryResetRequest{Who: who, Confirm: "factory-reset", KeepSettings: true}, &info)
	return info, err
}

// PutFile stores data (at most MaxFileSize bytes) as name in
// configd's file store, on the config partition, replacing what was there.
// Files are for secrets at rest such as TLS keys; they are not part of the
// configuration. The answer's Storage is "ram" when there is no config
// partition and the file will not survive a reboot.
func (c *Client) PutFile(ctx context.Context, name string, data []byte) (FileInfo, error) {
	var info FileInfo
	if !ValidFileName(name) {
		return info, fmt.Errorf("file %q: %w", name, ErrBadFileName)
	}
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	_, err := c.do(ctx, "PUT", "/v1/files/"+name, hdr, data, &info)
	return info, err
}

// File returns a file from configd's file store; an error matching
// fs.ErrNotExist only when configd answered that none was stored under
// that name.
func (c *Client) File(ctx context.Context, name string) ([]byte, error) {
	if !ValidFileName(name) {
		return nil, fmt.Errorf("file %q: %w", name, ErrBadFileName)
	}
	var data []byte
	_, err := c.do(ctx, "GET", "/v1/files/"+name, nil, nil, &data)
	var ae *APIError
	if err != nil && !errors.As(err, &ae) {
		// A missing socket is ENOENT, which matches fs.ErrNotExist: a
		// caller would take "configd is not running" for "no such file"
		// and make a new key. Cut the chain.
		return nil, fmt.Errorf("configd unreachable: %v", err)
	}
	return data, err
}

// Watch delivers a config.Change for every change of the running
// configuration until ctx ends, when the channel is closed. The first
// Change on every (re)connection has Reason "current" and lists every
// section: apply the whole configuration then. When configd restarts or
// the stream breaks, Watch reconnects by itself (backing off up to 5 s).
func (c *Client) Watch(ctx context.Context) <-chan config.Change {
	out := make(chan config.Change)
	go func() {
		defer close(out)
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			got := c.watchOnce(ctx, out)
			if got {
				backoff = 100 * time.Millisecond
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}()
	return out
}

// watchOnce reads one stream until it ends; it reports whether anything
// arrived.
func (c *Client) watchOnce(ctx context.Context, out chan<- config.Change) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://configd/v1/watch", nil)
	if err != nil {
		return false
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	got := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ch config.Change
		if err := json.Unmarshal(sc.Bytes(), &ch); err != nil {
			return got
		}
		got = true
		select {
		case out <- ch:
		case <-ctx.Done():
			return got
		}
	}
	return got
}

// Firmware reads the card's slots, its trusted keys, PID 1's boot record
// and the upload in progress (GET /v1/firmware, on a configd serving the
// firmware routes: the web UI's socket on the box).
func (c *Client) Firmware(ctx context.Context) (FirmwareView, error) {
	var v FirmwareView
	_, err := c.do(ctx, "GET", "/v1/firmware", nil, nil, &v)
	return v, err
}

// CheckFirmware has configd check an upgrade file from its first bytes
// (the header; 64 KiB at most) against the card and the running firmware;
// size is the whole file's length, or -1. A refusal returns the plan, with
// what the file is and why it is refused, and an *APIError with Code
// CodeFirmwareRefused and the HTTP status for it.
func (c *Client) CheckFirmware(ctx context.Context, head []byte, size int64, allowDowngrade bool) (FirmwarePlan, error) {
	q := url.Values{"size": {strconv.FormatInt(size, 10)}}
	if allowDowngrade {
		q.Set("confirm_downgrade", "1")
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://configd/v1/firmware/check?"+q.Encode(), bytes.NewReader(head))
	if err != nil {
		return FirmwarePlan{}, err
	}
	return c.firmwarePlan(c.hc, req)
}

// InstallFirmware streams an upgrade file of size bytes from body to
// configd, which checks its header and writes it into the inactive slot
// as it arrives, then arms the test boot. Nothing but the caller's
// context bounds it (a file on a slow link takes minutes). Refusals are
// as CheckFirmware's.
func (c *Client) InstallFirmware(ctx context.Context, body io.Reader, size int64, allowDowngrade bool) (FirmwarePlan, error) {
	path := "/v1/firmware"
	if allowDowngrade {
		path += "?confirm_downgrade=1"
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://configd"+path, io.NopCloser(body))
	if err != nil {
		return FirmwarePlan{}, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	return c.firmwarePlan(c.stream, req)
}

// firmwarePlan sends a firmware request; the answer is a FirmwarePlan
// whatever its status.
func (c *Client) firmwarePlan(hc *http.Client, req *http.Request) (FirmwarePlan, error) {
	var p FirmwarePlan
	for k, v := range c.reauth {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		return p, fmt.Errorf("configd %s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(data, &p)
	}
	if err != nil {
		return p, fmt.Errorf("configd %s %s: %s: answer: %w", req.Method, req.URL.Path, resp.Status, err)
	}
	if resp.StatusCode >= 300 {
		// A refusal before the file is looked at (the password) is an
		// ErrorResponse, with its code.
		var er ErrorResponse
		json.Unmarshal(data, &er)
		code := cmp.Or(er.Code, CodeFirmwareRefused)
		msg := p.Error
		if msg == "" {
			msg = fmt.Sprintf("configd %s %s: %s", req.Method, req.URL.Path, resp.Status)
		}
		return p, &APIError{Status: resp.StatusCode, Code: code, Message: msg}
	}
	return p, nil
}

// String names the client's configd in logs: "configd at <socket>".
func (c *Client) String() string { return "configd at " + c.socket }
