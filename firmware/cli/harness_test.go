package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/configd/configdtest"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

// The tests drive the CLI the way an admin does: through a pseudo
// terminal, with a real configd (store on a temporary database, API on a
// unix socket) behind it.

// openPTY returns the two ends of a new pseudo terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v (the tests need pseudo terminals)", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty slave: %v", err)
	}
	return m, s
}

// shortDir is a temporary directory with a path short enough for unix
// sockets.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "fgcli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type configdEnv struct {
	store  *config.Store
	socket string
	client *configdapi.Client
	dir    string
}

// startConfigd serves configd's API for a fresh store on a unix socket.
func startConfigd(t *testing.T) *configdEnv {
	t.Helper()
	dir := shortDir(t)
	cd := configdtest.Start(t, configdtest.Options{Dir: dir, Storage: "card"})
	return &configdEnv{store: cd.Store, socket: cd.Socket, client: cd.Client, dir: dir}
}

// serveJSON serves fixed JSON answers by path on a unix socket: a
// stand-in for a service whose daemon needs more than a test has (iked
// needs its data plane, netd the kernel's).
func serveJSON(t *testing.T, dir, name string, answers map[string]any) string {
	t.Helper()
	sock := filepath.Join(dir, name+".sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for path, v := range answers {
		if h, ok := v.(http.HandlerFunc); ok {
			mux.HandleFunc(path, h)
			continue
		}
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(v)
		})
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// startSupervisor runs a real supervisor with one shell service and
// serves its API.
func startSupervisor(t *testing.T, dir string, power func(supervisor.PowerAction) error) string {
	t.Helper()
	s, err := supervisor.New(supervisor.Config{
		Services: []supervisor.Service{{Name: "svc", Path: "/bin/sh", Args: []string{"-c", "echo hello from svc; exec sleep 1000"}, StopTimeout: time.Second}},
		Power:    power,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	sock := filepath.Join(dir, "supervisor.sock")
	if err := s.Serve(ctx, sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Shutdown(2 * time.Second)
		cancel()
		<-done
	})
	return sock
}

// terminal is the far end of the pty: what the admin types and sees.
type terminal struct {
	t      *testing.T
	master *os.File

	mu  sync.Mutex
	out []byte // everything the CLI wrote
	// The end of the last match: line, column and the line's content.
	markRow, markCol int
	markLine         string

	done chan error // Run's result
}

// startCLI runs fn (Run or Recover) on a new pty.
func startCLI(t *testing.T, opts Options, fn func(context.Context, *os.File, Options) error) *terminal {
	t.Helper()
	master, slave := openPTY(t)
	ctx, cancel := context.WithCancel(context.Background())
	term := &terminal{t: t, master: master, done: make(chan error, 1)}
	go func() {
		err := fn(ctx, slave, opts)
		slave.Close()
		term.done <- err
	}()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out = append(term.out, buf[:n]...)
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-term.done:
		case <-time.After(5 * time.Second):
			t.Errorf("the CLI did not end within 5s of its context")
		}
		master.Close()
		<-readerDone
		if t.Failed() {
			t.Logf("screen:\n%s", term.screen())
		}
	})
	return term
}

func runCLI(ctx context.Context, f *os.File, o Options) error     { return Run(ctx, f, o) }
func runRecover(ctx context.Context, f *os.File, o Options) error { return Recover(ctx, f, o) }

func (c *terminal) send(s string) {
	c.t.Helper()
	if _, err := c.master.Write([]byte(s)); err != nil {
		c.t.Fatalf("write to pty: %v", err)
	}
}

// expect waits until want appears on the screen after the end of the
// previous match and returns the screen from there to the end of this
// one. A match may start on the previous match's line, so that a prompt
// and what is typed after it match as one. The line editor rewrites lines
// in place (history, completion lists, ^C): if the previous match's line
// was rewritten, the text returned starts at that line, and a match that
// ends on it counts only if it is not what was there before.
func (c *terminal) expect(want string) string {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c.mu.Lock()
		text := render(c.out, 80)
		from, rewritten := c.markOffset(text)
		lineStart := strings.LastIndexByte(text[:from], '\n') + 1
		lineEnd := lineStart + strings.IndexByte(text[lineStart:]+"\n", '\n')
		for i := lineStart; i <= len(text); {
			j := strings.Index(text[i:], want)
			if j < 0 {
				break
			}
			end := i + j + len(want)
			ok := end > from
			if rewritten && end <= lineEnd {
				ok = !strings.HasPrefix(c.markLine, text[lineStart:end])
			}
			if ok {
				c.setMark(text, end)
				c.mu.Unlock()
				return text[from:end]
			}
			i += j + 1
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			c.t.Fatalf("waited 15s for %q; the screen since the last match:\n%s", want, text[from:])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setMark remembers the position end of text as the line number, the
// column and the line's content then.
func (c *terminal) setMark(text string, end int) {
	c.markRow = strings.Count(text[:end], "\n")
	lineStart := strings.LastIndexByte(text[:end], '\n') + 1
	c.markCol = end - lineStart
	c.markLine = text[lineStart:end]
}

// markOffset returns where the text after the mark starts: just after the
// remembered column if the line still starts as it did, else (rewritten)
// at the line's start.
func (c *terminal) markOffset(text string) (from int, rewritten bool) {
	off := 0
	for range c.markRow {
		i := strings.IndexByte(text[off:], '\n')
		if i < 0 {
			return len(text), false
		}
		off += i + 1
	}
	lineEnd := strings.IndexByte(text[off:], '\n')
	if lineEnd < 0 {
		lineEnd = len(text) - off
	}
	if strings.HasPrefix(text[off:off+lineEnd], c.markLine) {
		return off + c.markCol, false
	}
	return off, true
}

// quiet waits d and returns what appeared meanwhile.
func (c *terminal) quiet(d time.Duration) string {
	time.Sleep(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	text := render(c.out, 80)
	from, _ := c.markOffset(text)
	c.setMark(text, len(text))
	return text[from:]
}

// screen is everything the CLI wrote, as a terminal shows it.
func (c *terminal) screen() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return render(c.out, 80)
}

// wait returns Run's result once it ends.
func (c *terminal) wait() error {
	c.t.Helper()
	select {
	case err := <-c.done:
		c.done <- err
		return err
	case <-time.After(15 * time.Second):
		c.t.Fatal("the CLI did not end")
		return nil
	}
}

// render plays output on an emulated dumb terminal of the given width that
// understands what term.Terminal sends: CR, LF, backspace and the CSI
// cursor moves and erase-to-end-of-line. It returns the screen's lines;
// a line the terminal wrapped is joined with its continuation.
func render(out []byte, width int) string {
	var lines [][]rune
	soft := map[int]bool{} // rows that continue on the next one
	row, col := 0, 0
	put := func(r rune) {
		for len(lines) <= row {
			lines = append(lines, nil)
		}
		for len(lines[row]) < col {
			lines[row] = append(lines[row], ' ')
		}
		if col < len(lines[row]) {
			lines[row][col] = r
		} else {
			lines[row] = append(lines[row], r)
		}
		col++
	}
	s := []rune(string(out))
	for i := 0; i < len(s); i++ {
		switch r := s[i]; {
		case r == '\r':
			col = 0
		case r == '\n':
			row++
		case r == '\b':
			col = max(0, col-1)
		case r == 0x1b && i+1 < len(s) && s[i+1] == '[':
			j := i + 2
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ';' || s[j] == '?') {
				j++
			}
			if j >= len(s) {
				i = j
				break
			}
			n, err := strconv.Atoi(string(s[i+2 : j]))
			if err != nil {
				n = 1
			}
			switch s[j] {
			case 'A':
				row = max(0, row-n)
			case 'B':
				row += n
			case 'C':
				col += n
			case 'D':
				col = max(0, col-n)
			case 'K':
				if row < len(lines) && col < len(lines[row]) {
					lines[row] = lines[row][:col]
				}
			}
			i = j
		case r < ' ':
		default:
			if col >= width {
				soft[row] = true
				row, col = row+1, 0
			}
			put(r)
		}
	}
	var b bytes.Buffer
	for i, l := range lines {
		b.WriteString(string(l))
		if !soft[i] {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func commitReq(message string) configdapi.CommitRequest {
	return configdapi.CommitRequest{Who: "test", Message: message}
}
