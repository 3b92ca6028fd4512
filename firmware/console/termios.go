package console

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// speeds are the baud rates the supported boards' consoles use.
var speeds = map[int]uint32{
	9600:   unix.B9600,
	19200:  unix.B19200,
	38400:  unix.B38400,
	57600:  unix.B57600,
	115200: unix.B115200,
}

// configureTTY sets the line to baud, 8N1, no flow control and cooked
// mode: the kernel's line discipline does the line editing (backspace,
// ctrl-U) that a serial terminal user expects, and echo is switched off
// only while a password is read.
func configureTTY(fd, baud int) error {
	speed, ok := speeds[baud]
	if !ok {
		return fmt.Errorf("baud %d: not one of 9600, 19200, 38400, 57600, 115200", baud)
	}
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("get termios: %w", err)
	}
	t.Iflag = unix.ICRNL | unix.IXON | unix.IUTF8 | unix.BRKINT
	t.Oflag = unix.OPOST | unix.ONLCR
	t.Cflag = t.Cflag&^(unix.CBAUD|unix.CSIZE|unix.PARENB|unix.CSTOPB|unix.CRTSCTS) |
		unix.CS8 | unix.CREAD | unix.CLOCAL | unix.HUPCL | speed
	t.Lflag = unix.ISIG | unix.ICANON | unix.IEXTEN | unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHOCTL | unix.ECHOKE
	t.Ispeed, t.Ospeed = uint32(baud), uint32(baud)
	t.Cc[unix.VINTR] = 3     // ^C
	t.Cc[unix.VQUIT] = 0x1c  // ^\
	t.Cc[unix.VERASE] = 0x7f // DEL, what serial terminals send for backspace
	t.Cc[unix.VKILL] = 0x15  // ^U
	t.Cc[unix.VEOF] = 4      // ^D
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return fmt.Errorf("set termios: %w", err)
	}
	return nil
}
