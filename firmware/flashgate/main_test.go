package main

import (
	"slices"
	"testing"
	"time"
)

// beside runs hostd in configd's process: the process's status is
// configd's, hostd's bad flags end it (the supervisor says so and restarts
// it), and a hostd that stopped on SIGTERM waits for configd to finish.
func TestBeside(t *testing.T) {
	release := make(chan struct{})
	mainRan := make(chan []string, 1)
	main := func(code int) func([]string) int {
		return func(args []string) int {
			mainRan <- args
			<-release
			return code
		}
	}
	companion := func(code int, after <-chan struct{}) func([]string) int {
		return func(args []string) int {
			if after != nil {
				<-after
			}
			return code
		}
	}

	// The main service's status ends the process, whatever the companion.
	done := make(chan int, 1)
	go func() { done <- beside(main(3), []string{"a"}, companion(0, make(chan struct{})), nil) }()
	if args := <-mainRan; !slices.Equal(args, []string{"a"}) {
		t.Errorf("main got %q, want its own arguments", args)
	}
	close(release)
	if code := <-done; code != 3 {
		t.Errorf("main ended with 3: the process ended with %d", code)
	}

	// A companion failing on its own ends the process with its status.
	release = make(chan struct{})
	if code := beside(main(0), nil, companion(2, nil), nil); code != 2 {
		t.Errorf("the companion failed with 2: the process ended with %d", code)
	}
	<-mainRan
	close(release)

	// A companion ending cleanly waits for main.
	release = make(chan struct{})
	done = make(chan int, 1)
	go func() { done <- beside(main(0), nil, companion(0, nil), nil) }()
	<-mainRan
	select {
	case code := <-done:
		t.Fatalf("the process ended (%d) when the companion did, before main", code)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if code := <-done; code != 0 {
		t.Errorf("the process ended with %d, want main's 0", code)
	}
}
