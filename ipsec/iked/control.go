package iked

import (
	"errors"
	"fmt"

	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// What an operator asks of a tunnel, from the local API, the console or
// a test: the logic behind POST /v1/tunnels/{name}/up, down and rekey.

// noTunnel is the error for a name that is not a configured tunnel: the
// API's 404 (errors.Is ikedapi.ErrNoTunnel).
type noTunnel string

func (n noTunnel) Error() string        { return fmt.Sprintf("no tunnel named %q", string(n)) }
func (n noTunnel) Is(target error) bool { return target == ikedapi.ErrNoTunnel }

// Up initiates the named tunnel now, whatever its start action, as
// swanctl --initiate does. One that waits for traffic starts as if traffic
// had come. One that responds is initiated once: if that fails it waits for
// the peer again, without the retries of start action initiate. A tunnel
// that has an IKE SA, or whose initiation is under way, is left as it is.
func (d *Daemon) Up(name string) error {
	d.mu.Lock()
	t := d.tunnels[name]
	if t == nil {
		d.mu.Unlock()
		return noTunnel(name)
	}
	err := t.upAsked(d.now())
	d.mu.Unlock()
	if err != nil {
		return err
	}
	d.maintain()
	return nil
}

// Down deletes the named tunnel's IKE SAs; with start action initiate it
// comes back after the retry delay, with respond it waits for the peer
// (an up asked for and still under way is dropped).
func (d *Daemon) Down(name string) error {
	d.mu.Lock()
	t := d.tunnels[name]
	if t == nil {
		d.mu.Unlock()
		return noTunnel(name)
	}
	t.downAsked()
	d.mu.Unlock()
	// Every IKE SA of the tunnel, not only the current one: a peer that
	// does not reuse IKE SAs (strongSwan's reuse_ikesa = no) may have
	// made a second one, and the first would stay up at its end.
	for _, sa := range d.sasOf(name) {
		sa.Delete()
	}
	return nil
}

// Rekey rekeys the named tunnel's IKE SA (ikeSA) or every one of its
// CHILD_SAs now, as `swanctl --rekey` does; the SAs being replaced keep
// carrying traffic until their successors are installed.
func (d *Daemon) Rekey(name string, ikeSA bool) error {
	d.mu.Lock()
	t := d.tunnels[name]
	var sa *ike.IKESA
	if t != nil {
		sa = t.sa
	}
	d.mu.Unlock()
	switch {
	case t == nil:
		return noTunnel(name)
	case sa == nil || sa.State() != ike.StateEstablished:
		return fmt.Errorf("tunnel %s has no established IKE SA to rekey", name)
	case ikeSA:
		return sa.RekeyIKE()
	}
	var errs []error
	for _, c := range sa.Status().Children {
		if err := sa.RekeyChild(c.InSPI); err != nil {
			errs = append(errs, fmt.Errorf("tunnel %s: rekey CHILD_SA %08x: %w", name, c.InSPI, err))
		}
	}
	return errors.Join(errs...)
}
