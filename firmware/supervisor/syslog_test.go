package supervisor

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestFormatSyslog(t *testing.T) {
	when := time.Date(2026, 11, 30, 6, 5, 4, 123456000, time.UTC)
	for _, tc := range []struct {
		name string
		cfg  SyslogConfig
		app  string
		line Line
		want string
	}{
		{"5424 service", SyslogConfig{Format: "rfc5424", Hostname: "gw1"}, "netd",
			Line{Time: when, Stream: "stderr", Text: "link eth0 up"},
			"<30>1 2026-11-30T06:05:04.123456Z gw1 netd - stderr - link eth0 up"},
		{"5424 kernel keeps its level", SyslogConfig{Format: "rfc5424", Hostname: "gw1"}, "kernel",
			Line{Time: when, Stream: "kernel", Level: 3, Text: "ata1: failed"},
			"<3>1 2026-11-30T06:05:04.123456Z gw1 kernel - kernel - ata1: failed"},
		{"3164", SyslogConfig{Format: "rfc3164", Hostname: "gw1"}, "iked",
			Line{Time: when, Stream: "stdout", Text: "tab\there"},
			"<30>Nov 30 06:05:04 gw1 iked: tab here"},
	} {
		if got := string(formatSyslog(tc.cfg, tc.app, tc.line)); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestRemoteSyslogForwardsServiceOutput(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := New(Config{Syslog: &SyslogConfig{Addr: pc.LocalAddr().String(), Format: "bsd"}}); err == nil {
		t.Error("New accepted a syslog config with format bsd")
	}
	s, err := New(Config{Services: []Service{sh("talker", "exec sleep 1000")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRemoteSyslog(&SyslogConfig{Addr: "127.0.0.1:1", Format: "bsd"}); err == nil {
		t.Error("SetRemoteSyslog accepted format \"bsd\"")
	}
	if err := s.SetRemoteSyslog(&SyslogConfig{Addr: pc.LocalAddr().String(), Hostname: "gw1"}); err != nil {
		t.Fatal(err)
	}
	s.byName["talker"].ring.Append(Line{Time: time.Now(), Stream: "stdout", Text: "hello syslog"})
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	for {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no syslog datagram for talker: %v", err)
		}
		msg := string(buf[:n])
		if strings.Contains(msg, " gw1 talker - stdout - hello syslog") && strings.HasPrefix(msg, "<30>1 ") {
			break
		}
	}
	if st := s.SystemStatus().Syslog; st == nil || st.Sent < 1 {
		t.Errorf("system status syslog %+v, want at least one sent", st)
	}
	if err := s.SetRemoteSyslog(nil); err != nil {
		t.Fatal(err)
	}
	if s.SystemStatus().Syslog != nil {
		t.Error("syslog still reported after SetRemoteSyslog(nil)")
	}
}
