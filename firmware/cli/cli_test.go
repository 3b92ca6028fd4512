package cli

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
)

const prompt = "admin@fg> "

func newCLI(t *testing.T) (*terminal, *configdEnv) {
	t.Helper()
	cd := startConfigd(t)
	term := startCLI(t, Options{User: "admin", Hostname: "fg", ConfigdSocket: cd.socket,
		SupervisorSocket: cd.dir + "/none.sock", IkedSocket: cd.dir + "/none.sock", NetdSocket: cd.dir + "/none.sock"}, runCLI)
	term.expect(prompt)
	return term, cd
}

// addTunnel types the set commands of a complete tunnel.
func addTunnel(term *terminal, name string) {
	for _, l := range []string{
		"set tunnels." + name + ".remote_address 192.0.2.1",
		"set tunnels." + name + ".psk a-very-long-preshared-key",
		"set tunnels." + name + ".local_subnets 192.168.1.0/24",
		"set tunnels." + name + ".remote_subnets 10.2.0.0/16 10.3.0.0/16",
	} {
		term.send(l + "\r")
		term.expect(prompt)
	}
}

func TestSetCommitShowConfigHistory(t *testing.T) {
	term, cd := newCLI(t)
	addTunnel(term, "branch")

	term.send("show diff\r")
	got := term.expect(prompt)
	for _, want := range []string{"+ set tunnels branch remote_address 192.0.2.1", "+ set tunnels branch psk <redacted>"} {
		if !strings.Contains(got, want) {
			t.Errorf("show diff lacks %q:\n%s", want, got)
		}
	}
	term.send("commit first tunnel\r")
	if got := term.expect(prompt); !strings.Contains(got, "Committed revision 2.") {
		t.Errorf("commit said:\n%s\nwant Committed revision 2.", got)
	}
	running, rev := cd.store.Running()
	if tun := running.Tunnel("branch"); rev != 2 || tun == nil || tun.RemoteAddress.String() != "192.0.2.1" || len(tun.RemoteSubnets) != 2 {
		t.Fatalf("running revision %d tunnel %+v, want revision 2 with the tunnel as set", rev, tun)
	}

	term.send("show config running tunnels.branch\r")
	got = term.expect(prompt)
	if !strings.Contains(got, "set tunnels branch remote_subnets 10.3.0.0/16") || strings.Contains(got, "set system") {
		t.Errorf("show config running tunnels.branch:\n%s\nwant only the tunnel's lines", got)
	}
	term.send("show history\r")
	got = term.expect(prompt)
	if !strings.Contains(got, "admin@console") || !strings.Contains(got, "first tunnel") {
		t.Errorf("show history:\n%s\nwant revision 2 by admin@console with its message", got)
	}
	term.send("commit\r")
	if got := term.expect(prompt); !strings.Contains(got, "Nothing to commit") {
		t.Errorf("commit without changes said:\n%s", got)
	}
}

func TestErrorsNamePathAndReason(t *testing.T) {
	term, _ := newCLI(t)
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"set tunnels.branch.vlan 1400", []string{"tunnels.branch.vlan", `unknown field "vlan"`, "remote_address"}},
		{"set interfaces.eth1.mtu abc", []string{"interfaces.eth1.mtu", `"abc" is not a whole number`}},
		{"set interfaces.eth1.addresses 10.0.0.1/99", []string{"interfaces.eth1.addresses", "10.0.0.1/99"}},
		{"set system.hostname", []string{"usage: set PATH VALUE"}},
		{"delete tunnels.nosuch", []string{"tunnels.nosuch", `no entry named "nosuch"`}},
		{"delete system", []string{"system", "cannot be deleted"}},
		{"rollback 99", []string{"no revision 99"}},
		{"rollback x", []string{`"x" is not a revision number`}},
		{"commit confirmed 0", []string{"0 minutes is not between 1 and 1440"}},
		{"commit confirmed soon", []string{`"soon" is not a number of minutes`}},
		{"confirm", []string{"no commit is waiting for confirmation"}},
		{"frobnicate", []string{`Unknown command "frobnicate". Type help`}},
		{"show nonsense", []string{"show nonsense: unknown; one of: status, interfaces"}},
		{`set system.hostname "unfinished`, []string{"unfinished or malformed quoted word"}},
		{"ipsec sideways x", []string{"usage: ipsec up|down TUNNEL"}},
	} {
		term.send(tc.line + "\r")
		got := term.expect(prompt)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s:\n%s\nwant %q in the answer", tc.line, got, w)
			}
		}
	}

	// An incomplete tunnel is refused at commit with every field's path,
	// in the form set takes.
	term.send("set tunnels.half.remote_address 192.0.2.9\r")
	term.expect(prompt)
	term.send("commit\r")
	got := term.expect(prompt)
	for _, w := range []string{"The configuration is not valid:", "tunnels.half.psk: missing pre-shared key",
		"tunnels.half.local_subnets: at least one local subnet is needed"} {
		if !strings.Contains(got, w) {
			t.Errorf("commit of an incomplete tunnel:\n%s\nwant %q", got, w)
		}
	}
}

func TestCompletion(t *testing.T) {
	term, _ := newCLI(t)
	addTunnel(term, "branch")
	for _, tc := range []struct {
		typed, want string
	}{
		{"se\t", prompt + "set "},
		{"set tun\t", prompt + "set tunnels."},
		{"set tunnels.\t", prompt + "set tunnels.branch."},
		{"set tunnels.branch.remote_ad\t", prompt + "set tunnels.branch.remote_address "},
		{"set tunnels.branch.start_action i\t", prompt + "set tunnels.branch.start_action initiate "},
		{"set tunnels.branch.enabled f\t", prompt + "set tunnels.branch.enabled false "},
		{"set sys\t", prompt + "set system."},
		{"set system.remote_syslog.po\t", prompt + "set system.remote_syslog.port "},
		{"show hi\t", prompt + "show history "},
		{"commit con\t", prompt + "commit confirmed "},
		{"delete tunnels.branch.remote_subnets.\t", prompt + "delete tunnels.branch.remote_subnets."},
	} {
		term.send(tc.typed)
		term.expect(tc.want)
		term.send("\x03\r") // clear the line, and a fresh prompt
		term.expect(prompt)
	}

	// Ambiguous with nothing more in common: the choices are listed and
	// the line is drawn again below them.
	// The common prefix first, then the list on the next Tab.
	term.send("show t\t")
	term.expect(prompt + "show tunnel")
	term.send("\t")
	if got := term.expect("tunnels\n"); !strings.Contains(got, "tunnel ") {
		t.Errorf("show tunnel<Tab> listed:\n%s\nwant tunnel and tunnels", got)
	}
	term.expect(prompt + "show tunnel")
	term.send("\x03\r")
	term.expect(prompt)
	term.send("set tunnels.branch.start_action \t")
	if got := term.expect("respond\n"); !strings.Contains(got, "initiate") || !strings.Contains(got, "on-traffic") {
		t.Errorf("start_action <Tab> listed:\n%s\nwant initiate, respond, on-traffic", got)
	}
	term.expect(prompt + "set tunnels.branch.start_action ")
	term.send("\x03\r")
	term.expect(prompt)
	// Paths are listed by their last element.
	term.send("set tunnels.branch.lo\t")
	term.expect(prompt + "set tunnels.branch.local_")
	term.send("\t")
	if got := term.expect("local_subnets\n"); !strings.Contains(got, "local_address") || !strings.Contains(got, "local_cert") || strings.Contains(got, "tunnels.branch.local_id") {
		t.Errorf("tunnels.branch.lo<Tab> listed:\n%s\nwant local_address, local_cert, local_id, local_subnets", got)
	}
	term.expect(prompt + "set tunnels.branch.local_")
	term.send("\x03\r")
	term.expect(prompt)
	// Completion followed by Enter runs the completed line.
	term.send("show dif\t\r")
	if got := term.expect(prompt); !strings.Contains(got, "+ set tunnels branch") {
		t.Errorf("show dif<Tab><Enter>:\n%s", got)
	}
}

func TestHistoryRecallsLines(t *testing.T) {
	term, _ := newCLI(t)
	term.send("set system.hostname first\r")
	term.expect(prompt)
	term.send("show diff\r")
	term.expect("+ set system hostname first")
	term.expect(prompt)
	// Up twice is the set; edit its last word with backspaces. The set
	// prints nothing, so the show diff typed after it (kept while the set
	// runs) tells when it is done.
	term.send("\x1b[A\x1b[A")
	term.expect(prompt + "set system.hostname first")
	term.send("\x7f\x7f\x7f\x7f\x7fsecond\rshow diff\r")
	term.expect("+ set system hostname second")
	term.expect(prompt)
	// ^P is Up too; Down (^N) comes back.
	term.send("\x10\x10")
	term.expect(prompt + "set system.hostname second")
	term.send("\x0e")
	term.expect(prompt + "show diff")
	term.send("\r")
	if got := term.expect(prompt); !strings.Contains(got, "+ set system hostname second") {
		t.Errorf("show diff recalled with ^P ^P ^N:\n%s", got)
	}
}

func TestRollback(t *testing.T) {
	term, cd := newCLI(t)
	term.send("set system.hostname one\r")
	term.expect(prompt)
	term.send("commit\r")
	term.expect("Committed revision 2.")
	term.expect(prompt)
	term.send("set system.hostname two\r")
	term.expect(prompt)
	term.send("commit\r")
	term.expect("Committed revision 3.")
	term.expect(prompt)
	term.send("rollback 2\r")
	if got := term.expect(prompt); !strings.Contains(got, "Revision 2 is running again, as revision 4.") {
		t.Errorf("rollback 2 said:\n%s", got)
	}
	if c, rev := cd.store.Running(); rev != 4 || c.System.Hostname != "one" {
		t.Errorf("after rollback: revision %d hostname %q, want 4 and one", rev, c.System.Hostname)
	}
	term.send("set system.hostname three\r")
	term.expect(prompt)
	term.send("discard\r")
	term.expect("Candidate discarded")
	term.expect(prompt)
	term.send("show diff\r")
	if got := term.expect(prompt); !strings.Contains(got, "No changes") {
		t.Errorf("show diff after discard:\n%s", got)
	}
}

func TestCommitConfirmed(t *testing.T) {
	term, cd := newCLI(t)
	term.send("set system.hostname risky\r")
	term.expect(prompt)
	// Without confirm it rolls back by itself. configd takes any window;
	// the CLI takes minutes, or a duration with a unit.
	term.send("commit confirmed 2s trying\r")
	got := term.expect("> ")
	if !strings.Contains(got, "Committed revision 2. It is rolled back in 2s unless you type confirm.") ||
		!strings.Contains(got, "admin@fg [confirm 2 in 0:0") {
		t.Errorf("commit confirmed said:\n%s\nwant the window and a countdown in the prompt", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, _ := cd.store.Running()
		if c.System.Hostname != "risky" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the unconfirmed commit was not rolled back within 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	term.send("show history\r")
	if got := term.expect(prompt); !strings.Contains(got, "confirm-timeout") {
		t.Errorf("history after the timeout:\n%s\nwant a confirm-timeout revision", got)
	}

	// With confirm it stays.
	term.send("set system.hostname kept\r")
	term.expect(prompt)
	term.send("commit confirmed 1\r")
	term.expect("rolled back in 1m0s unless you type confirm")
	term.expect("admin@fg [confirm 4 in ")
	term.send("confirm\r")
	if got := term.expect(prompt); !strings.Contains(got, "Revision 4 confirmed.") {
		t.Errorf("confirm said:\n%s", got)
	}
	if cd.store.Pending() != nil {
		t.Errorf("still pending after confirm: %+v", cd.store.Pending())
	}
	if c, _ := cd.store.Running(); c.System.Hostname != "kept" {
		t.Errorf("hostname %q after confirm, want kept", c.System.Hostname)
	}
}

func TestParseConfirmWindow(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"1", time.Minute, false},
		{"10", 10 * time.Minute, false},
		{"1440", 24 * time.Hour, false},
		{"1441", 0, true},
		{"0", 0, true},
		{"-3", 0, true},
		{"90s", 90 * time.Second, false},
		{"500ms", 0, true},
		{"25h", 0, true},
		{"x", 0, true},
	} {
		got, err := parseConfirmWindow(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseConfirmWindow(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestLineEndings(t *testing.T) {
	term, _ := newCLI(t)
	for _, tc := range []struct{ name, enter string }{
		{"CR", "\r"}, {"LF", "\n"}, {"CRLF", "\r\n"},
	} {
		term.send("show diff" + tc.enter)
		term.expect("No changes")
		term.expect(prompt)
		// Nothing more: a CRLF must not count as two Enters.
		if extra := term.quiet(300 * time.Millisecond); strings.Contains(extra, prompt) {
			t.Errorf("%s: an extra prompt after one command:\n%s", tc.name, extra)
		}
	}
	// A CRLF split across two writes is still one Enter.
	term.send("show diff\r")
	term.expect(prompt)
	term.send("\n")
	if extra := term.quiet(300 * time.Millisecond); strings.Contains(extra, prompt) {
		t.Errorf("split CRLF gave an extra prompt:\n%s", extra)
	}
}

func TestNoiseControlCharactersAndLongLines(t *testing.T) {
	term, _ := newCLI(t)
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 20000)
	for i := range noise {
		noise[i] = byte(rng.UintN(256))
		if noise[i] == 4 || noise[i] == '\r' || noise[i] == '\n' {
			noise[i] = 0x1b // no ^D (logout) or Enter in the noise: it would run it
		}
	}
	term.send(string(noise))
	term.send("\x03show diff\r")
	got := term.expect("No changes")
	if strings.Contains(got, "\x00") {
		t.Errorf("a NUL reached the screen")
	}
	term.expect(prompt)

	// An unterminated escape sequence followed by a command.
	term.send("\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13show diff\r")
	term.expect(prompt)

	// A line longer than the limit is refused as a whole.
	term.send("show diff " + strings.Repeat("x", 6000) + "\r")
	if got := term.expect(prompt); !strings.Contains(got, "longer than 4096 characters; nothing was run") {
		t.Errorf("a 6000-character line:\n%s", lastLines(got, 3))
	}
	// The limit is exact: 4096 characters run, one more does not.
	term.send("show config running " + strings.Repeat("y", maxLine-len("show config running ")) + "\r")
	if got := term.expect(prompt); !strings.Contains(got, "nothing is set there") {
		t.Errorf("a line of exactly %d characters:\n%s", maxLine, lastLines(got, 3))
	}
	term.send("show config running " + strings.Repeat("y", maxLine+1-len("show config running ")) + "\r")
	if got := term.expect(prompt); !strings.Contains(got, "nothing was run") {
		t.Errorf("a line of %d characters:\n%s", maxLine+1, lastLines(got, 3))
	}
	// Control characters inside a word are dropped by the editor or
	// refused as an unknown command, never run as something else.
	term.send("sh\x00o\x07w di\x1bOff\r")
	got = term.expect(prompt)
	if !strings.Contains(got, "No changes") && !strings.Contains(got, "Unknown") && !strings.Contains(got, "unknown") {
		t.Errorf("a line with control characters:\n%s", lastLines(got, 3))
	}
	// Invalid UTF-8 in a value.
	term.send("set system.hostname \xff\xfeab\xc3\r")
	term.expect(prompt)
	// The session still works.
	term.send("help\r")
	term.expect("factory-reset")
	term.expect(prompt)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func TestExitAndEOF(t *testing.T) {
	term, _ := newCLI(t)
	term.send("exit\r")
	if err := term.wait(); err != nil {
		t.Errorf("exit: Run returned %v, want nil", err)
	}
	term2, _ := newCLI(t)
	term2.send("\x04") // ^D on an empty line
	if err := term2.wait(); err == nil {
		t.Errorf("^D: Run returned nil, want end of input")
	}
}

func TestIdleTimeout(t *testing.T) {
	cd := startConfigd(t)
	term := startCLI(t, Options{Hostname: "fg", ConfigdSocket: cd.socket, IdleTimeout: 500 * time.Millisecond}, runCLI)
	term.expect(prompt)
	term.expect("Idle for 500ms: logged out.")
	if err := term.wait(); err == nil {
		t.Errorf("idle: Run returned nil, want the idle error")
	}
}

func TestPingLoopbackAndInterrupt(t *testing.T) {
	term, _ := newCLI(t)
	term.send("ping 127.0.0.1 2\r")
	got := term.expect(prompt)
	if !strings.Contains(got, "from 127.0.0.1: seq=1") || !strings.Contains(got, "2 sent, 2 received, 0% lost") {
		t.Errorf("ping 127.0.0.1 2:\n%s", got)
	}
	term.send("ping 127.0.0.1 20\r")
	term.expect("seq=1")
	start := time.Now()
	term.send("\x03")
	got = term.expect(prompt)
	if !strings.Contains(got, "Interrupted.") || time.Since(start) > 3*time.Second {
		t.Errorf("^C during ping (after %v):\n%s", time.Since(start), got)
	}
	// Typed ahead while the command ran: kept for the next prompt.
	term.send("ping 127.0.0.1 1\r")
	term.expect("seq=1")
	term.send("show diff\r")
	term.expect("No changes")
	term.send("ping ::1 21\r")
	term.expect("count \"21\" is not a number from 1 to 20")
}

func TestFactoryResetAsksForTheWord(t *testing.T) {
	term, cd := newCLI(t)
	term.send("set system.hostname custom\r")
	term.expect(prompt)
	term.send("commit\r")
	term.expect(prompt)
	term.send("factory-reset\r")
	term.expect("Type factory-reset to go on")
	term.send("yes\r")
	term.expect("Cancelled.")
	if c, _ := cd.store.Running(); c.System.Hostname != "custom" {
		t.Fatalf("a wrong word reset the box")
	}
	term.send("factory-reset\r")
	term.expect("Type factory-reset to go on")
	term.send("factory-reset\r")
	term.expect("asks for a new admin password")
	if err := term.wait(); err != nil {
		t.Errorf("Run after factory reset: %v, want nil (the session ends)", err)
	}
	if c, _ := cd.store.Running(); c.System.Hostname != config.Default().System.Hostname {
		t.Errorf("hostname %q after factory reset", c.System.Hostname)
	}
}

func TestShellHookGetsCookedTerminal(t *testing.T) {
	cd := startConfigd(t)
	ran := make(chan struct{}, 1)
	term := startCLI(t, Options{Hostname: "fg", ConfigdSocket: cd.socket, Shell: func(ctx context.Context) error {
		ran <- struct{}{}
		return nil
	}}, runCLI)
	term.expect(prompt)
	term.send("shell\r")
	term.expect(prompt)
	select {
	case <-ran:
	default:
		t.Fatal("shell did not call the hook")
	}
}

func TestShowWithoutServices(t *testing.T) {
	term, _ := newCLI(t)
	term.send("show status\r")
	got := term.expect(prompt)
	for _, w := range []string{"configuration: revision 1, stored on card", "the supervisor is not answering", "iked is not answering"} {
		if !strings.Contains(got, w) {
			t.Errorf("show status without services:\n%s\nwant %q", got, w)
		}
	}
	term.send("show interfaces\r")
	if got := term.expect(prompt); !strings.Contains(got, "netd is not answering") {
		t.Errorf("show interfaces without netd:\n%s", got)
	}
	term.send("show board\r")
	if got := term.expect(prompt); !strings.Contains(got, "the board is not known") {
		t.Errorf("show board with no board:\n%s", got)
	}
}

func TestContextEndsSession(t *testing.T) {
	cd := startConfigd(t)
	master, slave := openPTY(t)
	defer master.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, slave, Options{ConfigdSocket: cd.socket}) }()
	go func() { // drain the output
		buf := make([]byte, 1024)
		for {
			if _, err := master.Read(buf); err != nil {
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run returned nil after its context ended, want the context's error")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not end within 3s of its context")
	}
}

func TestConfigdDown(t *testing.T) {
	term := startCLI(t, Options{Hostname: "fg", ConfigdSocket: shortDir(t) + "/configd.sock"}, runCLI)
	term.expect(prompt)
	term.send("set system.hostname x\r")
	if got := term.expect(prompt); !strings.Contains(got, "configd.sock is not answering (connect: no such file or directory)") {
		t.Errorf("set with configd down:\n%s", got)
	}
}

func TestPagerOnAShortTerminal(t *testing.T) {
	cd := startConfigd(t)
	term := startCLI(t, Options{Hostname: "fg", ConfigdSocket: cd.socket, Height: 8}, runCLI)
	term.expect(prompt)
	// The default configuration's text (14 lines) is longer than a screen.
	term.send("show config\r")
	got := term.expect("--More--")
	if n := strings.Count(got, "\n"); n != 8 {
		t.Errorf("first page ends after %d line breaks, want 8 (the command's line and 7 lines, 8 minus the prompt line):\n%s", n, got)
	}
	term.send("\r") // one more line
	term.expect("--More--")
	term.send("q")
	term.expect(prompt)
	// The whole text, page by page.
	term.send("show config\r")
	for {
		term.expect("--More--")
		term.send(" ")
		if strings.Contains(term.quiet(200*time.Millisecond), prompt) {
			break
		}
	}
	// ^C stops it too.
	term.send("show config\r")
	term.expect("--More--")
	term.send("\x03")
	term.expect(prompt)
	term.send("show diff\r")
	term.expect("No changes")
}

// A route tunnel and its route typed at the console, as docs/tunnels.md
// shows them, commit and read back.
func TestRouteTunnelAtTheConsole(t *testing.T) {
	term, cd := newCLI(t)
	for _, l := range []string{
		"set tunnels.aws1.mode route",
		"set tunnels.aws1.interface ipsec0",
		"set tunnels.aws1.remote_address 203.0.113.10",
		"set tunnels.aws1.psk a-very-long-preshared-key",
		"set tunnels.aws1.inner_addresses 169.254.10.2/30",
		"set tunnels.aws1.mtu 1399",
		"set routes.vpc.destination 172.31.0.0/16",
		"set routes.vpc.interface ipsec0",
		"set routes.vpc.metric 100",
	} {
		term.send(l + "\r")
		if got := term.expect(prompt); strings.Contains(got, "rror") || strings.Contains(got, "unknown") {
			t.Fatalf("%s:\n%s", l, got)
		}
	}
	term.send("commit aws\r")
	if got := term.expect(prompt); !strings.Contains(got, "Committed revision 2.") {
		t.Fatalf("commit said:\n%s", got)
	}
	running, _ := cd.store.Running()
	tun := running.Tunnel("aws1")
	if tun == nil || !tun.IsRoute() || tun.IfID() != 1 || tun.MTU != 1399 || len(running.Routes) != 1 || running.Routes[0].Interface != "ipsec0" {
		t.Fatalf("running tunnel %+v, routes %+v", tun, running.Routes)
	}
	term.send("show config running tunnels.aws1\r")
	got := term.expect(prompt)
	for _, want := range []string{"set tunnels aws1 mode route", "set tunnels aws1 interface ipsec0", "set tunnels aws1 inner_addresses 169.254.10.2/30"} {
		if !strings.Contains(got, want) {
			t.Errorf("show config running tunnels.aws1 lacks %q:\n%s", want, got)
		}
	}
	term.send("set tunnels.aws1.interface vti0\r")
	term.expect(prompt)
	term.send("commit\r")
	if got := term.expect(prompt); !strings.Contains(got, "tunnels.aws1.interface") || !strings.Contains(got, "is not ipsecN") {
		t.Errorf("commit with interface vti0 said:\n%s", got)
	}
}
