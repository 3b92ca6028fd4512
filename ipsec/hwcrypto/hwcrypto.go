// Package hwcrypto finds the crypto engines of the board flashgate runs on,
// loads their kernel modules, and answers the questions iked and the web UI
// ask about them: which engines are there and usable, which IPsec proposals
// they speed up (so iked can offer those first), and which kernel driver
// serves an installed SA.
//
// Engines are seen from a root file system, "/" on the box or a fixture tree
// in tests: CPU flags in proc/cpuinfo (AES-NI, VIA PadLock), PCI ids under
// sys/bus/pci/devices (Geode LX security block, Hifn 795x) and the drivers
// registered in proc/crypto. An engine is usable only when its driver is
// registered and passed the kernel's self-test; everything else falls back
// to software, and the report says why.
package hwcrypto

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// State says whether an engine does work.
type State int

const (
	// Usable: its driver is registered and passed the self-test.
	Usable State = iota
	// NotLoaded: the hardware is there but its driver is not registered
	// (Detect does not load modules; Setup does).
	NotLoaded
	// ModuleFailed: loading the module failed, or it loaded and registered
	// nothing (the driver's probe rejected the device).
	ModuleFailed
	// NoDriver: the hardware is there and Linux has no driver for it.
	NoDriver
	// SelftestFailed: the driver is registered but did not pass the kernel
	// crypto self-test, so the crypto API will not hand it out.
	SelftestFailed
	// Disabled: known to give wrong results on this CPU.
	Disabled
)

func (s State) String() string {
	switch s {
	case Usable:
		return "usable"
	case NotLoaded:
		return "not loaded"
	case ModuleFailed:
		return "module failed"
	case NoDriver:
		return "no Linux driver"
	case SelftestFailed:
		return "selftest failed"
	case Disabled:
		return "disabled"
	}
	return fmt.Sprintf("state %d", int(s))
}

// MarshalText makes states readable in the JSON the web UI gets.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Engine is one detected crypto engine.
type Engine struct {
	Name        string   `json:"name"`        // "Geode LX AES"
	Modules     []string `json:"modules"`     // kernel modules that drive it
	Accelerates string   `json:"accelerates"` // what it does in hardware, for humans
	Evidence    string   `json:"evidence"`    // what showed it is there: "PCI 1022:2082 at 0000:00:01.2 (...)"
	State       State    `json:"state"`
	Reason      string   `json:"reason,omitempty"`  // why it is not usable; empty when usable
	Drivers     []string `json:"drivers,omitempty"` // its registered /proc/crypto drivers
	InUse       bool     `json:"in_use"`            // one of its drivers is referenced by a transform (an SA, AF_ALG)

	spec *engineSpec
}

// Report is the outcome of detection on one system.
type Report struct {
	CPU     CPUInfo  `json:"cpu"`
	Engines []Engine `json:"engines"`
}

// Usable returns the engines that do work.
func (r *Report) Usable() []Engine {
	var out []Engine
	for _, e := range r.Engines {
		if e.State == Usable {
			out = append(out, e)
		}
	}
	return out
}

// Modules lists the kernel modules of the detected engines, once each, in
// report order: what a board with this hardware needs in its initramfs.
func (r *Report) Modules() []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range r.Engines {
		for _, m := range e.Modules {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// Detect looks at the system under root and reports its engines without
// changing anything.
func Detect(root string) (*Report, error) {
	f, err := os.Open(filepath.Join(root, "proc/cpuinfo"))
	if err != nil {
		return nil, fmt.Errorf("detect crypto engines: %w", err)
	}
	cpu, err := ParseCPUInfo(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("detect crypto engines: %w", err)
	}
	pci, err := ReadPCI(root)
	if err != nil {
		return nil, fmt.Errorf("detect crypto engines: %w", err)
	}
	hw := hardware{cpu: cpu, pci: pci}
	r := &Report{CPU: cpu}
	for i := range catalogue {
		spec := &catalogue[i]
		ev := spec.detect(hw)
		if ev == "" {
			continue
		}
		e := Engine{Name: spec.name, Modules: spec.modules, Accelerates: spec.accelerates, Evidence: ev, spec: spec}
		switch {
		case spec.noDriver:
			e.State, e.Reason = NoDriver, "Linux has no driver for this chip"
		case spec.disabled != nil && spec.disabled(hw) != "":
			e.State, e.Reason = Disabled, spec.disabled(hw)
		}
		r.Engines = append(r.Engines, e)
	}
	if err := r.refresh(root); err != nil {
		return nil, err
	}
	return r, nil
}

// refresh sets the state of each engine that could work from what the
// kernel has registered.
func (r *Report) refresh(root string) error {
	table, err := ReadCryptoTable(root)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("detect crypto engines: %w", err)
	}
	rngs, err := readRNGs(root)
	if err != nil {
		return fmt.Errorf("detect crypto engines: %w", err)
	}
	for i := range r.Engines {
		e := &r.Engines[i]
		if e.State == NoDriver || e.State == Disabled || e.State == ModuleFailed {
			continue
		}
		if e.spec.rngName != "" {
			if rngs[e.spec.rngName] {
				e.State, e.Reason = Usable, ""
			} else {
				e.State, e.Reason = NotLoaded, "not registered with hw_random"
			}
			continue
		}
		e.Drivers, e.InUse = nil, false
		var passed, failed []string
		for _, a := range table {
			if a.Internal || !e.spec.matchDriver(a.Driver) {
				continue
			}
			e.Drivers = append(e.Drivers, a.Driver)
			if a.InUse() {
				e.InUse = true
			}
			if a.Selftest == "passed" {
				passed = append(passed, a.Driver)
			} else {
				failed = append(failed, fmt.Sprintf("%s selftest %q", a.Driver, a.Selftest))
			}
		}
		switch {
		case len(passed) > 0:
			e.State, e.Reason = Usable, ""
		case len(failed) > 0:
			e.State, e.Reason = SelftestFailed, strings.Join(failed, ", ")
		default:
			e.State, e.Reason = NotLoaded, "no driver registered in /proc/crypto"
		}
	}
	return nil
}

// readRNGs returns the hardware RNGs the kernel has registered.
func readRNGs(root string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(root, "sys/class/misc/hw_random/rng_available"))
	if os.IsNotExist(err) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hw_random: %w", err)
	}
	rngs := map[string]bool{}
	for _, name := range strings.Fields(string(b)) {
		rngs[name] = true
	}
	return rngs, nil
}

// Setup detects the engines under root, loads the modules of those whose
// driver is not registered yet, and detects again. An engine whose module
// fails to load is marked ModuleFailed with the loader's error; the others
// are unaffected, and everything it would have done runs in software.
func Setup(root string, loader ModuleLoader) (*Report, error) {
	r, err := Detect(root)
	if err != nil {
		return nil, err
	}
	tried := map[string]error{}
	loadedAny := false
	for i := range r.Engines {
		e := &r.Engines[i]
		if e.State != NotLoaded {
			continue
		}
		for _, m := range e.Modules {
			lerr, done := tried[m]
			if !done {
				lerr = loader.Load(m)
				tried[m] = lerr
				loadedAny = loadedAny || lerr == nil
			}
			if lerr != nil {
				e.State, e.Reason = ModuleFailed, lerr.Error()
				break
			}
		}
	}
	if !loadedAny {
		return r, nil
	}
	if err := r.refresh(root); err != nil {
		return nil, err
	}
	for i := range r.Engines {
		e := &r.Engines[i]
		if e.State == NotLoaded {
			e.State = ModuleFailed
			e.Reason = fmt.Sprintf("%s loaded but registered no driver (the driver rejected the device; see the kernel log)", strings.Join(e.Modules, ", "))
		}
	}
	return r, nil
}
