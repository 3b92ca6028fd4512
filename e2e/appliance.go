package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/internal/testnet"
)

// vmLimit bounds each qemu's life: the whole scenario must fit in it.
const vmLimit = 25 * time.Minute

// Appliance is one flashgate box in qemu, on its own card.
type Appliance struct {
	Name      string
	mac       byte // MAC seed, so appliances on one switch differ
	Card      string
	lab       *Lab
	lanBridge string
	host      *testnet.NS // the host on its LAN, from where the web UI is used
	wanTap    string
	lanTap    string
	VM        *images.VM
	started   time.Time
	logs      []string // serial logs of earlier boots of this appliance
}

// macSeed numbers the appliances of a test process.
var macSeed byte

// NewAppliance copies image to a card of its own and boots it with its WAN
// port on the lab's WAN switch and its LAN port on lanBridge.
func NewAppliance(t testing.TB, lab *Lab, name, image, lanBridge string, host *testnet.NS) *Appliance {
	t.Helper()
	card := filepath.Join(t.TempDir(), name+".img")
	if err := images.CopyCard(image, card); err != nil {
		t.Fatal(err)
	}
	p := testnet.Prefix()
	macSeed++
	a := &Appliance{Name: name, mac: macSeed, Card: card, lab: lab, lanBridge: lanBridge, host: host, wanTap: p + "w", lanTap: p + "l"}
	a.Start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serial console of appliance %s:\n%s", a.Name, a.Log())
		}
		a.VM.Stop()
	})
	return a
}

// Start boots the appliance's card (again).
func (a *Appliance) Start(t testing.TB) {
	t.Helper()
	board, err := boards.Lookup("qemu")
	if err != nil {
		t.Fatal(err)
	}
	tap := func(name string) string { return "tap,ifname=" + name + ",script=no,downscript=no" }
	vm, err := images.StartVM(images.QEMUConfig{
		Board: board, Image: a.Card, Netns: a.lab.Switch.Name,
		NetDevs: []string{tap(a.wanTap), tap(a.lanTap)}, MACSeed: a.mac,
	}, vmLimit)
	if err != nil {
		t.Fatalf("start appliance %s: %v", a.Name, err)
	}
	a.VM, a.started = vm, time.Now()
	a.lab.plug(t, a.wanTap, "brwan")
	a.lab.plug(t, a.lanTap, a.lanBridge)
}

// PowerCut kills qemu at once, as pulling the plug would.
func (a *Appliance) PowerCut() {
	a.logs = append(a.logs, string(a.VM.Log()))
	a.VM.Stop()
}

// Log is everything the appliance's serial console printed, all boots.
func (a *Appliance) Log() string {
	s := ""
	for i, l := range a.logs {
		s += fmt.Sprintf("----- boot %d -----\n%s\n", i+1, l)
	}
	return s + fmt.Sprintf("----- boot %d -----\n%s", len(a.logs)+1, a.VM.Log())
}

// WaitLogin waits for the console's login prompt of the current boot. On a
// card without an admin account it first answers the first-boot password
// questions with password.
func (a *Appliance) WaitLogin(t testing.TB, password string, firstBoot bool) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	at, _, err := a.VM.WaitFor(ctx, 0, "flashgate init: board qemu")
	if err != nil {
		t.Fatalf("appliance %s: %v", a.Name, err)
	}
	if firstBoot {
		for _, s := range []struct{ prompt, answer string }{
			{"New admin password: ", password + "\r"},
			{"Repeat password: ", password + "\r"},
		} {
			if at, _, err = a.VM.WaitFor(ctx, at, s.prompt); err != nil {
				t.Fatalf("appliance %s: first-boot password: %v", a.Name, err)
			}
			if err := a.VM.Type(s.answer); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, elapsed, err := a.VM.WaitFor(ctx, at, "login: ")
	if err != nil {
		t.Fatalf("appliance %s: %v", a.Name, err)
	}
	return elapsed
}

// Shell logs in on the serial console, opens the expert shell from the CLI,
// runs each command and returns what the console printed meanwhile. It is
// how a failing test shows what an admin at the console would see.
func (a *Appliance) Shell(t testing.TB, password string, cmds ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	from := len(a.VM.Log())
	step := func(typed, want string) error {
		if typed != "" {
			if err := a.VM.Type(typed); err != nil {
				return err
			}
		}
		at, _, err := a.VM.WaitFor(ctx, from, want)
		from = at
		return err
	}
	var err error
	for _, s := range []struct{ typed, want string }{
		{"\r", "login: "}, {"admin\r", "Password: "}, {password + "\r", "> "}, {"shell\r", "Expert shell"},
	} {
		if err = step(s.typed, s.want); err != nil {
			break
		}
	}
	start := from
	if err == nil {
		for _, c := range cmds {
			// The marker's quotes keep the echo of the typed line from
			// matching it.
			if err = step(c+"; echo '__'DONE\r", "\n__DONE"); err != nil {
				break
			}
		}
		a.VM.Type("exit\r")
		a.VM.Type("exit\r")
	}
	out := string(a.VM.Log()[start:])
	if err != nil {
		out += fmt.Sprintf("\n(console session ended: %v)", err)
	}
	return out
}
