package imagefile

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExtensionIsSignedAndRead(t *testing.T) {
	key, _ := GenerateKey()
	trust := Trust{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	s := slotFiles(t, "kernel", "initramfs")
	s.Extension = &Extension{ConfigDBFormats: []int{1, 2, 3}, ConfigSchema: 2}
	h, _, _, err := readAll(build(t, s, key), trust)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h.Manifest.Extension, s.Extension) || !reflect.DeepEqual(h.Manifest.ConfigDBFormats(), []int{1, 2, 3}) || h.Manifest.ConfigSchema() != 2 {
		t.Fatalf("extension read back as %+v", h.Manifest.Extension)
	}
	// The signature covers it.
	file := build(t, s, key)
	i := bytes.Index(file, []byte(`[1,2,3]`))
	file[i+5] = '4'
	if _, _, _, err := readAll(file, trust); !errors.Is(err, ErrSignature) {
		t.Fatalf("a changed extension: %v, want ErrSignature", err)
	}
	// A file without one is firmware that reads formats 1 and 2.
	s.Extension = nil
	h, _, _, err = readAll(build(t, s, key), trust)
	if err != nil || h.Manifest.Extension != nil || !reflect.DeepEqual(h.Manifest.ConfigDBFormats(), []int{1, 2}) || h.Manifest.ConfigSchema() != 2 {
		t.Fatalf("no extension: %+v, %v", h, err)
	}
}

// header makes an unsigned header around manifest bytes js.
func header(js string) []byte {
	var b bytes.Buffer
	b.WriteString(Magic)
	binary.Write(&b, binary.BigEndian, uint32(len(js)))
	b.WriteString(js)
	binary.Write(&b, binary.BigEndian, uint16(0))
	return b.Bytes()
}

func TestExtensionForms(t *testing.T) {
	m := `{"format":1,"version":"v1","board":"qemu","built":1,"kernel":{"length":1,"sha256":"` + strings.Repeat("a", 64) + `"},"initrd":{"length":1,"sha256":"` + strings.Repeat("b", 64) + `"}}`
	for _, c := range []struct {
		name, js string
		ok       bool
		formats  []int
	}{
		{"none", m, true, []int{1, 2}},
		{"blank after the manifest", m + "\n ", true, []int{1, 2}},
		{"extension", m + `{"config_db_formats":[2,3]}`, true, []int{2, 3}},
		{"a later extension's field is skipped", m + "\n" + `{"config_db_formats":[2,3,4],"config_new":true}`, true, []int{2, 3, 4}},
		{"data after the extension", m + `{} {}`, false, nil},
		{"not an object", m + `[1]`, false, nil},
		{"garbage", m + `x`, false, nil},
	} {
		h, err := ReadHeader(bytes.NewReader(header(c.js)))
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err == nil && !reflect.DeepEqual(h.Manifest.ConfigDBFormats(), c.formats) {
			t.Errorf("%s: formats %v, want %v", c.name, h.Manifest.ConfigDBFormats(), c.formats)
		}
	}
}

// beforeExtension is a commit whose imagefile package predates the
// extension: the code of every box in the field then.
const beforeExtension = "e835034"

// TestFirmwareBeforeExtensionReadsIt builds that commit's imagefile
// package from the repository's history and has it read, verify and stream
// a signed file with an extension, as such a box does with an upload: a
// field in the manifest object itself would make it refuse the file.
func TestFirmwareBeforeExtensionReadsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an older imagefile package from git")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("git", "-C", root, "cat-file", "-e", beforeExtension+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout's history: %v", beforeExtension, err)
	}
	old := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" go.mod upgrade/imagefile | tar -x -C "$3"`, "sh", root, beforeExtension, old)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v\n%s", beforeExtension, err, out)
	}
	os.MkdirAll(filepath.Join(old, "cmd", "readfgup"), 0o755)
	const reader = `package main

import (
	"bufio"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"

	"github.com/flashgate/flashgate/upgrade/imagefile"
)

func main() {
	pub, _ := os.ReadFile(os.Args[2])
	f, _ := os.Open(os.Args[1])
	r := bufio.NewReader(f)
	h, err := imagefile.ReadHeader(r)
	if err != nil {
		fmt.Println("refused:", err)
		os.Exit(1)
	}
	if err := h.Verify(imagefile.Trust{Keys: []ed25519.PublicKey{pub}}); err != nil {
		fmt.Println("refused:", err)
		os.Exit(1)
	}
	for _, p := range []imagefile.Part{h.Manifest.Kernel, h.Manifest.Initrd} {
		if _, err := io.Copy(io.Discard, imagefile.PartReader(r, p, "part")); err != nil {
			fmt.Println("refused:", err)
			os.Exit(1)
		}
	}
	fmt.Println("accepted", h.Manifest.Version)
}
`
	os.WriteFile(filepath.Join(old, "cmd", "readfgup", "main.go"), []byte(reader), 0o644)
	bin := filepath.Join(old, "readfgup")
	compile := exec.Command("go", "build", "-o", bin, "./cmd/readfgup")
	compile.Dir = old
	compile.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := compile.CombinedOutput(); err != nil {
		t.Fatalf("build the older reader: %v\n%s", err, out)
	}
	key, _ := GenerateKey()
	dir := t.TempDir()
	pub := filepath.Join(dir, "pub")
	os.WriteFile(pub, key.Public().(ed25519.PublicKey), 0o644)
	s := slotFiles(t, "kernel", "initramfs")
	s.Extension = &Extension{ConfigDBFormats: []int{1, 2, 3}, ConfigSchema: 2}
	file := filepath.Join(dir, "x.fgup")
	os.WriteFile(file, build(t, s, key), 0o644)
	if out, err := exec.Command(bin, file, pub).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "accepted v2" {
		t.Fatalf("the older firmware on a file with an extension: %v: %s", err, out)
	}
	// The oracle tells: a field in the manifest object itself is refused.
	hdr := header(`{"format":1,"version":"v2","board":"qemu","built":1,"config_db_formats":[3],"kernel":{"length":1,"sha256":"` + strings.Repeat("a", 64) + `"},"initrd":{"length":1,"sha256":"` + strings.Repeat("b", 64) + `"}}`)
	os.WriteFile(file, append(hdr, 'k', 'i'), 0o644)
	if out, err := exec.Command(bin, file, pub).CombinedOutput(); err == nil || !strings.Contains(string(out), "unknown field") {
		t.Fatalf("the older firmware on a manifest with a new field: %v: %s; the oracle does not show the difference", err, out)
	}
}
