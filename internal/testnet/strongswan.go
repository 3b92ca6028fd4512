package testnet

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/strongswan/govici/vici"
	"golang.org/x/sys/unix"
)

// CharonBinary is where Debian's strongswan-charon puts the daemon.
const CharonBinary = "/usr/lib/ipsec/charon"

// CharonConn is one site-to-site connection for a strongSwan peer, in the
// terms of swanctl.conf. The recipe is the one of interop.md: kernel-libipsec
// for ESP (the host kernel has none) and therefore encap = yes.
type CharonConn struct {
	Name                  string // connection name; the child is Name+"-net"
	LocalAddr, RemoteAddr netip.Addr
	LocalID, RemoteID     string
	PSK                   string
	Proposals             string // e.g. "aes128gcm16-prfsha256-ecp256"
	ESPProposals          string // e.g. "aes128gcm16"
	LocalTS, RemoteTS     []netip.Prefix
	StartAction           string // "none" (default), "start" or "trap"
	RekeyTime             time.Duration
	IKERekeyTime          time.Duration
	DPDDelay              time.Duration
	// CertPEM, KeyPEM and CAPEM make the connection authenticate with a
	// certificate both ways (auth = pubkey): ours with its key, and the
	// CA the peer's must chain to. LocalID/RemoteID must be in the
	// certificates.
	CertPEM, KeyPEM, CAPEM string
	// Version is the IKE version, 2 when 0. With 1 the PSK is also
	// listed under both addresses: an IKEv1 main mode responder picks
	// the key before it learns the peer's identity.
	Version int
	// DPDAction is the child's dpd_action when DPDDelay is set (default
	// restart).
	DPDAction string
}

// Child returns the name of the connection's CHILD_SA.
func (c CharonConn) Child() string { return c.Name + "-net" }

// Charon is a strongSwan charon daemon running in a namespace, with its own
// configuration directory, vici socket, log file and private /run (charon 5.9
// hard-codes /var/run/charon.pid, so two charons need two /run).
type Charon struct {
	NS      *NS
	Dir     string
	Log     string
	Socket  string
	cmd     *exec.Cmd
	env     []string
	stopped bool
}

// StartCharon writes the configuration for conns into a fresh directory,
// starts charon in ns and waits until its vici socket answers. The daemon
// is stopped (by PID) when the test ends, and its log is printed if the test
// failed.
func StartCharon(t testing.TB, ns *NS, conns ...CharonConn) *Charon {
	t.Helper()
	RequireRoot(t)
	RequireTool(t, "swanctl", "strongswan-swanctl")
	if _, err := os.Stat(CharonBinary); err != nil {
		t.Fatalf("strongSwan's charon is not installed: apt-get install strongswan-charon libcharon-extra-plugins libstrongswan-extra-plugins libstrongswan-standard-plugins")
	}
	dir := t.TempDir()
	c := &Charon{NS: ns, Dir: dir, Log: filepath.Join(dir, "charon.log"), Socket: filepath.Join(dir, "charon.vici")}
	for _, d := range []string{"run", "swanctl/conf.d", "swanctl/x509", "swanctl/x509ca", "swanctl/private"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeTemplate(filepath.Join(dir, "strongswan.conf"), strongswanConf, c); err != nil {
		t.Fatal(err)
	}
	if err := writeTemplate(filepath.Join(dir, "swanctl/swanctl.conf"), swanctlConf, conns); err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		if c.CertPEM == "" {
			continue
		}
		for sub, pem := range map[string]string{"x509": c.CertPEM, "private": c.KeyPEM, "x509ca": c.CAPEM} {
			if err := os.WriteFile(filepath.Join(dir, "swanctl", sub, c.Name+".pem"), []byte(pem), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.env = append(os.Environ(),
		"STRONGSWAN_CONF="+filepath.Join(dir, "strongswan.conf"),
		"SWANCTL_DIR="+filepath.Join(dir, "swanctl"))
	// A private mount namespace gives this charon its own /run.
	c.cmd = exec.Command("ip", "netns", "exec", ns.Name, "unshare", "-m", "--propagation", "private",
		"sh", "-c", fmt.Sprintf("mount --bind %s /run && exec %s", filepath.Join(dir, "run"), CharonBinary))
	c.cmd.Env = c.env
	out, err := os.Create(filepath.Join(dir, "charon.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout, c.cmd.Stderr = out, out
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start charon in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		c.Stop()
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(c.Log)
			t.Logf("charon log (%s):\n%s", ns.Name, lastLines(string(b), 80))
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if s, err := vici.NewSession(vici.WithSocketPath(c.Socket)); err == nil {
			s.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "charon.stdout"))
			t.Fatalf("charon in %s did not open its vici socket within 15 s: %s", ns.Name, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := c.Swanctl("--load-all", "--noprompt"); err != nil {
		t.Fatalf("swanctl --load-all: %v\n%s", err, out)
	}
	return c
}

// Load replaces charon's connections and secrets with conns, e.g. to run
// a table of cases against one charon.
func (c *Charon) Load(conns ...CharonConn) error {
	if err := writeTemplate(filepath.Join(c.Dir, "swanctl/swanctl.conf"), swanctlConf, conns); err != nil {
		return err
	}
	if out, err := c.Swanctl("--load-all", "--noprompt"); err != nil {
		return fmt.Errorf("swanctl --load-all: %w: %s", err, lastLines(out, 10))
	}
	return nil
}

// Swanctl runs swanctl against this charon.
func (c *Charon) Swanctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "swanctl", append(args, "--uri", "unix://"+c.Socket)...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Initiate starts the named child (and its IKE_SA) and waits for the result.
func (c *Charon) Initiate(child string) error {
	out, err := c.Swanctl("--initiate", "--child", child, "--timeout", "20")
	if err != nil {
		return fmt.Errorf("swanctl --initiate %s: %w: %s", child, err, lastLines(out, 10))
	}
	return nil
}

// PID is charon's process id (ip netns exec, unshare and sh each exec the
// next, so the one started is charon itself).
func (c *Charon) PID() int { return c.cmd.Process.Pid }

// Session opens a vici session to this charon; the caller closes it.
func (c *Charon) Session() (*vici.Session, error) {
	return vici.NewSession(vici.WithSocketPath(c.Socket))
}

// SA is what a test needs to know of one IKE_SA at the strongSwan end.
type SA struct {
	Name  string
	State string // "ESTABLISHED", "CONNECTING", ...
	// Children holds every CHILD_SA of the IKE_SA: strongSwan keeps a
	// rekeyed one a few seconds as DELETED (delete_rekeyed_delay) under
	// the same name as its successor, so a name may appear more than once.
	Children []ChildSA
}

// ChildSA is one CHILD_SA of an SA.
type ChildSA struct {
	Name  string
	State string // "INSTALLED", "REKEYED", "DELETED", ...
}

// Installed counts the SA's CHILD_SAs named child that are INSTALLED.
func (sa SA) Installed(child string) int {
	n := 0
	for _, c := range sa.Children {
		if c.Name == child && c.State == "INSTALLED" {
			n++
		}
	}
	return n
}

// maxListedSAs bounds a listing: the vici reader drops an event that does
// not fit the channel it is sent on, so SAs reserves room for far more
// list-sa events (one per IKE_SA) than a test brings up.
const maxListedSAs = 1024

// SAs lists the IKE_SAs, with their CHILD_SAs, without losing any.
//
// It does not use govici's CallStreaming, which can: its reader queues the
// list-sa events and the closing command response on two channels, and the
// caller selects on both, so when both are ready it may take the response
// first and end the listing with events unread. With one IKE_SA up, that
// returned no SA in 1 to 76 of 1000 listings, and tests took it for the SA
// having been deleted. Here the events go to a channel of our own, which
// the reader fills in the order charon sends: every list-sa event before
// the response, so once Call returns, the channel holds the whole listing.
func (c *Charon) SAs() ([]SA, error) {
	s, err := c.Session()
	if err != nil {
		return nil, fmt.Errorf("vici session to charon in %s: %w", c.NS.Name, err)
	}
	defer s.Close()
	if err := s.Subscribe("list-sa"); err != nil {
		return nil, fmt.Errorf("vici subscribe list-sa: %w", err)
	}
	events := make(chan vici.Event, maxListedSAs)
	s.NotifyEvents(events)
	defer s.StopEvents(events)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Call(ctx, "list-sas", nil); err != nil {
		return nil, fmt.Errorf("vici list-sas: %w", err)
	}
	n := len(events)
	if n == cap(events) {
		return nil, fmt.Errorf("vici list-sas: %d or more IKE_SAs, more than a listing has room for", n)
	}
	var sas []SA
	for range n {
		sas = append(sas, parseListSA((<-events).Message)...)
	}
	return sas, nil
}

// parseListSA reads one list-sa event: its keys name IKE_SAs.
func parseListSA(m *vici.Message) []SA {
	var sas []SA
	for _, name := range m.Keys() {
		ike, ok := m.Get(name).(*vici.Message)
		if !ok {
			continue
		}
		sa := SA{Name: name}
		sa.State, _ = ike.Get("state").(string)
		if children, ok := ike.Get("child-sas").(*vici.Message); ok {
			for _, k := range children.Keys() {
				if ch, ok := children.Get(k).(*vici.Message); ok {
					var c ChildSA
					c.Name, _ = ch.Get("name").(string)
					c.State, _ = ch.Get("state").(string)
					sa.Children = append(sa.Children, c)
				}
			}
		}
		sas = append(sas, sa)
	}
	return sas
}

// WaitChild waits until the named child is INSTALLED, or the timeout passes.
func (c *Charon) WaitChild(child string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last []SA
	var lastErr error
	for time.Now().Before(deadline) {
		sas, err := c.SAs()
		if err == nil {
			last = sas
			for _, sa := range sas {
				if sa.Installed(child) > 0 {
					return nil
				}
			}
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	if lastErr != nil {
		return fmt.Errorf("strongSwan child %s not installed after %v (SAs: %+v; last listing: %w)", child, timeout, last, lastErr)
	}
	return fmt.Errorf("strongSwan child %s not installed after %v (SAs: %+v)", child, timeout, last)
}

// Stop terminates charon by PID: SIGTERM, then SIGKILL after 3 s.
func (c *Charon) Stop() {
	if c.stopped || c.cmd == nil || c.cmd.Process == nil {
		return
	}
	c.stopped = true
	// ip netns exec and unshare exec into charon, so the PID is charon's.
	pid := c.cmd.Process.Pid
	unix.Kill(pid, unix.SIGTERM)
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		unix.Kill(pid, unix.SIGKILL)
		<-done
	}
}

func writeTemplate(path, text string, data any) error {
	tmpl, err := template.New(filepath.Base(path)).Funcs(template.FuncMap{
		"join": func(ps []netip.Prefix) string {
			s := make([]string, len(ps))
			for i, p := range ps {
				s[i] = p.String()
			}
			return strings.Join(s, ",")
		},
		"secs": func(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) },
	}).Parse(text)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := tmpl.Execute(f, data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kernel-libipsec must be loaded before kernel-netlink (interop.md), hence the
// explicit plugin list. threads, unique and dos_protection are set for many
// parallel IKE_SAs (benchmarks).
const strongswanConf = `charon {
	load_modular = no
	load = random nonce openssl aes sha1 sha2 hmac gcm chapoly curve25519 gmp x509 pubkey pkcs1 pkcs8 pem kdf kernel-libipsec kernel-netlink socket-default vici
	threads = 32
	reuse_ikesa = no
	dos_protection = no
	install_routes = yes
	retransmit_tries = 3
	retransmit_timeout = 1.0
	filelog {
		log {
			path = {{.Log}}
			time_format = %T
			default = 1
			ike = 2
			cfg = 1
			flush_line = yes
		}
	}
	plugins {
		vici {
			socket = unix://{{.Socket}}
		}
	}
}
`

const swanctlConf = `connections {
{{- range .}}
	{{.Name}} {
		version = {{if .Version}}{{.Version}}{{else}}2{{end}}
		local_addrs = {{.LocalAddr}}
		remote_addrs = {{.RemoteAddr}}
		proposals = {{.Proposals}}
		encap = yes
		mobike = no
		unique = never
{{- if .IKERekeyTime}}
		rekey_time = {{secs .IKERekeyTime}}
{{- end}}
{{- if .DPDDelay}}
		dpd_delay = {{secs .DPDDelay}}
{{- end}}
		local {
			auth = {{if .CertPEM}}pubkey
			certs = {{.Name}}.pem{{else}}psk{{end}}
			id = {{.LocalID}}
		}
		remote {
			auth = {{if .CertPEM}}pubkey{{else}}psk{{end}}
			id = {{.RemoteID}}
		}
		children {
			{{.Name}}-net {
				local_ts = {{join .LocalTS}}
				remote_ts = {{join .RemoteTS}}
				esp_proposals = {{.ESPProposals}}
				mode = tunnel
				start_action = {{if .StartAction}}{{.StartAction}}{{else}}none{{end}}
{{- if .DPDDelay}}
				dpd_action = {{if .DPDAction}}{{.DPDAction}}{{else}}restart{{end}}
{{- end}}
{{- if .RekeyTime}}
				rekey_time = {{secs .RekeyTime}}
{{- end}}
			}
		}
	}
{{- end}}
}
secrets {
{{- range .}}
	ike-{{.Name}} {
		id-a = {{.LocalID}}
		id-b = {{.RemoteID}}
{{- if eq .Version 1}}
		id-c = {{.LocalAddr}}
		id-d = {{.RemoteAddr}}
{{- end}}
		secret = "{{.PSK}}"
	}
{{- end}}
}
`
