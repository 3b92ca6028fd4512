package supervisor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestAPIConsoleBaud(t *testing.T) {
	var mu sync.Mutex
	var got []int
	hookErr := errors.New("getty would not restart")
	s, err := New(Config{ConsoleBaud: func(baud int) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, baud)
		if baud == 1200 {
			return hookErr
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, s)
	ctx := context.Background()
	for _, tc := range []struct {
		baud     int
		wantErr  string // "" for success
		wantHook bool
	}{
		{115200, "", true},
		{38400, "", true},
		{9600, "", true},
		{1200, "getty would not restart", true},
		{0, "op console-baud needs a baud", false},
		{-9600, "want one of [1200 2400 4800 9600 19200 38400 57600 115200]", false},
		{300, "want one of", false},
		{14400, "want one of", false},
		{230400, "want one of", false},
	} {
		mu.Lock()
		got = got[:0]
		mu.Unlock()
		err := c.SetConsoleBaud(ctx, tc.baud)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("SetConsoleBaud(%d) = %v, want success", tc.baud, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("SetConsoleBaud(%d) = %v, want an error containing %q", tc.baud, err, tc.wantErr)
		}
		mu.Lock()
		if called := len(got) == 1 && got[0] == tc.baud; called != tc.wantHook || len(got) > 1 {
			t.Errorf("SetConsoleBaud(%d) called the hook with %v; want it called with %d: %v", tc.baud, got, tc.baud, tc.wantHook)
		}
		mu.Unlock()
	}
	if logs, _ := c.Logs(ctx, "supervisor", 0); !strings.Contains(logText(logs.Lines), "console getty restarted at 38400 baud") {
		t.Errorf("supervisor log %q: want a note of the restart at 38400 baud", logText(logs.Lines))
	}
}

func TestAPIConsoleBaudWithoutGetty(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, s)
	if err := c.SetConsoleBaud(context.Background(), 38400); err == nil || !strings.Contains(err.Error(), "runs no console getty") {
		t.Errorf("SetConsoleBaud without a hook = %v, want an error saying the box runs no console getty", err)
	}
}

func logText(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}
