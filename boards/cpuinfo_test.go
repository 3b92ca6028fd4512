package boards

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseCPUInfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want cpuInfo
	}{
		{
			name: "Geode LX",
			in: "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 5\nmodel\t\t: 10\n" +
				"model name\t: Geode(TM) Integrated Processor by AMD PCS\nflags\t\t: fpu cmov mmx 3dnow\n\n",
			want: cpuInfo{Vendor: "AuthenticAMD", Family: 5, Model: 10,
				ModelName: "Geode(TM) Integrated Processor by AMD PCS", Flags: []string{"3dnow", "cmov", "fpu", "mmx"}},
		},
		{
			name: "only the first processor counts",
			in:   "processor: 0\nvendor_id: A\nflags: x\n\nprocessor: 1\nvendor_id: B\nflags: y\n",
			want: cpuInfo{Vendor: "A", Family: -1, Model: -1, Flags: []string{"x"}},
		},
		{
			name: "leading blank lines, duplicate flags, CRLF",
			in:   "\n\nvendor_id : CentaurHauls\r\ncpu family : 6\r\nmodel : 9\r\nflags : ace rng ace\r\n",
			want: cpuInfo{Vendor: "CentaurHauls", Family: 6, Model: 9, Flags: []string{"ace", "rng"}},
		},
		{
			name: "numbers that are not",
			in:   "cpu family\t: five\nmodel\t: -3\n",
			want: cpuInfo{Family: -1, Model: -1},
		},
		{
			name: "empty",
			in:   "",
			want: cpuInfo{Family: -1, Model: -1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := parseCPUInfo([]byte(tc.in))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseCPUInfo(%q)\n got %+v\nwant %+v", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzParseCPUInfo holds the parser to two things on any input: it does not
// panic, and what it returns survives being written out and read back,
// which fails if it keeps anything it could not have read cleanly (stray
// spaces, empty or duplicate flags, unsorted flags, negative numbers).
func FuzzParseCPUInfo(f *testing.F) {
	fixtures, _ := filepath.Glob(filepath.Join("testdata", "probe", "*", "proc", "cpuinfo"))
	for _, path := range fixtures {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("vendor_id:\nflags:\n"))
	f.Add([]byte("\x00:\x00\n\n:\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := parseCPUInfo(data)
		again := parseCPUInfo(c.format())
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("round trip changed the result:\nfirst  %#v\nsecond %#v", c, again)
		}
		for i, flag := range c.Flags {
			if flag == "" || (i > 0 && c.Flags[i-1] >= flag) {
				t.Fatalf("flags not sorted and unique: %q", c.Flags)
			}
		}
		_ = c.String()
	})
}
