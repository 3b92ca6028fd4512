package ikedapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/ipsec"
)

// Client talks to iked's local API. Its methods take a context; each
// request is also bounded by the client's own timeout (5 s).
type Client struct {
	path string
	hc   *http.Client
}

// NewClient talks to the API on the unix socket at path.
func NewClient(path string) *Client {
	return &Client{path: path, hc: &http.Client{Timeout: 5 * time.Second, Transport: localapi.NewTransport(path)}}
}

// TunnelsPageSize is how many tunnels a request asks iked for when a
// caller wants them all (Tunnels, TunnelsMatching). Listing a head office's
// thousand tunnels in one answer took iked 0.1-0.3 s, and over 2.7 s on
// a loaded machine at nice 19, near the client's 5 s timeout; a page of
// a hundred is a tenth of that, each page under its own timeout.
const TunnelsPageSize = 100

// Tunnels returns every tunnel's status, read a page of TunnelsPageSize
// at a time. Callers that want a count, one tunnel or one page ask for
// that instead (CountTunnels, Tunnel, TunnelsPage).
func (c *Client) Tunnels(ctx context.Context) ([]ipsec.TunnelStatus, error) {
	return c.TunnelsMatching(ctx, TunnelQuery{})
}

// TunnelsMatching returns every tunnel q selects (its Offset and Limit
// aside), in name order, read a page of TunnelsPageSize at a time. The
// pages are not one snapshot: a tunnel added while they are read may be
// listed or not, and one removed may shift another from the page not yet
// read into one already read, so that it is left out.
func (c *Client) TunnelsMatching(ctx context.Context, q TunnelQuery) ([]ipsec.TunnelStatus, error) {
	q.Offset, q.Limit = 0, TunnelsPageSize
	var all []ipsec.TunnelStatus
	seen := map[string]bool{}
	for {
		page, matched, err := c.TunnelsPage(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, t := range page {
			// A tunnel added before the offset shifts the last one
			// read into the next page.
			if !seen[t.Name] {
				seen[t.Name] = true
				all = append(all, t)
			}
		}
		q.Offset += len(page)
		if len(page) < q.Limit || q.Offset >= matched {
			return all, nil
		}
	}
}

// CountTunnels returns how many tunnels q selects (its Offset and Limit
// aside), with one tunnel's status read, not every one's.
func (c *Client) CountTunnels(ctx context.Context, q TunnelQuery) (int, error) {
	q.Offset, q.Limit = 0, 1
	_, matched, err := c.TunnelsPage(ctx, q)
	return matched, err
}

// TunnelsPage returns the tunnels q selects and how many matched before
// q's offset and limit.
func (c *Client) TunnelsPage(ctx context.Context, q TunnelQuery) ([]ipsec.TunnelStatus, int, error) {
	var ts []ipsec.TunnelStatus
	path := "/v1/tunnels"
	if v := q.Values().Encode(); v != "" {
		path += "?" + v
	}
	hdr, err := c.doHeader(ctx, http.MethodGet, path, &ts)
	if err != nil {
		return nil, 0, err
	}
	matched, err := strconv.Atoi(hdr.Get(HeaderMatched))
	if err != nil {
		return nil, 0, fmt.Errorf("iked: GET %s: no %s header", path, HeaderMatched)
	}
	return ts, matched, nil
}

// Tunnel returns the named tunnel's status (ErrNoTunnel: none of that name).
func (c *Client) Tunnel(ctx context.Context, name string) (ipsec.TunnelStatus, error) {
	var t ipsec.TunnelStatus
	err := c.do(ctx, http.MethodGet, "/v1/tunnels/"+url.PathEscape(name), &t)
	return t, err
}

// Up asks iked to initiate the tunnel now (and to forget its retry
// backoff); a tunnel that only responds is initiated once.
func (c *Client) Up(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/v1/tunnels/"+url.PathEscape(name)+"/up", nil)
}

// Down asks iked to delete the tunnel's IKE SAs and their CHILD_SAs. A
// tunnel that starts by itself comes back by its start action.
func (c *Client) Down(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/v1/tunnels/"+url.PathEscape(name)+"/down", nil)
}

// Rekey asks iked to rekey the tunnel's IKE SA (ikeSA) or its CHILD_SAs now.
func (c *Client) Rekey(ctx context.Context, name string, ikeSA bool) error {
	which := "child"
	if ikeSA {
		which = "ike"
	}
	return c.do(ctx, http.MethodPost, "/v1/tunnels/"+url.PathEscape(name)+"/rekey?sa="+which, nil)
}

// Stats returns iked's daemon-wide drop counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.do(ctx, http.MethodGet, "/v1/stats", &s)
	return s, err
}

// maxDocument bounds what is read of an answer: a status of many tunnels
// with their events fits many times over.
const maxDocument = 8 << 20

func (c *Client) do(ctx context.Context, method, path string, out any) error {
	_, err := c.doHeader(ctx, method, path, out)
	return err
}

// doHeader is do that also returns the answer's header.
func (c *Client) doHeader(ctx context.Context, method, path string, out any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://iked"+path, nil)
	if err != nil {
		return nil, fmt.Errorf("iked API %s %s: %w", method, path, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// A missing socket, or one left by a dead iked (connection
		// refused): iked is not running. The dial error stays in the
		// chain for callers that show its cause.
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, fmt.Errorf("%w (%s does not answer): %w", ErrNotRunning, c.path, err)
		}
		return nil, fmt.Errorf("iked API %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		return nil, fmt.Errorf("iked API %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var r Reply
		json.Unmarshal(body, &r) // a body that is not a Reply leaves the status to speak
		return nil, &Error{Status: resp.StatusCode, Message: r.Error}
	}
	if out == nil {
		return resp.Header, nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return nil, fmt.Errorf("iked API %s %s: decode: %w", method, path, err)
	}
	return resp.Header, nil
}
