package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flashgate runs the tool in-process and returns its exit status, stdout
// and stderr.
func flashgate(t *testing.T, input string, args ...string) (int, string, string) {
	t.Helper()
	stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	rc := realMain(args, &out, &errOut)
	return rc, out.String(), errOut.String()
}

// oneSentence checks that a refusal is a single line naming the problem.
func oneSentence(t *testing.T, stderr, want string) {
	t.Helper()
	if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, want) {
		t.Errorf("stderr = %q, want one line containing %q", stderr, want)
	}
}

func TestImageRefusesBadBoards(t *testing.T) {
	for _, tc := range []struct{ board, want string }{
		{"net4501", "board net4501 is not supported: AMD Elan SC520 has no MMX"},
		{"wrt54g", `unknown board "wrt54g": valid boards are alix2d13`},
	} {
		out := t.TempDir()
		rc, _, stderr := flashgate(t, "", "image", "-board", tc.board, "-out", out, "-version", "v1")
		if rc != 1 {
			t.Errorf("image -board %s: exit status %d, want 1", tc.board, rc)
		}
		oneSentence(t, stderr, tc.want)
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("image -board %s wrote %d entries into %s", tc.board, len(entries), out)
		}
	}
	if rc, _, _ := flashgate(t, "", "image"); rc != 2 {
		t.Errorf("image without -board: exit status %d, want 2 (usage)", rc)
	}
	if rc, _, stderr := flashgate(t, "", "run", "-board", "alix2d13"); rc != 1 || !strings.Contains(stderr, "real hardware") {
		t.Errorf("run -board alix2d13: %d %q, want a refusal", rc, stderr)
	}
}

func TestBoardsLists(t *testing.T) {
	rc, out, _ := flashgate(t, "", "boards")
	if rc != 0 {
		t.Fatalf("boards: exit status %d", rc)
	}
	for _, want := range []string{"alix2d13", "net5501", "epia-c3", "apu2", "qemu ", "ttyS0 38400", "net4501", "UNSUPPORTED"} {
		if !strings.Contains(out, want) {
			t.Errorf("boards output lacks %q:\n%s", want, out)
		}
	}
}

// flashFixture makes sysfs and procfs trees with one 32 MB card, sdb,
// whose "device node" is a regular file, and a 2 TB disk, sdc.
func flashFixture(t *testing.T, mountinfo string) (dir string, args []string) {
	t.Helper()
	dir = t.TempDir()
	files := map[string]string{
		"sys/class/block/sdb/size":           "62720",
		"sys/class/block/sdb/removable":      "1",
		"sys/class/block/sdb/dev":            "8:16",
		"sys/class/block/sdb/device/model":   "SDCFB-32",
		"sys/class/block/sdb/sdb1/partition": "1",
		"sys/class/block/sdb/sdb1/dev":       "8:17",
		"sys/class/block/sdc/size":           "3907029168",
		"sys/class/block/sdc/dev":            "8:32",
		"proc/self/mountinfo":                "22 1 0:30 / / rw - overlay overlay rw\n" + mountinfo,
		"sdb":                                strings.Repeat("old card", 1<<12),
		"sdc":                                "a big disk",
		"card.img":                           strings.Repeat("flashgate image ", 1<<10),
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, []string{"flash", "-image", filepath.Join(dir, "card.img"),
		"-sys-root", filepath.Join(dir, "sys"), "-proc-root", filepath.Join(dir, "proc")}
}

func TestFlash(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mountinfo string
		dev       string
		extra     []string
		input     string
		want      string // stderr for a refusal, or "" for success
	}{
		{"mounted partition", "40 22 8:17 / /media/card rw - vfat /dev/sdb1 rw\n", "sdb", nil, "", "/dev/sdb1 is mounted on /media/card"},
		{"too large", "", "sdc", []string{"-yes"}, "", "larger than the 64 GiB"},
		{"not confirmed", "", "sdb", nil, "no\n", "not confirmed; "},
		{"no such device", "", "sdz", []string{"-yes"}, "", "is not a block device of this system"},
		{"confirmed", "", "sdb", nil, "yes\n", ""},
		{"-yes", "", "sdb", []string{"-yes"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, args := flashFixture(t, tc.mountinfo)
			dev := filepath.Join(dir, tc.dev)
			before, _ := os.ReadFile(dev)
			args = append(append(args, "-dev", dev), tc.extra...)
			rc, stdout, stderr := flashgate(t, tc.input, args...)
			after, _ := os.ReadFile(dev)
			img, _ := os.ReadFile(filepath.Join(dir, "card.img"))
			if tc.want != "" {
				if rc != 1 {
					t.Errorf("exit status %d, want 1", rc)
				}
				oneSentence(t, stderr, tc.want)
				if !bytes.Equal(before, after) {
					t.Errorf("a refused flash changed %s", dev)
				}
				return
			}
			if rc != 0 {
				t.Fatalf("exit status %d: %s", rc, stderr)
			}
			if !bytes.HasPrefix(after, img) || len(after) != len(before) {
				t.Errorf("%s does not hold the image followed by its old tail", dev)
			}
			for _, want := range []string{"SDCFB-32", "32.1 MB", "written and verified"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
		})
	}
}

// flashgate import prints the reference isakmpd.conf's tunnel in the
// text form, its weak proposals and the line it could not import.
func TestImportCommand(t *testing.T) {
	var out, errb bytes.Buffer
	rc := realMain([]string{"import", "../../config/importer/testdata/isakmpd-flashboot-vpn.conf"}, &out, &errb)
	if rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	for _, want := range []string{
		"(isakmpd.conf): 1 tunnel(s)",
		"set tunnels VPN-A-B remote_address 192.168.3.198",
		"set tunnels VPN-A-B psk <redacted>",
		"set tunnels VPN-A-B ike_proposals aes128-sha1-modp1024",
		"set tunnels VPN-A-B ike_version 1",
		"set tunnels VPN-A-B legacy_algorithms true",
		"weak: tunnel VPN-A-B ike proposal aes128-sha1-modp1024 (sha1, modp1024)",
		"1 line(s) not imported:",
		"40: Transforms=\t\tAES-SHA,BLF-SHA",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "yoursharedsecret") {
		t.Error("the PSK was printed")
	}
	if rc := realMain([]string{"import"}, &out, &errb); rc != 2 {
		t.Errorf("no file: rc %d", rc)
	}
}
