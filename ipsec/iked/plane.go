package iked

import (
	"fmt"
	"net/netip"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/esp"
	"github.com/flashgate/flashgate/ipsec/xfrm"
)

// DataPlane is what the daemon installs negotiated CHILD_SAs into, and
// where tunnels with start action on-traffic wait for their traffic. On
// the appliance it is the kernel's XFRM or the userspace ESP device
// (OpenDataPlane); tests use ikedtest's memory plane.
type DataPlane interface {
	ipsec.DataPlane
	ipsec.Traps
}

// OpenDataPlane opens the data plane the option asks for: "xfrm",
// "userspace", or "auto" (XFRM when the kernel has ESP, userspace
// otherwise). why says how it was chosen, for the log and for tunnels
// that ask for the other one. tun names the userspace plane's interface;
// nattPort is the port it owns for ESP in UDP (and the IKE that arrives
// there).
func OpenDataPlane(kind, tun string, nattPort uint16) (dp DataPlane, why string, err error) {
	kind, why = chooseDataPlane(kind)
	switch kind {
	case "xfrm":
		p, err := xfrm.New(xfrm.Options{})
		if err != nil {
			return nil, why, fmt.Errorf("kernel data plane: %w", err)
		}
		return newKernelPlane(p), why, nil
	default:
		u := &userspacePlane{acquires: make(chan ipsec.Acquire, acquireQueue)}
		dev, err := esp.NewDevice(esp.Config{TUN: tun, Listen: netip.AddrPortFrom(netip.IPv4Unspecified(), nattPort),
			OnMissingSA: u.missing})
		if err != nil {
			return nil, why, fmt.Errorf("userspace data plane: %w", err)
		}
		u.Device = dev
		return u, why, nil
	}
}

// chooseDataPlane applies the data plane option: "auto" probes the kernel.
func chooseDataPlane(option string) (kind, why string) {
	switch option {
	case "xfrm":
		return "xfrm", "forced by configuration"
	case "userspace":
		return "userspace", "forced by configuration"
	}
	if err := xfrm.Probe(); err != nil {
		// Probe's error says what is missing ("kernel has no ESP: ...").
		return "userspace", fmt.Sprintf("probe: %v", err)
	}
	return "xfrm", "the kernel has ESP"
}

// acquireQueue bounds the acquires waiting for the daemon: a trap's
// traffic repeats, so one more or less is not lost for good.
const acquireQueue = 16

// kernelPlane is the kernel's XFRM as a DataPlane: traps are outbound
// policies without an SA, and the kernel's acquires name them by reqid.
type kernelPlane struct {
	*xfrm.Plane
	acquires chan ipsec.Acquire
}

func newKernelPlane(p *xfrm.Plane) *kernelPlane {
	k := &kernelPlane{Plane: p, acquires: make(chan ipsec.Acquire, acquireQueue)}
	go func() {
		defer close(k.acquires)
		for a := range p.Acquires() {
			select {
			case k.acquires <- ipsec.Acquire{ReqID: a.ReqID, Remote: a.Remote}:
			default: // the daemon is behind or gone; the traffic comes again
			}
		}
	}()
	return k
}

func (k *kernelPlane) AddTrap(t ipsec.Trap) error {
	return k.Plane.Trap(t.ReqID, t.Local, t.Remote, t.LocalTS, t.RemoteTS)
}

func (k *kernelPlane) DeleteTrap(t ipsec.Trap) error { return k.Plane.Untrap(t.ReqID) }

func (k *kernelPlane) Acquires() <-chan ipsec.Acquire { return k.acquires }

// userspacePlane is the userspace ESP device as a DataPlane: a trap is a
// route into its TUN, and a packet that finds no SA is an acquire for its
// destination. The device also owns the NAT-T port (see udpTransport).
type userspacePlane struct {
	*esp.Device
	acquires chan ipsec.Acquire
}

// missing is the device's OnMissingSA.
func (u *userspacePlane) missing(dst netip.Addr) {
	select {
	case u.acquires <- ipsec.Acquire{Dst: dst}:
	default: // the daemon is behind; the traffic comes again
	}
}

func (u *userspacePlane) AddTrap(t ipsec.Trap) error     { return u.Device.AddTrap(t.RemoteTS) }
func (u *userspacePlane) DeleteTrap(t ipsec.Trap) error  { return u.Device.DeleteTrap(t.RemoteTS) }
func (u *userspacePlane) Acquires() <-chan ipsec.Acquire { return u.acquires }
