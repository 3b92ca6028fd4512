package xfrm

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// conn is a NETLINK_XFRM request socket in one network namespace. Requests
// are serialised: XFRM changes are few (a handful per rekey), and one
// outstanding request keeps the ack matching trivial.
type conn struct {
	mu  sync.Mutex
	s   *nl.NetlinkSocket
	seq uint32
}

// requestTimeout bounds how long we wait for the kernel's answer; it
// answers XFRM requests synchronously, so this only trips on a wedged socket.
const requestTimeout = 5 * time.Second

func dial(ns netns.NsHandle) (*conn, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_XFRM)
	if err != nil {
		return nil, fmt.Errorf("xfrm netlink socket: %w", err)
	}
	// Extended acks carry the kernel's reason with the errno
	// ("Requested AEAD algorithm not found"); older kernels ignore this.
	_ = s.SetExtAck(true)
	tv := unix.NsecToTimeval(requestTimeout.Nanoseconds())
	if err := s.SetReceiveTimeout(&tv); err != nil {
		s.Close()
		return nil, fmt.Errorf("xfrm netlink socket: %w", err)
	}
	return &conn{s: s}, nil
}

func (c *conn) close() { c.s.Close() }

// request sends one message and waits for the kernel's answer. With ack set
// it returns on the acknowledgement; otherwise it returns the payloads of
// the reply messages (XFRM_MSG_GETSA answers with one NEWSA). The message
// buffer is zeroed after sending, since it may carry keys.
func (c *conn) request(typ uint16, ack bool, payload []byte) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	seq := c.seq
	flags := uint16(unix.NLM_F_REQUEST)
	if ack {
		flags |= unix.NLM_F_ACK
	}
	buf := make([]byte, unix.SizeofNlMsghdr+len(payload))
	ne.PutUint32(buf[0:4], uint32(len(buf)))
	ne.PutUint16(buf[4:6], typ)
	ne.PutUint16(buf[6:8], flags)
	ne.PutUint32(buf[8:12], seq)
	copy(buf[unix.SizeofNlMsghdr:], payload)
	err := unix.Sendto(c.s.GetFd(), buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	clear(buf)
	if err != nil {
		return nil, fmt.Errorf("netlink send: %w", err)
	}
	var replies [][]byte
	for {
		msgs, from, err := c.s.Receive()
		if err != nil {
			return nil, fmt.Errorf("netlink receive: %w", err)
		}
		if from.Pid != nl.PidKernel {
			continue
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // a late answer to an earlier, timed-out request
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, errors.New("netlink: short error message")
				}
				if errno := -int32(ne.Uint32(m.Data[0:4])); errno != 0 {
					if msg := extAckMessage(m.Header.Flags, m.Data); msg != "" {
						return nil, &kernelError{errno: unix.Errno(errno), msg: msg}
					}
					return nil, unix.Errno(errno)
				}
				return replies, nil // the acknowledgement
			case unix.NLMSG_DONE:
				return replies, nil
			default:
				replies = append(replies, m.Data)
				if !ack && m.Header.Flags&unix.NLM_F_MULTI == 0 {
					return replies, nil
				}
			}
		}
	}
}

// kernelError is an errno with the kernel's extended-ack explanation.
type kernelError struct {
	errno unix.Errno
	msg   string
}

func (e *kernelError) Error() string { return e.errno.Error() + " (kernel: " + e.msg + ")" }
func (e *kernelError) Unwrap() error { return e.errno }

// extAckMessage returns the NLMSGERR_ATTR_MSG of an error message, if the
// kernel attached one. The payload is struct nlmsgerr (the errno and the
// header of our request, or the whole request unless NLM_F_CAPPED), then
// attributes.
func extAckMessage(flags uint16, data []byte) string {
	const (
		flagCapped  = 0x100 // NLM_F_CAPPED
		flagAckTLVs = 0x200 // NLM_F_ACK_TLVS
		attrMsg     = 1     // NLMSGERR_ATTR_MSG
	)
	if flags&flagAckTLVs == 0 || len(data) < 4+unix.SizeofNlMsghdr {
		return ""
	}
	off := 4 + unix.SizeofNlMsghdr
	if flags&flagCapped == 0 {
		off = 4 + int(ne.Uint32(data[4:8])) // the echoed request's length
	}
	for off+unix.SizeofNlAttr <= len(data) {
		n := int(ne.Uint16(data[off:]))
		typ := ne.Uint16(data[off+2:])
		if n < unix.SizeofNlAttr || off+n > len(data) {
			return ""
		}
		if typ == attrMsg {
			return strings.TrimRight(string(data[off+unix.SizeofNlAttr:off+n]), "\x00")
		}
		off += (n + 3) &^ 3
	}
	return ""
}
