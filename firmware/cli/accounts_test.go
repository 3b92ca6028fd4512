package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAccountsOnConfigd(t *testing.T) {
	cd := startConfigd(t)
	acc := NewAccounts(cd.socket)
	if acc.HasAdmin() {
		t.Fatal("a fresh configuration has an admin password")
	}
	if err := acc.SetPassword("admin", []byte("short")); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("SetPassword(short) = %v, want too short", err)
	}
	if err := acc.SetPassword("admin", []byte("correct horse battery")); err != nil {
		t.Fatalf("SetPassword: %v", err)
	}
	// Committed, so on the card: running has it, and it is a revision.
	running, rev := cd.store.Running()
	if a := running.Admin("admin"); a == nil || !a.VerifyPassword("correct horse battery") || rev != 2 {
		t.Fatalf("after SetPassword: revision %d admin %+v, want revision 2 with the password", rev, a)
	}
	if !acc.HasAdmin() {
		t.Error("HasAdmin is false after SetPassword")
	}
	for _, tc := range []struct {
		user, pass string
		want       bool
	}{
		{"admin", "correct horse battery", true},
		{"admin", "correct horse batterY", false},
		{"admin", "", false},
		{"root", "correct horse battery", false},
		{"", "", false},
	} {
		if got := acc.Verify(tc.user, []byte(tc.pass)); got != tc.want {
			t.Errorf("Verify(%q, %q) = %v, want %v", tc.user, tc.pass, got, tc.want)
		}
	}

	// Someone's half-done edit in the candidate is not committed along
	// with a password.
	if _, err := cd.client.Set(context.Background(), "", "system.hostname", "half-done"); err != nil {
		t.Fatal(err)
	}
	if err := acc.SetPassword("admin", []byte("another good one")); !errors.Is(err, ErrUncommitted) {
		t.Errorf("SetPassword with an edited candidate = %v, want ErrUncommitted", err)
	}
	if running, _ := cd.store.Running(); running.System.Hostname == "half-done" {
		t.Error("the candidate's edit was committed with the password")
	}
}

func TestAccountsWithoutConfigdFailClosed(t *testing.T) {
	acc := NewAccounts(shortDir(t) + "/none.sock")
	acc.Wait = 300 * time.Millisecond
	if !acc.HasAdmin() {
		t.Error("HasAdmin without configd = false; it must not offer a first password it cannot know is missing")
	}
	if acc.Verify("admin", []byte("whatever1")) {
		t.Error("Verify without configd accepted a password")
	}
	if err := acc.SetPassword("admin", []byte("whatever1")); err == nil {
		t.Error("SetPassword without configd succeeded")
	}
}

func TestPasswd(t *testing.T) {
	term, cd := newCLI(t)
	if err := NewAccounts(cd.socket).SetPassword("admin", []byte("old password")); err != nil {
		t.Fatal(err)
	}
	term.send("passwd\r")
	term.expect("Current password: ")
	term.send("wrong password\r")
	if got := term.expect(prompt); !strings.Contains(got, "not your current password") {
		t.Errorf("passwd with a wrong current password:\n%s", got)
	}
	term.send("passwd\r")
	term.expect("Current password: ")
	term.send("old password\r")
	term.expect("New password: ")
	term.send("short\r")
	term.expect("too short")
	term.expect("New password: ")
	term.send("new password\r")
	term.expect("Repeat password: ")
	term.send("new passwort\r")
	term.expect("do not match")
	term.expect("New password: ")
	term.send("new password\r")
	term.expect("Repeat password: ")
	term.send("new password\r")
	got := term.expect(prompt)
	if !strings.Contains(got, "Password changed and saved.") {
		t.Errorf("passwd:\n%s", got)
	}
	if strings.Contains(term.screen(), "new password") || strings.Contains(term.screen(), "old password") {
		t.Error("a password was echoed")
	}
	if acc := NewAccounts(cd.socket); !acc.Verify("admin", []byte("new password")) || acc.Verify("admin", []byte("old password")) {
		t.Error("after passwd the new password does not verify, or the old one still does")
	}
	// Passwords never enter the history.
	term.send("\x1b[A")
	term.expect(prompt + "passwd")
}

// A new password at the console comes only with every secret erased: the
// person at the serial port must not be able to log in and read the old
// keys and hashes (shell, export, the history).
func TestRecoverRestoresLANAccessAndPassword(t *testing.T) {
	cd := startConfigd(t)
	ctx := context.Background()
	// The admin locked themselves out: LAN port disabled, a rule that
	// drops everything, and nobody remembers the password.
	acc := NewAccounts(cd.socket)
	if err := acc.SetPassword("admin", []byte("forgotten password")); err != nil {
		t.Fatal(err)
	}
	for _, s := range [][]string{
		{"interfaces.eth1.enabled", "false"},
		{"firewall.rules.lockout.chain", "input"},
		{"firewall.rules.lockout.action", "drop"},
		{"firewall.rules.lockout.protocol", "any"},
		{"firewall.rules.lockout.enabled", "true"},
		{"tunnels.branch.remote_address", "192.0.2.1"},
		{"tunnels.branch.psk", "a-very-long-preshared-key"},
		{"tunnels.branch.local_subnets", "192.168.1.0/24"},
		{"tunnels.branch.remote_subnets", "10.2.0.0/16"},
	} {
		if _, err := cd.client.Set(ctx, "", s[0], s[1:]...); err != nil {
			t.Fatalf("set %v: %v", s, err)
		}
	}
	if _, err := cd.client.Commit(ctx, commitReq("lock myself out")); err != nil {
		t.Fatal(err)
	}
	// And an uncommitted edit is lying around.
	if _, err := cd.client.Set(ctx, "", "system.hostname", "half-done"); err != nil {
		t.Fatal(err)
	}

	term := startCLI(t, Options{ConfigdSocket: cd.socket, Board: "qemu"}, runRecover)
	term.expect("Choice: ")
	term.send("3\r")
	term.expect("Account [admin]: ")
	term.send("\r")
	term.expect("New password: ")
	term.send("brand new password\r")
	term.expect("Repeat password: ")
	term.send("brand new password\r")
	got := term.expect("Type erase to go on")
	if !strings.Contains(got, "192.168.1.1/24") {
		t.Errorf("recovery did not say what the LAN will be:\n%s", got)
	}
	if !strings.Contains(got, "every tunnel (branch)") {
		t.Errorf("recovery did not say which tunnels it erases:\n%s", got)
	}
	term.send("erase\r")
	got = term.expect("Done: ")
	if !strings.Contains(got, "Uncommitted changes in the candidate were discarded.") {
		t.Errorf("recovery did not say it discarded the candidate:\n%s", got)
	}
	if err := term.wait(); err != nil {
		t.Fatalf("Recover: %v", err)
	}

	running, _ := cd.store.Running()
	lan := running.Interface("eth1")
	if lan == nil || !lan.Enabled || len(lan.Addresses) != 1 || lan.Addresses[0].String() != "192.168.1.1/24" {
		t.Errorf("LAN after recovery: %+v, want eth1 enabled with 192.168.1.1/24", lan)
	}
	if len(running.Firewall.Rules) != 0 {
		t.Errorf("firewall rules after recovery: %+v, want none", running.Firewall.Rules)
	}
	if running.Tunnel("branch") != nil {
		t.Error("the tunnel and its pre-shared key survived a recovery that set a new password")
	}
	if len(running.System.Admins) != 1 || NewAccounts(cd.socket).Verify("admin", []byte("forgotten password")) {
		t.Errorf("admins after recovery: %d; the old password must not verify", len(running.System.Admins))
	}
	// Nothing in the history holds the old secrets.
	hist, err := cd.client.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		cfg, _, err := cd.client.Revision(ctx, h.Revision)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Tunnel("branch") != nil || len(cfg.System.Admins) > 1 {
			t.Errorf("revision %d (%s) still holds the old tunnel or accounts", h.Revision, h.Message)
		}
	}
	if len(hist) != 2 {
		t.Errorf("history after recovery: %d revisions, want 2 (the erase and the recovery)", len(hist))
	}
	if running.System.Hostname == "half-done" {
		t.Error("recovery committed the stray candidate edit")
	}
	if !NewAccounts(cd.socket).Verify("admin", []byte("brand new password")) {
		t.Error("the new password does not verify after recovery")
	}
	h, err := cd.client.History(ctx)
	if err != nil || h[0].Who != "recovery@console" || !strings.Contains(h[0].Message, "console recovery") {
		t.Errorf("newest revision %+v (%v), want one by recovery@console", h[0], err)
	}
}

// Restoring LAN access alone sets no password, so it keeps the secrets
// and everything but the interfaces and the firewall.
func TestRecoverLANOnlyKeepsTheRest(t *testing.T) {
	cd := startConfigd(t)
	ctx := context.Background()
	if err := NewAccounts(cd.socket).SetPassword("admin", []byte("kept password")); err != nil {
		t.Fatal(err)
	}
	for _, s := range [][]string{
		{"tunnels.branch.remote_address", "192.0.2.1"},
		{"tunnels.branch.psk", "a-very-long-preshared-key"},
		{"tunnels.branch.local_subnets", "192.168.1.0/24"},
		{"tunnels.branch.remote_subnets", "10.2.0.0/16"},
	} {
		if _, err := cd.client.Set(ctx, "", s[0], s[1:]...); err != nil {
			t.Fatalf("set %v: %v", s, err)
		}
	}
	if _, err := cd.client.Commit(ctx, commitReq("tunnel")); err != nil {
		t.Fatal(err)
	}
	term := startCLI(t, Options{ConfigdSocket: cd.socket, Board: "qemu"}, runRecover)
	term.expect("Choice: ")
	term.send("2\r")
	term.expect("Type recover to go on")
	term.send("recover\r")
	term.expect("Done: ")
	if err := term.wait(); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	running, _ := cd.store.Running()
	if running.Tunnel("branch") == nil || !NewAccounts(cd.socket).Verify("admin", []byte("kept password")) {
		t.Error("restoring LAN access alone dropped the tunnel or the password")
	}
}

func TestRecoverCancels(t *testing.T) {
	cd := startConfigd(t)
	term := startCLI(t, Options{ConfigdSocket: cd.socket}, runRecover)
	term.expect("Choice: ")
	term.send("2\r")
	term.expect("Type recover to go on")
	term.send("no\r")
	term.expect("Cancelled.")
	if err := term.wait(); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if _, rev := cd.store.Running(); rev != 1 {
		t.Errorf("a cancelled recovery made revision %d", rev)
	}
}

func TestRecoverWithoutConfigd(t *testing.T) {
	term := startCLI(t, Options{ConfigdSocket: shortDir(t) + "/none.sock"}, runRecover)
	err := term.wait()
	if err == nil || !strings.Contains(err.Error(), "configuration store is not answering") {
		t.Errorf("Recover without configd = %v, want it to say configd is not answering", err)
	}
}
