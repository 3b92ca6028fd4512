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
	// asks: the line answers a question, and the CLI asks another rather
	// than coming back to its prompt.
	steps := []struct {
		typed, want string
		asks        bool
	}{
		{"help", "factory-reset", false},
		{"set tunnels.branch.remote_address 192.0.2.1", "", false},
		{"set tunnels.branch.psk", "PSK: ", true},
		{"a-very-long-preshared-key", "Repeat: ", true},
		{"a-very-long-preshared-key", "PSK set in the candidate.", false},
		{"set tunnels.branch.local_subnets 192.168.1.0/24", "", false},
		{"set tunnels.branch.remote_subnets 10.2.0.0/16", "", false},
		{"set tunnels.branch.vlan 1400", `unknown field "vlan"`, false},
		{"set tunnels.branch.dpd_interval often", "tunnels.branch.dpd_interval", false},
		{"show diff", "+ set tunnels branch remote_address 192.0.2.1", false},
		{`commit "branch office tunnel"`, "Committed revision 2.", false},
		{"set interfaces.eth1.addresses 192.168.7.1/24", "", false},
		{"commit confirmed 5 new LAN address", "unless you type confirm", false},
		{"show config running interfaces.eth1", "set interfaces eth1 addresses 192.168.7.1/24", false},
		{"confirm", "Revision 3 confirmed.", false},
		{"set tunnels.half.remote_address 192.0.2.9", "", false},
		{"commit", "tunnels.half.psk: missing pre-shared key", false},
		{"discard", "Candidate discarded", false},
		{"show history", "branch office tunnel", false},
		{"rollback 2", "Revision 2 is running again, as revision 4.", false},
	}
	for _, s := range steps {
		term.send(s.typed + "\r")
		if s.want != "" {
			term.expect(s.want)
		}
		if !s.asks {
			term.expect("> ") // the next prompt, with or without a countdown
		}
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
