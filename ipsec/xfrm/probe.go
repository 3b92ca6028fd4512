package xfrm

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNoESP is wrapped by Probe's error when the kernel cannot do ESP.
var ErrNoESP = errors.New("kernel has no ESP")

// probeSPI is the SPI of the throwaway SA; it lives only in a private
// namespace (or for an instant on loopback).
const probeSPI = 0x0f1a5c0d

// Probe reports whether this kernel can carry ESP through XFRM: it adds an
// AES-CBC/HMAC-SHA256 tunnel SA on loopback and deletes it again, inside a
// throwaway network namespace so that nothing is ever visible outside.
// A nil error means iked can use this plane; otherwise the error, wrapping
// ErrNoESP when the kernel lacks ESP or XFRM, says why.
func Probe() error {
	ns, err := newNamespace()
	if err != nil {
		// Without CAP_SYS_ADMIN there is no private namespace: probe in ours.
		return probeIn(netns.None())
	}
	defer ns.Close()
	return probeIn(ns)
}

func probeIn(ns netns.NsHandle) error {
	c, err := dial(ns)
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		return fmt.Errorf("%w: no XFRM netlink (CONFIG_XFRM_USER): %v", ErrNoESP, err)
	}
	if err != nil {
		return fmt.Errorf("xfrm probe: %w", err)
	}
	defer c.close()
	lo := netip.MustParseAddr("127.0.0.1")
	key := make([]byte, 16)
	integ := make([]byte, 32)
	sa := &ipsec.ChildSA{
		SPI: probeSPI, ReqID: 1, Src: lo, Dst: lo, Inbound: true,
		Transform: ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha256)"},
		EncKey:    key, IntegKey: integ,
	}
	st, err := buildState(sa)
	if err != nil {
		return fmt.Errorf("xfrm probe: %w", err)
	}
	_, err = c.request(msgNewSA, true, native.encodeNewSA(st))
	switch {
	case errors.Is(err, unix.EPROTONOSUPPORT):
		return fmt.Errorf("%w: adding an ESP SA failed with %v (esp4 not built in or loaded)", ErrNoESP, err)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w: the crypto API has no cbc(aes) or hmac(sha256) for ESP: %v", ErrNoESP, err)
	case errors.Is(err, unix.ENOENT):
		// ESP is there but could not allocate its transform: a crypto
		// module it needs is neither built in nor loaded, and without
		// modprobe the kernel cannot load it (echainiv/seqiv need drbg
		// for stdrng, authenc, gcm...).
		return fmt.Errorf("%w: ESP could not set up its crypto (a crypto module is missing: drbg, authenc, echainiv?): %v", ErrNoESP, err)
	case errors.Is(err, unix.EOPNOTSUPP):
		// The kernel refuses XFRM messages from a 32-bit process on a
		// 64-bit kernel unless CONFIG_XFRM_USER_COMPAT translates them.
		return fmt.Errorf("%w: XFRM refused our messages (%v): a 32-bit flashgate on a 64-bit kernel needs xfrm_compat", ErrNoESP, err)
	case errors.Is(err, unix.EEXIST):
		// A probe SA left behind by an earlier, killed probe in our own
		// namespace: ESP works. Fall through to delete it.
	case err != nil:
		return fmt.Errorf("xfrm probe: add SA: %w", err)
	}
	if _, err := c.request(msgDelSA, true, encodeUsersaID(lo, probeSPI)); err != nil {
		return fmt.Errorf("xfrm probe: delete SA: %w", err)
	}
	return nil
}

// newNamespace creates a network namespace and returns a handle to it. The
// switch happens on a goroutine of its own whose thread is discarded if it
// cannot be moved back, so no caller ever runs in the wrong namespace.
func newNamespace() (netns.NsHandle, error) {
	type result struct {
		ns  netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{netns.None(), err}
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			ch <- result{netns.None(), err} // thread stays locked: it exits with us
			return
		}
		if err := netns.Set(orig); err != nil {
			ns.Close()
			ch <- result{netns.None(), err}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{ns, nil}
	}()
	r := <-ch
	return r.ns, r.err
}
