package vmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/upgrade/imagefile"
	"github.com/flashgate/flashgate/upgrade/remote"
)

var (
	webuiRow = regexp.MustCompile(`(?m)^webui +running +(\d+) `)
	ikedRow  = regexp.MustCompile(`(?m)^iked +running +(\d+) `)
	netdRow  = regexp.MustCompile(`(?m)^netd +running +(\d+) `)
)

// run types cmd in the expert shell and returns what it printed up to the
// next prompt, without carriage returns.
func (c *console) run(cmd string) string {
	c.TB.Helper()
	return strings.ReplaceAll(c.Shell(cmd), "\r", "")
}

// TestWebUIUnprivilegedInVM: in the booted appliance the web UI runs as
// its own user (443) with no capabilities, serves HTTPS on the port PID 1
// bound for it, and its user reaches configd only through the restricted
// socket, where a tunnel's pre-shared key is redacted and a clear-text
// export refused; configd's full socket, the supervisor's and the
// database refuse it. A firmware upload through it still writes the card.
// iked and netd, which parse what the network sends, run as their own
// users with only the capabilities they need; every service runs with
// no_new_privs; netd, unprivileged, still takes the WAN's DHCP lease
// (qemu's user network) and writes its DNS server where /etc/resolv.conf
// points, and the console still reaches its socket.
func TestWebUIUnprivilegedInVM(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := bootImage(t, func(q *images.QEMUConfig) { q.WebUIPort = port })
	c.login()

	// A tunnel with a key, committed at the CLI.
	c.TypeLine("exit")
	c.Expect(time.Minute, "admin@")
	c.Expect(time.Minute, "> ")
	for _, l := range []string{"set tunnels.hq.remote_address 198.51.100.1", "set tunnels.hq.psk vm-test-pre-shared-key-1234",
		"set tunnels.hq.local_subnets 192.168.1.0/24", "set tunnels.hq.remote_subnets 10.200.0.0/16"} {
		c.TypeLine(l)
		c.Expect(time.Minute, "> ")
	}
	c.TypeLine(`commit "vm test: a tunnel with a key"`)
	c.Expect(time.Minute, "Committed revision")
	c.Expect(time.Minute, "> ")
	c.TypeLine("shell")
	c.Expect(time.Minute, "Expert shell (")
	c.Expect(time.Minute, "$ ")

	var pid, ikedPID, netdPID string
	for try := 0; try < 30 && (pid == "" || ikedPID == "" || netdPID == ""); try++ {
		st := c.run("flashgate status")
		if m := webuiRow.FindStringSubmatch(st); m != nil {
			pid = m[1]
		}
		if m := ikedRow.FindStringSubmatch(st); m != nil {
			ikedPID = m[1]
		}
		if m := netdRow.FindStringSubmatch(st); m != nil {
			netdPID = m[1]
		}
		if pid == "" || ikedPID == "" || netdPID == "" {
			time.Sleep(2 * time.Second)
		}
	}
	if pid == "" || ikedPID == "" || netdPID == "" {
		t.Fatalf("flashgate status never showed the web UI (pid %q), iked (pid %q) and netd (pid %q) running", pid, ikedPID, netdPID)
	}
	status := c.run("cat /proc/" + pid + "/status")
	for _, want := range []string{"Uid:\t443\t443\t443\t443", "Gid:\t443\t443\t443\t443", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want) {
			t.Errorf("/proc/%s/status of the web UI:\n%s\nwant %q", pid, status, want)
		}
	}

	// iked parses the WAN's packets: its own user, CAP_NET_BIND_SERVICE,
	// CAP_NET_ADMIN and CAP_NET_RAW (bits 10, 12, 13) and nothing else.
	ikedStatus := c.run("cat /proc/" + ikedPID + "/status")
	for _, want := range []string{"Uid:\t501\t501\t501\t501", "Gid:\t501\t501\t501\t501", "Groups:\t502",
		"CapEff:\t0000000000003400", "CapPrm:\t0000000000003400", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(ikedStatus, want) {
			t.Errorf("/proc/%s/status of iked:\n%s\nwant %q", ikedPID, ikedStatus, want)
		}
	}
	ikedAccess := c.run("flashgate access 501:501:502")
	for _, want := range []string{"configd-read.sock      connects", "psk of tunnel hq: IN THE CLEAR", "candidate (the edits): refused",
		"export with secrets in the clear: refused", "configd-web.sock       refused: permission denied",
		"configd.sock           refused: permission denied", "supervisor.sock        refused: permission denied",
		"config.db              refused: permission denied", "iked/iked.sock         connects",
		fmt.Sprintf("%-22s refused: permission denied", "netd/netd.sock"), fmt.Sprintf("%-22s refused: permission denied", "netd/netd-web.sock")} {
		if !strings.Contains(ikedAccess, want) {
			t.Errorf("flashgate access 501:501:502 (iked's user) on the box:\n%s\nwant %q", ikedAccess, want)
		}
	}
	// netd parses DHCP and NTP: its own user, CAP_NET_BIND_SERVICE,
	// CAP_NET_ADMIN, CAP_NET_RAW and CAP_SYS_TIME (bits 10, 12, 13, 25),
	// only the supplementary group of its socket for the web UI (504),
	// no_new_privs.
	netdStatus := c.run("cat /proc/" + netdPID + "/status")
	// The kernel ends each group with a blank.
	if !regexp.MustCompile(`(?m)^Groups:\s*504\s*$`).MatchString(netdStatus) {
		t.Errorf("/proc/%s/status of netd:\n%s\nwant the supplementary group 504 only", netdPID, netdStatus)
	}
	for _, want := range []string{"Uid:\t503\t503\t503\t503", "Gid:\t503\t503\t503\t503",
		"CapEff:\t0000000002003400", "CapPrm:\t0000000002003400", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(netdStatus, want) {
			t.Errorf("/proc/%s/status of netd:\n%s\nwant %q", netdPID, netdStatus, want)
		}
	}
	// Its user reads the configuration without keys and can change
	// nothing; its socket is its own.
	netdAccess := c.run("flashgate access 503:503:504")
	for _, want := range []string{fmt.Sprintf("%-22s connects", "configd-redacted.sock"), "psk of tunnel hq: redacted",
		"candidate (the edits): refused", "export with secrets in the clear: refused",
		fmt.Sprintf("%-22s connects", "netd/netd.sock"), fmt.Sprintf("%-22s connects", "netd/netd-web.sock"), fmt.Sprintf("%-22s refused: permission denied", "configd-read.sock"),
		fmt.Sprintf("%-22s refused: permission denied", "configd-web.sock"), fmt.Sprintf("%-22s refused: permission denied", "configd.sock"),
		fmt.Sprintf("%-22s refused: permission denied", "supervisor.sock"),
		fmt.Sprintf("%-22s refused: permission denied", "config.db")} {
		if !strings.Contains(netdAccess, want) {
			t.Errorf("flashgate access 503:503 (netd's user) on the box:\n%s\nwant %q", netdAccess, want)
		}
	}
	// iked's directory (501:502, 0750) does not even list its socket.
	if strings.Contains(netdAccess, "IN THE CLEAR") || strings.Contains(netdAccess, "vm-test-pre-shared-key") ||
		strings.Contains(netdAccess, fmt.Sprintf("%-22s connects", "iked/iked.sock")) {
		t.Errorf("netd's user got the key:\n%s", netdAccess)
	}
	// netd, unprivileged, writes the resolver file in its own directory,
	// and /etc/resolv.conf (a link PID 1 made) reads it. Its content here
	// is netd's "no DNS servers" header: the test's WAN is qemu's
	// restricted user network (nothing may leave this host), whose DHCP
	// answers without a router or DNS server. That the lease's DNS servers
	// land in the file, written by netd's user, is TestMainInNamespace's
	// (services/netd), with a DHCP server of its own.
	const netdHeader = "# Written by netd"
	var resolv string
	for try := 0; try < 30 && !strings.Contains(resolv, netdHeader); try++ {
		if try > 0 {
			time.Sleep(2 * time.Second)
		}
		resolv = c.run("cat /etc/resolv.conf")
	}
	if !strings.Contains(resolv, netdHeader) {
		t.Errorf("/etc/resolv.conf on the box:\n%s\nwant the file netd writes", resolv)
	}
	if own := c.run("cat /run/flashgate/netd/resolv.conf"); !strings.Contains(own, netdHeader) {
		t.Errorf("netd's own resolv.conf on the box:\n%s\nwant netd's", own)
	}
	// iked serves its API as its own user, and the console (root) and the
	// web UI reach it.
	if out := c.run("flashgate ipsec status"); !strings.Contains(out, "hq") {
		t.Errorf("flashgate ipsec status on the box does not list the tunnel hq:\n%s", out)
	}

	access := c.run("flashgate access 443:443:502,504")
	for _, want := range []string{fmt.Sprintf("%-22s refused: permission denied", "netd/netd.sock"), "as uid 443 gid 443 groups [502 504]:", "configd-web.sock       connects", "psk of tunnel hq: redacted", "iked/iked.sock         connects", "configd-read.sock      refused: permission denied",
		"export with secrets in the clear: refused", "configd.sock           refused: permission denied",
		"supervisor.sock        refused: permission denied", "config.db              refused: permission denied",
		fmt.Sprintf("%-22s connects", "netd/netd-web.sock")} {
		if !strings.Contains(access, want) {
			t.Errorf("flashgate access 443:443 on the box:\n%s\nwant %q", access, want)
		}
	}
	if strings.Contains(access, "IN THE CLEAR") || strings.Contains(access, "GIVEN") || strings.Contains(access, "vm-test-pre-shared-key") {
		t.Errorf("the web UI's user got the key:\n%s", access)
	}

	// The UI serves on the listener PID 1 bound, with the certificate
	// whose fingerprint it wrote for the console.
	fp := c.run("cat /run/flashgate/webui/fingerprint")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // checked against the fingerprint below
		Proxy:           nil,
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var page string
	var served string
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://127.0.0.1:"+strconv.Itoa(port)+"/login", nil)
		if resp, err := hc.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			sum := sha256.Sum256(resp.TLS.PeerCertificates[0].Raw)
			page, served = string(b), hex.EncodeToString(sum[:])
			break
		}
		time.Sleep(2 * time.Second)
	}
	if !strings.Contains(page, "<form") {
		t.Errorf("the web UI's login page through the port forward: %.300q", page)
	}
	if served == "" || !strings.Contains(strings.ToLower(strings.ReplaceAll(fp, ":", "")), served) {
		t.Fatalf("the certificate served has SHA-256 %s; the fingerprint file says %q", served, fp)
	}

	// A firmware upload through the unprivileged UI still writes the
	// card (configd does): the image's own .fgup goes into slot b, armed
	// but not rebooted into. A wrong password writes nothing.
	box := &remote.Box{URL: "https://127.0.0.1:" + strconv.Itoa(port), Fingerprint: served, User: "admin", Password: password}
	if err := box.Login(ctx); err != nil {
		t.Fatal(err)
	}
	// The ports on the dashboard are netd's answer on its web socket (the
	// UI reads no /sys/class/net): the qemu board's eth0 and eth1, with
	// the LAN's address, and no problem reading them.
	var dash struct {
		Interfaces []struct {
			Name      string   `json:"name"`
			State     string   `json:"state"`
			Addresses []string `json:"addresses"`
		} `json:"interfaces"`
		Problems []string `json:"problems"`
	}
	if err := box.Get(ctx, "/api/v1/dashboard", &dash); err != nil {
		t.Fatal(err)
	}
	lanShown := false
	for _, l := range dash.Interfaces {
		if l.Name == "eth1" && slices.Contains(l.Addresses, "192.168.1.1/24") {
			lanShown = true
		}
	}
	if !lanShown || strings.Contains(strings.Join(dash.Problems, "\n"), "interfaces") {
		t.Errorf("the dashboard's interfaces %+v, problems %q; want eth1 with 192.168.1.1/24 from netd", dash.Interfaces, dash.Problems)
	}

	wrong := *box
	wrong.Password = "not-the-password"
	if _, err := wrong.Upload(ctx, c.upgradeFile, false, false, nil); err == nil || !strings.Contains(err.Error(), "Wrong password") {
		t.Errorf("upload with a wrong password: %v", err)
	}
	plan, err := box.Upload(ctx, c.upgradeFile, false, false, nil)
	if err != nil || plan.Target != "b" || plan.Version != "vmtest" {
		t.Fatalf("upload through the web UI: %+v, %v", plan, err)
	}
	var view struct {
		Slots []struct {
			Name     string `json:"name"`
			Manifest *struct {
				Version string `json:"version"`
			} `json:"manifest"`
		} `json:"slots"`
		Error string `json:"error"`
	}
	if err := box.Get(ctx, "/api/v1/upgrade", &view); err != nil || len(view.Slots) != 2 || view.Slots[1].Manifest == nil || view.Slots[1].Manifest.Version != "vmtest" {
		t.Errorf("slots after the upload: %+v, %v; want slot b holding vmtest", view, err)
	}

	// The same firmware as a build from before database format 3 would
	// describe itself (no extension after its manifest): configd, on the
	// card, rewrites the database in format 2 before arming slot b, and
	// then refuses every change until the reboot.
	old := filepath.Join(t.TempDir(), "format2.fgup")
	if err := withoutExtension(c.upgradeFile, old); err != nil {
		t.Fatal(err)
	}
	if p, err := box.Inspect(ctx, old, false); err != nil || !strings.Contains(p.Config, "reads configuration database format 2 only") {
		t.Fatalf("inspect of a format 2 firmware: %+v, %v", p, err)
	}
	if plan, err := box.Upload(ctx, old, false, false, nil); err != nil || plan.Target != "b" {
		t.Fatalf("upload of a format 2 firmware: %+v, %v", plan, err)
	}
	c.TypeLine("exit")
	c.Expect(time.Minute, "> ")
	c.TypeLine("set system.hostname after-handoff")
	c.Expect(time.Minute, "handed to the firmware in the other slot")
	c.Expect(time.Minute, "> ")
	c.TypeLine("shell")
	c.Expect(time.Minute, "$ ")
	if out := c.run("ls /cfg"); !strings.Contains(out, "config.db") || strings.Contains(out, "config.db.format2") {
		t.Fatalf("/cfg after the hand-off: %q", out)
	}

	// The console (root) reaches netd's socket in netd's directory, and
	// netd shows the WAN lease it took as its own user.
	c.TypeLine("exit")
	c.Expect(time.Minute, "> ")
	c.TypeLine("show interfaces")
	c.Expect(time.Minute, "DHCP lease 10.0.2.15/24")
	c.Expect(time.Minute, "> ")
}

// withoutExtension writes the unsigned upgrade file src to dst with its
// manifest's extension left out.
func withoutExtension(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	h, err := imagefile.ReadHeader(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if h.Signer != nil {
		return fmt.Errorf("%s is signed; the test re-encodes unsigned files only", src)
	}
	m := h.Manifest
	m.Extension = nil
	hdr, err := imagefile.EncodeHeader(m, nil)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, append(hdr, b[len(h.Raw):]...), 0o644)
}
