package images

import (
	"strings"
	"testing"
)

func TestPlanLayout(t *testing.T) {
	for _, tc := range []struct {
		minCardMB                   int
		card, boot, config, cfgFrom int64
	}{
		// 32,000,000 bytes rounded down to MiB: 30 MiB.
		{32, 30 * mib, 25 * mib, 4 * mib, 26 * mib},
		{64, 61 * mib, 56 * mib, 4 * mib, 57 * mib},
		{80, 76 * mib, 59 * mib, 16 * mib, 60 * mib},
		{4096, maxCardImage, maxCardImage - 17*mib, 16 * mib, maxCardImage - 16*mib},
	} {
		l, err := PlanLayout(tc.minCardMB)
		if err != nil {
			t.Errorf("PlanLayout(%d): %v", tc.minCardMB, err)
			continue
		}
		if l.CardBytes != tc.card || l.BootStart != mib || l.BootBytes != tc.boot || l.ConfigBytes != tc.config || l.ConfigStart != tc.cfgFrom {
			t.Errorf("PlanLayout(%d) = %+v, want card %d, boot %d at 1 MiB, config %d at %d",
				tc.minCardMB, l, tc.card, tc.boot, tc.config, tc.cfgFrom)
		}
		if l.BootStart+l.BootBytes != l.ConfigStart || l.ConfigStart+l.ConfigBytes != l.CardBytes {
			t.Errorf("PlanLayout(%d) = %+v: partitions do not tile the card", tc.minCardMB, l)
		}
	}
	if _, err := PlanLayout(8); err == nil {
		t.Error("PlanLayout(8) succeeded; an 8 MB card has no room for a boot partition")
	}
}

func TestSfdiskScript(t *testing.T) {
	l, _ := PlanLayout(32)
	got := l.sfdiskScript(0x1234abcd)
	want := "label: dos\nlabel-id: 0x1234abcd\nunit: sectors\n\n" +
		"start=2048, size=51200, type=6, bootable\nstart=53248, size=8192, type=83\n"
	if got != want {
		t.Errorf("sfdisk script:\n%s\nwant:\n%s", got, want)
	}
}

func TestDeriveCardIDs(t *testing.T) {
	a, b := deriveCardIDs("alix2d13", "1.0"), deriveCardIDs("alix2d13", "1.0")
	if a != b {
		t.Errorf("same inputs gave different IDs: %+v and %+v", a, b)
	}
	c := deriveCardIDs("net5501", "1.0")
	if a.DiskID == c.DiskID || a.VolumeID == c.VolumeID || a.ConfigUUID == c.ConfigUUID {
		t.Errorf("two boards got the same IDs: %+v and %+v", a, c)
	}
	if a.DiskID == 0 {
		t.Error("disk ID is zero, which means no signature")
	}
	if len(a.ConfigUUID) != 36 || a.ConfigUUID[14] != '4' || !strings.Contains("89ab", string(a.ConfigUUID[19])) {
		t.Errorf("config UUID %q is not a version 4 UUID", a.ConfigUUID)
	}
}

func TestCheckFit(t *testing.T) {
	rep := &Report{Board: "alix2d13", KernelBytes: 6 * mib, InitramfsBytes: 6 * mib, BootBytes: 25 * mib, MinCardMB: 32}
	if err := checkFit(rep); err != nil {
		t.Errorf("12 MiB of firmware in a 25 MiB partition: %v", err)
	}
	rep.InitramfsBytes = 19 * mib
	err := checkFit(rep)
	if err == nil {
		t.Fatal("25 MiB of firmware fit a 25 MiB partition with syslinux")
	}
	for _, want := range []string{"alix2d13", "26214400", "6291456", "19922944", "32 MB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not give the number %s", err, want)
		}
	}
}

func TestParseMdirFree(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want int64
		ok   bool
	}{
		{" Volume in drive : is FGBOOT\nDirectory for ::/\n\na <DIR> 2026-01-01\n        2 files                 204 bytes\n                         17 864 704 bytes free\n\n", 17864704, true},
		{"  0 bytes free\n", 0, true},
		{"1 file 3 bytes\n", 0, false},
		{"  12x bytes free\n", 0, false},
	} {
		got, err := parseMdirFree([]byte(tc.out))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseMdirFree(%q) = %d, %v; want %d, ok=%v", tc.out, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseMdirFree(f *testing.F) {
	f.Add([]byte("                         17 864 704 bytes free\n"))
	f.Add([]byte("bytes free"))
	f.Fuzz(func(t *testing.T, out []byte) {
		n, err := parseMdirFree(out)
		if err == nil && n < 0 {
			t.Errorf("negative free space %d from %q", n, out)
		}
	})
}
