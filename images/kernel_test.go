package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

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

// TestLockFileReady: a waiter for a class's lock stops waiting as soon as
// what it wants is there, although the holder keeps the lock (as
// `flashgate kernels` does, building the class's next board); without a
// ready check it waits until its context ends.
func TestLockFileReady(t *testing.T) {
	name := filepath.Join(t.TempDir(), "build-i586.lock")
	holder, err := lockFile(context.Background(), name, nil)
	if err != nil {
		t.Fatal(err)
	}

	var built atomic.Bool
	time.AfterFunc(700*time.Millisecond, func() { built.Store(true) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unlock, err := lockFile(ctx, name, built.Load)
	if err != nil || unlock != nil {
		t.Fatalf("waiting with a ready check: unlock %v, err %v; want nil, nil once ready", unlock != nil, err)
	}

	short, cancel2 := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel2()
	if unlock, err := lockFile(short, name, nil); err == nil || unlock != nil {
		t.Fatalf("waiting without a ready check while the lock is held: err %v, want the context's", err)
	}
	holder()
	unlock, err = lockFile(context.Background(), name, built.Load)
	if err != nil || unlock != nil {
		t.Fatalf("ready before the first try: unlock %v, err %v", unlock != nil, err)
	}
	unlock, err = lockFile(context.Background(), name, func() bool { return false })
	if err != nil || unlock == nil {
		t.Fatalf("a free lock: unlock %v, err %v", unlock != nil, err)
	}
	unlock()
}

// A board whose merged configuration equals a cached kernel's takes that
// kernel's bytes (and modules); a configuration differing in one byte does
// not.
func TestReuseKernelOfSameConfig(t *testing.T) {
	s := &KernelBuild{CacheDir: t.TempDir()}
	dot := []byte("CONFIG_X86_32=y\nCONFIG_PATA_CS5536=y\nCONFIG_CRYPTO_DEV_HIFN_795X=m\n")
	sum := configSum(dot)
	first := &Kernel{Board: "alix2d13", Root: filepath.Join(s.CacheDir, "built", "alix2d13-k1"), Release: "6.1.192-3-flashgate", Modules: true}
	tmp := filepath.Join(s.CacheDir, "built", ".new-1")
	mod := filepath.Join(tmp, "lib", "modules", first.Release, "kernel", "drivers", "crypto", "hifn_795x.ko")
	if err := os.MkdirAll(filepath.Dir(mod), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{filepath.Join(tmp, "vmlinuz"): "bzImage bytes", mod: "module bytes"} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("kernel", filepath.Join(tmp, "lib", "modules", first.Release, "updates")); err != nil {
		t.Fatal(err)
	}
	if err := s.commit(first, tmp, sum); err != nil {
		t.Fatal(err)
	}

	if got := s.builtFromConfig(configSum(append([]byte("# CONFIG_SMP is not set\n"), dot...))); got != nil {
		t.Fatalf("another configuration matched %s", got.Root)
	}
	from := s.builtFromConfig(sum)
	if from == nil || from.Root != first.Root {
		t.Fatalf("builtFromConfig = %+v, want %q", from, first.Root)
	}
	second := &Kernel{Board: "alix3d", Root: filepath.Join(s.CacheDir, "built", "alix3d-k2")}
	if err := s.reuse(second, from, dot, sum, time.Now()); err != nil {
		t.Fatal(err)
	}
	if second.SameAs != "alix2d13" || !second.Built {
		t.Errorf("reused kernel: SameAs %q, Built %t; want alix2d13, true", second.SameAs, second.Built)
	}
	loaded := &Kernel{Root: second.Root}
	if !s.load(loaded) || loaded.Release != first.Release || !loaded.Modules {
		t.Fatalf("reused kernel loads as %+v", loaded)
	}
	for _, rel := range []string{"vmlinuz", "lib/modules/6.1.192-3-flashgate/kernel/drivers/crypto/hifn_795x.ko", "lib/modules/6.1.192-3-flashgate/updates/drivers/crypto/hifn_795x.ko"} {
		a, errA := os.ReadFile(filepath.Join(first.Root, rel))
		b, errB := os.ReadFile(filepath.Join(second.Root, rel))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: %v %v, equal %t", rel, errA, errB, bytes.Equal(a, b))
		}
	}
	if cfg, err := os.ReadFile(filepath.Join(second.Root, "config")); err != nil || !bytes.Equal(cfg, dot) {
		t.Errorf("config of the reused kernel: %v", err)
	}
	if got := s.builtFromConfig(sum); got == nil || got.Root != first.Root && got.Root != second.Root {
		t.Errorf("after reuse, builtFromConfig = %+v", got)
	}
}
