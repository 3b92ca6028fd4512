package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// A serial line delivers whatever the far end sends: CR, LF or CRLF for
// Enter depending on the terminal, NULs and stray high bytes on a noisy
// line, half escape sequences when a key is pressed during a baud mismatch.
// input cleans that up before term.Terminal sees it, so that the line
// editor only ever gets whole keys:
//
//   - Enter is CR, LF or CRLF (even split across reads); each is one CR.
//   - ^C at the prompt clears the line (term.Terminal would treat it as
//     end of input and log the user out).
//   - Escape sequences are passed on only when short and well formed
//     (ESC [ digits/; final, or ESC O final); anything else is dropped, so
//     that an unterminated sequence cannot hold the editor's small input
//     buffer (a full buffer makes term.Terminal spin).
//   - Invalid UTF-8, NULs and bracketed-paste marks are dropped.
//
// While a command runs, watchInterrupt reads the line for ^C and keeps
// whatever else was typed for the next prompt.

const (
	keyCtrlC  = 0x03
	keyCtrlD  = 0x04
	keyCtrlE  = 0x05
	keyCtrlU  = 0x15
	keyEscape = 0x1b
	keyCR     = '\r'
	keyLF     = '\n'

	maxEscapeLen = 12   // ESC [ 1 ; 3 C is the longest the editor knows
	maxTypeAhead = 4096 // bytes kept while a command runs
	pollInterval = 250 * time.Millisecond
)

// errIdle ends a session nobody typed into for the idle timeout.
var errIdle = errors.New("idle timeout")

// input is the read side of the terminal, filtered for term.Terminal.
type input struct {
	r  io.Reader
	fd int // -1 when r is not a file descriptor: no polling, no ^C watch

	ctx  context.Context
	idle time.Duration // 0: no idle timeout

	raw []byte // read from the line, not yet filtered
	out []byte // filtered, not yet read by the editor

	lastCR bool   // the previous byte was CR: a following LF is its pair
	esc    []byte // escape sequence being collected
	escBad bool   // in a sequence too long to keep: swallow it to its end
	utf    []byte // incomplete UTF-8 sequence
	buf    [256]byte
}

func newInput(ctx context.Context, r io.Reader, fd int, idle time.Duration) *input {
	return &input{r: r, fd: fd, ctx: ctx, idle: idle}
}

// Read gives the editor filtered bytes, reading the line when it has none.
func (in *input) Read(p []byte) (int, error) {
	for len(in.out) == 0 {
		if len(in.raw) == 0 {
			n, err := in.readLine(in.buf[:])
			in.raw = append(in.raw, in.buf[:n]...)
			if n == 0 && err != nil {
				return 0, err
			}
		}
		for _, b := range in.raw {
			in.filter(b)
		}
		in.raw = in.raw[:0]
	}
	n := copy(p, in.out)
	in.out = in.out[:copy(in.out, in.out[n:])]
	return n, nil
}

// readLine reads from the terminal. On a file descriptor it waits in poll
// so that the session's context and the idle timeout can end the wait; a
// read is only started when data is there, so nothing is left blocked in
// read(2) to steal input from whatever uses the line next (the expert
// shell, the getty).
func (in *input) readLine(p []byte) (int, error) {
	if in.fd < 0 {
		return in.r.Read(p)
	}
	var deadline time.Time
	if in.idle > 0 {
		deadline = time.Now().Add(in.idle)
	}
	for {
		if err := in.ctx.Err(); err != nil {
			return 0, err
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return 0, errIdle
		}
		ready, err := pollIn(in.fd, pollInterval)
		if err != nil {
			return 0, err
		}
		if ready {
			n, err := unix.Read(in.fd, p)
			if n == 0 && err == nil {
				return 0, io.EOF // hang-up
			}
			if err == unix.EINTR || err == unix.EAGAIN {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("read terminal: %w", err)
			}
			return n, nil
		}
	}
}

// pollIn waits up to d for fd to become readable.
func pollIn(fd int, d time.Duration) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(d/time.Millisecond))
	if err == unix.EINTR {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("poll terminal: %w", err)
	}
	if n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 && fds[0].Revents&unix.POLLIN == 0 {
		return false, io.EOF
	}
	return n > 0, nil
}

// filter feeds one byte from the line through the clean-up described at
// the top of this file.
func (in *input) filter(b byte) {
	wasCR := in.lastCR
	in.lastCR = false
	if in.escBad {
		switch {
		case b >= '0' && b <= '9' || b == ';':
			return
		case b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b == '~':
			in.escBad = false
			return
		}
		in.escBad = false
	}
	if len(in.esc) > 0 {
		in.escape(b)
		return
	}
	if len(in.utf) > 0 {
		if b >= 0x80 && b < 0xc0 {
			in.utf = append(in.utf, b)
			if utf8.FullRune(in.utf) {
				if r, _ := utf8.DecodeRune(in.utf); r != utf8.RuneError {
					in.out = append(in.out, in.utf...)
				}
				in.utf = in.utf[:0]
			}
			return
		}
		in.utf = in.utf[:0] // cut short: drop it and take b on its own
	}
	switch {
	case b == keyCR:
		in.out = append(in.out, keyCR)
		in.lastCR = true
	case b == keyLF:
		if !wasCR {
			in.out = append(in.out, keyCR)
		}
	case b == keyCtrlC:
		in.out = append(in.out, keyCtrlE, keyCtrlU)
	case b == keyEscape:
		in.esc = append(in.esc, b)
	case b == 0:
	case b < 0x80:
		in.out = append(in.out, b)
	case b >= 0xc2 && b <= 0xf4: // lead byte of a 2-4 byte sequence
		in.utf = append(in.utf, b)
	}
}

// escape collects an escape sequence and passes it on when it ends well.
func (in *input) escape(b byte) {
	final := b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b == '~'
	switch {
	case len(in.esc) == 1 && (b == '[' || b == 'O'):
		in.esc = append(in.esc, b)
	case len(in.esc) == 1:
		// ESC then a plain key (Alt-key, or a lone Escape): keep the key.
		in.esc = in.esc[:0]
		in.filter(b)
	case in.esc[1] == 'O':
		// SS3 arrows and Home/End, sent in application cursor mode:
		// pass them on in the CSI form the editor knows.
		if final {
			in.out = append(in.out, keyEscape, '[', b)
		}
		in.esc = in.esc[:0]
	case final:
		// Bracketed paste marks are dropped: the CLI never turns that
		// mode on, and inside it the editor would take control bytes
		// into the line.
		if !(b == '~' && (string(in.esc[1:]) == "[200" || string(in.esc[1:]) == "[201")) {
			in.out = append(in.out, in.esc...)
			in.out = append(in.out, b)
		}
		in.esc = in.esc[:0]
	case b >= '0' && b <= '9' || b == ';':
		if len(in.esc) < maxEscapeLen {
			in.esc = append(in.esc, b)
		} else {
			// Longer than any key sends: noise. Swallow the rest of it
			// without keeping it.
			in.esc = in.esc[:0]
			in.escBad = true
		}
	default:
		// Too long or not a parameter: noise. Drop the sequence; a
		// control byte (Enter, ^C) still counts.
		in.esc = in.esc[:0]
		if b < ' ' {
			in.filter(b)
		}
	}
}

// watchInterrupt returns a context that is canceled when ^C arrives on the
// terminal while a command runs. Other input is kept for the next prompt.
// stop ends the watch and returns only when nothing reads the line any
// more. Without a file descriptor there is nothing to watch and ^C cannot
// stop a command; commands are bounded in time anyway.
func (in *input) watchInterrupt(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	if in.fd < 0 {
		return ctx, cancel
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf [64]byte
		for {
			select {
			case <-quit:
				return
			default:
			}
			ready, err := pollIn(in.fd, 50*time.Millisecond)
			if err != nil {
				cancel()
				return
			}
			if !ready {
				continue
			}
			n, err := unix.Read(in.fd, buf[:])
			if n <= 0 || err != nil {
				if err == unix.EINTR || err == unix.EAGAIN {
					continue
				}
				cancel()
				return
			}
			for _, b := range buf[:n] {
				switch {
				case b == keyCtrlC:
					cancel()
				case len(in.raw) < maxTypeAhead:
					in.raw = append(in.raw, b)
				}
			}
		}
	}()
	return ctx, func() {
		close(quit)
		<-done
		cancel()
	}
}
