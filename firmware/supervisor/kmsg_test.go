package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"

	"golang.org/x/sys/unix"
)

func TestParseKernelRecord(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    KernelRecord
		wantErr string
	}{
		{in: "6,339,5140900,-;NET: Registered protocol family 10\n",
			want: KernelRecord{Facility: 0, Level: 6, Seq: 339, Since: 5140900 * time.Microsecond, Text: "NET: Registered protocol family 10"}},
		{in: "30,340,5141000,-,caller=T1;udevd[1]: starting\n SUBSYSTEM=net\n DEVICE=n2\n",
			want: KernelRecord{Facility: 3, Level: 6, Seq: 340, Since: 5141 * time.Millisecond, Text: "udevd[1]: starting"}},
		{in: "3,1,0,c;semi;colon inside\n",
			want: KernelRecord{Level: 3, Seq: 1, Text: "semi;colon inside"}},
		{in: "4,2,7,-;", want: KernelRecord{Level: 4, Seq: 2, Since: 7 * time.Microsecond}},
		{in: "no separator", wantErr: "without ';'"},
		{in: "6,1;x", wantErr: "want prio,seq,usec"},
		{in: "x,1,2,-;x", wantErr: "kmsg priority"},
		{in: "6,-1,2,-;x", wantErr: "kmsg sequence"},
		{in: "6,1,99999999999999999999,-;x", wantErr: "kmsg timestamp"},
	} {
		got, err := ParseKernelRecord([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseKernelRecord(%q) error %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseKernelRecord(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseKernelRecord(f *testing.F) {
	for _, seed := range []string{
		"6,339,5140900,-;NET: Registered protocol family 10\n",
		"30,340,5141000,-,caller=T1;udevd[1]: starting\n SUBSYSTEM=net\n",
		"4,2,7,-;", ";", ",,,;", "6,1,2",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		r, err := ParseKernelRecord(rec)
		if err != nil {
			return
		}
		if r.Level < 0 || r.Level > 7 || r.Facility < 0 || strings.Contains(r.Text, "\n") {
			t.Errorf("ParseKernelRecord(%q) = %+v: level out of range or newline in text", rec, r)
		}
	})
}

// The real /dev/kmsg of this machine: the kernel log ring must fill with
// parsed records. The test only reads: a record written to /dev/kmsg would
// land in the host's kernel log (dmesg, journald, the console), which a
// test has no business changing. The newest record the kernel holds, read
// here independently, must reach the ring.
func TestFollowKernelLog(t *testing.T) {
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		t.Fatalf("/dev/kmsg: %v (the test runs as root on a Linux host)", err)
	}
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.FollowKernelLog(ctx, "/dev/kmsg"); err != nil {
		t.Fatal(err)
	}
	newest := newestKernelRecord(t)
	waitfor.Cond(t, 10*time.Second, fmt.Sprintf("the kernel's newest record %q (level %d) in the kernel ring", newest.Text, newest.Level), func() bool {
		lines, _, _ := s.Logs("kernel", 0)
		for _, l := range lines {
			if l.Text == newest.Text && l.Level == newest.Level && l.Stream == "kernel" {
				return true
			}
		}
		return false
	})
}

// newestKernelRecord reads /dev/kmsg without blocking up to its end and
// returns the last record. A running kernel always holds some (its boot
// messages at least).
func newestKernelRecord(t *testing.T) KernelRecord {
	t.Helper()
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/kmsg: %v", err)
	}
	defer unix.Close(fd)
	var last KernelRecord
	found := false
	buf := make([]byte, 8192)
	for range 1 << 20 { // bounded: the ring holds far fewer records
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EPIPE) {
			continue // overwritten while reading: go on from the oldest left
		}
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			t.Fatalf("read /dev/kmsg: %v", err)
		}
		if rec, err := ParseKernelRecord(buf[:n]); err == nil {
			last, found = rec, true
		}
	}
	if !found {
		t.Fatal("/dev/kmsg holds no record to compare with")
	}
	return last
}
