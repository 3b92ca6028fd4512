package cryptobench

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"golang.org/x/sys/unix"
)

func TestRun(t *testing.T) {
	sizes := []int{16, 256}
	r, err := Run(Options{Sizes: sizes, PerCell: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	afalgErr := afalgAvailable()
	goRows, algRows := 0, 0
	for _, res := range r.Results {
		switch res.Impl {
		case "go":
			goRows++
			if res.Error != "" || len(res.MBps) != len(sizes) {
				t.Errorf("%s go: expected %d numbers, got %v (error %q)", res.Algorithm, len(sizes), res.MBps, res.Error)
			}
			for _, v := range res.MBps {
				if v <= 0 {
					t.Errorf("%s go: non-positive throughput %v", res.Algorithm, res.MBps)
				}
			}
		case "af_alg":
			algRows++
			if afalgErr != nil && !strings.HasPrefix(res.Error, "AF_ALG not available: ") {
				t.Errorf("%s af_alg on a kernel without AF_ALG: expected the reason, got %+v", res.Algorithm, res)
			}
			if afalgErr == nil && res.Error == "" && len(res.MBps) != len(sizes) {
				t.Errorf("%s af_alg %s: expected %d numbers, got %v", res.Algorithm, res.Driver, len(sizes), res.MBps)
			}
		}
	}
	if goRows != len(algorithms) || algRows < len(algorithms) {
		t.Errorf("expected %d go rows and at least as many af_alg rows, got %d and %d", len(algorithms), goRows, algRows)
	}
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, a := range algorithms {
		if !strings.Contains(buf.String(), a.Name) {
			t.Errorf("table lacks %s:\n%s", a.Name, buf.String())
		}
	}
}

func TestRunOptions(t *testing.T) {
	if _, err := Run(Options{Sizes: []int{0}}); err == nil {
		t.Error("block size 0: expected an error")
	}
	if _, err := Run(Options{Only: []string{"rot13"}}); err == nil {
		t.Error("unknown algorithm: expected an error")
	}
	if code := Main([]string{"-t", "1ms", "-sizes", "16", "-alg", "aes-128-cbc", "-json"}); code != 0 {
		t.Errorf("Main -json: exit %d", code)
	}
	if code := Main([]string{"-sizes", "sixteen"}); code != 2 {
		t.Errorf("Main with a bad -sizes: exit %d, expected 2", code)
	}
}

// TestDrivers: on an ALIX the engine's driver comes first, then the generic
// one; the generic one is added where /proc/crypto does not list it yet.
func TestDrivers(t *testing.T) {
	alix, err := hwcrypto.ReadCryptoTable("../testdata/alix")
	if err != nil {
		t.Fatal(err)
	}
	apu, err := hwcrypto.ReadCryptoTable("../testdata/apu2")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		table hwcrypto.CryptoTable
		alg   int
		want  []string
	}{
		{alix, 0, []string{"cbc-aes-geode", "cbc(aes-generic)"}},
		{alix, 2, []string{"gcm_base(ctr(aes-generic),ghash-generic)"}},
		{apu, 0, []string{"cbc-aes-aesni", "cbc(aes-generic)"}},
		{apu, 2, []string{"generic-gcm-aesni", "gcm_base(ctr(aes-generic),ghash-generic)"}},
	}
	for _, tt := range tests {
		if got := drivers(&algorithms[tt.alg], tt.table); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: expected %q, got %q", algorithms[tt.alg].Name, tt.want, got)
		}
	}
}

// TestControl checks the control messages of an AF_ALG request: operation
// encrypt, the IV with its length, and for AEADs an associated data length.
func TestControl(t *testing.T) {
	for _, a := range []*algorithm{&algorithms[0], &algorithms[2]} {
		_, iv, _ := testVector(a)
		msgs, err := unix.ParseSocketControlMessage(buildControl(a, iv))
		if err != nil {
			t.Fatal(err)
		}
		want := 2
		if a.Type == "aead" {
			want = 3
		}
		if len(msgs) != want {
			t.Fatalf("%s: %d control messages, expected %d", a.Name, len(msgs), want)
		}
		for _, m := range msgs {
			if m.Header.Level != unix.SOL_ALG {
				t.Errorf("%s: level %d", a.Name, m.Header.Level)
			}
			switch m.Header.Type {
			case unix.ALG_SET_OP:
				if binary.NativeEndian.Uint32(m.Data) != unix.ALG_OP_ENCRYPT {
					t.Errorf("%s: op %x", a.Name, m.Data)
				}
			case unix.ALG_SET_IV:
				if int(binary.NativeEndian.Uint32(m.Data)) != a.IVLen || !bytes.Equal(m.Data[4:4+a.IVLen], iv) {
					t.Errorf("%s: IV message %x, expected length %d then the IV", a.Name, m.Data, a.IVLen)
				}
			case unix.ALG_SET_AEAD_ASSOCLEN:
				if binary.NativeEndian.Uint32(m.Data) != 0 {
					t.Errorf("%s: assoclen %x", a.Name, m.Data)
				}
			default:
				t.Errorf("%s: unexpected control message type %d", a.Name, m.Header.Type)
			}
		}
	}
}

// BenchmarkGo reports Go's own throughput per algorithm at 1024 bytes, the
// typical ESP payload, for comparison with cryptobench's table.
func BenchmarkGo(b *testing.B) {
	for i := range algorithms {
		a := &algorithms[i]
		b.Run(a.Name, func(b *testing.B) {
			key, iv, _ := testVector(a)
			seal, err := a.newGo(key)
			if err != nil {
				b.Fatal(err)
			}
			src := make([]byte, 1024)
			dst := make([]byte, 1024+a.TagLen)
			b.SetBytes(1024)
			b.ReportAllocs()
			for b.Loop() {
				seal(dst, iv, src)
			}
		})
	}
}

// TestGoSealReuse: reusing the CBC encrypter with a new IV gives the same
// bytes as a fresh one, so the known-answer check against AF_ALG holds.
func TestGoSealReuse(t *testing.T) {
	for i := range algorithms {
		a := &algorithms[i]
		key, iv, msg := testVector(a)
		seal, err := a.newGo(key)
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, len(msg)+a.TagLen)
		seal(first, iv, msg)
		seal(make([]byte, len(msg)+a.TagLen), bytes.Repeat([]byte{1}, a.IVLen), msg) // another IV in between
		again := make([]byte, len(msg)+a.TagLen)
		seal(again, iv, msg)
		fresh, _ := a.newGo(key)
		want := make([]byte, len(msg)+a.TagLen)
		fresh(want, iv, msg)
		if !bytes.Equal(first, want) || !bytes.Equal(again, want) {
			t.Errorf("%s: reused sealer gives %x then %x, fresh one %x", a.Name, first, again, want)
		}
	}
}
