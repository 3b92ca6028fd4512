package webui

import (
	"os"
	"path/filepath"
	"sort"

	"github.com/flashgate/flashgate/config"
)

// unconfiguredPorts are the kernel names of the box's network ports that
// the configuration does not name: a third NIC the first-boot defaults
// left out, a USB NIC plugged in later. A port is a link with a device
// behind it (/sys/class/net/NAME/device, for PCI and USB NICs alike);
// loopback, tunnels, bridges and veths have none and are no ports to add.
// Without a readable /sys there are no hints, and the form still takes
// any name.
func unconfiguredPorts(root string, c *config.Config) []string {
	dir := filepath.Join(root, "sys/class/net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if c.Interface(name) != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name, "device")); err != nil {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
