package cli

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestIsSecretPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"tunnels.branch.psk", true},
		{"tunnels.not-yet-there.psk", true},
		{"tunnels.branch.remote_address", false},
		{"tunnels.branch", false},
		{"tunnels.branch.psk.x", false},
		{"system.hostname", false},
		{"psk", false},
		{"", false},
		{"tunnels..psk", false},
	} {
		if got := isSecretPath(tc.path); got != tc.want {
			t.Errorf("isSecretPath(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

func TestRedactLine(t *testing.T) {
	for _, tc := range []struct {
		line, want string
	}{
		{"set tunnels.branch.psk hunter2", "set tunnels.branch.psk <secret>"},
		{"  set   tunnels.branch.psk   hunter2  ", "set tunnels.branch.psk <secret>"},
		{`set tunnels.branch.psk "two words"`, "set tunnels.branch.psk <secret>"},
		{`set tunnels.branch.psk "unfinished quote`, "set tunnels.branch.psk <secret>"},
		{`set "tunnels.branch.psk" "unfinished`, "set tunnels.branch.psk <secret>"},
		{"set tunnels.branch.psk several words of it", "set tunnels.branch.psk <secret>"},
		// Nothing secret on the line: kept as typed.
		{"set tunnels.branch.psk", "set tunnels.branch.psk"},
		{"set tunnels.branch.remote_address 192.0.2.1", "set tunnels.branch.remote_address 192.0.2.1"},
		{"show config candidate tunnels.branch.psk", "show config candidate tunnels.branch.psk"},
		{"delete tunnels.branch.psk", "delete tunnels.branch.psk"},
		{"", ""},
	} {
		if got := redactLine(tc.line); got != tc.want {
			t.Errorf("redactLine(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestHistoryKeepsNewestAndSkipsRepeats(t *testing.T) {
	h := newHistory(3)
	for _, l := range []string{"a", "", "b", "b", "set tunnels.x.psk s3cret", "c"} {
		h.Add(l)
	}
	var got []string
	for i := range h.Len() {
		got = append(got, h.At(i))
	}
	want := []string{"c", "set tunnels.x.psk <secret>", "b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("history newest first = %q, want %q", got, want)
	}
}

// candidatePSK reads the PSK of a tunnel from configd, as the box will use it.
func candidatePSK(t *testing.T, cd *configdEnv, tunnel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := cd.client.Candidate(ctx)
	if err != nil {
		t.Fatalf("configd candidate: %v", err)
	}
	tun := c.Config.Tunnel(tunnel)
	if tun == nil {
		t.Fatalf("the candidate has no tunnel %q", tunnel)
	}
	return tun.PSK.Reveal()
}

// rawOutput is every byte the CLI wrote, escape sequences and all.
func (c *terminal) rawOutput() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.out)
}

func TestSecretPromptAndHistory(t *testing.T) {
	term, cd := newCLI(t)
	const (
		hidden   = "Hidden-PSK-7f3a9c"
		mismatch = "Other-PSK-c0ffee"
		inline   = "Inline-PSK-51d2e8"
		recalled = "Recalled-PSK-9b8a77"
	)

	// A bare set on the secret asks twice, without echo.
	term.send("set tunnels.branch.psk\r")
	term.expect("PSK: ")
	term.send(hidden + "\r")
	term.expect("Repeat: ")
	term.send(hidden + "\r")
	term.expect("PSK set in the candidate.")
	term.expect(prompt)
	if got := candidatePSK(t, cd, "branch"); got != hidden {
		t.Errorf("after the hidden prompt configd has PSK %q, want %q", got, hidden)
	}

	// Two answers that differ set nothing.
	term.send("set tunnels.branch.psk\r")
	term.expect("PSK: ")
	term.send(mismatch + "\r")
	term.expect("Repeat: ")
	term.send(hidden + "\r")
	term.expect("the two do not match; nothing was set")
	term.expect(prompt)
	if got := candidatePSK(t, cd, "branch"); got != hidden {
		t.Errorf("after answers that differ configd has PSK %q, want it unchanged (%q)", got, hidden)
	}
	// Up recalls the bare set: the answers never entered the history.
	term.send("\x1b[A")
	term.expect(prompt + "set tunnels.branch.psk\n")
	term.send("\x03\r")
	term.expect(prompt)

	// Inline: set, with a note, and kept in the history without the value.
	term.send("set tunnels.branch.psk " + inline + "\r")
	term.expect("Note: a value typed after the path is shown on the screen")
	term.expect(prompt)
	if got := candidatePSK(t, cd, "branch"); got != inline {
		t.Errorf("after the inline set configd has PSK %q, want %q", got, inline)
	}
	term.send("\x1b[A")
	got := term.expect(prompt + "set tunnels.branch.psk <secret>")
	if strings.Contains(got, inline) {
		t.Errorf("Up after the inline set showed the value:\n%s", got)
	}
	// The recalled line, run, asks rather than setting the PSK to the mark.
	term.send("\r")
	term.expect("PSK: ")
	term.send(recalled + "\r")
	term.expect("Repeat: ")
	term.send(recalled + "\r")
	term.expect("PSK set in the candidate.")
	term.expect(prompt)
	if got := candidatePSK(t, cd, "branch"); got != recalled {
		t.Errorf("after the recalled line configd has PSK %q, want %q", got, recalled)
	}

	// A second inline set is not told again.
	term.send("set tunnels.branch.psk " + inline + "\r")
	term.expect(prompt)

	// show masks it.
	term.send("show config candidate tunnels.branch.psk\r")
	if got := term.expect(prompt); !strings.Contains(got, "set tunnels branch psk <redacted>") {
		t.Errorf("show config candidate tunnels.branch.psk:\n%s\nwant the PSK as <redacted>", got)
	}
	term.send("show diff\r")
	if got := term.expect(prompt); !strings.Contains(got, "+ set tunnels branch psk <redacted>") {
		t.Errorf("show diff:\n%s\nwant the PSK as <redacted>", got)
	}

	// Walk the whole history: the inline value is nowhere in it.
	term.send(strings.Repeat("\x1b[A", 12))
	time.Sleep(300 * time.Millisecond)
	term.send("\x03\r")
	term.expect(prompt)

	raw, screen := term.rawOutput(), term.screen()
	for _, secret := range []string{hidden, mismatch, recalled} {
		if strings.Contains(raw, secret) || strings.Contains(raw, secret[len(secret)-6:]) {
			t.Errorf("%q was typed at the hidden prompt, yet the terminal output holds it", secret)
		}
	}
	// Typed inline twice, so echoed twice; the history walk adds none.
	if n := strings.Count(raw, inline); n != 2 {
		t.Errorf("the inline PSK is in the output %d times, want 2 (its two echoes)", n)
	}
	if n := strings.Count(screen, "Note: a value typed after the path"); n != 1 {
		t.Errorf("the inline note was shown %d times, want once", n)
	}
}
