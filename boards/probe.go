package boards

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Confidence says how sure Probe is of its answer.
type Confidence int

const (
	// None: nothing identified a board.
	None Confidence = iota
	// Weak: the CPU alone, or the 64-bit fallback to generic-x86_64.
	Weak
	// Likely: PCI ids of the board's soldered-on devices.
	Likely
	// Certain: the firmware names the board (DMI or BIOS ROM).
	Certain
)

func (c Confidence) String() string {
	switch c {
	case None:
		return "none"
	case Weak:
		return "weak"
	case Likely:
		return "likely"
	case Certain:
		return "certain"
	}
	return "confidence(" + strconv.Itoa(int(c)) + ")"
}

// Result is what Probe found.
type Result struct {
	// Board is the name of the identified board, "" when none was.
	Board      string
	Confidence Confidence
	// Evidence says in words what the answer rests on, e.g.
	// "DMI sys_vendor=QEMU" or "PCI 1022:2082 (Geode LX AES)"; for an
	// unidentified board, what was seen instead.
	Evidence []string
	// Candidates lists the boards that matched equally well when the
	// evidence could not tell them apart; Board is then "".
	Candidates []string
	// Unsupported is the identified board's reason it cannot run
	// flashgate, if it cannot.
	Unsupported string
}

// String gives the result in one line: "alix2d13 (certain: BIOS ROM has
// "PC Engines ALIX.2"; PCI ...)".
func (r Result) String() string {
	name := r.Board
	switch {
	case name == "" && len(r.Candidates) > 0:
		name = "one of " + strings.Join(r.Candidates, ", ")
	case name == "":
		name = "unknown board"
	}
	s := fmt.Sprintf("%s (%s: %s)", name, r.Confidence, strings.Join(r.Evidence, "; "))
	if r.Unsupported != "" {
		s += ": not supported: " + r.Unsupported
	}
	return s
}

// Paths Probe reads, relative to the root it is given.
const (
	dmiDir     = "sys/class/dmi/id"
	pciDir     = "sys/bus/pci/devices"
	cpuinfo    = "proc/cpuinfo"
	devMem     = "dev/mem"
	romDumpDir = "bios-rom" // f0000.bin, ffff0000.bin: dumps of the two ROM windows
)

// romWindows are the two places the BIOS ROM shows in physical memory:
// the legacy F segment, where alix.c looks for tinyBIOS's signature, and
// the top of the 4 GiB space, where net5501.c looks for comBIOS's.
var romWindows = []struct {
	addr int64
	dump string
}{
	{0xF0000, "f0000.bin"},
	{0xFFFF0000, "ffff0000.bin"},
}

const romWindowSize = 64 << 10

// Probe identifies the board the system rooted at root runs on (root is
// "/" on the box; tests use fixture trees). It reads:
//
//   - DMI: sys/class/dmi/id/{sys_vendor,board_vendor,board_name,product_name,bios_vendor}
//   - the BIOS ROM: 64 KiB of dev/mem at 0xF0000 and at 0xFFFF0000, or,
//     where present, dumps of those windows in bios-rom/f0000.bin and
//     bios-rom/ffff0000.bin (a dump taken with
//     dd if=/dev/mem bs=64k skip=15 count=1 reads back the same way)
//   - PCI: sys/bus/pci/devices/*/{vendor,device}
//   - proc/cpuinfo: vendor_id, cpu family, model, flags
//
// Missing or unreadable files only cost evidence; Probe fails only when
// root is not a directory. When no board matches, a 64-bit CPU gives
// generic-x86_64 (weak) and anything else an unidentified result that says
// what was seen.
func Probe(root string) (Result, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return Result{}, fmt.Errorf("probe board: %w", err)
	}
	if !fi.IsDir() {
		return Result{}, fmt.Errorf("probe board: %s is not a directory", root)
	}
	sys := readSystem(root)
	return identify(sys, All()), nil
}

// system is the evidence read from a root file system.
type system struct {
	dmi     map[string]string // file name -> trimmed contents
	rom     [][]byte          // ROM windows that could be read
	pci     map[string]int    // "vvvv:dddd" -> number of devices
	cpu     cpuInfo
	haveCPU bool
}

func readSystem(root string) system {
	sys := system{dmi: map[string]string{}, pci: map[string]int{}}
	for _, f := range []string{"sys_vendor", "board_vendor", "board_name", "product_name", "bios_vendor"} {
		if b, err := readLimited(filepath.Join(root, dmiDir, f), 256); err == nil {
			if v := strings.TrimSpace(string(b)); v != "" {
				sys.dmi[f] = v
			}
		}
	}
	sys.rom = readROM(root)
	sys.pci = readPCI(root)
	if b, err := readLimited(filepath.Join(root, cpuinfo), 1<<20); err == nil {
		sys.cpu = parseCPUInfo(b)
		sys.haveCPU = sys.cpu.Vendor != "" || sys.cpu.Family >= 0 || len(sys.cpu.Flags) > 0
	}
	return sys
}

// readLimited reads at most max bytes of a file: enough for any file
// Probe reads, and bounded against a garbage file of any size.
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// readROM returns the ROM windows that could be read, dumps first.
func readROM(root string) [][]byte {
	var out [][]byte
	for _, w := range romWindows {
		if b, err := readLimited(filepath.Join(root, romDumpDir, w.dump), romWindowSize); err == nil && len(b) > 0 {
			out = append(out, b)
		}
	}
	if len(out) > 0 {
		return out
	}
	f, err := os.Open(filepath.Join(root, devMem))
	if err != nil {
		return nil
	}
	defer f.Close()
	for _, w := range romWindows {
		buf := make([]byte, romWindowSize)
		n, err := f.ReadAt(buf, w.addr)
		if n > 0 && (err == nil || errors.Is(err, io.EOF)) {
			out = append(out, buf[:n])
		}
	}
	return out
}

// maxPCIDevices bounds the PCI scan; the boards here have about twenty.
const maxPCIDevices = 1024

func readPCI(root string) map[string]int {
	ids := map[string]int{}
	entries, err := os.ReadDir(filepath.Join(root, pciDir))
	if err != nil {
		return ids
	}
	if len(entries) > maxPCIDevices {
		entries = entries[:maxPCIDevices]
	}
	for _, e := range entries {
		dir := filepath.Join(root, pciDir, e.Name())
		vendor, ok1 := readPCIID(filepath.Join(dir, "vendor"))
		device, ok2 := readPCIID(filepath.Join(dir, "device"))
		if ok1 && ok2 {
			ids[fmt.Sprintf("%04x:%04x", vendor, device)]++
		}
	}
	return ids
}

// readPCIID reads a sysfs id file: "0x1022\n".
func readPCIID(path string) (uint16, bool) {
	b, err := readLimited(path, 16)
	if err != nil {
		return 0, false
	}
	s := strings.TrimPrefix(strings.TrimSpace(string(b)), "0x")
	n, err := strconv.ParseUint(s, 16, 16)
	if err != nil {
		return 0, false
	}
	return uint16(n), true
}

// pciNames name the PCI ids boards are recognised by, for evidence.
var pciNames = map[string]string{
	pciGeodeLXAES:   "Geode LX AES",
	pciVT6105M:      "VIA VT6105M Ethernet",
	pciDP8381x:      "National DP8381x Ethernet",
	pciSC1100Bridge: "National SC1100 bridge",
	pciElanSC520:    "AMD Elan SC520 host bridge",
	pciAtomE6xxLPC:  "Intel Atom E6xx LPC bridge",
	pci82574L:       "Intel 82574L Ethernet",
}

// Scores by kind of sign: the firmware naming a board outweighs anything
// else; among PCI and CPU matches the more specific one wins.
const (
	scoreFirmware = 100
	scorePCI      = 10 // + 2 per listed device
	scoreCPU      = 5  // + 1 per constraint
)

type candidate struct {
	board    Board
	score    int
	level    Confidence
	evidence []string
}

// identify scores every board against the evidence.
func identify(sys system, boards []Board) Result {
	var best []candidate
	for _, b := range boards {
		c := score(sys, b)
		switch {
		case c.score == 0:
		case len(best) == 0 || c.score > best[0].score:
			best = []candidate{c}
		case c.score == best[0].score:
			best = append(best, c)
		}
	}
	switch {
	case len(best) == 1:
		c := best[0]
		return Result{Board: c.board.Name, Confidence: c.level, Evidence: c.evidence, Unsupported: c.board.Unsupported}
	case len(best) > 1:
		r := Result{Confidence: best[0].level}
		for _, c := range best {
			r.Candidates = append(r.Candidates, c.board.Name)
		}
		r.Evidence = append(slices.Clone(best[0].evidence), "nothing tells "+strings.Join(r.Candidates, " and ")+" apart")
		return r
	}
	return fallback(sys)
}

// fallback answers when no board matched.
func fallback(sys system) Result {
	seen := sys.describe()
	if sys.haveCPU && sys.cpu.has("lm") {
		return Result{
			Board:      "generic-x86_64",
			Confidence: Weak,
			Evidence:   append([]string{"cpuinfo has lm (64-bit CPU) and no known board matched"}, seen...),
		}
	}
	what := "unknown 32-bit board"
	if !sys.haveCPU {
		what = "unknown board"
	}
	return Result{Evidence: append([]string{what + ": no known board matched"}, seen...)}
}

// describe says what was seen, for a result that names no board.
func (sys system) describe() []string {
	var out []string
	if sys.haveCPU {
		out = append(out, "cpuinfo "+sys.cpu.String())
	} else {
		out = append(out, "no readable /proc/cpuinfo")
	}
	if v, ok := sys.dmi["sys_vendor"]; ok {
		out = append(out, fmt.Sprintf("DMI sys_vendor=%s product_name=%s", v, orNone(sys.dmi["product_name"])))
	} else {
		out = append(out, "no DMI")
	}
	if len(sys.rom) == 0 {
		out = append(out, "BIOS ROM not readable")
	}
	out = append(out, fmt.Sprintf("%d PCI devices", pciCount(sys.pci)))
	return out
}

func pciCount(ids map[string]int) int {
	n := 0
	for _, c := range ids {
		n += c
	}
	return n
}

// score matches one board's signs against the evidence.
func score(sys system, b Board) candidate {
	c := candidate{board: b}
	raise := func(points int, level Confidence, evidence string) {
		c.score += points
		c.level = max(c.level, level)
		c.evidence = append(c.evidence, evidence)
	}
	s := b.Signs
	if e, ok := matchDMI(sys, s); ok {
		raise(scoreFirmware, Certain, e)
	}
	if e, ok := matchROM(sys, s); ok {
		raise(scoreFirmware, Certain, e)
	}
	if e, ok := matchPCI(sys, s); ok {
		raise(scorePCI+2*len(s.PCI), Likely, e)
	}
	if e, n, ok := matchCPU(sys, s.CPU); ok && (s.CPU.Alone || c.score > 0) {
		raise(scoreCPU+n, Weak, e)
	}
	return c
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func matchDMI(sys system, s Signs) (string, bool) {
	if s.DMIVendor == "" {
		return "", false
	}
	var vendor string
	for _, f := range []string{"sys_vendor", "board_vendor"} {
		if containsFold(sys.dmi[f], s.DMIVendor) {
			vendor = fmt.Sprintf("DMI %s=%s", f, sys.dmi[f])
			break
		}
	}
	if vendor == "" {
		return "", false
	}
	if len(s.DMINames) == 0 {
		return vendor, true
	}
	for _, name := range s.DMINames {
		for _, f := range []string{"board_name", "product_name"} {
			if containsFold(sys.dmi[f], name) {
				return fmt.Sprintf("%s %s=%s", vendor, f, sys.dmi[f]), true
			}
		}
	}
	return "", false
}

func matchROM(sys system, s Signs) (string, bool) {
	for _, group := range s.ROM {
		if len(group) == 0 {
			continue
		}
		all := true
		for _, str := range group {
			if !romContains(sys.rom, str) {
				all = false
				break
			}
		}
		if all {
			return "BIOS ROM has " + quoteAll(group), true
		}
	}
	return "", false
}

func romContains(windows [][]byte, s string) bool {
	for _, w := range windows {
		if bytes.Contains(w, []byte(s)) {
			return true
		}
	}
	return false
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, " and ")
}

func matchPCI(sys system, s Signs) (string, bool) {
	if len(s.PCI) == 0 {
		return "", false
	}
	need := map[string]int{}
	var order []string
	for _, id := range s.PCI {
		if need[id] == 0 {
			order = append(order, id)
		}
		need[id]++
	}
	var words []string
	for _, id := range order {
		if sys.pci[id] < need[id] {
			return "", false
		}
		w := id
		if need[id] > 1 {
			w = fmt.Sprintf("%dx %s", need[id], id)
		}
		if name, ok := pciNames[id]; ok {
			w += " (" + name + ")"
		}
		words = append(words, w)
	}
	return "PCI " + strings.Join(words, ", "), true
}

// matchCPU returns the evidence, the number of constraints that matched
// (so that a more specific match scores higher) and whether all did.
func matchCPU(sys system, s CPUSigns) (string, int, bool) {
	if s.empty() || !sys.haveCPU {
		return "", 0, false
	}
	c := sys.cpu
	n := 0
	var words []string
	if s.Vendor != "" {
		if c.Vendor != s.Vendor {
			return "", 0, false
		}
		n++
		words = append(words, "vendor_id="+c.Vendor)
	}
	if s.Family != 0 {
		if c.Family != s.Family {
			return "", 0, false
		}
		n++
		words = append(words, fmt.Sprintf("family %d", c.Family))
	}
	if len(s.Models) > 0 {
		if !slices.Contains(s.Models, c.Model) {
			return "", 0, false
		}
		n++
		words = append(words, fmt.Sprintf("model %d", c.Model))
	}
	for _, f := range s.Flags {
		if !c.has(f) {
			return "", 0, false
		}
		n++
		words = append(words, "flag "+f)
	}
	for _, f := range s.NoFlags {
		if c.has(f) {
			return "", 0, false
		}
		n++
		words = append(words, "no "+f)
	}
	return "cpuinfo " + strings.Join(words, ", "), n, true
}
