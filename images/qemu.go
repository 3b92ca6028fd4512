package images

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/boards"
)

// QEMUConfig says how to boot a card image of an emulated board.
type QEMUConfig struct {
	Board boards.Board
	Image string // raw card image, used as the first IDE disk

	// Serial is qemu's -serial argument: "mon:stdio" for a person at a
	// terminal (Ctrl-A X quits, Ctrl-A C is the monitor), "stdio" for a
	// program talking over pipes.
	Serial string

	// WebUIPort, if not zero, forwards 127.0.0.1:WebUIPort on the host to
	// port 443 of the appliance's first LAN port.
	WebUIPort int

	// NoReboot makes a guest reboot or panic end qemu, as tests want.
	NoReboot bool

	// NetDevs, if set, replaces the user-mode network of NIC i with the
	// qemu -netdev backend NetDevs[i] without its id, e.g.
	// "tap,ifname=fgwan0,script=no,downscript=no" or
	// "socket,listen=127.0.0.1:7000" (tests that link appliances).
	NetDevs []string

	// IsolateWAN puts the WAN port on an isolated user network too
	// (restrict=on: qemu's DHCP still answers, but nothing the appliance
	// sends there leaves qemu). StartVM sets it: tests and benchmarks send
	// nothing off this host, where the appliance's DNS and NTP queries
	// would otherwise go out through qemu's NAT. `flashgate run` leaves it
	// off, so a box under `make run` reaches the internet as a real one
	// behind an ISP's router does.
	IsolateWAN bool

	// Extra arguments appended to the command line.
	Extra []string

	// Netns, if set, runs qemu inside that network namespace (made with
	// `ip netns add`), where its TAP devices are created.
	Netns string

	// Emulate boots a real board's card on the qemu CPU model closest to
	// the board's (boards.Board.Emulation), as the boot tests do.
	Emulate bool

	// MemMB is the guest's RAM in MB; 0 means the board's (its smallest
	// model's, for an emulated board).
	MemMB int

	// MACSeed tells apart the NICs of appliances on one network: the MAC
	// of NIC i is 52:54:00:fa:<seed>:<i+1>.
	MACSeed byte
}

// Args returns the qemu command line, program first. The NICs follow the
// board's NIC list in order, so eth0 in the guest is the board's first NIC;
// the wan NIC gets qemu's user-mode network (NAT to the host, and the web UI
// port forward), the others an isolated user network each.
func (c QEMUConfig) Args() ([]string, error) {
	q := c.Board.QEMU
	if q == nil && c.Emulate {
		var err error
		if q, err = c.Board.Emulation(); err != nil {
			return nil, err
		}
	}
	if q == nil {
		return nil, fmt.Errorf("board %s is real hardware, not an emulator: use a qemu board (see `flashgate boards`)", c.Board.Name)
	}
	if c.Image == "" {
		return nil, errors.New("no card image to boot")
	}
	mem := q.MemMB
	if c.MemMB > 0 {
		mem = c.MemMB
	}
	serial := c.Serial
	if serial == "" {
		serial = "mon:stdio"
	}
	args := []string{q.Binary,
		"-M", q.Machine,
		// Only the devices named here: no VGA card, parallel port or
		// IDE CD-ROM, which none of the boards has. The phantom CD-ROM
		// alone cost every boot its ATAPI probe on the second channel.
		"-nodefaults",
		"-m", strconv.Itoa(mem),
		"-display", "none",
		"-serial", serial,
		"-drive", "file=" + c.Image + ",format=raw,if=ide,index=0,media=disk",
	}
	if q.CPU != "" {
		args = append(args, "-cpu", q.CPU)
	}
	if serial != "mon:stdio" {
		args = append(args, "-monitor", "none")
	}
	if c.NoReboot {
		args = append(args, "-no-reboot")
	}
	nics := c.Board.NICs
	if len(nics) == 0 {
		nics = []boards.NIC{{Name: "eth0", Role: "wan"}}
	}
	wan, lan := -1, -1
	for i, n := range nics {
		if n.Role == "wan" && wan < 0 {
			wan = i
		}
		if n.Role == "lan" && lan < 0 {
			lan = i
		}
	}
	if wan < 0 {
		wan = 0
	}
	used := map[string]bool{}
	for i, n := range nics {
		id := n.Role
		if id == "" || used[id] {
			id = fmt.Sprintf("net%d", i)
		}
		used[id] = true
		netdev := "user,id=" + id
		switch {
		case i < len(c.NetDevs) && c.NetDevs[i] != "":
			netdev = c.NetDevs[i] + ",id=" + id
		case i == wan && !c.IsolateWAN:
			// The WAN gets qemu's NAT, as from an ISP's router (DHCP).
		case i == lan && c.WebUIPort != 0:
			// The web UI answers only on the LAN (the firewall's
			// default), so the host reaches it as a LAN client would:
			// qemu's user network takes the appliance's default LAN
			// (config.DefaultForNICs: 192.168.1.1/24) and forwards the
			// host's port to it, from 192.168.1.2.
			netdev += fmt.Sprintf(",net=192.168.1.0/24,host=192.168.1.2,restrict=on,hostfwd=tcp:127.0.0.1:%d-192.168.1.1:443", c.WebUIPort)
		default:
			// restrict=on: the guest cannot reach the host or beyond
			// through its non-wan ports.
			netdev += ",restrict=on"
		}
		args = append(args, "-netdev", netdev,
			"-device", fmt.Sprintf("%s,netdev=%s,mac=52:54:00:fa:%02x:%02x", q.NIC, id, c.MACSeed, i+1))
	}
	args = append(args, q.Extra...)
	if !slices.Contains(q.Extra, "i6300esb") {
		args = append(args, "-device", "i6300esb")
	}
	return append(args, c.Extra...), nil
}

// VM is a running qemu with its serial console on pipes.
type VM struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	start time.Time

	mu      sync.Mutex
	log     bytes.Buffer
	changed chan struct{} // closed and replaced whenever log grows
	done    chan struct{} // closed when qemu has exited
	err     error
}

// StartVM boots c under `timeout` (so that qemu dies even if this process
// is killed) with the serial console on pipes. limit bounds qemu's life.
func StartVM(c QEMUConfig, limit time.Duration) (*VM, error) {
	c.Serial = "stdio"
	c.IsolateWAN = true
	args, err := c.Args()
	if err != nil {
		return nil, err
	}
	if err := CheckQEMUTools(args[0]); err != nil {
		return nil, err
	}
	secs := strconv.Itoa(int(limit.Seconds()) + 1)
	argv := append([]string{tool(toolTimeout), "--kill-after=5", secs}, args...)
	if c.Netns != "" {
		argv = append([]string{"ip", "netns", "exec", c.Netns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	vm := &VM{cmd: cmd, stdin: stdin, changed: make(chan struct{}), done: make(chan struct{})}
	vm.start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	go vm.readSerial(stdout)
	return vm, nil
}

func (vm *VM) readSerial(r io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		vm.mu.Lock()
		vm.log.Write(buf[:n])
		close(vm.changed)
		vm.changed = make(chan struct{})
		vm.mu.Unlock()
		if err != nil {
			break
		}
	}
	err := vm.cmd.Wait()
	vm.mu.Lock()
	vm.err = err
	vm.mu.Unlock()
	close(vm.done)
}

// WaitFor waits until the serial output from byte from on contains marker
// and returns the offset just after it, and the time since qemu started.
func (vm *VM) WaitFor(ctx context.Context, from int, marker string) (int, time.Duration, error) {
	for {
		vm.mu.Lock()
		data := vm.log.Bytes()
		if from > len(data) {
			from = len(data)
		}
		i := bytes.Index(data[from:], []byte(marker))
		changed := vm.changed
		vm.mu.Unlock()
		if i >= 0 {
			return from + i + len(marker), time.Since(vm.start), nil
		}
		select {
		case <-changed:
		case <-vm.done:
			// One more look: the last output may have come with the exit.
			vm.mu.Lock()
			found := bytes.Contains(vm.log.Bytes()[from:], []byte(marker))
			vm.mu.Unlock()
			if found {
				continue
			}
			return from, time.Since(vm.start), fmt.Errorf("qemu exited (%v) before printing %q", vm.exitErr(), marker)
		case <-ctx.Done():
			return from, time.Since(vm.start), fmt.Errorf("no %q on the console after %s: %w", marker, time.Since(vm.start).Round(time.Millisecond), ctx.Err())
		}
	}
}

func (vm *VM) exitErr() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.err
}

// Type sends s to the serial console, as keys typed on a terminal.
func (vm *VM) Type(s string) error {
	_, err := io.WriteString(vm.stdin, s)
	return err
}

// Log returns everything the serial console printed so far.
func (vm *VM) Log() []byte {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return bytes.Clone(vm.log.Bytes())
}

// Stop kills qemu (and the timeout wrapping it, by process group) and waits
// for it to exit.
func (vm *VM) Stop() {
	vm.stdin.Close()
	if vm.cmd.Process != nil {
		syscall.Kill(-vm.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-vm.done:
	case <-time.After(10 * time.Second):
	}
}

// PrepareRunCard makes card (the persistent card of `flashgate run`) boot
// image. A new card is a copy of image. An existing card keeps its config
// partition: only the boot partition's files are rewritten, with mtools. If
// the partition tables differ the card is replaced, and reset says so.
func PrepareRunCard(ctx context.Context, image, card string) (reset bool, err error) {
	if err := checkTools(toolMcopy); err != nil {
		return false, err
	}
	old, err := os.ReadFile(card)
	if errors.Is(err, os.ErrNotExist) {
		return false, CopyCard(image, card)
	}
	if err != nil {
		return false, err
	}
	newMBR := make([]byte, 512)
	f, err := os.Open(image)
	if err != nil {
		return false, err
	}
	_, err = io.ReadFull(f, newMBR)
	f.Close()
	if err != nil {
		return false, fmt.Errorf("read %s: %w", image, err)
	}
	// Bytes 446..512: the four partition entries and the signature.
	if len(old) < 512 || !bytes.Equal(old[446:512], newMBR[446:512]) {
		return true, CopyCard(image, card)
	}
	// The boot partition is wholly the image's (both slots, syslinux and
	// its ADV, which a test upgrade on the run card may have changed):
	// copy its bytes. The config partition after it is kept.
	if err := copyRange(image, card, bootStart, int64(binary.LittleEndian.Uint32(newMBR[446+12:]))*512); err != nil {
		return false, fmt.Errorf("update the boot partition of %s: %w", card, err)
	}
	return false, nil
}

// copyRange copies n bytes at off from file src to the same place in dst.
func copyRange(src, dst string, off, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.NewOffsetWriter(out, off), io.NewSectionReader(in, off, n)); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// CopyCard makes card a fresh copy of a card image (through a temporary
// file, so a half-written card is never left under its name). A VM writes
// to its card, so each fresh box a test boots needs a copy of its own.
func CopyCard(image, card string) error {
	src, dst := image, card
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if _, err := copyFile(src, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
