package netd

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// Reconciler applies Desired states one after another, each time changing
// only what differs from the last one applied.
type Reconciler struct {
	NFT     *NFTables
	Netlink *Netlink

	mu      sync.Mutex
	current *Desired // last state applied (nil before the first)
	specs   []Spec   // the firewall now in the kernel
	result  netdapi.ApplyResult
}

// Apply validates d and, if it is sound, makes the kernel match it. An
// invalid d changes nothing and returns a *ValidationError.
//
// The firewall goes first: a new interface or address comes up already
// protected. The firewall is rebuilt only when its rules changed; it is
// replaced as a whole in one atomic batch, and established connections pass
// because their accept comes first and conntrack outlives the table.
func (r *Reconciler) Apply(d *Desired) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := d.Validate(); err != nil {
		r.result.Error = err.Error()
		return err
	}
	res := netdapi.ApplyResult{At: time.Now(), Rules: len(r.specs)}
	if err := r.applyFirewall(d, &res); err != nil {
		res.Error = err.Error()
		r.result = res
		return err
	}
	if r.Netlink != nil {
		if err := r.Netlink.Reconcile(d); err != nil {
			res.NetworkError = err.Error()
			r.current, r.result = d, res
			return fmt.Errorf("network: %w", err)
		}
	}
	r.current, r.result = d, res
	return nil
}

// applyFirewall replaces the ruleset if d's differs from the one in force.
func (r *Reconciler) applyFirewall(d *Desired, res *netdapi.ApplyResult) error {
	// The periodic resync applies the same state again and again: skip
	// even building the ruleset when the firewall's input did not change.
	if r.current != nil && reflect.DeepEqual(d.Firewall, r.current.Firewall) {
		return nil
	}
	specs := Build(&d.Firewall)
	res.Rules = len(specs)
	if r.current != nil && slices.Equal(specStrings(specs), specStrings(r.specs)) {
		return nil
	}
	if err := r.NFT.Apply(specs); err != nil {
		return err
	}
	r.specs, res.FirewallReplaced = specs, true
	return nil
}

// Current returns the last state applied and what that apply did.
func (r *Reconciler) Current() (*Desired, []Spec, netdapi.ApplyResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current, r.specs, r.result
}

func specStrings(specs []Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.String()
	}
	return out
}
