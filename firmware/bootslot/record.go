// Package bootslot is which firmware slot the card boots, and the record of
// the last upgrade: what PID 1 reads at every boot to commit a test boot or
// to fall back from one. It is apart from package upgrade, which writes
// slots, so that PID 1 links no signature code.
//
// Where the state lives (all in syslinux's ADV, two checksummed copies in
// ldlinux.sys, so a cut while it is written leaves the old or the new):
//
//	MENUSAVE  the committed slot: what the loader boots by default
//	BOOTONCE  the slot of a test boot; ldlinux clears it before booting it
//	'F'       the Record of the last upgrade (see Record)
package bootslot

import (
	"fmt"
	"strings"

	"github.com/flashgate/flashgate/firmware/bootfs"
	"github.com/flashgate/flashgate/internal/paths"
)

// Record states.
const (
	StateTrial     = "trial"     // written, switched for one boot, not yet committed
	StateCommitted = "committed" // the new slot passed its health checks and is the default
	StateFailed    = "failed"    // the new slot did not pass; the old one runs again
)

// Record is the last upgrade (or manual slot switch), kept in the ADV.
type Record struct {
	State       string   `json:"state"`
	From        string   `json:"from"` // slots
	To          string   `json:"to"`
	FromVersion string   `json:"from_version"`
	ToVersion   string   `json:"to_version"`
	Reason      string   `json:"reason,omitempty"`   // why it failed
	WaitFor     []string `json:"wait_for,omitempty"` // interfaces that had an IPv4 address before the switch
	Restored    bool     `json:"restored,omitempty"` // the old slot put its pre-upgrade configuration back
	// Snapshot: the new slot's PID 1 copied the configuration before its
	// services started, so a fallback puts that copy back. Without it the
	// new firmware never ran a service (a panic) and the configuration
	// was not touched.
	Snapshot bool `json:"snapshot,omitempty"`
}

// maxRecord is what the ADV leaves for the record: 500 bytes less the
// boot-once and menu-save records (a slot name each) and their headers.
const maxRecord = 255

// encode is "key=value" lines; the reason is shortened to fit.
func (r Record) encode() []byte {
	clean := func(s string) string {
		return strings.Map(func(c rune) rune {
			if c == '\n' || c == '\r' || c < 0x20 || c > 0x7e {
				return ' '
			}
			return c
		}, s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s\nfrom=%s\nto=%s\nfromv=%s\ntov=%s\n", r.State, r.From, r.To, clean(r.FromVersion), clean(r.ToVersion))
	if len(r.WaitFor) > 0 {
		fmt.Fprintf(&b, "wait=%s\n", clean(strings.Join(r.WaitFor, ",")))
	}
	if r.Restored {
		b.WriteString("restored=1\n")
	}
	if r.Snapshot {
		b.WriteString("snap=1\n")
	}
	if r.Reason != "" {
		room := maxRecord - b.Len() - len("reason=")
		reason := clean(r.Reason)
		if len(reason) > room {
			reason = reason[:max(room-3, 0)] + "..."
		}
		b.WriteString("reason=" + reason)
	}
	return []byte(b.String())
}

func decodeRecord(b []byte) Record {
	var r Record
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "state":
			r.State = v
		case "from":
			r.From = v
		case "to":
			r.To = v
		case "fromv":
			r.FromVersion = v
		case "tov":
			r.ToVersion = v
		case "reason":
			r.Reason = v
		case "restored":
			r.Restored = v == "1"
		case "snap":
			r.Snapshot = v == "1"
		case "wait":
			if v != "" {
				r.WaitFor = strings.Split(v, ",")
			}
		}
	}
	return r
}

// Boot is what the ADV says about slots.
type Boot struct {
	Committed string  // the default slot ("a" before any upgrade was committed)
	Once      string  // a pending boot-once slot, "" if none
	Last      *Record // nil before the first upgrade
}

// ReadBoot reads the ADV.
func ReadBoot(v *bootfs.Volume) (Boot, error) {
	a, err := v.ReadADV()
	if err != nil {
		return Boot{Committed: "a"}, err
	}
	b := Boot{Committed: string(a[bootfs.TagMenuSave]), Once: string(a[bootfs.TagBootOnce])}
	if b.Committed == "" {
		b.Committed = "a"
	}
	if raw := a[bootfs.TagUpgrade]; len(raw) > 0 {
		r := decodeRecord(raw)
		b.Last = &r
	}
	return b, nil
}

// WriteBoot writes b as the ADV (records of other tags are kept).
func WriteBoot(v *bootfs.Volume, b Boot) error {
	a, err := v.ReadADV()
	if err != nil {
		a = bootfs.ADV{} // neither copy readable: start afresh
	}
	a[bootfs.TagMenuSave] = []byte(b.Committed)
	if b.Once == "" {
		delete(a, bootfs.TagBootOnce)
	} else {
		a[bootfs.TagBootOnce] = []byte(b.Once)
	}
	if b.Last == nil {
		delete(a, bootfs.TagUpgrade)
	} else {
		a[bootfs.TagUpgrade] = b.Last.encode()
	}
	return v.WriteADV(a)
}

// Message is what the web UI and the console say about the last upgrade,
// "" when there is nothing to say.
func (r *Record) Message(running string) string {
	if r == nil {
		return ""
	}
	switch r.State {
	case StateFailed:
		return fmt.Sprintf("upgrade to %s failed: %s; running %s", r.ToVersion, r.Reason, running)
	case StateTrial:
		return fmt.Sprintf("upgrade from %s to %s: test boot of slot %s in progress", r.FromVersion, r.ToVersion, r.To)
	case StateCommitted:
		return fmt.Sprintf("upgraded from %s to %s", r.FromVersion, r.ToVersion)
	}
	return ""
}

// Status is what PID 1 found at boot, in StatusPath for the web UI and
// the console.
type Status struct {
	RunningSlot    string  `json:"running_slot"`
	RunningVersion string  `json:"running_version"`
	DefaultSlot    string  `json:"default_slot"`
	Trial          bool    `json:"trial"`    // this boot is a test boot; PID 1 is checking its health
	Checking       string  `json:"checking"` // what the health check waits for, during a test boot
	Last           *Record `json:"last,omitempty"`
	Message        string  `json:"message,omitempty"`
}

// StatusPath is where PID 1 keeps Status.
const StatusPath = paths.UpgradeStatus

// OtherSlot is the slot that is not s.
func OtherSlot(s string) string {
	if s == "a" {
		return "b"
	}
	return "a"
}
