package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KernelRecord is one record read from /dev/kmsg.
type KernelRecord struct {
	Facility int
	Level    int // syslog severity, 0 (emerg) to 7 (debug)
	Seq      uint64
	Since    time.Duration // since boot
	Text     string
}

// ParseKernelRecord parses one /dev/kmsg record:
// "<prio>,<seq>,<usec>,<flags>[,...];<text>\n" followed by optional
// " KEY=value" dictionary lines, which are dropped. Non-printable bytes in
// the text arrive escaped as \xNN already.
func ParseKernelRecord(rec []byte) (KernelRecord, error) {
	head, body, ok := strings.Cut(string(rec), ";")
	if !ok {
		return KernelRecord{}, fmt.Errorf("kmsg record without ';': %q", truncate(rec))
	}
	fields := strings.Split(head, ",")
	if len(fields) < 3 {
		return KernelRecord{}, fmt.Errorf("kmsg record header %q: want prio,seq,usec", head)
	}
	prio, err := strconv.ParseUint(fields[0], 10, 16)
	if err != nil {
		return KernelRecord{}, fmt.Errorf("kmsg priority %q: %w", fields[0], err)
	}
	seq, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return KernelRecord{}, fmt.Errorf("kmsg sequence %q: %w", fields[1], err)
	}
	usec, err := strconv.ParseUint(fields[2], 10, 63)
	if err != nil {
		return KernelRecord{}, fmt.Errorf("kmsg timestamp %q: %w", fields[2], err)
	}
	text, _, _ := strings.Cut(body, "\n")
	return KernelRecord{
		Facility: int(prio >> 3),
		Level:    int(prio & 7),
		Seq:      seq,
		Since:    time.Duration(usec) * time.Microsecond,
		Text:     text,
	}, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// FollowKernelLog copies the kernel log from path (/dev/kmsg) into the
// "kernel" ring until ctx is done, starting with what the kernel still
// holds from boot. It returns an error only if path cannot be opened.
func (s *Supervisor) FollowKernelLog(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("kernel log: %w", err)
	}
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go s.guard("kernel log", func() {
		buf := make([]byte, 8192) // one read returns one record
		for {
			n, err := f.Read(buf)
			if errors.Is(err, syscall.EPIPE) {
				// Records were overwritten before we read them; the
				// next read resumes at the oldest one still held.
				s.kernel.Append(Line{Time: time.Now(), Stream: "kernel", Text: "(kernel log records lost: ring overrun)"})
				continue
			}
			if err != nil {
				return
			}
			rec, perr := ParseKernelRecord(buf[:n])
			if perr != nil {
				continue
			}
			s.kernel.Append(Line{Time: time.Now(), Stream: "kernel", Level: rec.Level, Text: rec.Text})
		}
	})
	return nil
}
