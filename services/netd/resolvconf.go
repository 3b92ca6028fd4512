package netd

import (
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/flashgate/flashgate/internal/paths"
	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// DefaultResolvConf is the resolver configuration netd keeps on the
// appliance: the box's own name lookups (a syslog server by name, ping by
// name) use the DNS servers of the WAN's DHCP lease. It is in netd's own
// directory, since netd runs as its own user and may not write /etc;
// /etc/resolv.conf is a symbolic link to it (PID 1 makes it).
const DefaultResolvConf = paths.NetdResolvConf

// The resolver's limits: glibc and musl read at most 3 nameserver lines
// (MAXNS), and Go's resolver does the same; older resolvers read at most
// 6 search domains.
const (
	maxNameservers   = 3
	maxSearchDomains = 6
)

// domainRE is one DNS name as resolv.conf can carry it. The name comes from
// a DHCP server on the WAN, so anything else (spaces, a newline that would
// start a line of the attacker's choosing) is dropped.
var domainRE = regexp.MustCompile(`^([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?$`)

func validDomain(s string) bool { return len(s) <= 253 && domainRE.MatchString(s) }

// resolvConf renders resolv.conf from the leases, taken in the order given
// (the daemon sorts them by link): their DNS servers, deduplicated, at most
// three, and their search domains.
func resolvConf(leases []*netdapi.Lease) []byte {
	var servers []netip.Addr
	var search, from []string
	for _, l := range leases {
		if len(l.DNS) == 0 {
			continue
		}
		from = append(from, l.Link)
		for _, a := range l.DNS {
			if len(servers) < maxNameservers && !slices.Contains(servers, a) {
				servers = append(servers, a)
			}
		}
		for _, d := range l.Search {
			if len(search) < maxSearchDomains && !slices.Contains(search, d) {
				search = append(search, d)
			}
		}
	}
	var b bytes.Buffer
	if len(servers) == 0 {
		b.WriteString("# Written by netd: no DHCP lease on a WAN link gives DNS servers.\n")
		return b.Bytes()
	}
	fmt.Fprintf(&b, "# Written by netd from the DHCP lease on %s; rewritten when it changes.\n", strings.Join(from, ", "))
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	for _, a := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", a)
	}
	return b.Bytes()
}
