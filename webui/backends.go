package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/ipsec"
)

// TunnelSource reports the live state of the tunnels (iked).
type TunnelSource interface {
	Tunnels(ctx context.Context) ([]ipsec.TunnelStatus, error)
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
