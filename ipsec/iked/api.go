package iked

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

// DefaultSocket is where iked serves its local API on the appliance.
const DefaultSocket = "/run/flashgate/iked.sock"

// Handler is iked's local API:
//
//	GET  /v1/tunnels              every tunnel's ipsec.TunnelStatus
//	GET  /v1/tunnels/{name}       one tunnel
//	POST /v1/tunnels/{name}/up    initiate now (resets the retry backoff)
//	POST /v1/tunnels/{name}/down  delete the tunnel's IKE SA (and its children)
//	GET  /v1/stats                the engine's drop counters and the data plane in use
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/tunnels", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.Status())
	})
	mux.HandleFunc("GET /v1/tunnels/{name}", func(w http.ResponseWriter, r *http.Request) {
		for _, t := range d.Status() {
			if t.Name == r.PathValue("name") {
				writeJSON(w, http.StatusOK, t)
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no tunnel named %q", r.PathValue("name"))})
	})
	mux.HandleFunc("POST /v1/tunnels/{name}/up", func(w http.ResponseWriter, r *http.Request) {
		if err := d.Up(r.PathValue("name")); err != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"result": "initiating"})
	})
	mux.HandleFunc("POST /v1/tunnels/{name}/down", func(w http.ResponseWriter, r *http.Request) {
		if err := d.Down(r.PathValue("name")); err != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"result": "deleted"})
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		s := &d.ep.Stats
		writeJSON(w, http.StatusOK, map[string]any{
			"data_plane": d.dp.Name(), "received": s.Received.Load(), "malformed": s.Malformed.Load(),
			"unknown_spi": s.UnknownSPI.Load(), "bad_icv": s.BadICV.Load(), "out_of_window": s.OutOfWindow.Load(),
			"retransmits": s.Retransmits.Load(), "retransmits_answered": s.RetransmitsAnswered.Load(),
			"auth_failures": s.AuthFailures.Load(), "cookies_sent": s.CookiesSent.Load(),
			"half_open": d.ep.HalfOpen(), "half_open_refused": s.HalfOpenRefused.Load(), "no_config": s.NoConfig.Load(),
		})
	})
	return mux
}

// Up initiates the named tunnel now.
func (d *Daemon) Up(name string) error {
	d.mu.Lock()
	t := d.tunnels[name]
	if t == nil {
		d.mu.Unlock()
		return fmt.Errorf("no tunnel named %q", name)
	}
	t.retryAt, t.backoff = time.Time{}, 0
	d.mu.Unlock()
	d.maintain()
	return nil
}

// Down deletes the named tunnel's IKE SA; with start action initiate it
// comes back after the retry delay.
func (d *Daemon) Down(name string) error {
	d.mu.Lock()
	t := d.tunnels[name]
	if t == nil {
		d.mu.Unlock()
		return fmt.Errorf("no tunnel named %q", name)
	}
	sa := t.sa
	d.mu.Unlock()
	if sa != nil {
		sa.Delete()
	}
	return nil
}

// Serve serves the local API on a unix socket until ctx ends.
func (d *Daemon) Serve(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("iked API: %w", err)
	}
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("iked API: %w", err)
	}
	os.Chmod(path, 0o660)
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Client reads iked's local API.
type Client struct {
	hc *http.Client
}

// NewClient talks to the API on the unix socket at path.
func NewClient(path string) *Client {
	return &Client{hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}}}
}

// Tunnels returns every tunnel's status.
func (c *Client) Tunnels() ([]ipsec.TunnelStatus, error) {
	var ts []ipsec.TunnelStatus
	err := c.do("GET", "/v1/tunnels", &ts)
	return ts, err
}

// Up asks iked to initiate a tunnel now; Down to delete its SAs.
func (c *Client) Up(name string) error   { return c.do("POST", "/v1/tunnels/"+name+"/up", nil) }
func (c *Client) Down(name string) error { return c.do("POST", "/v1/tunnels/"+name+"/down", nil) }

func (c *Client) do(method, path string, out any) error {
	req, err := http.NewRequest(method, "http://iked"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("iked is not answering: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("iked: %s", e.Error)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}
