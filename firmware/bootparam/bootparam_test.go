package bootparam

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		want    Params
	}{
		{"BOOT_IMAGE=/a/vmlinuz console=ttyS0,38400 flashgate.board=alix2d13 flashgate.version=0.1.0 panic=10\n",
			Params{Board: "alix2d13", Version: "0.1.0", ConsoleDevice: "ttyS0", ConsoleBaud: 38400}},
		{"console=tty0 console=ttyS1,115200n8", Params{ConsoleDevice: "ttyS1", ConsoleBaud: 115200}},
		{"console=ttyS0", Params{ConsoleDevice: "ttyS0"}},
		{"console=ttyS0,fast", Params{ConsoleDevice: "ttyS0"}},
		{`flashgate.version="1.0 beta" flashgate.board=qemu`, Params{Board: "qemu", Version: "1.0 beta"}},
		{"flashgate.board", Params{}},
		{"flashgate.slot=b flashgate.board=qemu", Params{Board: "qemu", Slot: "b"}},
		{"console=ttyS0,19200 loglevel=7", Params{ConsoleDevice: "ttyS0", ConsoleBaud: 19200, ConsoleLogLevelSet: true}},
		{"debug", Params{ConsoleLogLevelSet: true}},
		{"quiet panic=10", Params{ConsoleLogLevelSet: true}},
		{"flashgate.quiet=1", Params{}},
		{"", Params{}},
	} {
		if got := Parse(tc.cmdline); got != tc.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.cmdline, got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("BOOT_IMAGE=/a/vmlinuz console=ttyS0,38400 flashgate.board=alix2d13 flashgate.version=0.1.0 panic=10")
	f.Add(`a="b c" "d`)
	f.Add("console=,9999999999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		p := Parse(s)
		if p.ConsoleBaud < 0 || strings.ContainsAny(p.Board, " \t\n") && !strings.Contains(s, `"`) {
			t.Errorf("Parse(%q) = %+v", s, p)
		}
	})
}
