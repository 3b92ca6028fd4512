package console

import (
	"fmt"
	"net"
	"strings"
)

// Banner is what the console shows above the login prompt: the version,
// the board and the addresses the box can be reached at. The web UI's URL
// and certificate fingerprint join it when the web UI exists.
func Banner(board, version string) string {
	if version == "" {
		version = "(unknown version)"
	}
	if board == "" {
		board = "unknown board"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "flashgate %s on %s\n", version, board)
	addrs := addresses()
	if len(addrs) == 0 {
		b.WriteString("  no network addresses yet\n")
	}
	for _, a := range addrs {
		fmt.Fprintf(&b, "  %s\n", a)
	}
	return b.String()
}

// addresses lists "eth0  192.0.2.1/24" for every address on an interface
// that is up, loopback excluded.
func addresses() []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsLinkLocalUnicast() {
				continue // fe80:: is no use to someone typing an address
			}
			out = append(out, fmt.Sprintf("%-6s %s", ifc.Name, a))
		}
	}
	return out
}
