package boards

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each fixture under testdata/probe is a root file system as a board shows
// it: proc/cpuinfo, sys/class/dmi/id, sys/bus/pci/devices and BIOS ROM
// dumps in bios-rom/. There is one per board, plus trees that must not be
// taken for any board.
func TestProbeFixtures(t *testing.T) {
	tests := []struct {
		fixture     string
		want        string // board, "" for none
		confidence  Confidence
		evidence    []string // substrings that must appear in the evidence
		candidates  []string
		unsupported bool
	}{
		{fixture: "alix2d13", want: "alix2d13", confidence: Certain,
			evidence: []string{`BIOS ROM has "PC Engines ALIX.2"`, "PCI 1022:2082 (Geode LX AES), 3x 1106:3053"}},
		{fixture: "alix2d13-coreboot", want: "alix2d13", confidence: Certain,
			evidence: []string{"DMI sys_vendor=PC Engines product_name=ALIX.2D"}},
		{fixture: "alix3d", want: "alix3d", confidence: Certain,
			evidence: []string{`BIOS ROM has "PC Engines ALIX.3"`}},
		{fixture: "net4501", want: "net4501", confidence: Certain, unsupported: true,
			evidence: []string{`BIOS ROM has "comBIOS" and "net4501"`, "PCI 1022:3000 (AMD Elan SC520 host bridge)", "no mmx"}},
		{fixture: "net4801", want: "net4801", confidence: Certain,
			evidence: []string{`BIOS ROM has "comBIOS" and "net4801"`, "3x 100b:0020"}},
		{fixture: "net5501", want: "net5501", confidence: Certain,
			evidence: []string{`BIOS ROM has "comBIOS" and "net5501"`, "4x 1106:3053"}},
		{fixture: "net6501", want: "net6501", confidence: Certain,
			evidence: []string{`"net6501"`, "8086:8186 (Intel Atom E6xx LPC bridge)"}},
		{fixture: "epia-c3", want: "epia-c3", confidence: Certain,
			evidence: []string{"board_name=EPIA-M", "vendor_id=CentaurHauls", "model 9", "no sse2"}},
		{fixture: "epia-c3-ezra", want: "epia-c3-ezra", confidence: Certain,
			evidence: []string{"board_name=EPIA-M", "vendor_id=CentaurHauls", "model 8", "no sse"}},
		{fixture: "epia-c7", want: "epia-c7", confidence: Weak,
			evidence: []string{"vendor_id=CentaurHauls", "model 13", "flag sse2"}},
		{fixture: "apu2", want: "apu2", confidence: Certain,
			evidence: []string{"DMI sys_vendor=PC Engines board_name=apu2"}},
		{fixture: "generic-x86_64", want: "generic-x86_64", confidence: Weak,
			evidence: []string{"cpuinfo has lm (64-bit CPU)", "DMI sys_vendor=ASRock"}},
		{fixture: "qemu", want: "qemu", confidence: Certain,
			evidence: []string{"DMI sys_vendor=QEMU", "no lm"}},
		{fixture: "qemu-x86_64", want: "qemu-x86_64", confidence: Certain,
			evidence: []string{"DMI sys_vendor=QEMU", "flag lm"}},
		{fixture: "unknown-32bit", want: "", confidence: None,
			evidence: []string{"unknown 32-bit board", "Pentium(R) M", "DMI sys_vendor=Hewlett-Packard", "BIOS ROM not readable", "2 PCI devices"}},
		{fixture: "geode-cpu-only", want: "", confidence: Weak,
			candidates: []string{"alix2d13", "alix3d", "net5501"},
			evidence:   []string{"nothing tells alix2d13 and alix3d and net5501 apart"}},
		{fixture: "garbage", want: "", confidence: None,
			evidence: []string{"unknown board", "no readable /proc/cpuinfo", "0 PCI devices"}},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			root := filepath.Join("testdata", "probe", tc.fixture)
			if _, err := os.Stat(root); err != nil {
				t.Fatalf("fixture missing: %v", err)
			}
			r, err := Probe(root)
			if err != nil {
				t.Fatalf("Probe(%s): %v", root, err)
			}
			if r.Board != tc.want {
				t.Errorf("Probe(%s) board = %q, want %q; result: %s", tc.fixture, r.Board, tc.want, r)
			}
			if r.Confidence != tc.confidence {
				t.Errorf("Probe(%s) confidence = %s, want %s; result: %s", tc.fixture, r.Confidence, tc.confidence, r)
			}
			if !slices.Equal(r.Candidates, tc.candidates) {
				t.Errorf("Probe(%s) candidates = %v, want %v", tc.fixture, r.Candidates, tc.candidates)
			}
			if (r.Unsupported != "") != tc.unsupported {
				t.Errorf("Probe(%s) unsupported = %q, want unsupported=%v", tc.fixture, r.Unsupported, tc.unsupported)
			}
			text := strings.Join(r.Evidence, "; ")
			for _, e := range tc.evidence {
				if !strings.Contains(text, e) {
					t.Errorf("Probe(%s) evidence = %q, want it to contain %q", tc.fixture, text, e)
				}
			}
		})
		covered[tc.want] = true
	}
	for _, b := range All() {
		if !covered[b.Name] {
			t.Errorf("board %s has no probe fixture under testdata/probe", b.Name)
		}
	}
}

// On a box the ROM comes from /dev/mem at its physical addresses. A sparse
// file stands in for it here.
func TestProbeReadsDevMem(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(root, "dev", "mem"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// comBIOS at the top of 4 GiB, as net5501.c reads it.
	if _, err := f.WriteAt([]byte("comBIOS\x00"), 0xFFFF0000+0x20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("net5501\x00"), 0xFFFF0000+0xb7b); err != nil {
		t.Fatal(err)
	}
	r, err := Probe(root)
	if err != nil {
		t.Fatal(err)
	}
	if r.Board != "net5501" || r.Confidence != Certain {
		t.Errorf("Probe with comBIOS in dev/mem at 0xFFFF0000 = %s, want net5501 (certain)", r)
	}

	// tinyBIOS in the F segment.
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("PC Engines ALIX.3 v0.99h\r\n"), 0xF0000+0x1234); err != nil {
		t.Fatal(err)
	}
	r, err = Probe(root)
	if err != nil {
		t.Fatal(err)
	}
	if r.Board != "alix3d" {
		t.Errorf("Probe with tinyBIOS in dev/mem at 0xF0000 = %s, want alix3d", r)
	}
}

func TestProbeBadRoot(t *testing.T) {
	if _, err := Probe(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Probe(missing directory) = nil error, want one")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Probe(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Probe(file) error = %v, want \"not a directory\"", err)
	}
	r, err := Probe(t.TempDir())
	if err != nil || r.Board != "" || !strings.Contains(r.String(), "unknown board") {
		t.Errorf("Probe(empty dir) = %s, %v; want an unknown board and no error", r, err)
	}
}

// Probe on the machine running the test must not fail or panic, whatever
// it is; its answer is logged, not checked.
func TestProbeThisMachine(t *testing.T) {
	r, err := Probe("/")
	if err != nil {
		t.Fatalf("Probe(/): %v", err)
	}
	t.Logf("this machine: %s", r)
}

func TestResultString(t *testing.T) {
	tests := []struct {
		r    Result
		want string
	}{
		{Result{Board: "qemu", Confidence: Certain, Evidence: []string{"DMI sys_vendor=QEMU", "cpuinfo no lm"}},
			"qemu (certain: DMI sys_vendor=QEMU; cpuinfo no lm)"},
		{Result{Board: "net4501", Confidence: Certain, Evidence: []string{"x"}, Unsupported: "no MMX"},
			"net4501 (certain: x): not supported: no MMX"},
		{Result{Confidence: Weak, Candidates: []string{"a", "b"}, Evidence: []string{"y"}},
			"one of a, b (weak: y)"},
		{Result{Evidence: []string{"unknown 32-bit board: no known board matched"}},
			"unknown board (none: unknown 32-bit board: no known board matched)"},
	}
	for _, tc := range tests {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("Result%+v.String() = %q, want %q", tc.r, got, tc.want)
		}
	}
}
