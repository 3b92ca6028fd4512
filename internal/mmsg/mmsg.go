// Package mmsg moves datagrams many to a system call: recvmmsg(2) and
// sendmmsg(2) over golang.org/x/sys/unix's Mmsghdr, and the walk of a
// received message's control data. The userspace ESP data plane's sockets
// (ipsec/esp) and iked's IKE sockets use it.
//
// unix.Mmsghdr has the layout of C's struct mmsghdr on each architecture
// (a Msghdr, the message length, padding to Msghdr's alignment: 64 bytes
// on amd64, 32 on 386); the assertion below keeps it so, and the 386 build
// checks it for the boards.
package mmsg

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdrSize is what C makes of struct mmsghdr { struct msghdr; unsigned
// int; }: the two, rounded up to the alignment of msghdr.
const mmsghdrSize = (unsafe.Sizeof(unix.Msghdr{}) + 4 + unsafe.Alignof(unix.Msghdr{}) - 1) &^ (unsafe.Alignof(unix.Msghdr{}) - 1)

// Either array has a negative length, and the build fails, if unix.Mmsghdr
// is not C's struct mmsghdr.
var (
	_ [unsafe.Sizeof(unix.Mmsghdr{}) - mmsghdrSize]struct{}
	_ [mmsghdrSize - unsafe.Sizeof(unix.Mmsghdr{})]struct{}
	_ [unsafe.Offsetof(unix.Mmsghdr{}.Len) - unsafe.Sizeof(unix.Msghdr{})]struct{}
	_ [unsafe.Sizeof(unix.Msghdr{}) - unsafe.Offsetof(unix.Mmsghdr{}.Len)]struct{}
)

// Recv is recvmmsg(2) on fd: it fills up to len(msgs) messages (each
// header's Len is the size of its datagram, Hdr.Flags says MSG_TRUNC when
// the datagram did not fit its buffer) and returns how many. msgs must not
// be empty.
func Recv(fd uintptr, msgs []unix.Mmsghdr, flags int) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), uintptr(flags), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// Send is sendmmsg(2) on fd: it sends msgs in order until one fails and
// returns how many went. msgs must not be empty.
func Send(fd uintptr, msgs []unix.Mmsghdr, flags int) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), uintptr(flags), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// ControlData returns the data of the first control message of level and
// typ in ctl (a received message's control buffer, cut to the length the
// kernel wrote), or nil when there is none. It stops at the first
// malformed header.
func ControlData(ctl []byte, level, typ int32) []byte {
	for len(ctl) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
		if int(h.Len) < unix.SizeofCmsghdr || int(h.Len) > len(ctl) {
			return nil
		}
		if h.Level == level && h.Type == typ {
			return ctl[unix.CmsgLen(0):h.Len]
		}
		step := unix.CmsgSpace(int(h.Len) - unix.CmsgLen(0))
		if step > len(ctl) {
			return nil
		}
		ctl = ctl[step:]
	}
	return nil
}
