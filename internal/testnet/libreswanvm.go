package testnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/u-root/u-root/pkg/cpio"
)

// A libreswan VM: pluto on a kernel with ESP. This machine's kernel has no
// ESP (an XFRM SA add fails with ENOSYS) and pluto has no userspace ESP,
// so in a namespace pluto stops at its kernel call. Here it runs in qemu
// on flashgate's own qemu-x86_64 kernel (XFRM, ESP, the ciphers of
// kernel/config/common.config), in an initramfs holding pluto, whack and
// addconn from the unpacked Debian package, the host's libraries they
// link (found with ldd) and the NSS modules NSS loads at run time, with
// internal/testnet/vmagent as PID 1. The VM's eth0 is a TAP device in a
// namespace of the test; the test drives the VM through the agent's HTTP
// API on the VM's WAN address.
//
//	ns (e.g. gwA: 10.10.0.1 on the TAP) ==tap== eth0 10.10.0.2  VM  lan0 10.10.2.1/24 (dummy)
//
// The VM's LAN is a dummy interface: traffic through the tunnel to its
// address ends in the VM's kernel, after its ESP; the agent answers TCP
// echo on port 7, and Ping sends from the LAN address.

// LibreswanVMConfig is the VM's network.
type LibreswanVMConfig struct {
	Tap     string       // the TAP device made in the namespace (≤ 15 bytes)
	Gateway netip.Prefix // the namespace's end of the TAP, and the VM's default route
	WAN     netip.Prefix // the VM's eth0
	LAN     netip.Prefix // the VM's lan0 (a dummy interface), e.g. 10.10.2.1/24
}

// LibreswanVM is a running VM; Pluto is its pluto once StartPluto ran.
type LibreswanVM struct {
	NS      *NS
	Config  LibreswanVMConfig
	Console string // the VM's serial console, a file on this host
	Kernel  string // the bzImage it booted
	Pluto   *Pluto
	agent   *vmAgent
	qemu    *exec.Cmd
	done    chan struct{}
}

// vmRunTimeout bounds a command in the VM. Generous: qemu emulates the
// VM's CPU, and on a loaded machine (another VM at a higher priority) a
// ping with an 8 s deadline in the VM once took over 30 s of this host's
// time.
const vmRunTimeout = 2 * time.Minute

const (
	vmAgentPort = 8901
	vmPlutoDir  = "/etc/pluto" // pluto's directory inside the VM
	vmLibexec   = "/usr/libexec/ipsec"
)

// LibreswanVMBoard is the board whose kernel the VM boots: x86-64, as the
// unpacked pluto is (Debian amd64).
const LibreswanVMBoard = "qemu-x86_64"

// StartLibreswanVM builds the initramfs, boots the VM with the TAP device
// in ns, and waits for its agent. The VM is powered off (its qemu killed
// by PID) when the test ends. The kernel is LibreswanVMBoard's from the
// kernel cache (`flashgate kernels` builds it; a cold cache builds it
// here, which takes tens of minutes), or the bzImage named by
// $FLASHGATE_LIBRESWAN_VM_KERNEL (any x86-64 kernel with XFRM_USER,
// INET_ESP, DUMMY and E1000 built in).
func StartLibreswanVM(t testing.TB, ns *NS, cfg LibreswanVMConfig) *LibreswanVM {
	t.Helper()
	RequireRoot(t)
	RequireTool(t, "ldd", "libc-bin")
	RequireTool(t, "certutil", "libnss3-tools")
	if _, err := os.Stat(PlutoBinary()); err != nil {
		t.Fatalf("libreswan's pluto is not unpacked at %s: run scripts/setup.sh", PlutoBinary())
	}
	board, err := boards.Lookup(LibreswanVMBoard)
	if err != nil {
		t.Fatal(err)
	}
	emu, err := board.Emulation()
	if err != nil {
		t.Fatal(err)
	}
	qemu, err := exec.LookPath(emu.Binary)
	if err != nil {
		t.Fatalf("%s is not installed: apt-get install qemu-system-x86", emu.Binary)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	began := time.Now()
	vmlinuz := os.Getenv("FLASHGATE_LIBRESWAN_VM_KERNEL")
	if vmlinuz == "" {
		k, err := (&images.KernelBuild{}).Build(ctx, board)
		if err != nil {
			t.Fatalf("the %s kernel for the libreswan VM: %v", board.Name, err)
		}
		vmlinuz = k.Vmlinuz
	}
	work := t.TempDir()
	initrd := filepath.Join(work, "initrd.cpio")
	if err := writeLibreswanInitramfs(ctx, work, initrd); err != nil {
		t.Fatal(err)
	}
	prepared := time.Now()
	for _, c := range [][]string{
		{"ip", "tuntap", "add", "dev", cfg.Tap, "mode", "tap"},
		{"ip", "addr", "add", cfg.Gateway.String(), "dev", cfg.Tap},
		{"ip", "link", "set", cfg.Tap, "up"},
	} {
		if err := ns.Run(c...); err != nil {
			t.Fatal(err)
		}
	}
	vm := &LibreswanVM{NS: ns, Config: cfg, Console: filepath.Join(work, "console.log"), Kernel: vmlinuz, done: make(chan struct{})}
	console, err := os.Create(vm.Console)
	if err != nil {
		t.Fatal(err)
	}
	cmdline := fmt.Sprintf("console=ttyS0 panic=-1 noapic vmagent.wan=%s vmagent.gw=%s vmagent.lan=%s vmagent.port=%d",
		cfg.WAN, cfg.Gateway.Addr(), cfg.LAN, vmAgentPort)
	vm.qemu = ns.Command(qemu, "-nodefaults", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-M", emu.Machine, "-cpu", emu.CPU, "-m", "512", "-smp", "1",
		"-kernel", vmlinuz, "-initrd", initrd, "-append", cmdline,
		"-netdev", "tap,id=wan,ifname="+cfg.Tap+",script=no,downscript=no",
		"-device", emu.NIC+",netdev=wan,mac=52:54:00:fb:01:01")
	vm.qemu.Stdout, vm.qemu.Stderr = console, console
	if err := vm.qemu.Start(); err != nil {
		t.Fatalf("start qemu for the libreswan VM: %v", err)
	}
	go func() { vm.qemu.Wait(); console.Close(); close(vm.done) }()
	t.Cleanup(func() {
		vm.stop()
		if t.Failed() {
			b, _ := os.ReadFile(vm.Console)
			t.Logf("libreswan VM console:\n%s", lastLines(string(b), 60))
		}
	})
	vm.agent = &vmAgent{ns: ns, base: "http://" + netip.AddrPortFrom(cfg.WAN.Addr(), vmAgentPort).String()}
	// TCG boots in seconds on a quiet machine; allow for a loaded one.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := vm.agent.call(ctx, http.MethodGet, "/file?path=/proc/uptime", nil, io.Discard)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-vm.done:
			b, _ := os.ReadFile(vm.Console)
			t.Fatalf("the libreswan VM stopped while booting:\n%s", lastLines(string(b), 60))
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(vm.Console)
			t.Fatalf("the libreswan VM's agent did not answer within 3 minutes (%v):\n%s", err, lastLines(string(b), 60))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("libreswan VM: kernel and initramfs in %v, booted to its agent in %v", prepared.Sub(began).Round(time.Second), time.Since(prepared).Round(time.Second))
	return vm
}

func (vm *LibreswanVM) stop() {
	select {
	case <-vm.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	vm.agent.call(ctx, http.MethodPost, "/poweroff", nil, nil)
	cancel()
	select {
	case <-vm.done:
	case <-time.After(5 * time.Second):
		vm.qemu.Process.Kill()
		<-vm.done
	}
}

// Run runs a command inside the VM and returns its output; an exit status
// other than 0 is an error carrying the output.
func (vm *LibreswanVM) Run(argv ...string) (string, error) {
	return vm.agent.run(vmRunTimeout, argv...)
}

// ReadFile reads a file inside the VM (e.g. /proc/net/xfrm_stat).
func (vm *LibreswanVM) ReadFile(name string) ([]byte, error) {
	var buf bytes.Buffer
	err := vm.agent.call(context.Background(), http.MethodGet, "/file?path="+url.QueryEscape(name), nil, &buf)
	return buf.Bytes(), err
}

// Ping pings dst from the VM's LAN address count times (through the
// tunnel when dst is behind the peer).
func (vm *LibreswanVM) Ping(dst netip.Addr, count int) error {
	_, err := vm.Run("/usr/bin/ping", "-q", "-n", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "2", "-w", strconv.Itoa(count+5),
		"-I", vm.Config.LAN.Addr().String(), dst.String())
	return err
}

// StartPluto (re)starts pluto in the VM with conns: a pluto running
// before is stopped first. Certificates are imported into a fresh NSS
// database made on this host with certutil and copied in.
func (vm *LibreswanVM) StartPluto(t testing.TB, conns ...PlutoConn) *Pluto {
	t.Helper()
	if vm.Pluto != nil {
		vm.Pluto.Stop()
		vm.Pluto = nil
	}
	local := t.TempDir()
	nss := filepath.Join(local, "nss")
	if err := os.MkdirAll(nss, 0o700); err != nil {
		t.Fatal(err)
	}
	plutoNSS(t, local, conns)
	ents, err := os.ReadDir(nss)
	if err != nil {
		t.Fatal(err)
	}
	host := &vmPlutoHost{vm: vm}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(nss, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := host.writeFile(path.Join(vmPlutoDir, "nss", e.Name()), b); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"run", "ipsec.d"} {
		if err := host.writeFile(path.Join(vmPlutoDir, d, ".keep"), nil); err != nil {
			t.Fatal(err)
		}
	}
	p := &Pluto{NS: vm.NS, Dir: vmPlutoDir, ctl: path.Join(vmPlutoDir, "run", "pluto.ctl"), host: host, noUpdown: true, done: make(chan struct{})}
	if err := p.write(conns); err != nil {
		t.Fatal(err)
	}
	logFile := path.Join(vmPlutoDir, "pluto.log")
	host.writeFile(logFile, nil)
	var resp vmRunResponse
	err = vm.agent.call(context.Background(), http.MethodPost, "/start", vmRunRequest{Log: logFile, Argv: []string{
		path.Join(vmLibexec, "pluto"), "--nofork", "--config", path.Join(vmPlutoDir, "ipsec.conf"),
		"--secretsfile", path.Join(vmPlutoDir, "ipsec.secrets"), "--ipsecdir", path.Join(vmPlutoDir, "ipsec.d"),
		"--nssdir", path.Join(vmPlutoDir, "nss"), "--rundir", path.Join(vmPlutoDir, "run"), "--stderrlog"}}, &resp)
	if err == nil && resp.Error != "" {
		err = fmt.Errorf("%s", resp.Error)
	}
	if err != nil {
		t.Fatalf("start pluto in the VM: %v", err)
	}
	host.pid = resp.PID
	p.readLog = func() string {
		b, _ := host.readFile(logFile)
		return string(b)
	}
	p.stop = func() {
		vm.agent.call(context.Background(), http.MethodPost, fmt.Sprintf("/signal?pid=%d&sig=15&wait=1", host.pid), nil, nil)
	}
	vm.Pluto = p
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pluto log (VM):\n%s", lastLines(p.ReadLog(), 80))
		}
	})
	began := time.Now()
	deadline := began.Add(60 * time.Second)
	for {
		if _, err := p.Whack("--status"); err == nil {
			t.Logf("pluto in the VM answered whack after %v", time.Since(began).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pluto in the VM did not answer whack within 60 s:\n%s", lastLines(p.ReadLog(), 40))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err := p.Load(conns...); err != nil {
		t.Fatal(err)
	}
	return p
}

// vmPlutoHost runs pluto's tools and keeps its files inside the VM.
type vmPlutoHost struct {
	vm  *LibreswanVM
	pid int
}

func (h *vmPlutoHost) writeFile(name string, data []byte) error {
	return h.vm.agent.call(context.Background(), http.MethodPut, "/file?mode=600&path="+url.QueryEscape(name), bytes.NewReader(data), nil)
}

func (h *vmPlutoHost) readFile(name string) ([]byte, error) {
	var buf bytes.Buffer
	err := h.vm.agent.call(context.Background(), http.MethodGet, "/file?path="+url.QueryEscape(name), nil, &buf)
	return buf.Bytes(), err
}

func (h *vmPlutoHost) run(argv ...string) (string, error) {
	return h.vm.agent.run(vmRunTimeout, argv...)
}

func (h *vmPlutoHost) libexec() string { return vmLibexec }

// The agent's wire types (internal/testnet/vmagent).
type vmRunRequest struct {
	Argv    []string `json:"argv"`
	Env     []string `json:"env,omitempty"`
	Timeout int      `json:"timeout_ms,omitempty"`
	Log     string   `json:"log,omitempty"`
}

type vmRunResponse struct {
	Output string `json:"output"`
	Exit   int    `json:"exit"`
	Error  string `json:"error,omitempty"`
	PID    int    `json:"pid,omitempty"`
}

// vmAgent is the client of the VM's agent. Its connections are made inside
// the namespace that holds the TAP device.
type vmAgent struct {
	ns     *NS
	base   string
	once   sync.Once
	client *http.Client
}

func (a *vmAgent) httpClient() *http.Client {
	a.once.Do(func() {
		a.client = &http.Client{Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var c net.Conn
				err := a.ns.Do(func() error {
					var err error
					c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
					return err
				})
				return c, err
			},
		}}
	})
	return a.client
}

// call sends a request with body (an io.Reader as is, else JSON) and
// decodes the answer into out (an io.Writer gets it raw, else JSON).
func (a *vmAgent) call(ctx context.Context, method, p string, body any, out any) error {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+p, rd)
	if err != nil {
		return err
	}
	resp, err := a.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("VM agent %s %s: %s: %s", method, p, resp.Status, strings.TrimSpace(string(msg)))
	}
	switch o := out.(type) {
	case nil:
		return nil
	case io.Writer:
		_, err = io.Copy(o, resp.Body)
		return err
	default:
		return json.NewDecoder(resp.Body).Decode(o)
	}
}

func (a *vmAgent) run(timeout time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	var resp vmRunResponse
	if err := a.call(ctx, http.MethodPost, "/run", vmRunRequest{Argv: argv, Timeout: int(timeout.Milliseconds())}, &resp); err != nil {
		return "", err
	}
	if resp.Error != "" {
		return resp.Output, fmt.Errorf("%s in the VM: %s: %s", strings.Join(argv, " "), resp.Error, strings.TrimSpace(resp.Output))
	}
	return resp.Output, nil
}

// The initramfs: the agent as /init, pluto's programs at the path they
// expect, and every shared object they need at the host's path.

// vmPrograms are the unpacked libreswan's programs the VM carries.
var vmPrograms = []string{"pluto", "whack", "addconn"}

// vmHostFiles are the host's programs and the libraries loaded at run time
// (NSS's soft token and its database back end; libgcc_s for thread exit).
var vmHostFiles = []string{
	"/usr/bin/ping", "/usr/sbin/ip",
	"/usr/lib/x86_64-linux-gnu/libsoftokn3.so", "/usr/lib/x86_64-linux-gnu/libsoftokn3.chk",
	"/usr/lib/x86_64-linux-gnu/libfreeblpriv3.so", "/usr/lib/x86_64-linux-gnu/libfreeblpriv3.chk",
	"/usr/lib/x86_64-linux-gnu/libfreebl3.so", "/usr/lib/x86_64-linux-gnu/libfreebl3.chk",
	"/usr/lib/x86_64-linux-gnu/libsqlite3.so.0",
	"/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",
}

var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// lddDeps lists the shared objects bin loads, by the host's ldd.
func lddDeps(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", bin, err, out)
	}
	var deps []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd %s: %s (scripts/setup.sh installs pluto's libraries)", bin, strings.TrimSpace(line))
		}
		if m := lddLine.FindStringSubmatch(line); m != nil {
			deps = append(deps, m[1])
		}
	}
	return deps, nil
}

// initramfsTree collects records by path, following the host's symlinks
// (of directories, such as /lib -> usr/lib, and of files) so every path a
// program names resolves in the VM as on the host.
type initramfsTree map[string]cpio.Record

func (tr initramfsTree) addHostPath(p string) error {
	p = filepath.Clean(p)
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			tr[strings.TrimPrefix(next, "/")] = cpio.Symlink(strings.TrimPrefix(next, "/"), target)
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target)
			}
			return tr.addHostPath(filepath.Join(append([]string{target}, parts[i+1:]...)...))
		}
		cur = next
	}
	fi, err := os.Stat(cur)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory", cur)
	}
	return tr.addFile(strings.TrimPrefix(cur, "/"), cur, uint64(fi.Mode().Perm()))
}

func (tr initramfsTree) addFile(name, src string, perm uint64) error {
	if _, ok := tr[name]; ok {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tr[name] = cpio.StaticFile(name, string(b), perm)
	return nil
}

func writeLibreswanInitramfs(ctx context.Context, work, out string) error {
	agent := filepath.Join(work, "vmagent")
	build := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", agent, "github.com/flashgate/flashgate/internal/testnet/vmagent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the VM's agent: %w: %s", err, b)
	}
	tr := initramfsTree{}
	if err := tr.addFile("init", agent, 0o755); err != nil {
		return err
	}
	bins := []string{}
	for _, p := range vmPrograms {
		src := filepath.Join(libreswanRoot(), "usr/libexec/ipsec", p)
		if err := tr.addFile(strings.TrimPrefix(path.Join(vmLibexec, p), "/"), src, 0o755); err != nil {
			return err
		}
		bins = append(bins, src)
	}
	for _, f := range vmHostFiles {
		if _, err := os.Stat(f); err != nil {
			if strings.HasSuffix(f, ".chk") {
				continue // only FIPS mode reads them
			}
			return fmt.Errorf("the libreswan VM needs %s from this host: %w", f, err)
		}
		if err := tr.addHostPath(f); err != nil {
			return err
		}
		if !strings.HasSuffix(f, ".chk") {
			bins = append(bins, f)
		}
	}
	for _, b := range bins {
		deps, err := lddDeps(ctx, b)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := tr.addHostPath(d); err != nil {
				return fmt.Errorf("%s's %s: %w", b, d, err)
			}
		}
	}
	names := make([]string, 0, len(tr))
	for n := range tr {
		names = append(names, n)
	}
	sort.Strings(names)
	recs := make([]cpio.Record, 0, len(names))
	for _, n := range names {
		recs = append(recs, tr[n])
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := cpio.Newc.Writer(f)
	if err := cpio.WriteRecordsAndDirs(w, recs); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return f.Close()
}
