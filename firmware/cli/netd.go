package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/flashgate/flashgate/services/netd"
)

// netdClient reads netd's local API (GET /v1/status: links, leases and
// the LAN and opt DHCP servers' leases; GET /v1/firewall); netd has no Go client
// of its own.
type netdClient struct {
	hc *http.Client
}

func newNetdClient(path string) *netdClient {
	return &netdClient{hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}}}
}

func (c *netdClient) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://netd"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return unreachable("netd", fmt.Errorf("netd GET %s: %w", path, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("netd GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("netd GET %s: %s", path, resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("netd GET %s: %w", path, err)
	}
	return nil
}

func (c *netdClient) status(ctx context.Context) (netd.Status, error) {
	var st netd.Status
	return st, c.get(ctx, "/v1/status", &st)
}

func (c *netdClient) firewall(ctx context.Context) (netd.FirewallStatus, error) {
	var fw netd.FirewallStatus
	return fw, c.get(ctx, "/v1/firewall", &fw)
}
