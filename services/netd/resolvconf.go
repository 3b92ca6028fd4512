package netd

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// DefaultResolvConf is the resolver configuration netd keeps: the box's own
// name lookups (a syslog server by name, ping by name) use the DNS servers
// of the WAN's DHCP lease.
const DefaultResolvConf = "/etc/resolv.conf"

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

// writeFileAtomic replaces path with content in one rename, so that a
// lookup running at that moment reads the old file or the new one, never
// half of one. The temporary file lives in path's directory, because
// rename does not cross file systems.
func writeFileAtomic(path string, content []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(content)
	if err == nil {
		err = f.Chmod(perm) // CreateTemp makes it 0600; every program reads resolv.conf
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
