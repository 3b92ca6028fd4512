package hwcrypto

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func seedFixtures(f *testing.F, name string) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "proc", name))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seed fixtures for %s: %v", name, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseProcCrypto: any input either parses into entries that all have
// a name and a driver, or fails; Lookup never returns an unusable entry.
func FuzzParseProcCrypto(f *testing.F) {
	seedFixtures(f, "crypto")
	f.Add([]byte("name : x\ndriver : y\npriority : 9999999999999999999999\n"))
	f.Add([]byte("name:a\nname:b\ndriver:c\n\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		table, err := ParseProcCrypto(bytes.NewReader(in))
		if err != nil {
			return
		}
		for _, a := range table {
			if a.Name == "" || a.Driver == "" {
				t.Fatalf("entry without name or driver: %+v", a)
			}
			got, err := table.Lookup(a.Name)
			if err == nil && !got.Usable() {
				t.Fatalf("Lookup(%q) returned an unusable entry %+v", a.Name, got)
			}
		}
	})
}

// FuzzParseCPUInfo: no panics, and flags never contain whitespace.
func FuzzParseCPUInfo(f *testing.F) {
	seedFixtures(f, "cpuinfo")
	f.Add([]byte("processor:0\ncpu family : -1\nflags:\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		info, err := ParseCPUInfo(bytes.NewReader(in))
		if err != nil {
			return
		}
		for flag := range info.Flags {
			if flag == "" || bytes.ContainsAny([]byte(flag), " \t\n") {
				t.Fatalf("bad flag %q", flag)
			}
		}
	})
}

// FuzzProposal: ranking any proposal string keeps every proposal and never
// calls something accelerated without naming the engine.
func FuzzProposal(f *testing.F) {
	r, err := Detect("testdata/apu2")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range espProposals {
		f.Add(p)
	}
	f.Add("aes-aes192ccm12-sha2_256_96-prfaesxcbc-ecp521bp-esn")
	f.Fuzz(func(t *testing.T, p string) {
		ranked := r.Rank([]string{p, "aes128-sha256"})
		if len(ranked) != 2 {
			t.Fatalf("Rank lost proposals: %+v", ranked)
		}
		for _, x := range ranked {
			if x.Accelerated != (x.Engine != "") {
				t.Fatalf("%+v: accelerated without an engine or the reverse", x)
			}
		}
	})
}
