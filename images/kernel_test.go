package images

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestParseKernelDepends(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"linux-image-686:i386\n  Depends: linux-image-6.1.0-50-686:i386\n", "linux-image-6.1.0-50-686:i386"},
		{"linux-image-amd64\n  Depends: linux-image-6.1.0-50-amd64\n  Recommends: firmware\n", "linux-image-6.1.0-50-amd64"},
		{"linux-image-686\n |Depends: linux-image-6.1.0-49-686\n  Depends: linux-image-6.1.0-50-686\n", "linux-image-6.1.0-49-686"},
		{"x\n  Depends: <virtual>\n", ""},
		{"x\n  Depends: libc6 (>= 2.36)\n", ""},
		{"", ""},
	} {
		if got := parseKernelDepends([]byte(tc.out)); got != tc.want {
			t.Errorf("parseKernelDepends(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}

func TestParseStanza(t *testing.T) {
	out := "Package: linux-image-6.1.0-50-686\nVersion: 6.1.176-1\nDescription: Linux\n kernel\n" +
		"Filename: pool/main/l/linux-signed-i386/linux-image-6.1.0-50-686_6.1.176-1_i386.deb\nSHA256: abc\n\nPackage: other\nVersion: 2\n"
	rec := parseStanza([]byte(out))
	for k, want := range map[string]string{
		"Version":     "6.1.176-1",
		"Filename":    "pool/main/l/linux-signed-i386/linux-image-6.1.0-50-686_6.1.176-1_i386.deb",
		"SHA256":      "abc",
		"Description": "Linux\nkernel",
	} {
		if rec[k] != want {
			t.Errorf("field %s = %q, want %q", k, rec[k], want)
		}
	}
}

func TestMetapackage(t *testing.T) {
	for _, tc := range []struct{ flavour, name, arch string }{
		{"686", "linux-image-686:i386", "i386"},
		{"amd64", "linux-image-amd64:amd64", "amd64"},
	} {
		name, arch, err := metapackage(tc.flavour)
		if err != nil || name != tc.name || arch != tc.arch {
			t.Errorf("metapackage(%q) = %q, %q, %v; want %q, %q", tc.flavour, name, arch, err, tc.name, tc.arch)
		}
	}
	if _, _, err := metapackage("486"); err == nil {
		t.Error("metapackage(486) succeeded; Debian has no such flavour")
	}
}

func FuzzParseKernelDepends(f *testing.F) {
	f.Add([]byte("linux-image-686:i386\n  Depends: linux-image-6.1.0-50-686:i386\n"))
	f.Add([]byte("|Depends: linux-image-x\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		parseKernelDepends(out)
	})
}

func FuzzParseStanza(f *testing.F) {
	f.Add([]byte("Package: a\nVersion: 1\n continued\n\nPackage: b\n"))
	f.Add([]byte(" leading continuation\nKey:value"))
	f.Fuzz(func(t *testing.T, out []byte) {
		parseStanza(out)
	})
}

func TestRetryTransient(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failFirst int // calls that fail before one succeeds
		wantCalls int
		wantErr   bool
	}{
		{"works at once", 0, 1, false},
		{"a name fails to resolve once", 1, 2, false},
		{"source unreachable", 10, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var logs []string
			err := retryTransient(context.Background(), 3, time.Millisecond, func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }, func() error {
				calls++
				if calls <= tc.failFirst {
					return errors.New("Temporary failure resolving 'deb.debian.org'")
				}
				return nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Errorf("%d calls, error %v; want %d calls, error %v", calls, err, tc.wantCalls, tc.wantErr)
			}
			if len(logs) != calls-1 {
				t.Errorf("logged %d retries for %d calls: %q", len(logs), calls, logs)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := retryTransient(ctx, 3, time.Hour, func(string, ...any) {}, func() error { return errors.New("down") }); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled build waited out the retries: %v", err)
	}
}
