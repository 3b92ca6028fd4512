package netd

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"golang.org/x/sys/unix"
)

// The NTP client lives in netd rather than in a service of its own: netd
// owns the network it needs (the WAN link, its DHCP lease and the
// resolv.conf written from it), already follows configd's watch stream,
// and a separate process would cost the ALIX several MiB of RSS for one
// UDP exchange every few minutes. It is an SNTP client (RFC 4330): one
// exchange per poll with the first server that answers acceptably, no
// clock filter or server selection beyond that, which keeps a firewall's
// logs and certificate checks right to well under a second.

const (
	// ntpStepThreshold is RFC 5905's STEPT: offsets beyond it are stepped
	// (the clock jumps), smaller ones slewed (the kernel runs it a little
	// fast or slow, 500 ppm, until it is right: 128 ms takes 256 s), so
	// that time never runs backwards for small corrections.
	ntpStepThreshold = 128 * time.Millisecond

	// Polls after a successful sync double from ntpMinPoll to ntpMaxPoll;
	// after a failure retries double from ntpRetryMin to ntpMinPoll, so
	// the first sync after the WAN comes up is at most a minute late and
	// an unreachable server is asked at most once a minute.
	ntpMinPoll  = 64 * time.Second
	ntpMaxPoll  = 1024 * time.Second
	ntpRetryMin = 2 * time.Second

	ntpExchangeTimeout = 3 * time.Second
)

// Clock is what the time sync corrects: the system clock on the
// appliance, a recording fake in tests.
type Clock interface {
	Now() time.Time
	// Step sets the clock offset ahead (negative: back) at once.
	Step(offset time.Duration) error
	// Slew makes the kernel absorb offset gradually.
	Slew(offset time.Duration) error
}

// SystemClock is CLOCK_REALTIME.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

func (SystemClock) Step(offset time.Duration) error {
	ts := unix.NsecToTimespec(time.Now().Add(offset).UnixNano())
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return fmt.Errorf("clock_settime: %w", err)
	}
	return nil
}

func (SystemClock) Slew(offset time.Duration) error {
	// adjtime(3)'s single-shot offset: the kernel slews at 500 ppm and a
	// new offset replaces what is left of the last one.
	// Slew sees offsets up to ntpStepThreshold; beyond that the caller
	// steps. The bound also keeps the microseconds within the field, which
	// is 32 bits on 386.
	offset = max(min(offset, time.Second), -time.Second)
	tx := unix.Timex{Modes: unix.ADJ_OFFSET_SINGLESHOT}
	setTimexField(&tx.Offset, offset.Microseconds())
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("adjtimex: %w", err)
	}
	return nil
}

// setTimexField sets a field of unix.Timex, whose C longs are int64 on
// 64-bit architectures and int32 on 386.
func setTimexField[T int32 | int64](field *T, v int64) { *field = T(v) }

// TimeSync keeps the clock in step with the configured NTP servers.
type TimeSync struct {
	Clock Clock
	// Resolve looks a server name up; nil uses the system resolver (with
	// netd's resolv.conf). IP addresses are not looked up.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Port is the servers' UDP port: 123 when zero.
	Port int

	mu       sync.Mutex
	servers  []string
	denied   map[string]bool // servers that sent DENY or RSTR, until the list changes
	status   netdapi.TimeStatus
	interval time.Duration // the current poll or retry interval
	changed  chan struct{}
}

// NewTimeSync returns a time sync with no servers (off) correcting clock.
func NewTimeSync(clock Clock) *TimeSync {
	return &TimeSync{Clock: clock, changed: make(chan struct{}, 1),
		status: netdapi.TimeStatus{Servers: []string{}, State: "off"}}
}

// SetServers sets the servers, by name or address; a change makes the
// next poll happen now.
func (t *TimeSync) SetServers(servers []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if slices.Equal(servers, t.servers) {
		return
	}
	t.servers = slices.Clone(servers)
	t.denied = nil
	t.interval = 0
	t.status.Servers = slices.Clone(servers)
	if t.status.Servers == nil {
		t.status.Servers = []string{}
	}
	switch {
	case len(servers) == 0:
		t.status.State = "off"
	case t.status.State == "off":
		t.status.State = "unsynchronized"
	}
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Status returns the state of the time sync.
func (t *TimeSync) Status() netdapi.TimeStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.status
	st.Servers = slices.Clone(st.Servers)
	return st
}

// Run polls until ctx ends.
func (t *TimeSync) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.changed:
		case <-timer.C:
		}
		wait := t.Poll(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// Poll syncs once with the first server that answers acceptably and
// returns how long to wait before the next poll.
func (t *TimeSync) Poll(ctx context.Context) time.Duration {
	t.mu.Lock()
	servers := slices.DeleteFunc(slices.Clone(t.servers), func(s string) bool { return t.denied[s] })
	t.mu.Unlock()
	if len(servers) == 0 {
		return ntpMaxPoll // nothing to ask; a SetServers wakes Run
	}
	var errs []error
	slowDown := false
	for _, server := range servers {
		sample, err := t.ask(ctx, server)
		if err != nil {
			errs = append(errs, err)
			var kiss *kissError
			if errors.As(err, &kiss) && !kiss.permanent() {
				slowDown = true // RATE: we ask too often
			}
			if errors.As(err, &kiss) && kiss.permanent() {
				t.mu.Lock()
				if t.denied == nil {
					t.denied = map[string]bool{}
				}
				t.denied[server] = true
				t.mu.Unlock()
				log.Printf("netd: NTP server %s refuses us (%v); not asking it again until the servers change", server, kiss)
			}
			continue
		}
		return t.correct(sample)
	}
	err := errors.Join(errs...)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status.LastError == "" {
		log.Printf("netd: NTP: %v", err) // once, and again after a success
	}
	t.status.LastError = err.Error()
	if slowDown {
		// A retry in seconds would be the opposite of what it asked.
		t.interval = nextPoll(max(t.interval, ntpMinPoll))
	} else {
		t.interval = nextRetry(t.interval)
	}
	t.status.NextPoll = t.Clock.Now().Add(t.interval)
	return t.interval
}

// nextPoll and nextRetry are the poll interval after a success and the
// retry interval after a failure, given the current one.
func nextPoll(cur time.Duration) time.Duration {
	return min(max(cur*2, ntpMinPoll), ntpMaxPoll)
}

func nextRetry(cur time.Duration) time.Duration {
	return min(max(cur*2, ntpRetryMin), ntpMinPoll)
}

// ntpSample is one measurement.
type ntpSample struct {
	server  string // "name (address)" or the address
	stratum int
	offset  time.Duration
	delay   time.Duration
}

func (t *TimeSync) correct(s ntpSample) time.Duration {
	how, err := "slewed", error(nil)
	if s.offset > ntpStepThreshold || s.offset < -ntpStepThreshold {
		how, err = "stepped", t.Clock.Step(s.offset)
	} else {
		err = t.Clock.Slew(s.offset)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.status.LastError = fmt.Sprintf("NTP server %s: offset %v: %v", s.server, s.offset, err)
		log.Printf("netd: %s", t.status.LastError)
		t.interval = nextRetry(t.interval)
		t.status.NextPoll = t.Clock.Now().Add(t.interval)
		return t.interval
	}
	if how == "stepped" || t.status.State != "synchronized" || t.status.LastError != "" {
		log.Printf("netd: clock %s by %v from NTP server %s (stratum %d, delay %v)", how, s.offset, s.server, s.stratum, s.delay)
	}
	if t.status.LastError != "" || t.interval < ntpMinPoll {
		t.interval = 0 // a success after failures starts polling afresh
	}
	t.interval = nextPoll(t.interval)
	now := t.Clock.Now()
	t.status = netdapi.TimeStatus{
		Servers:       t.status.Servers,
		State:         "synchronized",
		LastSync:      now,
		Server:        s.server,
		Stratum:       s.stratum,
		OffsetSeconds: s.offset.Seconds(),
		DelaySeconds:  s.delay.Seconds(),
		Correction:    how,
		NextPoll:      now.Add(t.interval),
	}
	return t.interval
}

// ask resolves server and exchanges with its addresses in turn until one
// gives an acceptable reply.
func (t *TimeSync) ask(ctx context.Context, server string) (ntpSample, error) {
	addrs, err := t.resolve(ctx, server)
	if err != nil {
		return ntpSample{}, fmt.Errorf("NTP server %s: %w", server, err)
	}
	var errs []error
	for _, a := range addrs {
		label := a.String()
		if label != server {
			label = fmt.Sprintf("%s (%s)", server, a)
		}
		s, err := t.exchange(ctx, a)
		if err == nil {
			s.server = label
			return s, nil
		}
		errs = append(errs, fmt.Errorf("NTP server %s: %w", label, err))
		var kiss *kissError
		if errors.As(err, &kiss) {
			break // the operator's answer, whichever of its addresses we ask
		}
	}
	return ntpSample{}, errors.Join(errs...)
}

func (t *TimeSync) resolve(ctx context.Context, server string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(server); err == nil {
		return []netip.Addr{a}, nil
	}
	lookup := t.Resolve
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := lookup(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	if len(addrs) == 0 {
		return nil, errors.New("resolve: no addresses")
	}
	// A few addresses are enough: pool names return four.
	addrs = addrs[:min(len(addrs), 4)]
	for i, a := range addrs {
		addrs[i] = a.Unmap() // the resolver gives IPv4 as ::ffff:a.b.c.d
	}
	return addrs, nil
}

// exchange sends one client request to addr and reads the reply.
func (t *TimeSync) exchange(ctx context.Context, addr netip.Addr) (ntpSample, error) {
	port := t.Port
	if port == 0 {
		port = 123
	}
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, ntpExchangeTimeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "udp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
	if err != nil {
		return ntpSample{}, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)

	// The transmit timestamp is random rather than our clock: the server
	// only echoes it, so it serves as a nonce against forged replies and
	// tells nobody on the path what our clock says.
	var nonce [8]byte
	rand.Read(nonce[:])
	sent := ntpTime(binary.BigEndian.Uint64(nonce[:]))
	req := ntpPacket{Version: 4, Mode: ntpModeClient, Transmit: sent}

	t1 := t.Clock.Now()
	start := time.Now() // monotonic: the round trip is measured on it
	if _, err := conn.Write(req.marshal()); err != nil {
		return ntpSample{}, err
	}
	buf := make([]byte, 512)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return ntpSample{}, err
		}
		t4 := t1.Add(time.Since(start))
		p, err := parseNTPPacket(buf[:n])
		if err != nil {
			continue // not NTP: wait for the real answer until the deadline
		}
		if err := checkReply(p, sent); err != nil {
			if p.Origin != sent {
				continue // someone else's or a stale reply
			}
			return ntpSample{}, err
		}
		offset, delay := clockOffset(t1, p.Receive.Time(), p.Transmit.Time(), t4)
		return ntpSample{stratum: int(p.Stratum), offset: offset, delay: delay}, nil
	}
}
