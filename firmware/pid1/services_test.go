package pid1

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/internal/paths"
	"golang.org/x/sys/unix"
)

func TestServiceTableGivesConfigdTheBoard(t *testing.T) {
	for _, tc := range []struct {
		board string
		want  []string
	}{
		{"alix2d13", []string{"configd", "-web-group", "443", "-read-group", "501", "-redacted-group", "503", "-board", "alix2d13"}},
		{"unknown", []string{"configd", "-web-group", "443", "-read-group", "501", "-redacted-group", "503", "-board", "unknown"}},
		{"", []string{"configd", "-web-group", "443", "-read-group", "501", "-redacted-group", "503"}},
	} {
		var got []string
		for _, s := range serviceTable("/bbin/flashgate", consoleSpec{Device: "ttyS0", Baud: 38400, Board: tc.board}, webListeners{}) {
			if s.Name == "configd" {
				got = s.Args
			}
		}
		if i := slices.Index(got, HostdMark); i >= 0 {
			got = got[:i] // hostd's, TestServiceTableGivesHostdTheAppliancePaths
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("board %q: configd's own args %q, want %q", tc.board, got, tc.want)
		}
	}
}

// iked parses the WAN's packets: it runs as its own user with the network
// capabilities it needs and no other, reads the configuration through
// configd's read-only socket (not the full one, which can change it), and
// serves its API from its own directory.
func TestServiceTableRunsIkedUnprivileged(t *testing.T) {
	for _, s := range serviceTable("/bbin/flashgate", consoleSpec{}, webListeners{}) {
		if s.Name != "iked" {
			continue
		}
		if s.User == nil || s.User.UID == 0 || s.User.UID == webUIUID {
			t.Fatalf("iked runs as %+v; want its own user", s.User)
		}
		caps := slices.Clone(s.User.Caps)
		slices.Sort(caps)
		if want := []uintptr{unix.CAP_NET_BIND_SERVICE, unix.CAP_NET_ADMIN, unix.CAP_NET_RAW}; !slices.Equal(caps, want) {
			t.Errorf("iked keeps capabilities %v; want exactly %v", caps, want)
		}
		if i := slices.Index(s.Args, "-configd"); i < 0 || s.Args[i+1] != paths.ConfigdReadSocket {
			t.Errorf("iked args %q; want -configd %s", s.Args, paths.ConfigdReadSocket)
		}
		if i := slices.Index(s.Args, "-socket"); i < 0 || filepath.Dir(s.Args[i+1]) != paths.IkedRunDir {
			t.Errorf("iked args %q; want its socket in %s", s.Args, paths.IkedRunDir)
		}
		// Not the web UI's group: that one opens configd-web.sock, which
		// changes the configuration.
		if slices.Contains(s.User.Groups, webUIGID) || s.User.GID == webUIGID {
			t.Errorf("iked is in the web UI's group %d: %+v", webUIGID, s.User)
		}
		// iked tunes its own collector (ipsec/iked/gc.go) unless the
		// environment sets GOGC, as the other services' does.
		for _, e := range s.Env {
			if strings.HasPrefix(e, "GOGC=") || strings.HasPrefix(e, "GOMEMLIMIT=") {
				t.Errorf("iked's environment sets %s, which overrides its own garbage collector settings", e)
			}
		}
		return
	}
	t.Error("no iked in the service table")
}

// netd parses DHCP and NTP from the network: it runs as its own user with
// the network capabilities and the clock's and no other, reads the
// configuration without secrets, and keeps its socket and the resolver
// file in its own directory. It leaves any resolver file alone unless told
// (so that a netd run by hand or by a test cannot rewrite a host's
// resolver): the appliance's table must tell it, or the box never learns
// its DNS servers.
func TestServiceTableRunsNetdUnprivileged(t *testing.T) {
	for _, s := range serviceTable("/bbin/flashgate", consoleSpec{}, webListeners{}) {
		if s.Name != "netd" {
			continue
		}
		if s.User == nil || s.User.UID == 0 || s.User.UID == webUIUID || s.User.UID == ikedUID {
			t.Fatalf("netd runs as %+v; want its own user", s.User)
		}
		caps := slices.Clone(s.User.Caps)
		slices.Sort(caps)
		if want := []uintptr{unix.CAP_NET_BIND_SERVICE, unix.CAP_NET_ADMIN, unix.CAP_NET_RAW, unix.CAP_SYS_TIME}; !slices.Equal(caps, want) {
			t.Errorf("netd keeps capabilities %v; want exactly %v", caps, want)
		}
		// Only the group of its socket for the web UI: not the web UI's
		// own (configd-web.sock changes the configuration) nor iked's API.
		if !slices.Equal(s.User.Groups, []uint32{netdWebGID}) {
			t.Errorf("netd is in the groups %v; want only %d (its socket for the web UI)", s.User.Groups, netdWebGID)
		}
		for flag, want := range map[string]string{"-configd": paths.ConfigdRedactedSocket, "-socket": paths.NetdSocket,
			"-resolv-conf": paths.NetdResolvConf} {
			if i := slices.Index(s.Args, flag); i < 0 || i+1 >= len(s.Args) || s.Args[i+1] != want {
				t.Errorf("netd args %q, want %s %s", s.Args, flag, want)
			}
		}
		for _, p := range []string{paths.NetdSocket, paths.NetdResolvConf} {
			if filepath.Dir(p) != paths.NetdRunDir {
				t.Errorf("%s is not in netd's directory %s", p, paths.NetdRunDir)
			}
		}
		// netd serves the web UI its links on a socket of their own, in
		// its directory, for netdWebGID only (the web UI reads no
		// /sys/class/net itself).
		if i := slices.Index(s.Args, "-web-socket"); i < 0 || i+1 >= len(s.Args) || s.Args[i+1] != paths.NetdWebSocket || filepath.Dir(paths.NetdWebSocket) != paths.NetdRunDir {
			t.Errorf("netd args %q, want -web-socket %s in %s", s.Args, paths.NetdWebSocket, paths.NetdRunDir)
		}
		if i := slices.Index(s.Args, "-web-group"); i < 0 || i+1 >= len(s.Args) || s.Args[i+1] != strconv.Itoa(netdWebGID) {
			t.Errorf("netd args %q, want -web-group %d", s.Args, netdWebGID)
		}
		return
	}
	t.Error("no netd in the service table")
}

// /etc/resolv.conf becomes a link to netd's file, whatever was there, and
// making it again changes nothing.
func TestLinkResolvConf(t *testing.T) {
	dir := t.TempDir()
	link, target := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "netd", "resolv.conf")
	if err := os.WriteFile(link, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := linkResolvConf(link, target); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(link); err != nil || got != target {
			t.Fatalf("%s links to %q (%v), want %s", link, got, err, target)
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("nameserver 10.0.2.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(link); err != nil || string(b) != "nameserver 10.0.2.3\n" {
		t.Errorf("reading through the link: %q (%v)", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%s holds %d entries after linking, want the link and netd's directory", dir, len(entries))
	}
}

// hostd changes only what its flags name (so that a hostd started by a
// test cannot rename the host): the appliance's table must name all of
// it, and the console speed only when there is a console getty. It runs
// in configd's process, its flags after HostdMark, so that it restarts
// with configd.
func TestServiceTableGivesHostdTheAppliancePaths(t *testing.T) {
	for _, tc := range []struct {
		console consoleSpec
		want    []string
	}{
		{consoleSpec{Device: "ttyS0", Baud: 38400}, []string{"-configd", "/run/flashgate/configd.sock",
			"-supervisor", supervisor.SocketPath, "-hostname", "-localtime", "/etc/localtime", "-console-baud", "38400"}},
		{consoleSpec{}, []string{"-configd", "/run/flashgate/configd.sock",
			"-supervisor", supervisor.SocketPath, "-hostname", "-localtime", "/etc/localtime"}},
	} {
		var configd *supervisor.Service
		for _, s := range serviceTable("/bbin/flashgate", tc.console, webListeners{}) {
			if s.Name == "hostd" {
				t.Errorf("console %+v: hostd is a service of its own: %q", tc.console, s.Args)
			}
			if s.Name == "configd" {
				configd = &s
			}
		}
		if configd == nil {
			t.Fatal("no configd in the service table")
		}
		i := slices.Index(configd.Args, HostdMark)
		if i < 0 {
			t.Fatalf("console %+v: configd's args %q hold no %s: no hostd runs", tc.console, configd.Args, HostdMark)
		}
		if configd.Args[0] != "configd" || slices.Contains(configd.Args[1:i], "-configd") {
			t.Errorf("console %+v: configd's own args %q", tc.console, configd.Args[:i])
		}
		if got := configd.Args[i+1:]; !slices.Equal(got, tc.want) {
			t.Errorf("console %+v: hostd args %q, want %q", tc.console, got, tc.want)
		}
		if configd.Restart != supervisor.RestartAlways {
			t.Errorf("configd (and hostd) restart %v; want restarted always", configd.Restart)
		}
	}
}

// The boot order is a readiness contract (issue 17): configd first; the
// console once configd is ready; netd, iked and the web UI once the
// console shows its prompt, so that on one slow CPU the admin's prompt
// comes first. Every wait is bounded, the console's well within the
// others', so that a broken configd leaves a console first and then the
// rest. Without a console getty the others wait for configd only.
func TestServiceTableStartsTheConsoleFirst(t *testing.T) {
	for _, tc := range []struct {
		console consoleSpec
		after   []string
	}{
		{consoleSpec{Device: "ttyS0", Baud: 115200}, []string{"configd", "console"}},
		{consoleSpec{}, []string{"configd"}},
	} {
		table := serviceTable("/bbin/flashgate", tc.console, webListeners{})
		if _, err := supervisor.New(supervisor.Config{Services: table, Conditions: []string{modulesLoaded}}); err != nil {
			t.Fatalf("console %+v: the table does not validate: %v", tc.console, err)
		}
		byName := map[string]supervisor.Service{}
		for _, s := range table {
			byName[s.Name] = s
		}
		if cd := byName["configd"]; !cd.NotifiesReady || len(cd.After) != 0 {
			t.Errorf("configd: notifies %v, after %q; want it to notify its readiness and wait for nothing", cd.NotifiesReady, cd.After)
		}
		if con, ok := byName["console"]; ok != (tc.console.Device != "") {
			t.Errorf("console %+v: console getty in the table: %v", tc.console, ok)
		} else if ok && (!con.NotifiesReady || !slices.Equal(con.After, []string{"configd"}) || con.AfterWait != consoleWaitsForConfigd) {
			t.Errorf("console: notifies %v, after %q for %v; want it to notify, after configd for %v",
				con.NotifiesReady, con.After, con.AfterWait, consoleWaitsForConfigd)
		}
		for _, name := range []string{"netd", "iked", "webui"} {
			svc, ok := byName[name]
			if !ok {
				t.Errorf("no %s in the table", name)
				continue
			}
			if !slices.Equal(svc.After, tc.after) || svc.AfterWait != servicesWaitForConsole {
				t.Errorf("console %+v: %s after %q for %v; want after %q for %v", tc.console, name, svc.After, svc.AfterWait, tc.after, servicesWaitForConsole)
			}
		}
	}
	// With configd broken, the console gets its prompt (the supervisor's
	// wait, then the getty's own for configd's answer) before the
	// others stop waiting for it.
	if consoleWaitsForConfigd+15*time.Second >= servicesWaitForConsole {
		t.Errorf("the console waits %v for configd, and 15 s more itself; the others wait only %v", consoleWaitsForConfigd, servicesWaitForConsole)
	}
}

// The web UI runs as its own user with no capabilities: PID 1 binds its
// ports and hands them over as fds 3 and 4, and gives it the restricted
// sockets of configd and the supervisor.
func TestServiceTableRunsTheWebUIUnprivileged(t *testing.T) {
	web, err := openWebListeners("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	var webui *supervisor.Service
	for _, s := range serviceTable("/bbin/flashgate", consoleSpec{}, web) {
		if s.Name == "webui" {
			webui = &s
		}
	}
	if webui == nil {
		t.Fatal("no webui in the service table")
	}
	if webui.User == nil || webui.User.UID != 443 || webui.User.GID != 443 {
		t.Errorf("webui runs as %+v, want uid and gid 443", webui.User)
	} else if !slices.Equal(webui.User.Groups, []uint32{ikedAPIGID, netdWebGID}) {
		t.Errorf("webui's supplementary groups %v, want iked's API (%d) and netd's socket for it (%d)", webui.User.Groups, ikedAPIGID, netdWebGID)
	}
	if len(webui.ExtraFiles) != 2 || webui.ExtraFiles[0] != web.HTTPS || webui.ExtraFiles[1] != web.HTTP {
		t.Errorf("webui extra files %v, want the HTTPS and the HTTP listener", webui.ExtraFiles)
	}
	args := strings.Join(webui.Args, " ")
	for _, want := range []string{"-listen-fd 3", "-http-fd 4", "-configd /run/flashgate/configd-web.sock",
		"-supervisor " + supervisor.WebSocketPath, "-fingerprint-file /run/flashgate/webui/fingerprint"} {
		if !strings.Contains(args, want) {
			t.Errorf("webui args %q lack %q", args, want)
		}
	}
	// The listeners are real, bound sockets.
	for _, f := range web.All() {
		ln, err := net.FileListener(f)
		if err != nil {
			t.Fatalf("listener %s: %v", f.Name(), err)
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Errorf("dial the listener: %v", err)
		} else {
			c.Close()
		}
		ln.Close()
	}
	for _, s := range serviceTable("/bbin/flashgate", consoleSpec{}, webListeners{}) {
		if s.Name == "webui" && (len(s.ExtraFiles) != 0 || strings.Contains(strings.Join(s.Args, " "), "-listen-fd")) {
			t.Errorf("without listeners, webui gets %v and %q", s.ExtraFiles, s.Args)
		}
	}
}

func TestPrepareWebUIDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "flashgate", "webui")
	if err := prepareWebUIDirs(dir, 443, 443); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o700 || st.Uid != 443 || st.Gid != 443 {
		t.Errorf("%s: mode %v owner %d:%d, want 0700 443:443", dir, fi.Mode().Perm(), st.Uid, st.Gid)
	}
}
