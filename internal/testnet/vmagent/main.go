// Command vmagent is PID 1 of the small test VMs internal/testnet boots in
// qemu (the libreswan VM: pluto on a kernel with ESP, which the test
// machine's own kernel lacks). It mounts what a program needs, sets up the
// network the kernel command line names, and then lets the test drive the
// VM over HTTP on its WAN address: write and read files, run a command,
// start one in the background and signal it. A TCP echo service on port 7
// gives the tests a peer for streams through a tunnel.
//
// Kernel command line (all required but lan):
//
//	vmagent.wan=10.10.0.2/24 vmagent.gw=10.10.0.1 vmagent.lan=10.10.2.1/24 vmagent.port=8901
//
// It refuses to run anywhere but as PID 1: it would reconfigure the
// machine's network.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Wire types of the agent's API (internal/testnet mirrors them).
type runRequest struct {
	Argv    []string `json:"argv"`
	Env     []string `json:"env,omitempty"`
	Timeout int      `json:"timeout_ms,omitempty"` // /run only; 30 s when 0
	Log     string   `json:"log,omitempty"`        // /start only: stdout and stderr go here
}

type runResponse struct {
	Output string `json:"output"`
	Exit   int    `json:"exit"`
	Error  string `json:"error,omitempty"`
	PID    int    `json:"pid,omitempty"`
}

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "vmagent: not PID 1: this is the init of a test VM's initramfs")
		os.Exit(2)
	}
	for _, m := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/tmp", "tmpfs"}, {"tmpfs", "/run", "tmpfs"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil {
			fmt.Printf("vmagent: mount %s: %v\n", m.dst, err)
		}
	}
	if err := serve(); err != nil {
		fmt.Printf("vmagent: %v\n", err)
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func cmdline() (map[string]string, error) {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range strings.Fields(string(b)) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "vmagent.") {
			out[strings.TrimPrefix(k, "vmagent.")] = v
		}
	}
	return out, nil
}

func serve() error {
	args, err := cmdline()
	if err != nil {
		return err
	}
	wan, err := netip.ParsePrefix(args["wan"])
	if err != nil {
		return fmt.Errorf("vmagent.wan: %w", err)
	}
	gw, err := netip.ParseAddr(args["gw"])
	if err != nil {
		return fmt.Errorf("vmagent.gw: %w", err)
	}
	port, err := strconv.Atoi(args["port"])
	if err != nil {
		return fmt.Errorf("vmagent.port: %w", err)
	}
	if err := network(wan, gw, args["lan"]); err != nil {
		return err
	}
	go echo()
	a := &agent{procs: map[int]*exec.Cmd{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/file", a.file)
	mux.HandleFunc("/run", a.run)
	mux.HandleFunc("/start", a.start)
	mux.HandleFunc("/signal", a.signal)
	mux.HandleFunc("/poweroff", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		go func() { time.Sleep(100 * time.Millisecond); unix.Sync(); unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF) }()
	})
	l, err := net.Listen("tcp", netip.AddrPortFrom(wan.Addr(), uint16(port)).String())
	if err != nil {
		return err
	}
	fmt.Printf("vmagent: ready on %s\n", l.Addr())
	return http.Serve(l, mux)
}

// network: lo up, eth0 with the WAN address and the default route, and a
// dummy "lan0" holding the LAN address (the subnet behind this peer).
func network(wan netip.Prefix, gw netip.Addr, lan string) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	eth, err := netlink.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("eth0: %w", err)
	}
	if err := addAddr(eth, wan); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(eth); err != nil {
		return fmt.Errorf("eth0 up: %w", err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
		return fmt.Errorf("default route via %s: %w", gw, err)
	}
	if lan == "" {
		return nil
	}
	p, err := netip.ParsePrefix(lan)
	if err != nil {
		return fmt.Errorf("vmagent.lan: %w", err)
	}
	d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "lan0"}}
	if err := netlink.LinkAdd(d); err != nil {
		return fmt.Errorf("dummy lan0: %w", err)
	}
	if err := addAddr(d, p); err != nil {
		return err
	}
	return netlink.LinkSetUp(d)
}

func addAddr(l netlink.Link, p netip.Prefix) error {
	addr, err := netlink.ParseAddr(p.String())
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("address %s on %s: %w", p, l.Attrs().Name, err)
	}
	return nil
}

// echo answers TCP port 7 with what it receives.
func echo() {
	l, err := net.Listen("tcp", ":7")
	if err != nil {
		fmt.Printf("vmagent: echo: %v\n", err)
		return
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() { io.Copy(c, c); c.Close() }()
	}
}

type agent struct {
	mu    sync.Mutex
	procs map[int]*exec.Cmd
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// file: GET reads ?path=, PUT writes the body to it (?mode= octal, 0600
// by default), creating the directories.
func (a *agent) file(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("path")
	if !filepath.IsAbs(name) {
		http.Error(w, "path must be absolute", http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodGet:
		b, err := os.ReadFile(name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Write(b)
	case http.MethodPut:
		mode := uint64(0o600)
		if m := r.URL.Query().Get("mode"); m != "" {
			var err error
			if mode, err = strconv.ParseUint(m, 8, 32); err != nil {
				http.Error(w, "mode: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		b, err := io.ReadAll(r.Body)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(name), 0o755)
		}
		if err == nil {
			err = os.WriteFile(name, b, os.FileMode(mode))
		}
		if err == nil {
			err = os.Chmod(name, os.FileMode(mode))
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
	}
}

func decode(w http.ResponseWriter, r *http.Request) (runRequest, bool) {
	var req runRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Argv) == 0 {
		http.Error(w, fmt.Sprintf("want {\"argv\": [...]}: %v", err), http.StatusBadRequest)
		return req, false
	}
	return req, true
}

func environ(extra []string) []string {
	return append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin:/usr/libexec/ipsec", "HOME=/root", "TMPDIR=/tmp"}, extra...)
}

// run runs a command to its end and returns its combined output.
func (a *agent) run(w http.ResponseWriter, r *http.Request) {
	req, ok := decode(w, r)
	if !ok {
		return
	}
	timeout := 30 * time.Second
	if req.Timeout > 0 {
		timeout = time.Duration(req.Timeout) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Env = environ(req.Env)
	out, err := cmd.CombinedOutput()
	resp := runResponse{Output: string(out)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		resp.Exit = ee.ExitCode()
		resp.Error = err.Error()
	case err != nil:
		resp.Exit = -1
		resp.Error = err.Error()
	}
	reply(w, resp)
}

// start starts a command in the background, its output into req.Log.
func (a *agent) start(w http.ResponseWriter, r *http.Request) {
	req, ok := decode(w, r)
	if !ok {
		return
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = environ(req.Env)
	if req.Log != "" {
		f, err := os.OpenFile(req.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			reply(w, runResponse{Exit: -1, Error: err.Error()})
			return
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		reply(w, runResponse{Exit: -1, Error: err.Error()})
		return
	}
	pid := cmd.Process.Pid
	a.mu.Lock()
	a.procs[pid] = cmd
	a.mu.Unlock()
	go func() {
		err := cmd.Wait()
		fmt.Printf("vmagent: %s (pid %d) ended: %v\n", req.Argv[0], pid, err)
		a.mu.Lock()
		delete(a.procs, pid)
		a.mu.Unlock()
	}()
	reply(w, runResponse{PID: pid})
}

// signal sends ?sig= (a number) to ?pid=, a process /start started, and
// with ?wait=1 waits up to 10 s for it to end (exit 1 when it did not).
func (a *agent) signal(w http.ResponseWriter, r *http.Request) {
	pid, err1 := strconv.Atoi(r.URL.Query().Get("pid"))
	sig, err2 := strconv.Atoi(r.URL.Query().Get("sig"))
	if err := errors.Join(err1, err2); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	_, ours := a.procs[pid]
	a.mu.Unlock()
	if !ours {
		reply(w, runResponse{})
		return
	}
	if err := unix.Kill(pid, unix.Signal(sig)); err != nil {
		reply(w, runResponse{Exit: -1, Error: err.Error()})
		return
	}
	if r.URL.Query().Get("wait") == "" {
		reply(w, runResponse{})
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		a.mu.Lock()
		_, alive := a.procs[pid]
		a.mu.Unlock()
		if !alive {
			reply(w, runResponse{})
			return
		}
	}
	reply(w, runResponse{Exit: 1, Error: "still running"})
}
