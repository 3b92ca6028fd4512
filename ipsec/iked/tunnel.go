package iked

// A tunnel's lifecycle. The daemon keeps one tunnel per configured
// tunnel; what the daemon is doing about it is one phase, whether the
// data plane holds its traffic (start action on-traffic) one trap state,
// and what it shows is its state, reason and events. Every change goes
// through one of the methods below, one per event (an up asked for,
// traffic, maintain picking it, an initiation returning, the engine's
// reports), each called with the daemon's lock held; what must happen
// outside the lock (talking to the engine or the data plane) they return
// to the daemon, which does it.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/ike"
)

// phase is what the daemon is doing about a tunnel.
type phase uint8

const (
	// idle: nothing under way. With an IKE SA (sa) the tunnel is up or
	// coming up; without one it waits: for retryAt (start action
	// initiate), the peer (respond), or traffic (on-traffic).
	idle phase = iota
	// triggered: traffic came for an on-traffic tunnel without an IKE
	// SA (or an up asked for it); maintain initiates.
	triggered
	// initiating: maintain picked the tunnel and is starting its IKE SA,
	// which sa does not hold yet. Apply, the timers and the API's up all
	// call maintain; none may start a second one meanwhile.
	initiating
	// needChild: the IKE SA is up but its last CHILD_SA is gone (or
	// traffic came for an on-traffic tunnel that kept its IKE SA);
	// maintain negotiates a new one.
	needChild
	// unusable: the tunnel cannot work until it is reconfigured (it asks
	// for a data plane iked is not running); reason says why.
	unusable
)

// trapState is where an on-traffic tunnel's trap is.
type trapState uint8

const (
	noTrap         trapState = iota
	trapInstalling           // maintain picked it; the data plane is being asked
	trapInstalled            // the data plane holds the tunnel's traffic for it
)

// maxEvents bounds each tunnel's event history: the last 16 events (a
// screenful) and a count of all of them. A head office keeps a history per
// branch, and 32 lines of about 150 bytes each made a long-running hub's
// tunnel history outweigh its SAs (issue 22).
const maxEvents = 16

// tunnelEvent is one line of a tunnel's history as the daemon keeps it:
// its time in Unix nanoseconds (8 bytes, where a time.Time takes 24).
type tunnelEvent struct {
	at  int64
	msg string
}

// waitingForPeer is the reason of a tunnel with start action respond that
// is not up: nothing is wrong, the peer starts it.
const waitingForPeer = "waiting for the peer to connect (start action: respond)"

// tunnel is the daemon's record of one configured tunnel.
type tunnel struct {
	cfg  config.Tunnel
	peer *ike.PeerConfig
	// creds: the certificate store's entries the tunnel uses (certs.go).
	creds *tunnelCreds
	sa    *ike.IKESA // the current IKE SA, if any
	// superseded: the established IKE SA that sa replaced without a rekey
	// (the peer initiated anew instead of reusing it). Once sa carries a
	// CHILD_SA, childUp deletes it if it carries none.
	superseded *ike.IKESA

	phase phase
	// once: the API's up asked a respond tunnel to initiate, as swanctl
	// --initiate does for any connection. It holds from the request
	// until the attempt ends: maintain initiates once, and a failure puts
	// the tunnel back to waiting for the peer instead of into the retries
	// of start action initiate.
	once    bool
	retryAt time.Time
	backoff time.Duration

	// Start action on-traffic: the trap (trapReqID names the kernel's,
	// trapRetryAt delays a refused one; trapSpec is the one installed).
	trap        trapState
	trapReqID   uint32
	trapSpec    ipsec.Trap
	trapRetryAt time.Time

	state  ipsec.TunnelState
	reason string
	since  time.Time
	// rekeyNote: why our last rekey of the current IKE SA failed (see
	// rekeyFailed); "" once an IKE SA is up or down.
	rekeyNote string
	// events: the last maxEvents events, oldest first; eventsTotal counts
	// every event since the tunnel was configured.
	events      []tunnelEvent
	eventsTotal int
	notify      func(string, ipsec.TunnelState) // Options.StateChanged
}

// newTunnel is a configured tunnel: down, waiting for what its start
// action waits for, or failed with err (a configuration iked cannot run;
// peer is nil then).
func newTunnel(now time.Time, cfg config.Tunnel, peer *ike.PeerConfig, err error, notify func(string, ipsec.TunnelState)) *tunnel {
	t := &tunnel{cfg: cfg, peer: peer, state: ipsec.StateDown, since: now, notify: notify}
	if err != nil {
		t.state, t.reason = ipsec.StateFailed, err.Error()
		return t
	}
	switch cfg.StartAction {
	case config.StartRespond:
		t.reason = waitingForPeer
	case config.StartOnTraffic:
		t.reason = ipsec.WaitingForTraffic
	}
	t.event(now, "configured")
	return t
}

// peerMoved: our address towards the peer changed (or was found at
// last): new IKE SAs use p.
func (t *tunnel) peerMoved(now time.Time, p *ike.PeerConfig) {
	if t.peer != nil {
		t.event(now, fmt.Sprintf("local address is now %v (was %v)", p.Local.Addr(), t.peer.Local.Addr()))
	}
	t.peer = p
}

func (t *tunnel) onTraffic() bool { return t.cfg.StartAction == config.StartOnTraffic }

// respondOnly reports whether maintain leaves the tunnel to the peer: start
// action respond, and no up asked for.
func (t *tunnel) respondOnly() bool {
	return t.cfg.StartAction == config.StartRespond && !t.once
}

// upAsked is the API's up: the retry delay is forgotten; an on-traffic
// tunnel starts as if traffic had come, a respond tunnel without an IKE SA
// is initiated once. It reports whether maintain has anything to do.
func (t *tunnel) upAsked(now time.Time) error {
	if t.phase == unusable {
		return errors.New(t.reason)
	}
	if t.cfg.StartAction == config.StartRespond && !t.cfg.RemoteAddress.IsSet() {
		return fmt.Errorf("tunnel %s has no remote address: it can only wait for the peer to connect", t.cfg.Name)
	}
	t.retryAt, t.backoff = time.Time{}, 0
	switch {
	case t.onTraffic():
		t.trafficCame(now, "asked to come up")
	case t.cfg.StartAction == config.StartRespond && t.sa == nil && t.phase != initiating && !t.once:
		t.once = true
		t.event(now, "asked to come up: initiating once (start action: respond)")
	}
	return nil
}

// downAsked is the API's down: an up still under way is dropped (the
// daemon deletes the SAs).
func (t *tunnel) downAsked() { t.once = false }

// trafficCame marks an on-traffic tunnel as wanted: maintain negotiates
// its IKE SA, or a CHILD_SA on the IKE SA it kept. It reports whether
// there is anything for maintain to do: not while an initiation is under
// way or the tunnel is up, nor before the retry delay after a failed
// attempt.
func (t *tunnel) trafficCame(now time.Time, why string) bool {
	if t.phase != idle || t.state == ipsec.StateUp || t.state == ipsec.StateConnecting || now.Before(t.retryAt) {
		return false
	}
	t.event(now, why+": starting the tunnel")
	if t.sa != nil {
		t.phase, t.retryAt = needChild, now
	} else {
		t.phase = triggered
	}
	t.setState(now, ipsec.StateConnecting, why)
	return true
}

// work is what maintain does for a tunnel.
type work uint8

const (
	nothing        work = iota
	negotiateIKE        // initiate an IKE SA (the tunnel is now initiating)
	negotiateChild      // a new CHILD_SA on sa
)

// due is maintain's look at the tunnel: a CHILD_SA to negotiate (one at a
// time: the next try waits 5 s, then longer, so a slow answer does not
// make two), or an IKE SA to initiate (after failures 1 s doubling to a
// minute), or nothing.
func (t *tunnel) due(now time.Time) work {
	if t.phase == needChild && t.sa != nil && !now.Before(t.retryAt) {
		t.backoff = min(max(2*t.backoff, 5*time.Second), time.Minute)
		t.retryAt = now.Add(t.backoff)
		return negotiateChild
	}
	// Tunnels without a PeerConfig (no route to the peer yet: the WAN is
	// not up) are retried like failed initiations.
	if t.phase == unusable || t.phase == initiating || t.sa != nil || t.peer != nil && (t.respondOnly() || !t.peer.Remote.IsValid()) {
		return nothing
	}
	if t.onTraffic() && t.phase != triggered {
		return nothing // the trap's first packet, or the API's up, says when
	}
	if now.Before(t.retryAt) {
		return nothing
	}
	t.backoff = min(max(2*t.backoff, time.Second), time.Minute)
	t.retryAt = now.Add(t.backoff)
	t.phase = initiating
	return negotiateIKE
}

// initiateSkipped: maintain found, with the tunnel's current PeerConfig,
// nothing to initiate (it only responds, or has no peer address).
func (t *tunnel) initiateSkipped(now time.Time) {
	t.phase, t.once = idle, false
	if t.state == ipsec.StateFailed {
		t.setState(now, ipsec.StateDown, waitingForPeer)
	}
}

// initiated: the initiation maintain started returned sa, or err.
func (t *tunnel) initiated(now time.Time, sa *ike.IKESA, err error) {
	if t.phase == initiating {
		t.phase = idle
	}
	switch {
	case err != nil:
		t.attemptFailed(now, err.Error())
	case t.sa != nil:
		// The peer's IKE SA came up meanwhile; the tunnel keeps it.
	default:
		t.sa = sa
		switch t.state {
		case ipsec.StateUp, ipsec.StateConnecting:
		case ipsec.StateFailed:
			// Keep saying why: a tunnel that keeps retrying is
			// otherwise shown as merely "connecting".
			t.setState(now, ipsec.StateConnecting, "retrying; last failure: "+strings.TrimPrefix(t.reason, "retrying; last failure: "))
		default:
			t.setState(now, ipsec.StateConnecting, "")
		}
	}
}

// initiationAbandoned: the initiation maintain started was for a
// configuration that is gone (or the daemon is closing); its SA is
// deleted, and nothing about the tunnel changes.
func (t *tunnel) initiationAbandoned() {
	if t.phase == initiating {
		t.phase = idle
	}
}

// attemptFailed records a failed initiation: an on-traffic tunnel waits for
// traffic again, a respond tunnel that was asked up once waits for the peer
// again (no retry), and an initiate tunnel shows failed until maintain's
// retry.
func (t *tunnel) attemptFailed(now time.Time, why string) {
	switch {
	case t.onTraffic():
		t.waitForTraffic(now, "the last attempt failed: "+why)
	case t.once:
		t.once = false
		t.event(now, "up failed: "+why)
		t.setState(now, ipsec.StateDown, waitingForPeer+"; up failed: "+why)
	default:
		t.setState(now, ipsec.StateFailed, why)
	}
}

// waitForTraffic puts an on-traffic tunnel back to waiting, saying what
// ended its last attempt or SA.
func (t *tunnel) waitForTraffic(now time.Time, what string) {
	if t.phase == triggered || t.phase == needChild {
		t.phase = idle
	}
	reason := ipsec.WaitingForTraffic
	if what != "" {
		reason += "; " + what
	}
	t.setState(now, ipsec.StateDown, reason)
}

// ikeUp: the engine established sa, or sa replaced the tunnel's IKE SA by
// a rekey (rekeyed). An established SA of the tunnel that sa replaced
// without a rekey (the peer initiated anew) is kept in superseded until
// sa carries a CHILD_SA.
func (t *tunnel) ikeUp(now time.Time, sa *ike.IKESA, rekeyed bool) {
	what := "IKE_SA up"
	if t.sa != nil && t.sa != sa {
		switch {
		case rekeyed:
			what = "IKE_SA rekeyed"
		case t.sa.State() == ike.StateEstablished:
			// The peer negotiated a new IKE SA beside ours (strongSwan
			// with reuse_ikesa = no does for a new CHILD_SA): the
			// tunnel moves to it, and childUp deletes the old one if it
			// is left without CHILD_SAs.
			t.superseded = t.sa
		}
	}
	t.sa, t.rekeyNote = sa, ""
	st := sa.Status()
	t.event(now, fmt.Sprintf("%s: %s, SPIs %016x_i %016x_r, %v <-> %v", what, st.Proposal, st.SPIi, st.SPIr, st.Local, st.Remote))
}

// ikeDown: the tunnel's IKE SA is gone, with reason (nil: closed by us or
// the peer without an error).
func (t *tunnel) ikeDown(now time.Time, reason error) {
	t.sa, t.rekeyNote = nil, ""
	if t.phase == needChild {
		t.phase = idle
	}
	if reason == nil {
		t.event(now, "IKE_SA closed")
		switch {
		case t.onTraffic():
			t.waitForTraffic(now, "the IKE_SA was closed")
		case t.cfg.StartAction == config.StartRespond:
			t.once = false
			t.setState(now, ipsec.StateDown, waitingForPeer+"; the IKE_SA was closed")
		default:
			t.setState(now, ipsec.StateDown, "closed")
		}
		return
	}
	why := reason.Error()
	var f *ike.Failure
	if errors.As(reason, &f) && f.DeadPeer() {
		why = "the peer is dead (dead peer detection): " + why
	}
	t.event(now, "IKE_SA down: "+why)
	switch {
	case t.onTraffic():
		t.waitForTraffic(now, why)
	case t.once:
		t.attemptFailed(now, why)
	default:
		t.setState(now, ipsec.StateFailed, why)
	}
}

// rekeyFailed: our rekey of the tunnel's IKE SA failed (an IKEv1 phase 1
// rekey is a main mode of its own, which can end without touching the SA
// it was to replace). The tunnel stays up on the current IKE SA; its
// events and, while it is up, its status say why the rekey failed, until
// a new IKE SA is up or the current one goes down.
func (t *tunnel) rekeyFailed(now time.Time, reason error) {
	t.rekeyNote = "IKE_SA rekey failed: " + reason.Error() + "; the current IKE_SA stays in use until its lifetime ends"
	t.event(now, t.rekeyNote)
}

// statusReason is the status's reason: why the tunnel is not up, or, when
// it is up, a failed rekey of its IKE SA.
func (t *tunnel) statusReason() string {
	if t.state == ipsec.StateUp && t.reason == "" {
		return t.rekeyNote
	}
	return t.reason
}

// failed: a negotiation of the tunnel was refused without its IKE SA
// going down (a CHILD_SA the peer would not have, a peer whose
// IKE_SA_INIT we refused), or an IKE SA that never was the tunnel's ended
// in a refusal (a peer with the wrong key or identity: we refused its
// IKE_AUTH). A tunnel that is up stays up; it says so in its events.
func (t *tunnel) failed(now time.Time, reason error) {
	t.event(now, reason.Error())
	switch {
	case t.onTraffic():
		// The IKE SA's end (ikeDown) puts it back to waiting.
	case t.once && t.state != ipsec.StateUp:
		// The IKE SA stays (its CHILD_SA was refused); the peer may
		// negotiate one on it, or a new IKE SA.
		t.attemptFailed(now, reason.Error())
	case t.state != ipsec.StateUp:
		t.setState(now, ipsec.StateFailed, reason.Error())
	}
}

// childUp: a CHILD_SA of sa is installed. It returns the IKE SA the
// tunnel moved away from, which the daemon deletes if it carries nothing.
func (t *tunnel) childUp(now time.Time, c ike.ChildUp) (replaced *ike.IKESA) {
	if t.sa != c.SA {
		// An SA the peer initiated, or a rekeyed IKE SA.
		t.superseded, t.sa = t.sa, c.SA
	}
	// The new SA carries a CHILD_SA now: the one it superseded (here, or
	// in ikeUp, which comes first) may go if it carries none.
	replaced, t.superseded = t.superseded, nil
	what := "CHILD_SA up"
	if c.Replaces != 0 {
		what = fmt.Sprintf("CHILD_SA rekeyed (replaces %08x)", c.Replaces)
	}
	t.event(now, fmt.Sprintf("%s: %s, SPIs %08x_i %08x_o, %s === %s", what, c.Proposal.String(), c.In.SPI, c.Out.SPI,
		prefixes(c.In.LocalTS), prefixes(c.In.RemoteTS)))
	t.backoff, t.once = 0, false
	if t.phase == needChild {
		t.phase = idle
	}
	t.setState(now, ipsec.StateUp, "")
	return replaced
}

// childNotInstalled: the data plane refused a negotiated CHILD_SA.
func (t *tunnel) childNotInstalled(now time.Time, plane string, err error) {
	t.setState(now, ipsec.StateFailed, fmt.Sprintf("the negotiated CHILD_SA could not be installed in the %s data plane: %v", plane, err))
}

// childDown: the CHILD_SA with inbound SPI in of sa is gone, with reason
// (nil: replaced by a rekey or closed by us). left is how many CHILD_SAs
// sa still carries (-1: sa is not established any more). When the
// tunnel's IKE SA is left without any, a respond tunnel waits for the
// peer, an on-traffic one for traffic, and an initiate one negotiates a
// new CHILD_SA on it.
func (t *tunnel) childDown(now time.Time, sa *ike.IKESA, in uint32, reason error, left int) {
	if reason != nil {
		t.event(now, fmt.Sprintf("CHILD_SA %08x down: %v", in, reason))
	}
	if left != 0 || t.sa != sa {
		return
	}
	if reason == nil {
		reason = fmt.Errorf("CHILD_SA %08x closed at the end of its lifetime", in)
		t.event(now, reason.Error())
	}
	switch {
	case t.cfg.StartAction == config.StartRespond:
		t.setState(now, ipsec.StateDown, reason.Error()+"; waiting for the peer to negotiate a new CHILD_SA")
	case t.onTraffic():
		// The trap takes the traffic again; its next packet negotiates
		// a new CHILD_SA on the IKE SA we keep.
		t.waitForTraffic(now, reason.Error())
	default:
		// Keep the tunnel up: a new CHILD_SA on the same IKE SA.
		t.phase, t.retryAt, t.backoff = needChild, now.Add(time.Second), 0
		t.setState(now, ipsec.StateConnecting, reason.Error()+"; negotiating a new CHILD_SA")
	}
}

// trapDue reports whether maintain should install the tunnel's trap now:
// an on-traffic tunnel whose peer address is known, without one, and not
// within the delay after a refusal. seq numbers the kernel's traps.
func (t *tunnel) trapDue(now time.Time, seq func() uint32) bool {
	if !t.onTraffic() || t.trap != noTrap || t.phase == unusable || t.peer == nil || !t.peer.Remote.IsValid() || now.Before(t.trapRetryAt) {
		return false
	}
	if t.trapReqID == 0 {
		t.trapReqID = seq()
	}
	t.trap = trapInstalling
	return true
}

// trapResult: the data plane took the trap (err nil) or refused it.
// current is false when the tunnel was replaced meanwhile (the daemon
// takes the trap out again).
func (t *tunnel) trapResult(now time.Time, spec ipsec.Trap, err error, current bool, plane string) {
	t.trap = noTrap
	switch {
	case err != nil:
		t.trapRetryAt = now.Add(trapRetry)
		msg := fmt.Sprintf("cannot wait for traffic: the %s data plane refused the trap: %v", plane, err)
		if len(t.events) == 0 || t.events[len(t.events)-1].msg != msg {
			t.event(now, msg)
		}
	case current:
		t.trap, t.trapSpec = trapInstalled, spec
		t.event(now, fmt.Sprintf("waiting for traffic to %s", prefixes(t.trapPrefixes())))
	}
}

func (t *tunnel) setState(now time.Time, s ipsec.TunnelState, reason string) {
	changed := t.state != s
	if changed {
		t.since = now
	}
	t.state, t.reason = s, reason
	if changed && t.notify != nil {
		t.notify(t.cfg.Name, s)
	}
}

func (t *tunnel) event(now time.Time, msg string) {
	t.eventsTotal++
	e := tunnelEvent{at: now.UnixNano(), msg: msg}
	if len(t.events) < maxEvents {
		t.events = append(t.events, e)
		return
	}
	// Full: the oldest goes, in place (the slice never grows past
	// maxEvents, and its capacity is at most that).
	copy(t.events, t.events[1:])
	t.events[len(t.events)-1] = e
}

// history is the tunnel's events as the API shows them, oldest first.
func (t *tunnel) history() []ipsec.TunnelEvent {
	if len(t.events) == 0 {
		return nil
	}
	out := make([]ipsec.TunnelEvent, len(t.events))
	for i, e := range t.events {
		out[i] = ipsec.TunnelEvent{Time: time.Unix(0, e.at), Message: e.msg}
	}
	return out
}
