package pid1

import (
	"slices"
	"testing"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

func TestServiceTableGivesConfigdTheBoard(t *testing.T) {
	for _, tc := range []struct {
		board string
		want  []string
	}{
		{"alix2d13", []string{"configd", "-board", "alix2d13"}},
		{"unknown", []string{"configd", "-board", "unknown"}},
		{"", []string{"configd"}},
	} {
		var got []string
		for _, s := range serviceTable("/bbin/flashgate", consoleSpec{Device: "ttyS0", Baud: 38400, Board: tc.board}) {
			if s.Name == "configd" {
				got = s.Args
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("board %q: configd args %q, want %q", tc.board, got, tc.want)
		}
	}
}

// netd leaves /etc/resolv.conf alone unless told (so that a netd run by
// hand or by a test cannot rewrite a host's resolver): the appliance's
// table must tell it, or the box never learns its DNS servers.
func TestServiceTableGivesNetdTheResolver(t *testing.T) {
	for _, s := range serviceTable("/bbin/flashgate", consoleSpec{}) {
		if s.Name != "netd" {
			continue
		}
		if i := slices.Index(s.Args, "-resolv-conf"); i < 0 || i+1 >= len(s.Args) || s.Args[i+1] != "/etc/resolv.conf" {
			t.Errorf("netd args %q, want -resolv-conf /etc/resolv.conf", s.Args)
		}
		return
	}
	t.Error("no netd in the service table")
}

// hostd changes only what its flags name (so that a hostd started by a
// test cannot rename the host): the appliance's table must name all of
// it, and the console speed only when there is a console getty.
func TestServiceTableGivesHostdTheAppliancePaths(t *testing.T) {
	for _, tc := range []struct {
		console consoleSpec
		want    []string
	}{
		{consoleSpec{Device: "ttyS0", Baud: 38400}, []string{"hostd", "-configd", "/run/flashgate/configd.sock",
			"-supervisor", supervisor.SocketPath, "-hostname", "-localtime", "/etc/localtime", "-console-baud", "38400"}},
		{consoleSpec{}, []string{"hostd", "-configd", "/run/flashgate/configd.sock",
			"-supervisor", supervisor.SocketPath, "-hostname", "-localtime", "/etc/localtime"}},
	} {
		var hostd *supervisor.Service
		for _, s := range serviceTable("/bbin/flashgate", tc.console) {
			if s.Name == "hostd" {
				hostd = &s
			}
		}
		if hostd == nil {
			t.Fatal("no hostd in the service table")
		}
		if !slices.Equal(hostd.Args, tc.want) {
			t.Errorf("console %+v: hostd args %q, want %q", tc.console, hostd.Args, tc.want)
		}
		if !slices.Equal(hostd.After, []string{"configd"}) || hostd.Restart != supervisor.RestartAlways {
			t.Errorf("hostd after %q, restart %v; want after configd, restarted always", hostd.After, hostd.Restart)
		}
	}
}
