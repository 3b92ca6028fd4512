package iked

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
)

// pattern is the deterministic byte stream a TCP test sends: both ends
// generate it from the same seed, so the receiver checks every byte without
// the sender keeping a copy.
type pattern struct{ r *rand.ChaCha8 }

func newPattern(seed byte) *pattern {
	var s [32]byte
	s[0] = seed
	return &pattern{rand.NewChaCha8(s)}
}

func (p *pattern) Read(b []byte) (int, error) { return p.r.Read(b) }

// tcpListen opens a TCP listener inside ns on addr:port.
func tcpListen(ns *testnet.NS, addr netip.Addr, port uint16) (net.Listener, error) {
	var l net.Listener
	err := ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp4", netip.AddrPortFrom(addr, port).String())
		return err
	})
	return l, err
}

// tcpDial connects from inside ns to dst.
func tcpDial(ns *testnet.NS, dst netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp4", dst.String(), timeout)
		return err
	})
	return c, err
}

// verifyStream reads r until EOF and checks every byte against the pattern;
// it returns how many bytes matched.
func verifyStream(r io.Reader, seed byte, progress *atomic.Int64) (int64, error) {
	want := newPattern(seed)
	buf, exp := make([]byte, 64<<10), make([]byte, 64<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			want.Read(exp[:k])
			if i := firstDiff(buf[:k], exp[:k]); i >= 0 {
				return n, fmt.Errorf("byte %d of the stream is %#02x, want %#02x", n+int64(i), buf[i], exp[i])
			}
			n += int64(k)
			if progress != nil {
				progress.Store(n)
			}
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// tcpCopy sends size bytes of the pattern from hostA to a listener on hostB
// (through the tunnel) and checks that every byte arrived intact, all within
// timeout.
func tcpCopy(s *testnet.SiteToSite, size int64, timeout time.Duration) error {
	l, err := tcpListen(s.HostB, s.HostBIP, 5201)
	if err != nil {
		return fmt.Errorf("listen on hostB: %w", err)
	}
	defer l.Close()
	deadline := time.Now().Add(timeout)
	type result struct {
		n   int64
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- result{0, err}
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		n, err := verifyStream(c, 1, nil)
		got <- result{n, err}
	}()
	c, err := tcpDial(s.HostA, netip.AddrPortFrom(s.HostBIP, 5201), time.Until(deadline))
	if err != nil {
		return fmt.Errorf("connect hostA -> hostB: %w", err)
	}
	c.SetDeadline(deadline)
	if _, err := io.Copy(c, io.LimitReader(newPattern(1), size)); err != nil {
		c.Close()
		return fmt.Errorf("send %d bytes: %w", size, err)
	}
	c.(*net.TCPConn).CloseWrite()
	r := <-got
	c.Close()
	if r.err != nil {
		return fmt.Errorf("receiver after %d bytes: %w", r.n, r.err)
	}
	if r.n != size {
		return fmt.Errorf("received %d bytes, sent %d", r.n, size)
	}
	return nil
}

// tcpStream is one long-lived TCP connection from hostA to hostB carrying
// the pattern at a bounded rate until Stop, for tests that change the
// tunnel underneath it (rekeys).
type tcpStream struct {
	conn     net.Conn // hostA's end, which sends
	rconn    net.Conn // hostB's end, which receives
	l        net.Listener
	sent     atomic.Int64
	received atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
	sendErr  error
	recvErr  error
}

// startStream opens the connection and starts sending rate bytes per second
// (in 16 KiB writes).
func startStream(s *testnet.SiteToSite, port uint16, rate int) (*tcpStream, error) {
	l, err := tcpListen(s.HostB, s.HostBIP, port)
	if err != nil {
		return nil, fmt.Errorf("listen on hostB: %w", err)
	}
	st := &tcpStream{l: l, stop: make(chan struct{})}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := tcpDial(s.HostA, netip.AddrPortFrom(s.HostBIP, port), 5*time.Second)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("connect hostA -> hostB: %w", err)
	}
	rc := <-accepted
	if rc == nil {
		c.Close()
		l.Close()
		return nil, errors.New("hostB did not accept the stream")
	}
	st.conn, st.rconn = c, rc
	st.wg.Add(2)
	go func() {
		defer st.wg.Done()
		defer rc.Close()
		_, st.recvErr = verifyStream(rc, 2, &st.received)
	}()
	go func() {
		defer st.wg.Done()
		st.sendErr = sendPaced(c, 2, 16<<10, rate, 10*time.Second, st.stop, &st.sent)
	}()
	return st, nil
}

// streamDrainLimit bounds how long Stop waits for a stream that keeps
// making progress: on a machine busy with other tests a tunnel can be
// slow without being broken.
const streamDrainLimit = 2 * time.Minute

// Stop ends the stream, waits for the receiver to have read everything,
// and reports any loss or corruption. A stream that receives nothing for
// stall has stalled (a broken path; TCP retransmits well within a few
// seconds on a working one), and Stop fails at once; one that is merely
// slow gets up to streamDrainLimit.
func (st *tcpStream) Stop(stall time.Duration) error {
	close(st.stop)
	done := make(chan struct{})
	go func() { st.wg.Wait(); close(done) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	last, lastAt := st.received.Load(), start
	for drained := false; !drained; {
		var why string
		select {
		case <-done:
			drained = true
			continue
		case now := <-tick.C:
			if r := st.received.Load(); r != last {
				last, lastAt = r, now
			}
			switch {
			case now.Sub(lastAt) >= stall:
				why = fmt.Sprintf("stream stalled: nothing received for %v", stall)
			case now.Sub(start) >= streamDrainLimit:
				why = fmt.Sprintf("stream did not drain within %v", streamDrainLimit)
			default:
				continue
			}
		}
		// Both ends: over a broken path the receiver would otherwise
		// wait for TCP to give up.
		st.conn.Close()
		st.rconn.Close()
		st.l.Close()
		<-done
		return fmt.Errorf("%s: sent %d, received %d", why, st.sent.Load(), st.received.Load())
	}
	st.conn.Close()
	st.l.Close()
	if st.sendErr != nil {
		return fmt.Errorf("sender after %d bytes: %w", st.sent.Load(), st.sendErr)
	}
	if st.recvErr != nil {
		return fmt.Errorf("receiver after %d bytes: %w", st.received.Load(), st.recvErr)
	}
	if st.sent.Load() != st.received.Load() {
		return fmt.Errorf("sent %d bytes, received %d", st.sent.Load(), st.received.Load())
	}
	return nil
}

// sendPaced writes seed's pattern to c in chunks at about rate bytes a
// second until stop closes, then half-closes c; each write may take up to
// writeLimit. It counts what it sent and returns the first error.
func sendPaced(c net.Conn, seed byte, chunk, rate int, writeLimit time.Duration, stop <-chan struct{}, sent *atomic.Int64) error {
	src := newPattern(seed)
	buf := make([]byte, chunk)
	tick := time.NewTicker(time.Second * time.Duration(chunk) / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return c.(*net.TCPConn).CloseWrite()
		case <-tick.C:
		}
		src.Read(buf)
		c.SetWriteDeadline(time.Now().Add(writeLimit))
		if _, err := c.Write(buf); err != nil {
			return err
		}
		sent.Add(int64(chunk))
	}
}
