package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/ipsec"
)

// TunnelSource reports the live state of the tunnels (iked).
type TunnelSource interface {
	Tunnels(ctx context.Context) ([]ipsec.TunnelStatus, error)
}

// TunnelControl starts and stops tunnels now, without a configuration
// change (iked's up and down). *IkedClient implements it; a TunnelSource
// that does not hides the buttons.
type TunnelControl interface {
	Up(ctx context.Context, name string) error
	Down(ctx context.Context, name string) error
}

// Supervisor is the part of the supervisor API the web UI uses: the
// service list, their logs, and reboot. *supervisor.Client implements it.
type Supervisor interface {
	Services(ctx context.Context) ([]supervisor.ServiceStatus, error)
	Logs(ctx context.Context, name string, n int) (supervisor.LogsReply, error)
	Power(ctx context.Context, a supervisor.PowerAction) error
}

// ErrIkedNotRunning is what IkedClient returns when iked's socket is not
// there: tunnels then show as unknown, never as down.
var ErrIkedNotRunning = errors.New("iked is not running")

// IkedClient reads tunnel status from iked's local API
// (GET /v1/tunnels on /run/flashgate/iked.sock).
type IkedClient struct {
	path string
	hc   *http.Client
}

// NewIkedClient returns a client for iked's socket at path.
func NewIkedClient(path string) *IkedClient {
	return &IkedClient{path: path, hc: unixHTTPClient(path, 5*time.Second)}
}

func unixHTTPClient(path string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			MaxIdleConns: 2,
		},
	}
}

// Up asks iked to initiate the tunnel now (and to forget its retry
// backoff).
func (c *IkedClient) Up(ctx context.Context, name string) error {
	return c.post(ctx, "/v1/tunnels/"+url.PathEscape(name)+"/up")
}

// Down asks iked to delete the tunnel's IKE SA and its CHILD_SAs. A tunnel
// that starts by itself comes back by its start action.
func (c *IkedClient) Down(ctx context.Context, name string) error {
	return c.post(ctx, "/v1/tunnels/"+url.PathEscape(name)+"/down")
}

func (c *IkedClient) post(ctx context.Context, path string) error {
	if _, err := os.Stat(c.path); errors.Is(err, os.ErrNotExist) {
		return ErrIkedNotRunning
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://iked"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("iked API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 300 {
		return nil
	}
	var e struct{ Error string }
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return errors.New(e.Error)
	}
	return fmt.Errorf("iked API: %s", resp.Status)
}

// Tunnels returns iked's view of every configured tunnel.
func (c *IkedClient) Tunnels(ctx context.Context) ([]ipsec.TunnelStatus, error) {
	if _, err := os.Stat(c.path); errors.Is(err, os.ErrNotExist) {
		return nil, ErrIkedNotRunning
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://iked/v1/tunnels", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// A socket left by a dead iked refuses connections.
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, fmt.Errorf("%w (%s does not answer)", ErrIkedNotRunning, c.path)
		}
		return nil, fmt.Errorf("iked API: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("iked API: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("iked API: %s", resp.Status)
	}
	var out []ipsec.TunnelStatus
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("iked API: decode tunnels: %w", err)
	}
	return out, nil
}
