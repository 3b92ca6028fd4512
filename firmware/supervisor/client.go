package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/flashgate/flashgate/internal/localsock"
)

// Client talks to the supervisor API on its unix socket. Each call is one
// connection: the API is used a few times a minute, and a connection per
// call leaves the server nothing to keep per client.
type Client struct {
	path    string
	timeout time.Duration // for each call, on top of the caller's context
}

// NewClient returns a client for the socket at path.
func NewClient(path string) *Client {
	return &Client{path: path, timeout: 10 * time.Second}
}

// call sends req and decodes the result into out (if not nil). An error
// the supervisor answered is returned with the supervisor's text; one that
// matches ErrUnknownService when the name was not in its table.
func (c *Client) call(ctx context.Context, req request, out any) error {
	line, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("supervisor API %s: encode: %w", req.Op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn, err := localsock.Dial(ctx, c.path)
	if err != nil {
		return fmt.Errorf("supervisor API: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	// A cancelled context ends a call blocked in Write or Read.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	resp, err := exchange(conn, line)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The connection's deadline is the context's, whose
			// timer may not have fired yet.
			err = context.DeadlineExceeded
		}
		return fmt.Errorf("supervisor API %s: %w", req.Op, err)
	}
	if resp.Error != "" {
		return &apiError{msg: resp.Error, notFound: resp.NotFound}
	}
	if out == nil {
		return nil
	}
	if len(resp.Result) == 0 {
		return fmt.Errorf("supervisor API %s: answer without a result", req.Op)
	}
	if err := json.Unmarshal(resp.Result, out); err != nil {
		return fmt.Errorf("supervisor API %s: decode: %w", req.Op, err)
	}
	return nil
}

// exchange writes a request line and reads the response line.
func exchange(conn net.Conn, line []byte) (response, error) {
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return response{}, err
	}
	br := bufio.NewReader(io.LimitReader(conn, maxResponseBytes+1))
	b, err := br.ReadBytes('\n')
	switch {
	case err == io.EOF && len(b) > maxResponseBytes:
		return response{}, fmt.Errorf("answer longer than %d bytes", maxResponseBytes)
	case err == io.EOF && len(b) == 0:
		return response{}, errors.New("connection closed without an answer")
	case err != nil && err != io.EOF:
		return response{}, err
	}
	var resp response
	if err := json.Unmarshal(b, &resp); err != nil {
		return response{}, fmt.Errorf("bad answer: %w", err)
	}
	return resp, nil
}

// Services lists the services.
func (c *Client) Services(ctx context.Context) ([]ServiceStatus, error) {
	var out []ServiceStatus
	return out, c.call(ctx, request{Op: opServices}, &out)
}

// Service returns one service.
func (c *Client) Service(ctx context.Context, name string) (ServiceStatus, error) {
	var out ServiceStatus
	return out, c.call(ctx, request{Op: opService, Name: name}, &out)
}

// System returns PID 1's own status.
func (c *Client) System(ctx context.Context) (System, error) {
	var out System
	return out, c.call(ctx, request{Op: opSystem}, &out)
}

// Logs returns the last n lines of a log ring (all if n is 0).
func (c *Client) Logs(ctx context.Context, name string, n int) (LogsReply, error) {
	var out LogsReply
	return out, c.call(ctx, request{Op: opLogs, Name: name, Lines: n}, &out)
}

// Restart restarts a service.
func (c *Client) Restart(ctx context.Context, name string) error {
	return c.call(ctx, request{Op: opRestart, Name: name}, nil)
}

// Stop stops a service.
func (c *Client) Stop(ctx context.Context, name string) error {
	return c.call(ctx, request{Op: opStop, Name: name}, nil)
}

// Power asks PID 1 to reboot or power off.
func (c *Client) Power(ctx context.Context, a PowerAction) error {
	if a != Reboot && a != PowerOff {
		return fmt.Errorf("power action %q: want %s or %s", a, Reboot, PowerOff)
	}
	return c.call(ctx, request{Op: op(a)}, nil)
}

// StopPetting is the watchdog test hook.
func (c *Client) StopPetting(ctx context.Context) error {
	return c.call(ctx, request{Op: opStopPetting}, nil)
}

// SetSyslog sets (or with an empty Addr, clears) remote syslog.
func (c *Client) SetSyslog(ctx context.Context, cfg SyslogConfig) error {
	return c.call(ctx, request{Op: opSyslog, Syslog: &cfg}, nil)
}

// SetConsoleBaud has the console getty restarted at baud, one of
// ConsoleBauds.
func (c *Client) SetConsoleBaud(ctx context.Context, baud int) error {
	return c.call(ctx, request{Op: opConsoleBaud, Baud: baud}, nil)
}
