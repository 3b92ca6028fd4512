package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"
)

func TestFormatSyslog(t *testing.T) {
	when := time.Date(2026, 11, 30, 6, 5, 4, 123456000, time.UTC)
	for _, tc := range []struct {
		name string
		cfg  SyslogConfig
		app  string
		line Line
		want string
	}{
		{"5424 service", SyslogConfig{Format: "rfc5424", Hostname: "gw1"}, "netd",
			Line{Time: when, Stream: "stderr", Text: "link eth0 up"},
			"<30>1 2026-11-30T06:05:04.123456Z gw1 netd - stderr - link eth0 up"},
		{"5424 kernel keeps its level", SyslogConfig{Format: "rfc5424", Hostname: "gw1"}, "kernel",
			Line{Time: when, Stream: "kernel", Level: 3, Text: "ata1: failed"},
			"<3>1 2026-11-30T06:05:04.123456Z gw1 kernel - kernel - ata1: failed"},
		{"3164", SyslogConfig{Format: "rfc3164", Hostname: "gw1"}, "iked",
			Line{Time: when, Stream: "stdout", Text: "tab\there"},
			"<30>Nov 30 06:05:04 gw1 iked: tab here"},
	} {
		if got := string(formatSyslog(tc.cfg, tc.app, tc.line)); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestRemoteSyslogForwardsServiceOutput(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := New(Config{Syslog: &SyslogConfig{Addr: pc.LocalAddr().String(), Format: "bsd"}}); err == nil {
		t.Error("New accepted a syslog config with format bsd")
	}
	s, err := New(Config{Services: []Service{sh("talker", "exec sleep 1000")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRemoteSyslog(&SyslogConfig{Addr: "127.0.0.1:1", Format: "bsd"}); err == nil {
		t.Error("SetRemoteSyslog accepted format \"bsd\"")
	}
	if err := s.SetRemoteSyslog(&SyslogConfig{Addr: pc.LocalAddr().String(), Hostname: "gw1"}); err != nil {
		t.Fatal(err)
	}
	s.byName["talker"].ring.Append(Line{Time: time.Now(), Stream: "stdout", Text: "hello syslog"})
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	for {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no syslog datagram for talker: %v", err)
		}
		msg := string(buf[:n])
		if strings.Contains(msg, " gw1 talker - stdout - hello syslog") && strings.HasPrefix(msg, "<30>1 ") {
			break
		}
	}
	// The datagram can arrive before the sender has counted it.
	waitfor.Cond(t, 10*time.Second, "one syslog line counted as sent", func() bool {
		st := s.SystemStatus().Syslog
		return st != nil && st.Sent >= 1 && st.Network == "udp"
	})
	if err := s.SetRemoteSyslog(nil); err != nil {
		t.Fatal(err)
	}
	if s.SystemStatus().Syslog != nil {
		t.Error("syslog still reported after SetRemoteSyslog(nil)")
	}
}

// tcpSyslogServer is a syslog collector on loopback that parses RFC 6587
// octet-counted frames from every connection it accepts, in order.
type tcpSyslogServer struct {
	t     *testing.T
	addr  string
	msgs  chan string
	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func startTCPSyslogServer(t *testing.T, addr string) *tcpSyslogServer {
	t.Helper()
	srv := &tcpSyslogServer{t: t, msgs: make(chan string, 1024)}
	srv.listen(addr)
	t.Cleanup(srv.stop)
	return srv
}

// listen (re)starts the server on addr; the previous listener is gone.
func (srv *tcpSyslogServer) listen(addr string) {
	srv.t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		srv.t.Fatalf("syslog listener on %s: %v", addr, err)
	}
	srv.mu.Lock()
	srv.ln, srv.addr = ln, ln.Addr().String()
	srv.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			srv.mu.Lock()
			srv.conns = append(srv.conns, c)
			srv.mu.Unlock()
			go func() {
				r := bufio.NewReader(c)
				for {
					msg, err := readOctetCounted(r)
					if err != nil {
						if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
							srv.msgs <- "FRAMING ERROR: " + err.Error()
						}
						return
					}
					srv.msgs <- msg
				}
			}()
		}
	}()
}

// stop closes the listener and every connection, as a server that goes away.
func (srv *tcpSyslogServer) stop() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.ln.Close()
	for _, c := range srv.conns {
		c.Close()
	}
	srv.conns = nil
}

// next returns the next message received, failing the test after 10 s.
func (srv *tcpSyslogServer) next(what string) string {
	srv.t.Helper()
	select {
	case m := <-srv.msgs:
		if strings.HasPrefix(m, "FRAMING ERROR") {
			srv.t.Fatalf("%s: %s", what, m)
		}
		return m
	case <-time.After(10 * time.Second):
		srv.t.Fatalf("%s: no syslog message within 10 s", what)
		return ""
	}
}

// readOctetCounted reads one RFC 6587 octet-counted frame: MSG-LEN (a
// decimal without leading zeros), one space, then MSG-LEN octets.
func readOctetCounted(r *bufio.Reader) (string, error) {
	head, err := r.ReadString(' ')
	if err != nil {
		if head == "" {
			return "", err
		}
		return "", fmt.Errorf("frame header %q cut short: %w", head, err)
	}
	digits := strings.TrimSuffix(head, " ")
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || digits[0] == '0' || n > 64<<10 {
		return "", fmt.Errorf("frame header %q is not MSG-LEN SP", head)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return "", fmt.Errorf("frame of %d octets cut short: %w", n, err)
	}
	return string(msg), nil
}

func TestAppendOctetCounted(t *testing.T) {
	// The length counts octets, not characters: "é" is two.
	got := appendOctetCounted([]byte("x"), []byte("<30>1 - café"))
	if want := "x13 <30>1 - café"; string(got) != want {
		t.Errorf("appendOctetCounted = %q, want %q", got, want)
	}
	r := bufio.NewReader(strings.NewReader(string(got[1:]) + "5 hello"))
	for _, want := range []string{"<30>1 - café", "hello"} {
		if m, err := readOctetCounted(r); err != nil || m != want {
			t.Errorf("readOctetCounted = %q, %v; want %q", m, err, want)
		}
	}
}

// fastBackoff keeps reconnection quick in tests.
var fastBackoff = Backoff{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond, Healthy: time.Minute}

// TestSyslogTCPReconnectsAndDropsOldest runs a forwarder against a real
// listener: framed delivery, a server that goes away (lines queue, the
// oldest beyond the queue are dropped and counted), and a server that comes
// back on the same port (the newest queued lines arrive, in order).
func TestSyslogTCPReconnectsAndDropsOldest(t *testing.T) {
	srv := startTCPSyslogServer(t, "127.0.0.1:0")
	var logMu sync.Mutex
	var logged []string
	logf := func(format string, args ...any) {
		logMu.Lock()
		logged = append(logged, fmt.Sprintf(format, args...))
		logMu.Unlock()
	}
	const queueLines = 8
	f, err := newSyslogForwarder(SyslogConfig{Addr: srv.addr, Network: "tcp", Hostname: "gw1"}, queueLines, fastBackoff, logf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	waitfor.Cond(t, 10*time.Second, "the forwarder to connect", f.connected.Load)
	now := time.Now()
	send := func(prefix string, n int) {
		for i := range n {
			f.enqueue("netd", Line{Time: now, Stream: "stdout", Text: fmt.Sprintf("%s %d", prefix, i)})
		}
	}
	expect := func(what, prefix string, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			m := srv.next(what)
			if want := fmt.Sprintf(" gw1 netd - stdout - %s %d", prefix, i); !strings.HasSuffix(m, want) || !strings.HasPrefix(m, "<30>1 ") {
				t.Fatalf("%s: got %q, want an RFC 5424 message ending in %q", what, m, want)
			}
		}
	}

	send("up", queueLines)
	expect("while the server is up", "up", 0, queueLines)
	waitfor.Cond(t, 10*time.Second, "the sent count", func() bool { return f.sent.Load() == queueLines })

	srv.stop()
	waitfor.Cond(t, 10*time.Second, "the forwarder to notice the server closed the connection", func() bool { return !f.connected.Load() })
	const away = 3 * queueLines
	send("away", away)
	if got, want := f.dropped.Load(), uint64(away-queueLines); got != want {
		t.Errorf("with the server away and a queue of %d, %d lines sent dropped %d; want %d", queueLines, away, got, want)
	}

	srv.listen(srv.addr) // the same port: the server restarted
	expect("after the server restarted", "away", away-queueLines, away)
	waitfor.Cond(t, 10*time.Second, "the sent count after reconnecting", func() bool { return f.sent.Load() == queueLines+queueLines })
	select {
	case m := <-srv.msgs:
		t.Errorf("unexpected message after the queue was drained: %q", m)
	case <-time.After(50 * time.Millisecond):
	}
	logMu.Lock()
	defer logMu.Unlock()
	if all := strings.Join(logged, "\n"); !strings.Contains(all, "connection to "+srv.addr+" lost") || strings.Count(all, "connected to "+srv.addr+" over tcp") != 2 {
		t.Errorf("forwarder log does not show the connection lost and made twice:\n%s", all)
	}
}

// TestSyslogEnqueueNeverWaits fills the path to a server that accepts but
// never reads: appending lines must go on at memory speed, dropping the
// oldest, and never wait for the network.
func TestSyslogEnqueueNeverWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // held open, never read
		}
	}()
	f, err := newSyslogForwarder(SyslogConfig{Addr: ln.Addr().String(), Network: "tcp"}, 16, fastBackoff, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	var c net.Conn
	select {
	case c = <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the forwarder did not connect")
	}
	// 20 000 lines of 1 KiB are far more than the socket buffers hold, so
	// the sender is stuck in a write long before the end.
	text := strings.Repeat("x", MaxLineBytes)
	done := make(chan struct{})
	go func() {
		for range 20000 {
			f.enqueue("iked", Line{Time: time.Now(), Stream: "stderr", Text: text})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("appending lines waited on a server that does not read")
	}
	if f.dropped.Load() == 0 {
		t.Errorf("no line dropped although the server read nothing of %d KiB (sent %d)", 20000, f.sent.Load())
	}
}

func TestRemoteSyslogOverTCP(t *testing.T) {
	srv := startTCPSyslogServer(t, "127.0.0.1:0")
	s, err := New(Config{Services: []Service{sh("talker", "exec sleep 1000")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []SyslogConfig{
		{Addr: srv.addr, Network: "sctp"},
		{Addr: "no-port", Network: "tcp"},
		{Addr: "127.0.0.1:0", Network: "tcp"},
	} {
		if err := s.SetRemoteSyslog(&bad); err == nil {
			t.Errorf("SetRemoteSyslog accepted %+v", bad)
		}
	}
	if err := s.SetRemoteSyslog(&SyslogConfig{Addr: srv.addr, Network: "tcp", Hostname: "gw1"}); err != nil {
		t.Fatal(err)
	}
	defer s.SetRemoteSyslog(nil)
	s.byName["talker"].ring.Append(Line{Time: time.Now(), Stream: "stderr", Text: "hello tcp"})
	for {
		m := srv.next("the talker's line")
		if strings.HasPrefix(m, "<30>1 ") && strings.HasSuffix(m, " gw1 talker - stderr - hello tcp") {
			break
		}
	}
	st := s.SystemStatus().Syslog
	if st == nil || st.Network != "tcp" || st.Format != "rfc5424" {
		t.Errorf("system status syslog %+v, want network tcp, format rfc5424", st)
	}
}
