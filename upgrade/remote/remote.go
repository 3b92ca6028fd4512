// Package remote drives a box's firmware upgrade over its JSON API, as
// `flashgate upgrade` does: log in, show what the file is, stream it, and
// follow the test boot until the new firmware is committed or the box fell
// back. ImportTunnels saves tunnels into its candidate, as `flashgate
// import -box` does. The box's certificate is pinned by its fingerprint.
package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"time"
)

// Box is one appliance's web UI.
type Box struct {
	URL         string // https://192.168.1.1
	Fingerprint string // SHA-256 of its certificate, hex with or without colons
	User        string
	Password    string

	client *http.Client
	csrf   string
}

// Plan is what the box says about a file (webui.UpgradePlan).
type Plan struct {
	Version   string `json:"version"`
	Board     string `json:"board"`
	Built     int64  `json:"built"`
	Signer    string `json:"signer"`
	Target    string `json:"target_slot"`
	Downgrade bool   `json:"downgrade"`
	Size      int64  `json:"size"`
	Error     string `json:"error"`
	Rebooting bool   `json:"rebooting"`
	Config    string `json:"config"` // what configuration the firmware will run with, when not the database as it is
}

// State is the part of GET /api/v1/upgrade the host tool follows.
type State struct {
	Running struct {
		Slot    string `json:"slot"`
		Version string `json:"version"`
		Board   string `json:"board"`
	} `json:"running"`
	DefaultSlot string `json:"default_slot"`
	Boot        *struct {
		Trial    bool   `json:"trial"`
		Checking string `json:"checking"`
		Last     *struct {
			State     string `json:"state"`
			ToVersion string `json:"to_version"`
			Reason    string `json:"reason"`
		} `json:"last"`
	} `json:"boot"`
	Message string `json:"message"`
	Error   string `json:"error"`
}

func normFP(s string) string {
	return strings.ToLower(strings.NewReplacer(":", "", " ", "").Replace(s))
}

func (b *Box) httpClient() (*http.Client, error) {
	if b.client != nil {
		return b.client, nil
	}
	want := normFP(b.Fingerprint)
	if len(want) != 64 {
		return nil, errors.New("-fingerprint: give the box's certificate SHA-256 (the System page and the console banner show it): the box's certificate is self-signed, so it is pinned, not trusted")
	}
	jar, _ := cookiejar.New(nil)
	b.client = &http.Client{Jar: jar, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, // replaced by the pin below
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				if len(raw) == 0 {
					return errors.New("the box sent no certificate")
				}
				sum := sha256.Sum256(raw[0])
				if got := hex.EncodeToString(sum[:]); got != want {
					return fmt.Errorf("the box's certificate has SHA-256 %s, not the pinned %s: a different box, or someone in between", got, want)
				}
				return nil
			},
		},
		ResponseHeaderTimeout: 10 * time.Minute, // the box answers the upload after writing and verifying it
	}}
	return b.client, nil
}

type apiError struct {
	Status int
	Msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("the box answered %d: %s", e.Status, e.Msg) }

func (b *Box) do(ctx context.Context, method, path string, body io.Reader, size int64, ctype string, out any) error {
	c, err := b.httpClient()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(b.URL, "/")+path, body)
	if err != nil {
		return err
	}
	if size >= 0 {
		req.ContentLength = size
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if b.csrf != "" {
		req.Header.Set("X-CSRF-Token", b.csrf)
	}
	if method == "POST" && strings.HasPrefix(path, "/api/v1/upgrade?") {
		// The upload needs the current password again (re-authentication).
		req.Header.Set("X-Flashgate-Password", url.PathEscape(b.Password))
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if out != nil {
		json.Unmarshal(raw, out)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(raw, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		return &apiError{resp.StatusCode, e.Error}
	}
	return nil
}

// Login opens a session.
func (b *Box) Login(ctx context.Context) error {
	body, _ := json.Marshal(map[string]string{"user": b.User, "password": b.Password})
	var s struct {
		CSRF string `json:"csrf_token"`
	}
	if err := b.do(ctx, "POST", "/api/v1/login", bytes.NewReader(body), int64(len(body)), "application/json", &s); err != nil {
		return fmt.Errorf("log in as %s: %w", b.User, err)
	}
	b.csrf = s.CSRF
	return nil
}

// Inspect sends the file's first bytes and returns what the box makes of
// them. A refusal comes back as the Plan's Error and a non-nil error.
func (b *Box) Inspect(ctx context.Context, file string, confirmDowngrade bool) (Plan, error) {
	f, err := os.Open(file)
	if err != nil {
		return Plan{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Plan{}, err
	}
	head, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return Plan{}, err
	}
	q := fmt.Sprintf("?size=%d", st.Size())
	if confirmDowngrade {
		q += "&confirm_downgrade=1"
	}
	var p Plan
	err = b.do(ctx, "POST", "/api/v1/upgrade/inspect"+q, bytes.NewReader(head), int64(len(head)), "application/octet-stream", &p)
	return p, err
}

// Upload streams the file; progress gets the bytes sent so far.
func (b *Box) Upload(ctx context.Context, file string, confirmDowngrade, reboot bool, progress func(sent, total int64)) (Plan, error) {
	f, err := os.Open(file)
	if err != nil {
		return Plan{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Plan{}, err
	}
	q := "?reboot=1"
	if !reboot {
		q = "?reboot=0"
	}
	if confirmDowngrade {
		q += "&confirm_downgrade=1"
	}
	var p Plan
	r := &countingReader{r: f, total: st.Size(), progress: progress}
	err = b.do(ctx, "POST", "/api/v1/upgrade"+q, r, st.Size(), "application/octet-stream", &p)
	return p, err
}

type countingReader struct {
	r        io.Reader
	sent     int64
	total    int64
	progress func(sent, total int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sent += int64(n)
	if c.progress != nil && n > 0 {
		c.progress(c.sent, c.total)
	}
	return n, err
}

// Status reads GET /api/v1/upgrade.
func (b *Box) Status(ctx context.Context) (State, error) {
	var s State
	err := b.do(ctx, "GET", "/api/v1/upgrade", nil, -1, "", &s)
	return s, err
}

// WaitResult follows the box through its reboot until it runs version
// with the test boot committed (nil), or runs something else with the
// upgrade marked failed (an error carrying the box's message). note gets
// what the box is doing, for the user.
func (b *Box) WaitResult(ctx context.Context, version string, timeout time.Duration, note func(string)) error {
	deadline := time.Now().Add(timeout)
	last := ""
	say := func(s string) {
		if s != last && note != nil {
			note(s)
		}
		last = s
	}
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
		b.csrf = ""
		if b.client != nil {
			b.client.CloseIdleConnections()
		}
		if err := b.Login(ctx); err != nil {
			say("waiting for the box to answer")
			continue
		}
		st, err := b.Status(ctx)
		if err != nil || st.Boot == nil {
			say("waiting for the box to answer")
			continue
		}
		switch {
		case st.Boot.Trial:
			say(fmt.Sprintf("test boot of %s: waiting for %s", st.Running.Version, st.Boot.Checking))
		case st.Running.Version == version && st.Boot.Last != nil && st.Boot.Last.State == "committed":
			return nil
		case st.Boot.Last != nil && st.Boot.Last.State == "failed" && st.Boot.Last.ToVersion == version:
			return errors.New(st.Message)
		default:
			say(fmt.Sprintf("the box runs %s (slot %s)", st.Running.Version, st.Running.Slot))
		}
	}
	return fmt.Errorf("the box did not report the upgrade's result within %s (last: %s)", timeout, last)
}

// Get, Put and Post call other JSON API routes with the session (tests
// use them to read and change the configuration around an upgrade).
func (b *Box) Get(ctx context.Context, path string, out any) error {
	return b.do(ctx, "GET", path, nil, -1, "", out)
}

func (b *Box) Put(ctx context.Context, path string, in any) error {
	body, _ := json.Marshal(in)
	return b.do(ctx, "PUT", path, bytes.NewReader(body), int64(len(body)), "application/json", nil)
}

func (b *Box) Post(ctx context.Context, path string, in any) error {
	body, _ := json.Marshal(in)
	return b.do(ctx, "POST", path, bytes.NewReader(body), int64(len(body)), "application/json", nil)
}
