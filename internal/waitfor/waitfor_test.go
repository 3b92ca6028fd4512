package waitfor

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestCond(t *testing.T) {
	var n atomic.Int32
	go func() {
		time.Sleep(20 * time.Millisecond)
		n.Store(1)
	}()
	Cond(t, 10*time.Second, "the flag", func() bool { return n.Load() == 1 })

	// A condition that never holds fails the test, naming it.
	var ft fakeT
	done := make(chan struct{})
	go func() {
		defer close(done)
		Cond(&ft, 30*time.Millisecond, "nothing", func() bool { return false })
	}()
	<-done
	if ft.msg != "timed out after 30ms waiting for nothing" {
		t.Errorf("failure %q", ft.msg)
	}
}

// fakeT records Fatalf and ends the goroutine as testing.T does.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
