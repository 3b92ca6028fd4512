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

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/esp"
	"github.com/flashgate/flashgate/ipsec/ike"
)

// DefaultSocket is where iked serves its local API on the appliance.
const DefaultSocket = "/run/flashgate/iked.sock"

// Handler is iked's local API:
//
//	GET  /v1/tunnels              every tunnel's ipsec.TunnelStatus
//	GET  /v1/tunnels/{name}       one tunnel
//	POST /v1/tunnels/{name}/up    initiate now (resets the retry backoff; once for start action respond)
//	POST /v1/tunnels/{name}/down  delete the tunnel's IKE SA (and its children)
//	POST /v1/tunnels/{name}/rekey?sa=ike|child  rekey now (default: the CHILD_SAs)
//	GET  /v1/stats                drop counters (engine and data plane), the data plane in use
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
			code := http.StatusConflict
			if errors.Is(err, errNoTunnel) {
				code = http.StatusNotFound
			}
			writeJSON(w, code, map[string]string{"error": err.Error()})
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
	mux.HandleFunc("POST /v1/tunnels/{name}/rekey", func(w http.ResponseWriter, r *http.Request) {
		which := r.URL.Query().Get("sa")
		if which != "" && which != "ike" && which != "child" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("sa=%q: want ike or child", which)})
			return
		}
		if err := d.Rekey(r.PathValue("name"), which == "ike"); err != nil {
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"result": "rekeying"})
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.Stats())
	})
	return mux
}

// errNoTunnel is the API's 404: the name is not a configured tunnel.
var errNoTunnel = errors.New("no tunnel named")

// Up initiates the named tunnel now, whatever its start action, as
// swanctl --initiate does. One that waits for traffic starts as if traffic
// had come. One that responds is initiated once: if that fails it waits for
// the peer again, without the retries of start action initiate. A tunnel
// that has an IKE SA, or whose initiation is under way, is left as it is.
func (d *Daemon) Up(name string) error {
	d.mu.Lock()
	t := d.tunnels[name]
	if t == nil {
		d.mu.Unlock()
		return fmt.Errorf("%w %q", errNoTunnel, name)
	}
	if t.unusable {
		d.mu.Unlock()
		return fmt.Errorf("%s", t.reason)
	}
	if t.cfg.StartAction == config.StartRespond && !t.cfg.RemoteAddress.IsSet() {
		d.mu.Unlock()
		return fmt.Errorf("tunnel %s has no remote address: it can only wait for the peer to connect", name)
	}
	t.retryAt, t.backoff = time.Time{}, 0
	switch {
	case t.onTraffic():
		d.trigger(t, "asked to come up") // as if traffic had come
	case t.cfg.StartAction == config.StartRespond && t.sa == nil && !t.initiating && !t.upOnce:
		t.upOnce = true
		t.event(time.Now(), "asked to come up: initiating once (start action: respond)")
	}
	d.mu.Unlock()
	d.maintain()
	return nil
}

// Down deletes the named tunnel's IKE SAs; with start action initiate it
// comes back after the retry delay, with respond it waits for the peer
// (an up asked for and still under way is dropped).
func (d *Daemon) Down(name string) error {
	d.mu.Lock()
	t := d.tunnels[name]
	if t == nil {
		d.mu.Unlock()
		return fmt.Errorf("%w %q", errNoTunnel, name)
	}
	t.upOnce = false
	d.mu.Unlock()
	// Every IKE SA of the tunnel, not only the current one: a peer that
	// does not reuse IKE SAs (strongSwan's reuse_ikesa = no) may have
	// made a second one, and the first would stay up at its end.
	for _, sa := range d.sasOf(name) {
		sa.Delete()
	}
	return nil
}

// Rekey rekeys the named tunnel's IKE SA (ikeSA) or every one of its
// CHILD_SAs now, as `swanctl --rekey` does; the SAs being replaced keep
// carrying traffic until their successors are installed.
func (d *Daemon) Rekey(name string, ikeSA bool) error {
	d.mu.Lock()
	t := d.tunnels[name]
	var sa *ike.IKESA
	if t != nil {
		sa = t.sa
	}
	d.mu.Unlock()
	switch {
	case t == nil:
		return fmt.Errorf("no tunnel named %q", name)
	case sa == nil || sa.State() != ike.StateEstablished:
		return fmt.Errorf("tunnel %s has no established IKE SA to rekey", name)
	case ikeSA:
		return sa.RekeyIKE()
	}
	var errs []error
	for _, c := range sa.Status().Children {
		if err := sa.RekeyChild(c.InSPI); err != nil {
			errs = append(errs, fmt.Errorf("tunnel %s: rekey CHILD_SA %08x: %w", name, c.InSPI, err))
		}
	}
	return errors.Join(errs...)
}

// Stats are the daemon-wide counters of GET /v1/stats: what the IKE engine
// and the data plane dropped, by cause.
type Stats struct {
	DataPlane string            `json:"data_plane"`
	HalfOpen  int               `json:"half_open"` // responder IKE SAs waiting for IKE_AUTH
	IKE       ike.StatsSnapshot `json:"ike"`
	// SendDrops counts IKE datagrams the kernel would not take at once
	// (send buffer full); NATIKEDrops, IKE from the NAT-T port dropped
	// because the engine was behind (userspace data plane).
	SendDrops   uint64 `json:"send_drops"`
	NATIKEDrops uint64 `json:"nat_t_ike_drops"`
	// QueueDrops counts IKE datagrams read from the IKE sockets and
	// dropped because their sender's worker was behind (a flood).
	QueueDrops uint64 `json:"ike_queue_drops"`
	// ESP holds the userspace data plane's drops that belong to no SA
	// (unknown SPI, truncated, oversized); nil with kernel XFRM.
	ESP *esp.DeviceCounterSnapshot `json:"esp,omitempty"`
}

// Stats returns the daemon-wide counters.
func (d *Daemon) Stats() Stats {
	s := Stats{DataPlane: d.dp.Name(), HalfOpen: d.ep.HalfOpen(), IKE: d.ep.Stats.Snapshot(),
		SendDrops: d.tr.sendDrops.Load(), NATIKEDrops: d.natIKEDrops.Load(), QueueDrops: d.tr.queueDrops.Load()}
	if d.dev != nil {
		c := d.dev.CounterSnapshot()
		s.ESP = &c
	}
	return s
}

// Serve serves the local API on a unix socket until ctx ends.
func (d *Daemon) Serve(ctx context.Context, path string) error {
	return d.ServeGroup(ctx, path, -1)
}

// ServeGroup is Serve with the socket's group set to gid (-1: root's),
// whose members may then use the API: the web UI's group on the
// appliance (tunnel status, connect and disconnect; the API hands out no
// keys).
func (d *Daemon) ServeGroup(ctx context.Context, path string, gid int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("iked API: %w", err)
	}
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("iked API: %w", err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return fmt.Errorf("iked API: socket group %d: %w", gid, err)
		}
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return fmt.Errorf("iked API: %w", err)
	}
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

// Rekey asks iked to rekey a tunnel's IKE SA (ikeSA) or CHILD_SAs now.
func (c *Client) Rekey(name string, ikeSA bool) error {
	which := "child"
	if ikeSA {
		which = "ike"
	}
	return c.do("POST", "/v1/tunnels/"+name+"/rekey?sa="+which, nil)
}

// Stats returns iked's daemon-wide drop counters.
func (c *Client) Stats() (Stats, error) {
	var s Stats
	err := c.do("GET", "/v1/stats", &s)
	return s, err
}

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
