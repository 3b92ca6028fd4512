package configdapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
)

// notYet is a configd that does not answer for its first n reads, then
// answers with err (nil: a configuration).
type notYet struct {
	mu    sync.Mutex
	n     int
	err   error
	reads int
}

func (s *notYet) Running(ctx context.Context) (*config.Config, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.reads <= s.n {
		return nil, 0, errors.New("dial unix configd.sock: connect: no such file or directory")
	}
	if s.err != nil {
		return nil, 0, s.err
	}
	return config.Default(), 7, nil
}

func (s *notYet) Watch(ctx context.Context) <-chan config.Change { return nil }

func TestWaitRunning(t *testing.T) {
	ctx := context.Background()
	// Five refusals take 50+100+200+400+500 ms of pauses at most.
	src := &notYet{n: 5}
	cfg, rev, err := WaitRunning(ctx, src, 10*time.Second)
	if err != nil || cfg == nil || rev != 7 || src.reads != 6 {
		t.Errorf("WaitRunning = %v, %d, %v after %d reads; want the configuration at 7 after 6", cfg != nil, rev, err, src.reads)
	}

	// No wait: one try.
	src = &notYet{n: 1}
	if _, _, err := WaitRunning(ctx, src, 0); err == nil || !strings.Contains(err.Error(), "no such file") || src.reads != 1 {
		t.Errorf("WaitRunning with no wait = %v after %d reads; want the dial error after 1", err, src.reads)
	}

	// An answer that is an error is final: configd is there.
	src = &notYet{err: &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "card"}}
	var apiErr *APIError
	if _, _, err := WaitRunning(ctx, src, 10*time.Second); !errors.As(err, &apiErr) || src.reads != 1 {
		t.Errorf("WaitRunning = %v after %d reads; want configd's answer after 1", err, src.reads)
	}

	// A context that ends stops the wait.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	src = &notYet{n: 1 << 30}
	if _, _, err := WaitRunning(cctx, src, time.Hour); err == nil {
		t.Error("WaitRunning returned no error when its context ended first")
	}
}
