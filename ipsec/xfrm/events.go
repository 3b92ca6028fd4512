package xfrm

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// monitor reads the kernel's XFRM multicast events: expires (an SA reached
// a soft or hard limit) and acquires (traffic hit a trap). vishvananda's
// XfrmMonitor handles expires only, with x86-64 struct sizes, so the
// subscription is read here.
type monitor struct {
	s    *nl.NetlinkSocket
	done chan struct{}
	exit chan struct{}
}

func startMonitor(ns netns.NsHandle, l layout, onExpire func(expireMsg), onAcquire func(Acquire)) (*monitor, error) {
	s, err := nl.SubscribeAt(ns, netns.None(), unix.NETLINK_XFRM, groupAcquire, groupExpire)
	if err != nil {
		return nil, fmt.Errorf("xfrm subscribe to expire and acquire events: %w", err)
	}
	m := &monitor{s: s, done: make(chan struct{}), exit: make(chan struct{})}
	go m.run(l, onExpire, onAcquire)
	return m, nil
}

func (m *monitor) run(l layout, onExpire func(expireMsg), onAcquire func(Acquire)) {
	defer close(m.exit)
	for {
		msgs, from, err := m.s.Receive()
		select {
		case <-m.done:
			return
		default:
		}
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			// ENOBUFS: events were lost while we were slow; the SAs are
			// still in the kernel and iked's own timers back the rekey up.
			continue
		}
		if err != nil {
			return // socket closed
		}
		if from.Pid != nl.PidKernel {
			continue
		}
		for _, msg := range msgs {
			switch msg.Header.Type {
			case msgExpire:
				if e, err := l.decodeExpire(msg.Data); err == nil {
					onExpire(e)
				}
			case msgAcquire:
				if a, err := l.decodeAcquire(msg.Data); err == nil {
					onAcquire(a)
				}
			}
		}
	}
}

func (m *monitor) stop() {
	close(m.done)
	m.s.Close()
	<-m.exit
}
