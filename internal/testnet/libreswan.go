package testnet

import (
	"bytes"
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
)

// libreswan's pluto as a second independent IKEv1 peer. Debian's libreswan
// package conflicts with strongswan-starter (installing it removes charon),
// so it is not installed: scripts/setup.sh unpacks it (apt-get download,
// dpkg -x) into LibreswanDir and installs only the libraries it links, and
// pluto runs from there with its own configuration, secrets, NSS database
// and run directory, in a namespace.

// LibreswanDir is where setup.sh unpacks the libreswan package; the
// environment variable FLASHGATE_LIBRESWAN overrides it.
const LibreswanDir = "/var/cache/flashgate/libreswan"

func libreswanRoot() string {
	if d := os.Getenv("FLASHGATE_LIBRESWAN"); d != "" {
		return d
	}
	return LibreswanDir
}

// PlutoBinary is the path of the unpacked pluto.
func PlutoBinary() string { return filepath.Join(libreswanRoot(), "usr/libexec/ipsec/pluto") }

func whackBinary() string { return filepath.Join(libreswanRoot(), "usr/libexec/ipsec/whack") }

// PlutoConn is one IKEv1 site-to-site connection of pluto, in ipsec.conf's
// terms ("left" is pluto's side).
type PlutoConn struct {
	Name                  string
	LocalAddr, RemoteAddr netip.Addr
	LocalID, RemoteID     string // FQDN identities, written with a leading @
	PSK                   string
	IKE                   string // libreswan syntax, e.g. "aes128-sha1;modp2048"
	ESP                   string // e.g. "aes128-sha1"
	PFS                   bool
	LocalTS, RemoteTS     []netip.Prefix // one connection per pair: Name, Name-2, ...
	DPDDelay              time.Duration
	IKELifetime, Lifetime time.Duration
	// IKEv2 makes it an IKEv2 connection (ikev2=insist).
	IKEv2 bool
	// CertP12 (a PKCS#12 file and its CertPass) is imported into pluto's
	// NSS database and authenticates the connection (AuthBy, e.g. ecdsa
	// or rsasig); CertNick is the nickname NSS gave it (StartPluto fills
	// it in). CAPEM is trusted for the peer's certificate.
	CertP12            []byte
	CertPass, CertNick string
	CAPEM, AuthBy      string
	// NoEncapsulation sets encapsulation=no: pluto ignores NAT detection
	// and installs its SAs for ESP as IP protocol 50, even when the peer
	// announced a NAT. By default pluto forces UDP encapsulation
	// (encapsulation=yes), which our userspace data plane needs.
	NoEncapsulation bool
}

// Pluto is a running libreswan pluto: in a namespace of this host
// (StartPluto), or in a VM with kernel ESP (LibreswanVM.StartPluto).
type Pluto struct {
	NS *NS
	// Dir is pluto's directory (configuration, secrets, NSS database,
	// control socket): on this host, or inside the VM.
	Dir string
	// Log is pluto's log file on this host; "" for pluto in a VM (ReadLog
	// reads either).
	Log      string
	ctl      string
	host     plutoHost
	noUpdown bool // no updown script (the VM has no shell)
	cmd      *exec.Cmd
	done     chan struct{}
	readLog  func() string
	stop     func()
	// certNicks are the NSS nicknames StartPluto gave the connections'
	// certificates, by connection name: a later Load of the same
	// connection (whose PlutoConn carries no CertNick) names them again.
	certNicks map[string]string
}

// plutoHost is where pluto's files live and its tools run.
type plutoHost interface {
	writeFile(name string, data []byte) error
	run(argv ...string) (string, error)
	libexec() string
}

// localPlutoHost is this host, with the unpacked package's programs.
type localPlutoHost struct{}

func (localPlutoHost) writeFile(name string, data []byte) error {
	return os.WriteFile(name, data, 0o600)
}

func (localPlutoHost) run(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(libreswanRoot(), "usr/lib/x86_64-linux-gnu"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (localPlutoHost) libexec() string { return filepath.Join(libreswanRoot(), "usr/libexec/ipsec") }

// ReadLog returns pluto's log so far.
func (p *Pluto) ReadLog() string {
	if p.readLog != nil {
		return p.readLog()
	}
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// StartPluto starts pluto in ns with conns loaded (auto=add). It fails
// the test with what to install when the unpacked libreswan is missing.
func StartPluto(t testing.TB, ns *NS, conns ...PlutoConn) *Pluto {
	t.Helper()
	RequireRoot(t)
	RequireTool(t, "certutil", "libnss3-tools")
	if _, err := os.Stat(PlutoBinary()); err != nil {
		t.Fatalf("libreswan's pluto is not unpacked at %s: run scripts/setup.sh (apt-get download libreswan && dpkg -x libreswan_*.deb %s; plus apt-get install libldns3 libevent-pthreads-2.1-7 libnss3-tools)", PlutoBinary(), libreswanRoot())
	}
	dir := t.TempDir()
	p := &Pluto{NS: ns, Dir: dir, Log: filepath.Join(dir, "pluto.log"), ctl: filepath.Join(dir, "run", "pluto.ctl"), host: localPlutoHost{}, done: make(chan struct{})}
	for _, d := range []string{"run", "nss", "ipsec.d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	plutoNSS(t, dir, conns)
	if err := p.write(conns); err != nil {
		t.Fatal(err)
	}
	// pluto runs /usr/libexec/ipsec/addconn at start: in a private mount
	// namespace the unpacked /usr/libexec takes the place of the host's.
	args := []string{"--nofork", "--config", filepath.Join(dir, "ipsec.conf"),
		"--secretsfile", filepath.Join(dir, "ipsec.secrets"), "--ipsecdir", filepath.Join(dir, "ipsec.d"),
		"--nssdir", filepath.Join(dir, "nss"), "--rundir", filepath.Join(dir, "run"), "--stderrlog"}
	p.cmd = ns.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		fmt.Sprintf("mount --bind %s /usr/libexec && exec %s %s", filepath.Join(libreswanRoot(), "usr/libexec"), PlutoBinary(), strings.Join(args, " ")))
	p.cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(libreswanRoot(), "usr/lib/x86_64-linux-gnu"))
	// stderr is unbuffered: the log is complete whenever it is read.
	out, err := os.Create(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start pluto in %s: %v", ns.Name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(p.Log)
			t.Logf("pluto log (%s):\n%s", ns.Name, lastLines(string(b), 80))
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := p.Whack("--status"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(p.Log)
			t.Fatalf("pluto in %s did not answer whack within 15 s: %s", ns.Name, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.Load(conns...); err != nil {
		t.Fatal(err)
	}
	return p
}

// plutoNSS makes pluto's NSS database in dir/nss on this host and
// imports the connections' certificates and CAs, filling in CertNick.
func plutoNSS(t testing.TB, dir string, conns []PlutoConn) {
	t.Helper()
	if out, err := exec.Command("certutil", "-N", "-d", "sql:"+filepath.Join(dir, "nss"), "--empty-password").CombinedOutput(); err != nil {
		t.Fatalf("certutil: NSS database for pluto: %v: %s", err, out)
	}
	for i, c := range conns {
		if c.CertP12 == nil {
			continue
		}
		p12, ca := filepath.Join(dir, fmt.Sprintf("cert%d.p12", i)), filepath.Join(dir, fmt.Sprintf("ca%d.pem", i))
		os.WriteFile(p12, c.CertP12, 0o600)
		os.WriteFile(ca, []byte(c.CAPEM), 0o600)
		if out, err := exec.Command("pk12util", "-i", p12, "-d", "sql:"+filepath.Join(dir, "nss"), "-W", c.CertPass, "-K", "").CombinedOutput(); err != nil {
			t.Fatalf("pk12util: %v: %s", err, out)
		}
		if out, err := exec.Command("certutil", "-A", "-d", "sql:"+filepath.Join(dir, "nss"), "-n", fmt.Sprintf("ca%d", i), "-t", "CT,,", "-i", ca).CombinedOutput(); err != nil {
			t.Fatalf("certutil -A: %v: %s", err, out)
		}
		// pk12util names the certificate after its subject and issuer:
		// the one with a key (trust u,u,u) is the connection's.
		out, _ := exec.Command("certutil", "-L", "-d", "sql:"+filepath.Join(dir, "nss")).CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[len(f)-1] == "u,u,u" {
				conns[i].CertNick = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), "u,u,u"))
			}
		}
		if conns[i].CertNick == "" {
			t.Fatalf("pk12util imported no certificate with a key:\n%s", out)
		}
	}
}

// Stop ends pluto (by its PID).
func (p *Pluto) Stop() {
	if p.stop != nil {
		p.stop()
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// Whack runs libreswan's control tool against this pluto.
func (p *Pluto) Whack(args ...string) (string, error) {
	return p.host.run(append([]string{filepath.Join(p.host.libexec(), "whack"), "--ctlsocket", p.ctl}, args...)...)
}

// Load replaces pluto's connections with conns and rereads its secrets.
func (p *Pluto) Load(conns ...PlutoConn) error {
	if err := p.write(conns); err != nil {
		return err
	}
	if out, err := p.Whack("--rereadsecrets"); err != nil {
		return fmt.Errorf("whack --rereadsecrets: %w: %s", err, out)
	}
	for _, c := range conns {
		for _, name := range c.names() {
			p.Whack("--delete", "--name", name)
			if out, err := p.host.run(filepath.Join(p.host.libexec(), "addconn"), "--config", filepath.Join(p.Dir, "ipsec.conf"), "--ctlsocket", p.ctl, name); err != nil {
				return fmt.Errorf("addconn %s: %w: %s", name, err, out)
			}
		}
	}
	return nil
}

// names are the connection names of c, one per selector pair.
func (c PlutoConn) names() []string {
	var out []string
	for i := range c.LocalTS {
		for j := range c.RemoteTS {
			n := c.Name
			if k := i*len(c.RemoteTS) + j; k > 0 {
				n = fmt.Sprintf("%s-%d", c.Name, k+1)
			}
			out = append(out, n)
		}
	}
	return out
}

func (c PlutoConn) pairIndex(name string) [2]int {
	for k, n := range c.names() {
		if n == name {
			return [2]int{k / len(c.RemoteTS), k % len(c.RemoteTS)}
		}
	}
	return [2]int{}
}

var plutoSecrets = template.Must(template.New("secrets").Parse(`{{range .}}{{if .PSK}}@{{.LocalID}} @{{.RemoteID}} {{.LocalAddr}} {{.RemoteAddr}} : PSK "{{.PSK}}"
{{end}}{{end}}`))

// plutoConf is ipsec.conf: one conn per selector pair ("left" is pluto).
var plutoConf = template.Must(template.New("conf").Funcs(template.FuncMap{"secs": func(d time.Duration) int { return int(d.Seconds()) }}).Parse(`config setup
	plutodebug=none
	ikev1-policy=accept
{{range .}}
conn {{.Name}}
	ikev2={{if .IKEv2}}insist{{else}}no{{end}}
	authby={{if .AuthBy}}{{.AuthBy}}{{else}}secret{{end}}
{{- if .Cert}}
	leftcert="{{.Cert}}"
{{- end}}
	type=tunnel
	encapsulation={{if .Encapsulation}}yes{{else}}no{{end}}
{{- if .NoUpdown}}
	leftupdown=%disabled
{{- end}}
	left={{.Left}}
	leftid=@{{.LeftID}}
	leftsubnet={{.LeftTS}}
	right={{.Right}}
	rightid=@{{.RightID}}
	rightsubnet={{.RightTS}}
	ike={{.IKE}}
	esp={{.ESP}}
	pfs={{if .PFS}}yes{{else}}no{{end}}
{{- if .IKELifetime}}
	ikelifetime={{secs .IKELifetime}}s
{{- end}}
{{- if .Lifetime}}
	salifetime={{secs .Lifetime}}s
{{- end}}
{{- if .DPDDelay}}
	dpddelay={{secs .DPDDelay}}
	dpdtimeout={{secs .DPDDelay}}0
	dpdaction=clear
{{- end}}
	auto=ignore
{{end}}`))

type plutoConnText struct {
	Name, Left, LeftID, LeftTS, Right, RightID, RightTS, IKE, ESP string
	PFS, IKEv2                                                    bool
	AuthBy, Cert                                                  string
	IKELifetime, Lifetime, DPDDelay                               time.Duration
	Encapsulation, NoUpdown                                       bool
}

func (p *Pluto) write(conns []PlutoConn) error {
	var secrets bytes.Buffer
	if err := plutoSecrets.Execute(&secrets, conns); err != nil {
		return err
	}
	var texts []plutoConnText
	for _, c := range conns {
		if c.CertNick != "" {
			if p.certNicks == nil {
				p.certNicks = map[string]string{}
			}
			p.certNicks[c.Name] = c.CertNick
		} else if c.CertP12 != nil {
			if c.CertNick = p.certNicks[c.Name]; c.CertNick == "" {
				return fmt.Errorf("connection %s: its certificate is not in pluto's NSS database (give it to StartPluto)", c.Name)
			}
		}
		for _, name := range c.names() {
			i := c.pairIndex(name)
			texts = append(texts, plutoConnText{Name: name, Left: c.LocalAddr.String(), LeftID: c.LocalID, LeftTS: c.LocalTS[i[0]].String(),
				Right: c.RemoteAddr.String(), RightID: c.RemoteID, RightTS: c.RemoteTS[i[1]].String(), IKE: c.IKE, ESP: c.ESP, PFS: c.PFS,
				IKELifetime: c.IKELifetime, Lifetime: c.Lifetime, DPDDelay: c.DPDDelay, IKEv2: c.IKEv2, AuthBy: c.AuthBy, Cert: c.CertNick,
				Encapsulation: !c.NoEncapsulation, NoUpdown: p.noUpdown})
		}
	}
	var conf bytes.Buffer
	if err := plutoConf.Execute(&conf, texts); err != nil {
		return err
	}
	if err := p.host.writeFile(filepath.Join(p.Dir, "ipsec.secrets"), secrets.Bytes()); err != nil {
		return err
	}
	return p.host.writeFile(filepath.Join(p.Dir, "ipsec.conf"), conf.Bytes())
}

// Initiate brings the named connection up (whack --initiate waits for the
// outcome) and returns whack's report.
func (p *Pluto) Initiate(name string) (string, error) {
	return p.Whack("--name", name, "--initiate")
}

// Status is whack --trafficstatus and --showstates, for assertions and logs.
func (p *Pluto) Status() string {
	a, _ := p.Whack("--showstates")
	b, _ := p.Whack("--trafficstatus")
	return strings.TrimSpace(a + "\n" + b)
}
