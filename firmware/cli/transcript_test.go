package cli

import (
	"os"
	"testing"
)

// TestTranscript runs the session docs/console.md shows. With
// FLASHGATE_TRANSCRIPT=file it writes the screen to file, which is how the
// transcript in the docs is made.
func TestTranscript(t *testing.T) {
	term, _ := newCLI(t)
	steps := []struct{ typed, want string }{
		{"help", "factory-reset"},
		{"set tunnels.branch.remote_address 192.0.2.1", ""},
		{"set tunnels.branch.psk a-very-long-preshared-key", ""},
		{"set tunnels.branch.local_subnets 192.168.1.0/24", ""},
		{"set tunnels.branch.remote_subnets 10.2.0.0/16", ""},
		{"set tunnels.branch.mtu 1400", `unknown field "mtu"`},
		{"set tunnels.branch.dpd_interval often", "tunnels.branch.dpd_interval"},
		{"show diff", "+ set tunnels branch remote_address 192.0.2.1"},
		{`commit "branch office tunnel"`, "Committed revision 2."},
		{"set interfaces.eth1.addresses 192.168.7.1/24", ""},
		{"commit confirmed 5 new LAN address", "unless you type confirm"},
		{"show config running interfaces.eth1", "set interfaces eth1 addresses 192.168.7.1/24"},
		{"confirm", "Revision 3 confirmed."},
		{"set tunnels.half.remote_address 192.0.2.9", ""},
		{"commit", "tunnels.half.psk: missing pre-shared key"},
		{"discard", "Candidate discarded"},
		{"show history", "branch office tunnel"},
		{"rollback 2", "Revision 2 is running again, as revision 4."},
	}
	for _, s := range steps {
		term.send(s.typed + "\r")
		if s.want != "" {
			term.expect(s.want)
		}
		term.expect("> ") // the next prompt, with or without a countdown
	}
	term.send("exit\r")
	if err := term.wait(); err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("FLASHGATE_TRANSCRIPT"); path != "" {
		if err := os.WriteFile(path, []byte(term.screen()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
