package webui

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
)

// Connection limits. Every open connection costs memory (a TLS
// connection with its buffers and goroutine some tens of KiB), and 2000
// idle ones took the UI from 21 to 86 MB on a box that may have 128 MB in
// all. A browser opens up to six HTTP/1.1 connections (the UI offers no
// HTTP/2, see TLSConfig).
const (
	MaxConns          = 128 // in all, per listener
	MaxConnsPerClient = 16  // per IPv4 address or IPv6 /64 (see limiterKey)
)

// limitListener accepts at most max connections in all and perClient from
// one client; a connection over either limit is closed at once, before
// any TLS handshake, so it costs almost nothing.
type limitListener struct {
	net.Listener
	max, perClient int
	logf           func(string, ...any)

	mu       sync.Mutex
	total    int
	byClient map[string]int
	refused  int // since the last log line
}

func newLimitListener(ln net.Listener, max, perClient int, logf func(string, ...any)) *limitListener {
	return &limitListener{Listener: ln, max: max, perClient: perClient, logf: logf, byClient: map[string]int{}}
}

// Accept returns the next connection within the limits.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := connClient(c.RemoteAddr())
		l.mu.Lock()
		if l.total >= l.max || l.byClient[key] >= l.perClient {
			l.refused++
			if l.refused == 1 || l.refused%1000 == 0 {
				l.logf("connection limit: refused a connection from %s (%d open in all, %d from its network; %d refused since)",
					key, l.total, l.byClient[key], l.refused)
			}
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.total++
		l.byClient[key]++
		if l.total < l.max {
			l.refused = 0
		}
		l.mu.Unlock()
		return &limitedConn{Conn: c, l: l, key: key}, nil
	}
}

func (l *limitListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byClient[key]--; l.byClient[key] <= 0 {
		delete(l.byClient, key)
	}
}

// open reports the connections counted now (tests).
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

func connClient(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return limiterKey(ip.String())
		}
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return limiterKey(a.String())
	}
	return limiterKey(host)
}

type limitedConn struct {
	net.Conn
	l    *limitListener
	key  string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}

// checkHost refuses requests whose Host names the box by a DNS name that
// is not its own. DNS rebinding works through a name the attacker
// controls, pointed at the box: a web page of theirs in the admin's
// browser then talks to the UI as a same-origin site, and the browser
// sends their name in Host. An IP address in Host cannot be rebound, and
// it is what a port forward or a tunnel gives (`flashgate run` serves the
// UI on 127.0.0.1:8443), so any address is accepted; names are the
// configured host name, <hostname>.local and localhost.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.ownHost(r) {
			http.Error(w, "this box answers only to its addresses and its own host name; use its address", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) ownHost(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" {
		return true
	}
	sys, err := s.runningSystem(r.Context())
	if err != nil {
		return name == "flashgate" // the name the box has before configd answers
	}
	own := strings.ToLower(sys.Hostname)
	// Not own+".anything": an attacker's DNS can name its own domain so.
	return own != "" && (name == own || name == own+".local")
}
