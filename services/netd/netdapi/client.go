package netdapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/flashgate/flashgate/internal/localapi"
)

// maxAnswer bounds an answer read: a status of many links and leases is
// tens of kilobytes.
const maxAnswer = 4 << 20

// Client reads netd's local API.
type Client struct {
	hc *http.Client
}

// New returns a client of the API on the unix socket at path (Socket on
// the appliance).
func New(path string) *Client {
	return &Client{hc: &http.Client{Timeout: 5 * time.Second, Transport: localapi.NewTransport(path)}}
}

// Status returns the links, leases, DHCP servers, the last apply and the
// time sync (GET /v1/status).
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	return st, c.do(ctx, "GET", "/v1/status", &st)
}

// Links returns every link the kernel has, sorted by name (GET
// /v1/links); the only route WebSocket serves.
func (c *Client) Links(ctx context.Context) ([]LinkStatus, error) {
	var links []LinkStatus
	return links, c.do(ctx, "GET", "/v1/links", &links)
}

// Firewall returns the ruleset as built and the kernel's counters (GET
// /v1/firewall).
func (c *Client) Firewall(ctx context.Context) (FirewallStatus, error) {
	var fw FirewallStatus
	return fw, c.do(ctx, "GET", "/v1/firewall", &fw)
}

// Reconcile makes netd apply the current configuration again now (POST
// /v1/reconcile). A partial apply is an error saying why, with the result.
func (c *Client) Reconcile(ctx context.Context) (ReconcileResult, error) {
	var res ReconcileResult
	err := c.do(ctx, "POST", "/v1/reconcile", &res)
	if err == nil && res.Problem != "" {
		err = fmt.Errorf("netd: %s", res.Problem)
	}
	return res, err
}

func (c *Client) do(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://netd"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("netd %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("netd %s %s: %w", method, path, err)
	}
	// POST /v1/reconcile answers 409 with a result when it applied only
	// part: that is the result, not a failed request.
	if resp.StatusCode != http.StatusOK && !(resp.StatusCode == http.StatusConflict && path == "/v1/reconcile") {
		return fmt.Errorf("netd %s %s: %s", method, path, resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("netd %s %s: answer: %w", method, path, err)
	}
	return nil
}
