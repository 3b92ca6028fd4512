package bootslot_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/images/imagestest"
	"golang.org/x/sys/unix"
)

// holdLock takes the card's lock the way another process's OpenCard does
// (flock on its own open file description) and returns its release.
func holdLock(t *testing.T, path string) func() {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

// The end of a test boot must not give up on the card because configd is
// reading it for the web UI at that moment (a power-cut trial left a box
// in its test boot for good that way): the writer waits for the lock.
func TestOpenCardWaitingWaitsForAReader(t *testing.T) {
	card := imagestest.NewCard(t, t.TempDir()).Path
	release := holdLock(t, card)
	if _, err := bootslot.OpenCard(card, 1<<20); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("OpenCard of a card in use: %v, want EWOULDBLOCK", err)
	}
	go func() { time.Sleep(300 * time.Millisecond); release() }()
	c, err := bootslot.OpenCardWaiting(card, 1<<20, time.Minute)
	if err != nil {
		t.Fatalf("OpenCardWaiting after the reader let go: %v", err)
	}
	if _, err := bootslot.ReadBoot(c.Vol); err != nil {
		t.Errorf("read the boot record: %v", err)
	}
	c.Close()
}

func TestOpenCardWaitingGivesUp(t *testing.T) {
	card := imagestest.NewCard(t, t.TempDir()).Path
	defer holdLock(t, card)()
	_, err := bootslot.OpenCardWaiting(card, 1<<20, 300*time.Millisecond)
	if !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("OpenCardWaiting of a card held for good: %v, want EWOULDBLOCK after the wait", err)
	}
	// Not the card's fault: any other error comes back at once.
	if _, err := bootslot.OpenCardWaiting(card+".missing", 1<<20, time.Minute); err == nil || errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("a missing card: %v", err)
	}
}
