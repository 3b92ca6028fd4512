package hwcrypto

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// PCIDevice is one function under /sys/bus/pci/devices.
type PCIDevice struct {
	Addr   string // "0000:00:01.2"
	Vendor uint16
	Device uint16
}

func (d PCIDevice) String() string {
	return fmt.Sprintf("%04x:%04x at %s", d.Vendor, d.Device, d.Addr)
}

// ReadPCI lists the PCI functions under <root>/sys/bus/pci/devices. A system
// without PCI (or a tree without the directory) has none; a device whose ids
// cannot be read is skipped rather than failing detection of the others.
func ReadPCI(root string) ([]PCIDevice, error) {
	dir := filepath.Join(root, "sys/bus/pci/devices")
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list PCI devices: %w", err)
	}
	var devs []PCIDevice
	for _, e := range entries {
		v, errV := readHex16(filepath.Join(dir, e.Name(), "vendor"))
		d, errD := readHex16(filepath.Join(dir, e.Name(), "device"))
		if errV != nil || errD != nil {
			continue
		}
		devs = append(devs, PCIDevice{Addr: e.Name(), Vendor: v, Device: d})
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Addr < devs[j].Addr })
	return devs, nil
}

func readHex16(path string) (uint16, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimPrefix(strings.TrimSpace(string(b)), "0x")
	n, err := strconv.ParseUint(s, 16, 16)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return uint16(n), nil
}
