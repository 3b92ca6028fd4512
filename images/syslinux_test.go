package images

import (
	"strings"
	"testing"

	"github.com/flashgate/flashgate/boards"
)

func TestSyslinuxConfig(t *testing.T) {
	b := boards.Board{Name: "alix2d13", Console: boards.Console{Device: "ttyS0", Baud: 38400}}
	cfg, err := SyslinuxConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"SERIAL 0 38400\n",
		"CONSOLE 0\n",
		"UI menu.c32\nMENU SAVE\n",
		"DEFAULT a\n",
		"LABEL a\n  MENU LABEL slot a\n  MENU NOSAVE\n",
		"  KERNEL /a/vmlinuz\n",
		"  INITRD /a/initrd.img\n",
		"  APPEND console=ttyS0,38400 flashgate.board=alix2d13 flashgate.slot=a panic=10\n",
		"LABEL b\n  MENU LABEL slot b\n  MENU NOSAVE\n",
		"  KERNEL /b/vmlinuz\n",
		"  INITRD /b/initrd.img\n",
		"  APPEND console=ttyS0,38400 flashgate.board=alix2d13 flashgate.slot=b panic=10\n",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("syslinux.cfg lacks %q; got:\n%s", want, cfg)
		}
	}
	// SERIAL must be the first directive, or syslinux prints its banner
	// before the serial port is set up.
	if !strings.HasPrefix(cfg, "SERIAL ") {
		t.Errorf("syslinux.cfg does not start with SERIAL:\n%s", cfg)
	}
}

func TestSyslinuxConfigRejectsConsoles(t *testing.T) {
	for _, tc := range []struct {
		console boards.Console
		want    string
	}{
		{boards.Console{Device: "tty0", Baud: 115200}, "not a ttyS serial port"},
		{boards.Console{Device: "ttyS7", Baud: 115200}, "ttyS0..ttyS3"},
		{boards.Console{Device: "ttyS1", Baud: 0}, "no console baud"},
	} {
		_, err := SyslinuxConfig(boards.Board{Name: "x", Console: tc.console})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("console %+v: got error %v, want one containing %q", tc.console, err, tc.want)
		}
	}
	cfg, err := SyslinuxConfig(boards.Board{Name: "x", Console: boards.Console{Device: "ttyS1", Baud: 19200}})
	if err != nil || !strings.HasPrefix(cfg, "SERIAL 1 19200\n") {
		t.Errorf("ttyS1: got %q, %v; want SERIAL 1 19200 first", cfg, err)
	}
}
