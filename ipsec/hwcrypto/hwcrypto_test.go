package hwcrypto

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// espProposals is a typical proposal list before ranking: iked's defaults
// plus the legacy ones the seeds of this project measured.
var espProposals = []string{
	"aes128gcm16-prfsha256-ecp256",
	"aes256gcm16-prfsha384-ecp384",
	"chacha20poly1305-prfsha256-x25519",
	"aes128-sha256-modp2048",
	"aes256-sha256-modp2048",
	"3des-sha1-modp1024",
}

// recordingLoader is a ModuleLoader that records what it was asked to load
// and fails the modules listed in fail.
type recordingLoader struct {
	fail   map[string]error
	loaded []string
}

func (l *recordingLoader) Load(name string) error {
	l.loaded = append(l.loaded, name)
	return l.fail[name]
}

func engineStates(r *Report) []string {
	var out []string
	for _, e := range r.Engines {
		out = append(out, e.Name+": "+e.State.String())
	}
	return out
}

func rankedNames(rs []Ranked) []string {
	var out []string
	for _, r := range rs {
		mark := ""
		if r.Accelerated {
			mark = " [" + r.Engine + "]"
		}
		out = append(out, r.Proposal+mark)
	}
	return out
}

func TestFixtures(t *testing.T) {
	geode := []string{"Geode LX AES: usable", "Geode LX RNG: usable"}
	geodeRank := []string{"aes128-sha256-modp2048 [Geode LX AES]", "aes128gcm16-prfsha256-ecp256", "aes256gcm16-prfsha384-ecp384",
		"chacha20poly1305-prfsha256-x25519", "aes256-sha256-modp2048", "3des-sha1-modp1024"}
	padlockRank := []string{"aes128-sha256-modp2048 [VIA PadLock ACE]", "aes256-sha256-modp2048 [VIA PadLock ACE]",
		"aes128gcm16-prfsha256-ecp256", "aes256gcm16-prfsha384-ecp384", "chacha20poly1305-prfsha256-x25519", "3des-sha1-modp1024"}
	tests := []struct {
		fixture  string
		fail     map[string]error
		engines  []string
		modules  []string
		loaded   []string // modules Setup asked the loader for
		rank     []string
		cbcAES   string // driver serving cbc(aes)
		inUse    string // engine that holds references, if any
		reasonIn map[string]string
	}{
		{fixture: "alix", engines: geode, modules: []string{"geode-aes", "geode-rng"}, rank: geodeRank, cbcAES: "cbc-aes-geode", inUse: "Geode LX AES"},
		{fixture: "net5501", engines: geode, modules: []string{"geode-aes", "geode-rng"}, rank: geodeRank, cbcAES: "cbc-aes-geode"},
		{
			fixture: "epia-c3",
			engines: []string{"VIA PadLock ACE: usable", "VIA PadLock RNG: usable"},
			modules: []string{"padlock-aes", "via-rng"}, rank: padlockRank, cbcAES: "cbc-aes-padlock",
		},
		{
			fixture: "epia-c7",
			engines: []string{"VIA PadLock ACE: usable", "VIA PadLock PHE: usable", "VIA PadLock RNG: usable"},
			modules: []string{"padlock-aes", "padlock-sha", "via-rng"},
			// PHE does SHA-1 too, so 3des-sha1 moves ahead of proposals nothing accelerates.
			rank: []string{"aes128-sha256-modp2048 [VIA PadLock ACE]", "aes256-sha256-modp2048 [VIA PadLock ACE]", "3des-sha1-modp1024",
				"aes128gcm16-prfsha256-ecp256", "aes256gcm16-prfsha384-ecp384", "chacha20poly1305-prfsha256-x25519"},
			cbcAES: "cbc-aes-padlock",
		},
		{
			fixture:  "epia-c7-selftest",
			engines:  []string{"VIA PadLock ACE: usable", "VIA PadLock PHE: selftest failed", "VIA PadLock RNG: usable"},
			modules:  []string{"padlock-aes", "padlock-sha", "via-rng"},
			rank:     padlockRank,
			cbcAES:   "cbc-aes-padlock",
			reasonIn: map[string]string{"VIA PadLock PHE": `sha1-padlock selftest "unknown"`},
		},
		{
			fixture:  "zhaoxin",
			engines:  []string{"VIA PadLock ACE: usable", "VIA PadLock PHE: disabled", "VIA PadLock RNG: usable"},
			modules:  []string{"padlock-aes", "padlock-sha", "via-rng"},
			rank:     padlockRank,
			cbcAES:   "cbc-aes-padlock",
			reasonIn: map[string]string{"VIA PadLock PHE": "Zhaoxin"},
		},
		{
			fixture: "net4801",
			engines: []string{"Hifn 7956: usable"},
			modules: []string{"hifn_795x"},
			rank: []string{"aes128-sha256-modp2048 [Hifn 7956]", "aes256-sha256-modp2048 [Hifn 7956]", "3des-sha1-modp1024 [Hifn 7956]",
				"aes128gcm16-prfsha256-ecp256", "aes256gcm16-prfsha384-ecp384", "chacha20poly1305-prfsha256-x25519"},
			cbcAES: "cbc-aes-hifn0",
		},
		{
			// The same board with a Hifn 7955 (vpn1411 cards carry
			// either chip): the same driver, the same 3DES.
			fixture: "net4801-7955",
			engines: []string{"Hifn 7955: usable"},
			modules: []string{"hifn_795x"},
			rank: []string{"aes128-sha256-modp2048 [Hifn 7955]", "aes256-sha256-modp2048 [Hifn 7955]", "3des-sha1-modp1024 [Hifn 7955]",
				"aes128gcm16-prfsha256-ecp256", "aes256gcm16-prfsha384-ecp384", "chacha20poly1305-prfsha256-x25519"},
			cbcAES: "cbc-aes-hifn0",
		},
		{
			fixture:  "net4801-vpn1211",
			engines:  []string{"Hifn 7951: no Linux driver"},
			rank:     espProposals,
			cbcAES:   "cbc(aes-generic)",
			reasonIn: map[string]string{"Hifn 7951": "no driver"},
		},
		{
			fixture: "apu2",
			engines: []string{"AES-NI: usable"},
			modules: []string{"aesni-intel"},
			rank: []string{"aes128gcm16-prfsha256-ecp256 [AES-NI]", "aes256gcm16-prfsha384-ecp384 [AES-NI]", "aes128-sha256-modp2048 [AES-NI]",
				"aes256-sha256-modp2048 [AES-NI]", "chacha20poly1305-prfsha256-x25519", "3des-sha1-modp1024"},
			cbcAES: "cbc-aes-aesni",
		},
		{fixture: "qemu", rank: espProposals, cbcAES: "cbc(aes-generic)"},
		{
			fixture: "alix-unloaded",
			fail: map[string]error{
				"geode-aes": errors.New("finit_module geode-aes.ko: no such device"),
				"geode-rng": errors.New("finit_module geode-rng.ko: exec format error"),
			},
			engines: []string{"Geode LX AES: module failed", "Geode LX RNG: module failed"},
			modules: []string{"geode-aes", "geode-rng"},
			loaded:  []string{"geode-aes", "geode-rng"},
			rank:    espProposals, // nothing usable: software for all, order kept
			cbcAES:  "cbc(aes-generic)",
			reasonIn: map[string]string{
				"Geode LX AES": "no such device",
				"Geode LX RNG": "exec format error",
			},
		},
		{
			// The module loads but the driver registers nothing: still unusable, with a reason.
			fixture:  "alix-unloaded",
			engines:  []string{"Geode LX AES: module failed", "Geode LX RNG: module failed"},
			modules:  []string{"geode-aes", "geode-rng"},
			loaded:   []string{"geode-aes", "geode-rng"},
			rank:     espProposals,
			cbcAES:   "cbc(aes-generic)",
			reasonIn: map[string]string{"Geode LX AES": "registered no driver"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			root := filepath.Join("testdata", tt.fixture)
			loader := &recordingLoader{fail: tt.fail}
			r, err := Setup(root, loader)
			if err != nil {
				t.Fatalf("Setup(%s): %v", root, err)
			}
			if got := engineStates(r); !reflect.DeepEqual(got, tt.engines) {
				t.Errorf("engines:\n expected %q\n got      %q", tt.engines, got)
			}
			if got := r.Modules(); !reflect.DeepEqual(got, tt.modules) {
				t.Errorf("modules: expected %q, got %q", tt.modules, got)
			}
			if !reflect.DeepEqual(loader.loaded, tt.loaded) {
				t.Errorf("modules loaded: expected %q, got %q", tt.loaded, loader.loaded)
			}
			if got := rankedNames(r.Rank(espProposals)); !reflect.DeepEqual(got, tt.rank) {
				t.Errorf("ranking:\n expected %q\n got      %q", tt.rank, got)
			}
			table, err := ReadCryptoTable(root)
			if err != nil {
				t.Fatal(err)
			}
			if a, err := table.Lookup("cbc(aes)"); err != nil || a.Driver != tt.cbcAES {
				t.Errorf("cbc(aes) served by: expected %q, got %q (err %v)", tt.cbcAES, a.Driver, err)
			}
			for _, e := range r.Engines {
				if e.InUse != (e.Name == tt.inUse) {
					t.Errorf("%s in use: expected %v, got %v", e.Name, e.Name == tt.inUse, e.InUse)
				}
				want, ok := tt.reasonIn[e.Name]
				switch {
				case ok && !strings.Contains(e.Reason, want):
					t.Errorf("%s reason: expected it to contain %q, got %q", e.Name, want, e.Reason)
				case e.State == Usable && e.Reason != "":
					t.Errorf("%s is usable but has reason %q", e.Name, e.Reason)
				case e.State != Usable && e.Reason == "":
					t.Errorf("%s is %s without a reason", e.Name, e.State)
				}
			}
		})
	}
}

func TestDetectDoesNotLoad(t *testing.T) {
	r, err := Detect("testdata/alix-unloaded")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := engineStates(r), []string{"Geode LX AES: not loaded", "Geode LX RNG: not loaded"}; !reflect.DeepEqual(got, want) {
		t.Errorf("expected %q, got %q", want, got)
	}
	if ok, _ := r.Accelerated("aes128-sha256"); ok {
		t.Error("aes128-sha256 accelerated by an engine whose driver is not loaded")
	}
}

func TestDetectMissingCPUInfo(t *testing.T) {
	if _, err := Detect(t.TempDir()); err == nil {
		t.Error("Detect on an empty tree: expected an error about cpuinfo, got none")
	}
}

func TestAccelerated(t *testing.T) {
	reports := map[string]*Report{}
	for _, f := range []string{"alix", "epia-c3", "net4801", "apu2", "qemu"} {
		r, err := Detect(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		reports[f] = r
	}
	tests := []struct {
		fixture, proposal string
		want              bool
		engine            string
	}{
		{"alix", "aes128-sha256", true, "Geode LX AES"},
		{"alix", "aes-sha1", true, "Geode LX AES"},          // "aes" is AES-128-CBC
		{"alix", "aes192-sha256", false, ""},                // 192-bit keys fall back to software
		{"alix", "aes256-sha256-modp2048", false, ""},       // so do 256-bit keys
		{"alix", "aes128gcm16-prfsha256-ecp256", false, ""}, // no GCM in the Geode
		{"alix", "aes128ctr-sha256", false, ""},
		{"alix", "aes128-aes256-sha256", false, ""}, // the peer may pick aes256
		{"alix", "AES128-SHA256", true, "Geode LX AES"},
		{"epia-c3", "aes256-sha512", true, "VIA PadLock ACE"},
		{"epia-c3", "aes192-sha1", true, "VIA PadLock ACE"},
		{"epia-c3", "aes256gcm16", false, ""},
		{"epia-c3", "3des-sha1", false, ""},
		{"net4801", "3des-sha1", true, "Hifn 7956"},
		{"net4801", "3des-md5-modp1024", true, "Hifn 7956"}, // a legacy_algorithms tunnel's IKEv1 proposal
		{"net4801", "aes256-sha256", true, "Hifn 7956"},
		{"net4801", "aes128gcm16", false, ""},
		{"apu2", "aes256gcm16-prfsha384-ecp384", true, "AES-NI"},
		{"apu2", "aes128ccm16", true, "AES-NI"},
		{"apu2", "aes128gmac", true, "AES-NI"},
		{"apu2", "chacha20poly1305", false, ""},
		{"apu2", "camellia128-sha256", false, ""},
		{"apu2", "prfsha256-ecp256", false, ""}, // no encryption algorithm at all
		{"apu2", "aes512-sha256", false, ""},    // not a key size
		{"apu2", "", false, ""},
		{"qemu", "aes128-sha256", false, ""},
	}
	for _, tt := range tests {
		ok, engine := reports[tt.fixture].Accelerated(tt.proposal)
		if ok != tt.want || engine != tt.engine {
			t.Errorf("%s: Accelerated(%q) = %v, %q; expected %v, %q", tt.fixture, tt.proposal, ok, engine, tt.want, tt.engine)
		}
	}
}

func TestEngineOf(t *testing.T) {
	tests := map[string]string{
		"authenc(hmac(sha256-generic),cbc-aes-geode)": "Geode LX AES",
		"cbc-aes-padlock": "VIA PadLock ACE",
		"authenc(hmac(sha1-padlock),cbc(aes-generic))": "VIA PadLock PHE",
		"cbc-3des-hifn0":    "Hifn 795x", // 7955 and 7956 share the driver
		"rfc4106-gcm-aesni": "AES-NI",
		"rfc4106(gcm_base(ctr(aes-generic),ghash-generic))": "",
		"cbc(aes-generic)": "",
	}
	for driver, want := range tests {
		if got := EngineOf(driver); got != want {
			t.Errorf("EngineOf(%q) = %q, expected %q", driver, got, want)
		}
	}
}

func TestKernelAlgorithm(t *testing.T) {
	for _, tt := range []struct{ enc, integ, want string }{
		{"rfc4106(gcm(aes))", "", "rfc4106(gcm(aes))"},
		{"cbc(aes)", "hmac(sha256)", "authenc(hmac(sha256),cbc(aes))"},
	} {
		if got := KernelAlgorithm(tt.enc, tt.integ); got != tt.want {
			t.Errorf("KernelAlgorithm(%q, %q) = %q, expected %q", tt.enc, tt.integ, got, tt.want)
		}
	}
	// The ALIX fixture has an SA installed: its driver is named after the engine.
	table, err := ReadCryptoTable("testdata/alix")
	if err != nil {
		t.Fatal(err)
	}
	a, err := table.Lookup(KernelAlgorithm("cbc(aes)", "hmac(sha256)"))
	if err != nil {
		t.Fatal(err)
	}
	if EngineOf(a.Driver) != "Geode LX AES" || !a.InUse() {
		t.Errorf("installed SA on alix: driver %q (engine %q, in use %v); expected the Geode, in use", a.Driver, EngineOf(a.Driver), a.InUse())
	}
	if _, err := table.Lookup("rfc7539esp(chacha20,poly1305)"); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Lookup of an unregistered algorithm: expected ErrNoDriver, got %v", err)
	}
}

func TestParseProcCrypto(t *testing.T) {
	in := "name : cbc(aes)\ndriver : cbc-aes-geode\nmodule : geode_aes\npriority : 400\nrefcnt : 2\nselftest : passed\ninternal : no\ntype : skcipher\n\n" +
		"name : __cbc(aes)\ndriver : __cbc-aes-aesni\npriority : 400\nrefcnt : 1\nselftest : passed\ninternal : yes\n" +
		"name : sha1\ndriver : sha1-generic\npriority : 100\nrefcnt : 1\nselftest : unknown\n"
	got, err := ParseProcCrypto(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := CryptoTable{
		{Name: "cbc(aes)", Driver: "cbc-aes-geode", Module: "geode_aes", Priority: 400, Refcnt: 2, Selftest: "passed", Type: "skcipher"},
		{Name: "__cbc(aes)", Driver: "__cbc-aes-aesni", Priority: 400, Refcnt: 1, Selftest: "passed", Internal: true},
		{Name: "sha1", Driver: "sha1-generic", Priority: 100, Refcnt: 1, Selftest: "unknown"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expected %+v\ngot %+v", want, got)
	}
	for _, bad := range []string{"name : x\npriority : high\n", "no colon here\n", "refcnt : -\n"} {
		if _, err := ParseProcCrypto(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseProcCrypto(%q): expected an error", bad)
		}
	}
}

func TestParseCPUInfo(t *testing.T) {
	info, err := ParseCPUInfo(strings.NewReader("\nprocessor : 0\nvendor_id : CentaurHauls\ncpu family : 6\nmodel : 9\nmodel name : VIA Nehemiah\nflags : fpu ace ace_en\n\nprocessor : 1\nflags : fpu sse2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Vendor != "CentaurHauls" || info.Family != 6 || info.Model != 9 || info.ModelName != "VIA Nehemiah" {
		t.Errorf("got %+v", info)
	}
	if !info.Has("ace_en") || info.Has("sse2") {
		t.Errorf("flags from the first processor only: expected ace_en and no sse2, got %v", info.Flags)
	}
	for _, bad := range []string{"", "\n\n", "cpu family : six\n", "model : 1e\n"} {
		if _, err := ParseCPUInfo(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseCPUInfo(%q): expected an error", bad)
		}
	}
}

func TestKernelModulesLoad(t *testing.T) {
	root := "testdata/modules"
	var inserted []string
	k := &KernelModules{
		Dir:       filepath.Join(root, "lib/modules/6.1.0-fg"),
		SysModule: filepath.Join(root, "sys/module"),
		finit: func(fd int, params string, flags int) error {
			name := fmt.Sprintf("fd%d", fd)
			// Identify the file by its content, written by the fixture.
			buf := make([]byte, 128)
			n, _ := readAt(fd, buf)
			name = strings.TrimSpace(strings.TrimPrefix(string(buf[:n]), "fake module "))
			inserted = append(inserted, fmt.Sprintf("%s flags=%d", filepath.Base(name), flags))
			if strings.Contains(name, "crypto_simd") {
				return errExist
			}
			return nil
		},
	}
	if err := k.Load("geode_aes"); err != nil {
		t.Fatalf("Load(geode_aes): %v", err)
	}
	// Dependencies from the end of the modules.dep line; aes_generic is
	// live (skipped); crypto_simd answers EEXIST (fine).
	want := []string{"libaes.ko flags=0", "crypto_simd.ko flags=0", "geode-aes.ko flags=0"}
	if !reflect.DeepEqual(inserted, want) {
		t.Errorf("inserted: expected %q, got %q", want, inserted)
	}
	inserted = nil
	if err := k.Load("padlock-aes"); err != nil {
		t.Fatalf("Load(padlock-aes): %v", err)
	}
	if want := []string{"libaes.ko flags=0", "padlock-aes.ko.xz flags=4"}; !reflect.DeepEqual(inserted, want) {
		t.Errorf("inserted: expected %q, got %q", want, inserted)
	}
	inserted = nil
	if err := k.Load("via-rng"); err != nil || len(inserted) != 0 {
		t.Errorf("Load of a built-in module: expected nothing inserted and no error, got %q, %v", inserted, err)
	}
	if err := k.Load("hifn_795x"); err == nil || !strings.Contains(err.Error(), "libdes.ko") {
		t.Errorf("Load with a missing dependency file: expected an error naming libdes.ko, got %v", err)
	}
	if err := k.Load("no-such-module"); err == nil || !strings.Contains(err.Error(), "not in") {
		t.Errorf("Load of an unknown module: expected a 'not in modules.dep' error, got %v", err)
	}
}

func TestReportJSON(t *testing.T) {
	r, err := Setup("testdata/alix-unloaded", &recordingLoader{fail: map[string]error{"geode-aes": errors.New("no such device")}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"Geode LX AES"`, `"state":"module failed"`, `"reason":"no such device"`, `"model_name":"Geode(TM) Integrated Processor by AMD PCS"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON for the web UI lacks %s:\n%s", want, b)
		}
	}
}
