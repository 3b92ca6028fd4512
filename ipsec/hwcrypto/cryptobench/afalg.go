package cryptobench

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// alg is an AF_ALG transform bound to one driver, with its key set, and an
// operation socket accepted from it.
type alg struct {
	tfm, op int
	a       *algorithm
	oob     []byte // control messages: operation, IV, AEAD associated data length
}

// afalgAvailable reports whether the kernel offers AF_ALG at all.
func afalgAvailable() error {
	fd, err := unix.Socket(unix.AF_ALG, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// openALG binds driver (a driver or algorithm name from /proc/crypto) for
// a and sets the key.
func openALG(a *algorithm, driver string, key, iv []byte) (*alg, error) {
	tfm, err := unix.Socket(unix.AF_ALG, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("AF_ALG socket: %w", err)
	}
	if err := unix.Bind(tfm, &unix.SockaddrALG{Type: a.Type, Name: driver}); err != nil {
		unix.Close(tfm)
		return nil, fmt.Errorf("bind %s %s: %w", a.Type, driver, err)
	}
	if err := unix.SetsockoptString(tfm, unix.SOL_ALG, unix.ALG_SET_KEY, string(key)); err != nil {
		unix.Close(tfm)
		return nil, fmt.Errorf("set key: %w", err)
	}
	if a.TagLen > 0 {
		// The kernel takes the tag size from optlen and ignores the value.
		if err := unix.SetsockoptString(tfm, unix.SOL_ALG, unix.ALG_SET_AEAD_AUTHSIZE, string(make([]byte, a.TagLen))); err != nil {
			unix.Close(tfm)
			return nil, fmt.Errorf("set tag size: %w", err)
		}
	}
	// accept4 with no address: AF_ALG sockets have no peer name to return.
	op, _, errno := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(tfm), 0, 0, unix.SOCK_CLOEXEC, 0, 0)
	if errno != 0 {
		unix.Close(tfm)
		return nil, fmt.Errorf("accept: %w", errno)
	}
	s := &alg{tfm: tfm, op: int(op), a: a}
	s.oob = buildControl(a, iv)
	return s, nil
}

// buildControl builds the control messages of an encryption request:
// ALG_SET_OP encrypt, ALG_SET_IV (struct af_alg_iv: length, then the IV),
// and for AEADs ALG_SET_AEAD_ASSOCLEN 0.
func buildControl(a *algorithm, iv []byte) []byte {
	var b []byte
	add := func(typ int, data []byte) {
		buf := make([]byte, unix.CmsgSpace(len(data)))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&buf[0]))
		h.Level = unix.SOL_ALG
		h.Type = int32(typ)
		h.SetLen(unix.CmsgLen(len(data)))
		copy(buf[unix.CmsgLen(0):], data)
		b = append(b, buf...)
	}
	u32 := func(v uint32) []byte {
		x := make([]byte, 4)
		*(*uint32)(unsafe.Pointer(&x[0])) = v
		return x
	}
	add(unix.ALG_SET_OP, u32(unix.ALG_OP_ENCRYPT))
	add(unix.ALG_SET_IV, append(u32(uint32(len(iv))), iv...))
	if a.Type == "aead" {
		add(unix.ALG_SET_AEAD_ASSOCLEN, u32(0))
	}
	return b
}

// encrypt runs one request: src in, len(src)+TagLen bytes out into dst.
func (s *alg) encrypt(dst, src []byte) error {
	if _, err := unix.SendmsgN(s.op, src, s.oob, nil, 0); err != nil {
		return fmt.Errorf("sendmsg: %w", err)
	}
	want := len(src) + s.a.TagLen
	n, err := unix.Read(s.op, dst[:want])
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if n != want {
		return fmt.Errorf("read %d bytes, want %d", n, want)
	}
	return nil
}

func (s *alg) close() {
	unix.Close(s.op)
	unix.Close(s.tfm)
}
