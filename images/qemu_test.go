package images

import (
	"strings"
	"testing"

	"github.com/flashgate/flashgate/boards"
)

func TestQEMUArgs(t *testing.T) {
	b, err := boards.Lookup("qemu")
	if err != nil {
		t.Fatal(err)
	}
	args, err := QEMUConfig{Board: b, Image: "/tmp/card.img", Serial: "mon:stdio", WebUIPort: 8443}.Args()
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	if args[0] != "qemu-system-i386" {
		t.Errorf("program %q, want qemu-system-i386", args[0])
	}
	for _, want := range []string{
		"-cpu pentium2",
		"-M pc",
		"-nodefaults", // no phantom CD-ROM to probe at every boot
		"-m 256",
		"-serial mon:stdio",
		"-drive file=/tmp/card.img,format=raw,if=ide,index=0,media=disk",
		// eth0 is the wan port: NAT. eth1 is the LAN, where the web UI
		// answers: the host's port goes to the default LAN address.
		"-netdev user,id=wan -device virtio-net-pci,netdev=wan,mac=52:54:00:fa:00:01",
		"-netdev user,id=lan,net=192.168.1.0/24,host=192.168.1.2,restrict=on,hostfwd=tcp:127.0.0.1:8443-192.168.1.1:443 -device virtio-net-pci,netdev=lan,mac=52:54:00:fa:00:02",
		"-device i6300esb",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("qemu command line lacks %q:\n%s", want, line)
		}
	}
	if n := strings.Count(line, "i6300esb"); n != 1 {
		t.Errorf("i6300esb appears %d times:\n%s", n, line)
	}
	if strings.Contains(line, "-no-reboot") || strings.Contains(line, "-monitor none") {
		t.Errorf("interactive run has -no-reboot or no monitor:\n%s", line)
	}

	args, _ = QEMUConfig{Board: b, Image: "x.img", Serial: "stdio", NoReboot: true}.Args()
	line = strings.Join(args, " ")
	for _, want := range []string{"-serial stdio", "-monitor none", "-no-reboot"} {
		if !strings.Contains(line, want) {
			t.Errorf("test boot command line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "hostfwd") {
		t.Errorf("test boot forwards a host port:\n%s", line)
	}

	// Isolated, every user network has restrict=on: nothing the appliance
	// sends (DNS, NTP) leaves qemu. Not isolated (make run), the WAN's has not.
	for _, isolate := range []bool{false, true} {
		args, _ = QEMUConfig{Board: b, Image: "x.img", Serial: "stdio", IsolateWAN: isolate}.Args()
		var open []string
		for i, a := range args {
			if a == "-netdev" && i+1 < len(args) && strings.HasPrefix(args[i+1], "user,") && !strings.Contains(args[i+1], "restrict=on") {
				open = append(open, args[i+1])
			}
		}
		if want := map[bool]int{false: 1, true: 0}[isolate]; len(open) != want {
			t.Errorf("IsolateWAN %v: %d user networks without restrict=on %v, want %d (the WAN's, and only without isolation)", isolate, len(open), open, want)
		}
	}
}

func TestQEMUArgsRefusesHardware(t *testing.T) {
	b, err := boards.Lookup("alix2d13")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (QEMUConfig{Board: b, Image: "x.img"}).Args(); err == nil || !strings.Contains(err.Error(), "real hardware") {
		t.Errorf("qemu args for alix2d13: %v, want a refusal", err)
	}
}

func TestMissingToolsSentence(t *testing.T) {
	err := checkTools(toolZstd, hostTool{"flashgate-no-such-tool", "flashgate-fake-pkg"}, hostTool{"/no/such/mbr.bin", "syslinux-common"})
	if err == nil {
		t.Fatal("checkTools found tools that do not exist")
	}
	want := "flashgate-no-such-tool, /no/such/mbr.bin not installed: run `apt-get install flashgate-fake-pkg syslinux-common` as root"
	if err.Error() != want {
		t.Errorf("missing tools: %q\nwant %q", err, want)
	}
	if !IsMissingTools(err) {
		t.Error("IsMissingTools is false for a missing tool")
	}
}
