package images

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseShowDepends(t *testing.T) {
	const dir = "/c/lib/modules/6.1.0-50-686"
	out := "insmod /c/lib/modules/6.1.0-50-686/kernel/arch/x86/crypto/crc32c-intel.ko \n" +
		"insmod /c/lib/modules/6.1.0-50-686/kernel/fs/ext4/ext4.ko opt=1\n" +
		"builtin af_packet\n"
	got, err := parseShowDepends([]byte(out), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []showDependsStep{
		{Path: "kernel/arch/x86/crypto/crc32c-intel.ko"},
		{Path: "kernel/fs/ext4/ext4.ko"},
		{Builtin: true, Name: "af_packet"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseShowDepends = %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"insmod /elsewhere/x.ko\n",
		"insmod /c/lib/modules/6.1.0-50-686/../../../etc/passwd\n",
		"rmmod x\n",
		"",
	} {
		if steps, err := parseShowDepends([]byte(bad), dir); err == nil {
			t.Errorf("parseShowDepends(%q) = %+v, want an error", bad, steps)
		}
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"geode-aes":                          "geode_aes",
		"kernel/drivers/crypto/geode-aes.ko": "geode_aes",
		"via-rhine.ko.xz":                    "via_rhine",
		"pata_cs5536":                        "pata_cs5536",
	} {
		if got := moduleName(in); got != want {
			t.Errorf("moduleName(%q) = %q, want %q", in, got, want)
		}
	}
	c := &ModuleClosure{Modules: []Module{{Name: "via_rhine"}}, Builtin: []string{"af_packet"}}
	if !c.Has("via-rhine") || !c.Has("af-packet") || c.Has("geode-aes") {
		t.Errorf("ModuleClosure.Has: via-rhine %v, af-packet %v, geode-aes %v; want true, true, false",
			c.Has("via-rhine"), c.Has("af-packet"), c.Has("geode-aes"))
	}
}

func FuzzParseShowDepends(f *testing.F) {
	f.Add([]byte("insmod /m/kernel/a.ko \nbuiltin b\n"))
	f.Add([]byte("insmod /m/../x.ko\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		steps, err := parseShowDepends(out, "/m")
		if err != nil {
			return
		}
		for _, s := range steps {
			if !s.Builtin && (s.Path == ".." || strings.HasPrefix(s.Path, "../") || strings.HasPrefix(s.Path, "/")) {
				t.Errorf("step %+v escapes the modules directory", s)
			}
		}
	})
}
