package mmsg

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cmsg appends one control message as the kernel lays it out.
func cmsg(b []byte, level, typ int32, data []byte) []byte {
	m := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&m[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(m[unix.CmsgLen(0):], data)
	return append(b, m...)
}

func TestControlData(t *testing.T) {
	ctl := cmsg(nil, unix.IPPROTO_IP, unix.IP_TOS, []byte{7})
	ctl = cmsg(ctl, unix.IPPROTO_IP, unix.IP_PKTINFO, bytes.Repeat([]byte{1}, 12))
	ctl = cmsg(ctl, unix.IPPROTO_UDP, unix.UDP_GRO, []byte{0xdc, 5, 0, 0})
	if got := ControlData(ctl, unix.IPPROTO_IP, unix.IP_PKTINFO); !bytes.Equal(got, bytes.Repeat([]byte{1}, 12)) {
		t.Errorf("IP_PKTINFO: %x", got)
	}
	if got := ControlData(ctl, unix.IPPROTO_UDP, unix.UDP_GRO); !bytes.Equal(got, []byte{0xdc, 5, 0, 0}) {
		t.Errorf("UDP_GRO after two others: %x", got)
	}
	if got := ControlData(ctl, unix.IPPROTO_IP, unix.IP_TTL); got != nil {
		t.Errorf("IP_TTL, which is not there: %x", got)
	}
	// A header that claims more than the buffer holds ends the walk.
	bad := cmsg(nil, unix.IPPROTO_IP, unix.IP_PKTINFO, make([]byte, 12))
	(*unix.Cmsghdr)(unsafe.Pointer(&bad[0])).SetLen(len(bad) + 1)
	if got := ControlData(bad, unix.IPPROTO_IP, unix.IP_PKTINFO); got != nil {
		t.Errorf("from a header longer than the buffer: %x", got)
	}
	if got := ControlData(ctl[:unix.SizeofCmsghdr-1], unix.IPPROTO_IP, unix.IP_TOS); got != nil {
		t.Errorf("from a cut header: %x", got)
	}
}
