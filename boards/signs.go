package boards

// Signs describe how a board shows itself to software. Each kind of sign is
// optional; Probe scores every board by the signs that match and picks the
// best. Firmware signs (DMI, BIOS ROM) name the board and so count most; PCI
// ids of soldered-on devices come next; the CPU alone counts least, since
// one CPU is used on several boards.
type Signs struct {
	// DMIVendor, when set, must appear in sys_vendor or board_vendor
	// (case-insensitive), and one of DMINames (if any are given) in
	// board_name or product_name. Firmware that fills in DMI (coreboot, SeaBIOS, AMI)
	// names the board this way; tinyBIOS and comBIOS do not.
	DMIVendor string
	DMINames  []string

	// ROM lists groups of strings: the sign matches when every string of
	// one group appears in the BIOS ROM (see Probe for where it is read).
	ROM [][]string

	// PCI lists vendor:device ids ("1022:2082") of devices soldered on the
	// board. All must be present; an id listed n times needs n devices,
	// which is how boards with the same chips but a different number of
	// ports are told apart.
	PCI []string

	// CPU matches /proc/cpuinfo. Zero values match anything.
	CPU CPUSigns
}

// CPUSigns match the first processor in /proc/cpuinfo.
type CPUSigns struct {
	// Alone says the CPU suggests the board by itself (a VIA C3 is on an
	// EPIA-type board), if only weakly. Otherwise the CPU signs only
	// count for a board that a DMI, ROM or PCI sign already matched: the
	// qemu boards differ from each other in the lm flag, but a 64-bit
	// CPU is no sign of qemu.
	Alone bool

	Vendor  string   // vendor_id, e.g. "CentaurHauls"
	Family  int      // "cpu family"; 0 matches any
	Models  []int    // "model"; empty matches any
	Flags   []string // flags that must be present
	NoFlags []string // flags that must be absent
}

// empty reports whether the CPU signs constrain nothing.
func (c CPUSigns) empty() bool {
	return c.Vendor == "" && c.Family == 0 && len(c.Models) == 0 &&
		len(c.Flags) == 0 && len(c.NoFlags) == 0
}
