package webui

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLowerPriority runs lowerPriority in a process of its own (this test
// binary again) while goroutines keep the runtime starting threads, and
// checks there that every thread ended up at the nice value.
func TestLowerPriority(t *testing.T) {
	if os.Getenv("WEBUI_TEST_LOWER_PRIORITY") == "1" {
		lowerPriorityChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLowerPriority$", "-test.v")
	cmd.Env = append(os.Environ(), "WEBUI_TEST_LOWER_PRIORITY=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child process: %v\n%s", err, out)
	}
}

func lowerPriorityChild(t *testing.T) {
	// Blocking system calls make the runtime start threads while the
	// priority is being lowered.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					time.Sleep(time.Millisecond)
					os.ReadFile("/proc/self/stat")
				}
			}
		}()
	}
	err := lowerPriority(7)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		stat, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// Field 19 is the nice value; the command (field 2) is in
		// parentheses and may hold spaces, so count after it.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if nice, _ := strconv.Atoi(fields[16]); nice != 7 {
			t.Errorf("thread %s runs at nice %d, want 7 (of %d threads)", task.Name(), nice, len(tasks))
		}
	}
}
