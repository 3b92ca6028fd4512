package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The supervisor API is a small protocol of its own on a unix socket, not
// HTTP: PID 1 serves it, and linking net/http would take PID 1's 386 binary
// from 2.7 MB to 6 MB, more than the smallest cards have room for.
//
// Per connection the client writes one request, a JSON object on one line,
// and the server answers one response line and closes the connection:
//
//	-> {"op":"logs","name":"kernel","lines":50}
//	<- {"result":{"name":"kernel","lines":[...],"dropped":0}}
//	-> {"op":"service","name":"nosuch"}
//	<- {"error":"unknown service \"nosuch\"","not_found":true}
//
// A request holds at most maxRequestBytes before its newline. The server
// refuses unknown ops, unknown fields and fields the op does not take, with
// an error response saying which.

// op names a request.
type op string

const (
	opServices    op = "services"     // result: []ServiceStatus in table order
	opService     op = "service"      // name; result: ServiceStatus
	opLogs        op = "logs"         // name (a service, "kernel" or "supervisor"), lines (0: all); result: LogsReply
	opRestart     op = "restart"      // name
	opStop        op = "stop"         // name
	opSystem      op = "system"       // result: System
	opSyslog      op = "syslog"       // syslog: a SyslogConfig; an empty addr stops forwarding
	opConsoleBaud op = "console-baud" // baud: one of ConsoleBauds
	opReboot      op = op(Reboot)
	opPowerOff    op = op(PowerOff)
	opStopPetting op = "stop-petting" // the watchdog test hook
)

// opArgs says which arguments each op takes; all that it takes are
// required except lines.
var opArgs = map[op]struct{ name, lines, syslog, baud bool }{
	opServices:    {},
	opService:     {name: true},
	opLogs:        {name: true, lines: true},
	opRestart:     {name: true},
	opStop:        {name: true},
	opSystem:      {},
	opSyslog:      {syslog: true},
	opConsoleBaud: {baud: true},
	opReboot:      {},
	opPowerOff:    {},
	opStopPetting: {},
}

const (
	// maxRequestBytes bounds a request line; the largest real one, a
	// syslog config, is a few hundred bytes.
	maxRequestBytes = 64 << 10
	// maxResponseBytes bounds what the client reads: the kernel's log
	// ring (64 KiB of text) in JSON with timestamps fits easily.
	maxResponseBytes = 4 << 20
)

// request is one call. Arguments an op does not take are left zero.
type request struct {
	Op     op            `json:"op"`
	Name   string        `json:"name,omitempty"`
	Lines  int           `json:"lines,omitempty"`
	Syslog *SyslogConfig `json:"syslog,omitempty"`
	Baud   int           `json:"baud,omitempty"`
}

// response is the answer: a result, or an error. NotFound marks an error
// about a name that is not in the service table.
type response struct {
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	NotFound bool            `json:"not_found,omitempty"`
}

// decodeRequest parses and checks one request line (without its newline).
func decodeRequest(line []byte) (request, error) {
	var req request
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return req, errors.New("empty request: want one JSON object on one line")
	}
	if len(line) > maxRequestBytes {
		return req, fmt.Errorf("request of %d bytes: the limit is %d", len(line), maxRequestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return request{}, fmt.Errorf("bad request: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return request{}, errors.New("bad request: data after the JSON object")
	}
	if req.Op == "" {
		return request{}, errors.New(`bad request: no "op"`)
	}
	args, ok := opArgs[req.Op]
	if !ok {
		return request{}, fmt.Errorf("unknown op %.40q", req.Op)
	}
	for _, a := range []struct {
		field      string
		given      bool
		takes, req bool
	}{
		{"name", req.Name != "", args.name, args.name},
		{"lines", req.Lines != 0, args.lines, false},
		{"syslog", req.Syslog != nil, args.syslog, args.syslog},
		{"baud", req.Baud != 0, args.baud, args.baud},
	} {
		switch {
		case a.given && !a.takes:
			return request{}, fmt.Errorf("op %s takes no %s", req.Op, a.field)
		case !a.given && a.req:
			return request{}, fmt.Errorf("op %s needs a %s", req.Op, a.field)
		}
	}
	if req.Lines < 0 {
		return request{}, fmt.Errorf("lines %d: want a non-negative number", req.Lines)
	}
	return req, nil
}

// apiError is an error the supervisor answered. It matches
// ErrUnknownService when the answer said not_found, so callers can use
// errors.Is; its text is the server's.
type apiError struct {
	msg      string
	notFound bool
}

func (e *apiError) Error() string { return e.msg }

func (e *apiError) Is(target error) bool { return e.notFound && target == ErrUnknownService }

// errorResponse turns a failed call into its answer.
func errorResponse(err error) response {
	return response{Error: err.Error(), NotFound: errors.Is(err, ErrUnknownService)}
}
