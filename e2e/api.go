package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
)

// API is an admin's session with an appliance's web UI JSON API, made from
// a host namespace on the appliance's LAN.
type API struct {
	base  string
	hc    *http.Client
	token string
	ns    *testnet.NS // where the appliance is reached from; nil: the host
}

// NewAPI makes a client whose connections are dialled inside ns. The
// appliance's certificate is self-signed and new with every card, so the
// test does not verify it (an admin pins the fingerprint the console shows).
func NewAPI(ns *testnet.NS, addr string) *API {
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() error {
				var err error
				c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, address)
				return err
			})
			return c, err
		},
	}
	return &API{base: "https://" + addr, hc: &http.Client{Jar: jar, Transport: tr, Timeout: 30 * time.Second}, ns: ns}
}

// APIError is a refused request, with the web UI's error and field problems.
type APIError struct {
	Status int
	Body   string
}

func (e *APIError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// Login opens a session and keeps its CSRF token.
func (a *API) Login(user, password string) error {
	var s struct {
		CSRF string `json:"csrf_token"`
	}
	if err := a.Do("POST", "/api/v1/login", map[string]string{"user": user, "password": password}, &s); err != nil {
		return err
	}
	a.token = s.CSRF
	return nil
}

// WaitLogin retries Login until the web UI answers (it starts after the
// console's prompt) or the timeout passes. A booting appliance is probed
// with bare TCP connects first (WaitListening), which cost it nothing; the
// login itself (an argon2id check, most of a second of the emulated CPU)
// is sent only once the web UI listens.
func (a *API) WaitLogin(user, password string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := a.WaitListening(time.Until(deadline))
		if err == nil {
			err = a.Login(user, password)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("log in to the web UI at %s: %w", a.base, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitListening returns once a TCP connect to the web UI succeeds. A SYN
// to an address the appliance does not have yet is dropped, and the
// kernel would send the next only a second later: each try gives up after
// 300 ms, so the port is found open within about 0.4 s.
func (a *API) WaitListening(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := a.listening()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the web UI at %s is not listening: %w", a.base, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listening connects to the web UI's port and hangs up.
func (a *API) listening() error {
	addr := strings.TrimPrefix(a.base, "https://")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "443")
	}
	dial := func() error {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err
	}
	if a.ns == nil {
		return dial()
	}
	return a.ns.Do(dial)
}

// Do sends a JSON request and decodes a JSON answer into out (if not nil).
func (a *API) Do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("X-CSRF-Token", a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %w", method, path, &APIError{Status: resp.StatusCode, Body: string(b)})
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: answer %q: %w", method, path, b, err)
		}
	}
	return nil
}
