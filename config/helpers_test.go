package config

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// sampleConfig returns a valid config with n tunnels, a routed LAN and a
// few firewall rules: the shape of a busy hub box.
func sampleConfig(n int) *Config {
	c := Default()
	c.System.Hostname = "hub"
	c.System.Admins = []Admin{{Name: "admin", PasswordHash: NewSecret(testHash())}}
	c.Interfaces[1].Addresses = []Prefix{MustPrefix("10.0.0.1/16")}
	c.Routes = []Route{{Name: "mgmt", Enabled: true, Destination: MustPrefix("172.16.0.0/12"), Gateway: MustAddr("10.0.0.254"), Interface: "eth1"}}
	c.Firewall.Rules = []Rule{
		{Name: "ssh-from-lan", Enabled: true, Chain: ChainInput, In: RoleLAN, Protocol: "tcp", DestinationPorts: []PortRange{Port(22)}, Action: ActionAccept},
		{Name: "no-smb-out", Enabled: true, Chain: ChainForward, In: RoleLAN, Out: "eth0", Protocol: "tcp", DestinationPorts: []PortRange{Port(445)}, Action: ActionReject, Log: true},
	}
	c.Firewall.PortForwards = []PortForward{{Name: "web", Enabled: true, In: RoleWAN, Protocol: "tcp", ExternalPorts: Port(443), Destination: MustAddr("10.0.0.10")}}
	for i := 0; i < n; i++ {
		t := NewTunnel(fmt.Sprintf("site%02d", i))
		t.RemoteAddress = MustAddr(fmt.Sprintf("192.0.2.%d", i+1))
		t.PSK = NewSecret(fmt.Sprintf("psk-for-site-%02d-0123456789", i))
		t.LocalSubnets = []Prefix{MustPrefix("10.0.0.0/16")}
		t.RemoteSubnets = []Prefix{MustPrefix(fmt.Sprintf("10.%d.0.0/16", i+1))}
		t.IKEProposals = []string{"aes128gcm16-prfsha256-ecp256", "aes256-sha256-modp2048"}
		c.Tunnels = append(c.Tunnels, t)
	}
	c.normalize()
	return c
}

// testHash is the argon2id hash of "correct horse", made once and only when
// needed, so that tests (and the power-loss helper processes) do not pay
// for hashing.
var testHash = sync.OnceValue(func() string {
	h, err := HashPassword("correct horse")
	if err != nil {
		panic(err)
	}
	return h
})

// fakeClock is a Clock that moves only when the test says so.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	when    time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock and runs, in the caller's goroutine, every timer
// that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	var rest []*fakeTimer
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.when.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

func mustValid(t *testing.T, c *Config) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("config does not validate:\n%v", err)
	}
}
