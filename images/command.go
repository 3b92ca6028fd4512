package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// command is one host program invocation. Errors carry the command line and
// the tail of its stderr, which is where the tools explain themselves.
type command struct {
	Dir   string
	Env   []string // added to the environment
	Stdin []byte
}

func (c command) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), c.Env...)
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &commandError{Args: append([]string{name}, args...), Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// commandError is a failed host command.
type commandError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *commandError) Error() string {
	return fmt.Sprintf("%s: %v%s", strings.Join(e.Args, " "), e.Err, stderrTail(e.Stderr))
}

func (e *commandError) Unwrap() error { return e.Err }

// exitCode is the command's exit status, or -1 if it did not exit normally.
func (e *commandError) exitCode() int {
	if ee, ok := e.Err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// stderrTail keeps the last few lines of a tool's stderr: the reason is at
// the end, progress chatter at the start.
func stderrTail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 4 {
		lines = lines[len(lines)-4:]
	}
	return ": " + strings.Join(lines, " / ")
}
