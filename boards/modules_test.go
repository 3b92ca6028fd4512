package boards

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// sharedKernels caches the unmodified kernel trees, which several tests
// read: building one writes four thousand files.
var sharedKernels sync.Map // version -> directory

func TestMain(m *testing.M) {
	code := m.Run()
	sharedKernels.Range(func(_, dir any) bool {
		os.RemoveAll(filepath.Dir(dir.(string)))
		return true
	})
	os.Exit(code)
}

// kernelFixture rebuilds a /lib/modules/<version> tree of empty .ko files
// from testdata/kernel/<version>/modules.list (the file names in the real
// Debian package) and returns its path. Trees without dropped modules are
// shared between tests and must not be changed.
func kernelFixture(t *testing.T, version string, drop ...string) string {
	t.Helper()
	if len(drop) == 0 {
		if dir, ok := sharedKernels.Load(version); ok {
			return dir.(string)
		}
		tmp, err := os.MkdirTemp("", "flashgate-boards-kernel-")
		if err != nil {
			t.Fatal(err)
		}
		dir := buildKernelFixture(t, filepath.Join(tmp, version), version, nil)
		sharedKernels.Store(version, dir)
		return dir
	}
	return buildKernelFixture(t, filepath.Join(t.TempDir(), version), version, drop)
}

func buildKernelFixture(t *testing.T, dir, version string, drop []string) string {
	t.Helper()
	src := filepath.Join("testdata", "kernel", version)
	if err := os.MkdirAll(filepath.Join(dir, "kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(src, "modules.list"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	skip := map[string]bool{}
	for _, d := range drop {
		skip[d+".ko"] = true
	}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || skip[name] {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "kernel", name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("%s lists %d modules; a Debian kernel has thousands", f.Name(), n)
	}
	builtin, err := os.ReadFile(filepath.Join(src, "modules.builtin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), builtin, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var debianKernels = []string{"6.1.0-50-686", "6.1.0-50-amd64"}

// Every module every supported board lists is a module file of the Debian
// kernel its flavour names.
func TestCheckModulesDebianKernels(t *testing.T) {
	for _, version := range debianKernels {
		t.Run(version, func(t *testing.T) {
			if err := CheckModules(kernelFixture(t, version)); err != nil {
				t.Errorf("CheckModules(%s) = %v, want nil", version, err)
			}
		})
	}
	checked := map[string]bool{}
	for _, b := range All() {
		if b.Unsupported != "" {
			continue
		}
		for _, version := range debianKernels {
			if strings.HasSuffix(version, "-"+b.KernelFlavour) {
				checked[b.Name] = true
			}
		}
		if !checked[b.Name] {
			t.Errorf("board %s: kernel flavour %q has no fixture in testdata/kernel", b.Name, b.KernelFlavour)
		}
	}
}

// If FLASHGATE_MODULES_DIR names a real extracted kernel module tree (as
// the image builder's cache holds), check the definitions against it too.
func TestCheckModulesRealKernel(t *testing.T) {
	dir := os.Getenv("FLASHGATE_MODULES_DIR")
	if dir == "" {
		t.Skip("FLASHGATE_MODULES_DIR not set: the fixture test above covers the Debian 6.1 package")
	}
	if err := CheckModules(dir); err != nil {
		t.Errorf("CheckModules(%s): %v", dir, err)
	}
}

func TestCheckModulesFindsProblems(t *testing.T) {
	alix := func() Board {
		b, err := Lookup("alix2d13")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name  string
		board func() Board
		drop  []string
		want  []string // substrings of the error
	}{
		{
			name:  "module missing from the kernel",
			board: alix,
			drop:  []string{"geode-aes"},
			want:  []string{"board alix2d13", "geode-aes is not in this kernel"},
		},
		{
			name: "underscore where the file has a dash",
			board: func() Board {
				b := alix()
				b.Modules.NIC = []string{"via_rhine"}
				return b
			},
			want: []string{"no module file via_rhine.ko; the file is via-rhine.ko"},
		},
		{
			name: "built-in listed as a module",
			board: func() Board {
				b := alix()
				b.Modules.Extra = append(b.Modules.Extra, "sha256_generic")
				return b
			},
			want: []string{"sha256_generic is built into this kernel"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := kernelFixture(t, "6.1.0-50-686", tc.drop...)
			err := tc.board().CheckModules(dir)
			if err == nil {
				t.Fatalf("CheckModules = nil, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("CheckModules error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
	t.Run("amd64 kernel lacks the Geode drivers", func(t *testing.T) {
		err := alix().CheckModules(kernelFixture(t, "6.1.0-50-amd64"))
		if err == nil || !strings.Contains(err.Error(), "geodewdt is not in this kernel") {
			t.Errorf("alix2d13 against the amd64 kernel: error = %v, want geodewdt reported missing", err)
		}
	})
	t.Run("directory names no flavour", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "6.1.0-50-rt-arm64")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		err := CheckModules(dir)
		if err == nil || !strings.Contains(err.Error(), "ends in none of the kernel flavours") {
			t.Errorf("CheckModules(%s) = %v, want a flavour error", dir, err)
		}
	})
	t.Run("empty directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "6.1.0-50-686")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		err := CheckModules(dir)
		if err == nil || !strings.Contains(err.Error(), "no .ko files") {
			t.Errorf("CheckModules(empty) = %v, want \"no .ko files\"", err)
		}
	})
}

func TestModuleName(t *testing.T) {
	tests := []struct {
		file string
		want string
		ok   bool
	}{
		{"via-rhine.ko", "via-rhine", true},
		{"geode-aes.ko.xz", "geode-aes", true},
		{"ext4.ko.zst", "ext4", true},
		{"modules.dep", "", false},
		{".ko", "", false},
	}
	for _, tc := range tests {
		got, ok := moduleName(tc.file)
		if got != tc.want || ok != tc.ok {
			t.Errorf("moduleName(%q) = %q, %v; want %q, %v", tc.file, got, ok, tc.want, tc.ok)
		}
	}
}
