package console

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/flashgate/flashgate/internal/paths"
)

// WebUIFingerprintFile is where the web UI writes its TLS certificate's
// SHA-256 fingerprint once it serves (webui.FingerprintFile; not imported,
// so the getty stays free of the web UI's dependencies).
const WebUIFingerprintFile = paths.WebUIFingerprint

// iface is one address of an interface that is up.
type iface struct {
	name string
	addr *net.IPNet
}

// banner is what the console shows above the login prompt: the version,
// the board, the addresses the box can be reached at and, once the web UI
// serves, its URLs and certificate fingerprint, so the first HTTPS
// connection can be checked against what the console says.
func banner(board, version string, addrs []iface, fingerprintFile string) string {
	if version == "" {
		version = "(unknown version)"
	}
	if board == "" {
		board = "unknown board"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "flashgate %s on %s\n", version, board)
	if len(addrs) == 0 {
		b.WriteString("  no network addresses yet\n")
	}
	for _, a := range addrs {
		fmt.Fprintf(&b, "  %-6s %s\n", a.name, a.addr)
	}
	fp, err := os.ReadFile(fingerprintFile)
	if err != nil { // the web UI is not serving (yet)
		return b.String()
	}
	for _, a := range addrs {
		if a.addr.IP.To4() != nil {
			fmt.Fprintf(&b, "Web UI: https://%s/\n", a.addr.IP)
		}
	}
	if f := strings.TrimSpace(string(fp)); f != "" {
		fmt.Fprintf(&b, "  certificate SHA-256 %s\n", f)
	}
	return b.String()
}

// addresses lists every address on an interface that is up, loopback and
// link-local excluded (no use to someone typing an address).
func addresses() []iface {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []iface
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.IsLinkLocalUnicast() {
				continue
			}
			out = append(out, iface{ifc.Name, ipn})
		}
	}
	return out
}
