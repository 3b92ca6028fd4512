package webui

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dialFrom opens a TCP connection to addr from the loopback address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	ip := net.ParseIP(src)
	if ip == nil {
		t.Fatalf("bad source address %q", src)
	}
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refused reports whether the server closed c without a word: a
// connection it keeps waits for our TLS ClientHello and says nothing.
func refused(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true // EOF or reset: closed
}

// The real Serve on loopback: idle connections that never log in are
// capped per client and in all, a refused one costs no handshake, and a
// closed one frees its place.
func TestServeCapsConnections(t *testing.T) {
	cert, _ := LoadOrCreateCertificate("gw", time.Now(), t.TempDir())
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }),
			cert, addr, "", t.Logf)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not stop")
		}
	})
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var err error
	for i := 0; i < 50; i++ {
		var resp *http.Response
		if resp, err = hc.Get("https://" + addr + "/"); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	hc.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond) // the server sees that close

	// One client: MaxConnsPerClient, then refused.
	var first []net.Conn
	for i := 0; i < MaxConnsPerClient; i++ {
		first = append(first, dialFrom(t, "127.0.0.2", addr))
	}
	if refused(t, first[len(first)-1]) {
		t.Fatalf("connection %d of one client refused, within the limit of %d", MaxConnsPerClient, MaxConnsPerClient)
	}
	if c := dialFrom(t, "127.0.0.2", addr); !refused(t, c) {
		t.Errorf("connection %d from one client kept, over the limit of %d", MaxConnsPerClient+1, MaxConnsPerClient)
	}
	first[0].Close()
	time.Sleep(100 * time.Millisecond)
	if c := dialFrom(t, "127.0.0.2", addr); refused(t, c) {
		t.Error("a closed connection did not free its place")
	}

	// Many clients: MaxConns in all, then refused, even from a new one.
	open := MaxConnsPerClient
	for src := 3; open < MaxConns; src++ {
		for i := 0; i < MaxConnsPerClient && open < MaxConns; i++ {
			dialFrom(t, "127.0.0."+strconv.Itoa(src), addr)
			open++
		}
	}
	time.Sleep(100 * time.Millisecond)
	if c := dialFrom(t, "127.0.0.250", addr); !refused(t, c) {
		t.Errorf("connection %d kept, over the limit of %d in all", MaxConns+1, MaxConns)
	}
}

func itoa(i int) string {
	return string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}

func TestIdleConnectionsCloseSoon(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), t.Logf)
	if srv.IdleTimeout <= 0 || srv.IdleTimeout > 30*time.Second {
		t.Errorf("idle timeout %v, want at most 30 s", srv.IdleTimeout)
	}
	if srv.ReadHeaderTimeout <= 0 || srv.ReadHeaderTimeout > 10*time.Second {
		t.Errorf("header timeout %v (it bounds the TLS handshake too), want at most 10 s", srv.ReadHeaderTimeout)
	}
}

// The UI answers to addresses and to its own names, not to a name
// someone's DNS points at it (DNS rebinding).
func TestForeignHostIsRefused(t *testing.T) {
	h := newHarness(t, true)
	ctx := context.Background()
	if _, err := h.cfg.Set(ctx, "", "system.hostname", "gw-7"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cfg.Commit(ctx, commitRequest("test", "name", 0)); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	for host, want := range map[string]int{
		"":                  http.StatusOK, // the test server's own 127.0.0.1:port
		"gw-7":              http.StatusOK,
		"GW-7.local":        http.StatusOK,
		"evil.example":      http.StatusMisdirectedRequest,
		"gw-7.evil.example": http.StatusMisdirectedRequest,
		"127.0.0.1:8443":    http.StatusOK, // a port forward (flashgate run)
		"[::1]:443":         http.StatusOK, // an address cannot be rebound
		"localhost:8443":    http.StatusOK, // an SSH tunnel
		"evil.example.":     http.StatusMisdirectedRequest,
	} {
		req, _ := http.NewRequest("GET", h.ts.URL+"/login", nil)
		if host != "" {
			req.Host = host
		}
		if r := b.do(req); r.Code != want {
			t.Errorf("Host %q: %d, want %d", host, r.Code, want)
		}
	}
}

// rssKB is this process's resident set in KiB, from /proc/self/status.
func rssKB(tb testing.TB) float64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// BenchmarkIdleConns measures what 2000 idle connections that never log
// in (nor even start TLS) add to the web UI's resident memory: the real
// Serve with the real UI on loopback, the connections from 125 source
// addresses, 16 each. It reports the figure webui.idle_conns_rss_kb.
func BenchmarkIdleConns(b *testing.B) {
	h := newHarness(b, true)
	cert, _ := LoadOrCreateCertificate("gw", time.Now(), b.TempDir())
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, h.srv, cert, addr, "", func(string, ...any) {}) }()
	defer func() { cancel(); <-done }()
	for i := 0; i < 50; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	const conns = 2000
	var growth float64
	for range b.N {
		runtime.GC()
		debug.FreeOSMemory()
		before := rssKB(b)
		var open []net.Conn
		for i := range conns {
			src := net.IPv4(127, 0, 1+byte(i/16/250), 1+byte(i/16%250))
			d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: src}}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				continue // refused by the backlog: costs the server nothing
			}
			open = append(open, c)
		}
		time.Sleep(500 * time.Millisecond) // the server accepts and parks (or closes) them
		growth = rssKB(b) - before
		for _, c := range open {
			c.Close()
		}
	}
	b.ReportMetric(growth, "rss_kB")
}
