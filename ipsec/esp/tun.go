package esp

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// tunDevice is a multi-queue TUN interface with virtio_net_hdr offloads.
// The kernel steers each flow to one queue, so one worker per queue keeps
// every flow in order without any locking between workers.
type tunDevice struct {
	name   string
	queues []*os.File
}

// tunOffloads are the super-packets we accept from the kernel: TCP over
// IPv4 and IPv6 and, when the kernel knows it, UDP (USO, Linux 6.2).
const tunOffloads = unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6 | unix.TUN_F_TSO_ECN

func openTUN(name string, queues int) (*tunDevice, error) {
	t := &tunDevice{name: name}
	for i := 0; i < queues; i++ {
		f, err := openTUNQueue(name)
		if err != nil {
			t.close()
			return nil, err
		}
		t.queues = append(t.queues, f)
	}
	return t, nil
}

func openTUNQueue(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUN %s: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR | unix.IFF_MULTI_QUEUE)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	err = unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunOffloads|unix.TUN_F_USO4|unix.TUN_F_USO6)
	if err != nil {
		// Kernels before 6.2 refuse the USO bits; TCP offloads still help.
		err = unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunOffloads)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETOFFLOAD %s: %w", name, err)
	}
	// Non-blocking, so that os.File parks reads in the runtime's poller.
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

func (t *tunDevice) close() error {
	var first error
	for _, f := range t.queues {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
