package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Client talks to the supervisor API on its unix socket.
type Client struct {
	hc *http.Client
}

// NewClient returns a client for the socket at path.
func NewClient(path string) *Client {
	return &Client{hc: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
		},
	}}
}

// The host part is ignored by the dialer; it names the service in errors.
const apiBase = "http://supervisor"

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, apiBase+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("supervisor API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("supervisor API %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s", e.Error)
		}
		return fmt.Errorf("supervisor API %s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("supervisor API %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// Services lists the services.
func (c *Client) Services(ctx context.Context) ([]ServiceStatus, error) {
	var out []ServiceStatus
	return out, c.do(ctx, http.MethodGet, "/v1/services", nil, &out)
}

// Service returns one service.
func (c *Client) Service(ctx context.Context, name string) (ServiceStatus, error) {
	var out ServiceStatus
	return out, c.do(ctx, http.MethodGet, "/v1/services/"+url.PathEscape(name), nil, &out)
}

// System returns PID 1's own status.
func (c *Client) System(ctx context.Context) (System, error) {
	var out System
	return out, c.do(ctx, http.MethodGet, "/v1/system", nil, &out)
}

// Logs returns the last n lines of a log ring (all if n is 0).
func (c *Client) Logs(ctx context.Context, name string, n int) (LogsReply, error) {
	var out LogsReply
	return out, c.do(ctx, http.MethodGet, "/v1/logs/"+url.PathEscape(name)+"?lines="+strconv.Itoa(n), nil, &out)
}

// Restart restarts a service.
func (c *Client) Restart(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/v1/services/"+url.PathEscape(name)+"/restart", nil, nil)
}

// Stop stops a service.
func (c *Client) Stop(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/v1/services/"+url.PathEscape(name)+"/stop", nil, nil)
}

// Power asks PID 1 to reboot or power off.
func (c *Client) Power(ctx context.Context, a PowerAction) error {
	return c.do(ctx, http.MethodPost, "/v1/"+string(a), nil, nil)
}

// StopPetting is the watchdog test hook.
func (c *Client) StopPetting(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/watchdog/stop-petting", nil, nil)
}

// SetSyslog sets (or with an empty Addr, clears) remote syslog.
func (c *Client) SetSyslog(ctx context.Context, cfg SyslogConfig) error {
	return c.do(ctx, http.MethodPut, "/v1/syslog", cfg, nil)
}

// SetConsoleBaud has the console getty restarted at baud, one of
// ConsoleBauds.
func (c *Client) SetConsoleBaud(ctx context.Context, baud int) error {
	return c.do(ctx, http.MethodPut, "/v1/console", map[string]int{"baud": baud}, nil)
}
