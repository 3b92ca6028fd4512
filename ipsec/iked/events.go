package iked

import (
	"errors"
	"strings"

	"github.com/flashgate/flashgate/ipsec/ike"
)

// The engine's events. They run without engine locks held and may call
// into the engine; they must not call it with d.mu held. Each finds the
// tunnel, has it change its state (tunnel.go), and does what must follow
// in the data plane or the engine.

func (d *Daemon) childUp(c ike.ChildUp) {
	d.markRoute(c.In, c.Out, c.SA.Name())
	err := d.dp.AddPair(c.In, c.Out)
	now := d.now()
	d.mu.Lock()
	t := d.tunnelOf(c.SA)
	if err != nil {
		d.logf("iked: %s: install CHILD_SA %08x/%08x: %v", c.SA.Name(), c.In.SPI, c.Out.SPI, err)
		if t != nil {
			t.childNotInstalled(now, d.dp.Name(), err)
		}
		d.mu.Unlock()
		go c.SA.DeleteChild(c.In.SPI)
		return
	}
	var replaced *ike.IKESA
	if t != nil {
		replaced = t.childUp(now, c)
	}
	d.mu.Unlock()
	// An IKE SA the tunnel no longer uses, left without CHILD_SAs (the
	// peer initiated anew instead of reusing it), would otherwise live on
	// at both ends, checked by DPD forever and carrying nothing.
	if replaced != nil && replaced != c.SA && replaced.State() == ike.StateEstablished && len(replaced.Status().Children) == 0 {
		replaced.Delete()
	}
}

func (d *Daemon) childDown(sa *ike.IKESA, in uint32, reason error) {
	if err := d.dp.DeletePair(in); err != nil {
		d.logf("iked: %s: remove CHILD_SA %08x: %v", sa.Name(), in, err)
	}
	// A CHILD_SA that went away on its own (the peer deleted it, its
	// hard lifetime ran out after failed rekeys) may leave an established
	// IKE SA that carries nothing. One replaced by a rekey leaves its
	// successor; one of an IKE SA being deleted leaves no established SA.
	left := -1
	if sa.State() == ike.StateEstablished {
		left = len(sa.Status().Children)
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.tunnelOf(sa); t != nil {
		t.childDown(now, sa, in, reason, left)
	}
}

func (d *Daemon) ikeUp(sa *ike.IKESA) {
	now := d.now()
	d.mu.Lock()
	t := d.tunnelOf(sa)
	var old *ike.IKESA
	if t != nil {
		old = t.sa
	}
	d.mu.Unlock()
	// Whether sa replaces the tunnel's SA by a rekey is the engine's to
	// say (asked without our lock: it takes the SA's): the old SA is
	// Rekeyed, or, when we rekeyed it, already Deleting, with sa as its
	// successor.
	rekeyed := old != nil && old != sa && (old.State() == ike.StateRekeyed || old.Replaced(sa))
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.tunnelOf(sa); t != nil {
		t.ikeUp(now, sa, rekeyed && t.sa == old)
	}
}

func (d *Daemon) ikeDown(sa *ike.IKESA, reason error) {
	// Asked without our lock (it takes the SA's): a new SA negotiated to
	// replace another (our IKEv1 phase 1 rekey) that ends unestablished.
	replacing := sa.Replacing()
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tunnelOf(sa)
	switch {
	case t == nil:
		// An SA of a tunnel that was removed or reconfigured.
	case t.sa == sa:
		t.ikeDown(now, reason)
	case reason != nil && replacing != nil && t.sa == replacing:
		// Our rekey of the tunnel's IKE SA failed; that SA carries on.
		t.rekeyFailed(now, reason)
	case refused(reason):
		// An SA that never became the tunnel's and ended in a refusal:
		// a peer we refused at IKE_AUTH (wrong key or identity; we sent
		// AUTHENTICATION_FAILED), or our second attempt beside the
		// current SA. Its status says why, as for any failure.
		t.failed(now, reason)
	default:
		// A rekeyed-away SA, or one that was superseded.
	}
}

// refused reports whether reason ends a negotiation (IKEv2's IKE_SA_INIT
// or IKE_AUTH, IKEv1's main mode, whose failures name the message in
// Stage, "main mode message 5") rather than an SA that was up. An IKEv1
// peer refused at main mode message 5 (wrong pre-shared key or identity)
// left no trace on a respond tunnel before IKEv1 failures counted here.
func refused(reason error) bool {
	var f *ike.Failure
	return errors.As(reason, &f) && (f.Exchange == ike.IKE_SA_INIT || f.Exchange == ike.IKE_AUTH ||
		strings.HasPrefix(f.Stage, "main mode message"))
}

func (d *Daemon) failure(peer *ike.PeerConfig, reason error) {
	if peer == nil || reason == nil {
		return
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tunnels[peer.Name]
	if t == nil || t.peer != peer {
		return
	}
	t.failed(now, reason)
}
