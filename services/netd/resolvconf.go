package netd

import (
	"bytes"
	"fmt"
	"net/netip"
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

// validDomain reports whether s is one DNS name as resolv.conf can carry
// it: labels of 1 to 63 of A-Z a-z 0-9 _ -, neither starting nor ending
// with -, joined by dots, with an optional dot at the end; 253 bytes at
// most. The name comes from a DHCP server on the WAN, so anything else
// (spaces, a newline that would start a line of the attacker's choosing)
// is dropped. (It was a regular expression, compiled at start in every
// process of the multi-call binary; resolvconf_test.go holds the two
// alike.)
func validDomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if !validDomainLabel(label) {
			return false
		}
	}
	return true
}

func validDomainLabel(l string) bool {
	if len(l) == 0 || len(l) > 63 || !domainEdge(l[0]) || !domainEdge(l[len(l)-1]) {
		return false
	}
	for i := 1; i < len(l)-1; i++ {
		if !domainEdge(l[i]) && l[i] != '-' {
			return false
		}
	}
	return true
}

func domainEdge(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

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
