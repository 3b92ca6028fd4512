package netd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/flashgate/flashgate/internal/atomicfile"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
)

// Daemon ties the pieces together: it holds the running configuration and
// the DHCP leases, turns them into a Desired state for the Reconciler, and
// starts and stops the DHCP clients and servers that state calls for.
type Daemon struct {
	Board boards.Board
	Rec   *Reconciler
	// InNS runs f in the network namespace netd manages, for the DHCP
	// sockets; nil runs it as is (on the appliance there is only one).
	InNS func(f func() error) error
	// ResolvConf is the file netd keeps with the DNS servers of the WAN
	// links' DHCP leases (DefaultResolvConf on the appliance); empty
	// leaves name resolution alone.
	ResolvConf string
	// Time is the NTP client, shown in the status; nil when there is none.
	Time *TimeSync

	ctx context.Context

	mu       sync.Mutex
	cfg      *config.Config
	revision uint64
	source   string // where cfg came from, in words
	leases   map[string]*netdapi.Lease
	clients  map[string]context.CancelFunc
	servers  map[string]*runningServer
	lastErr  error
	// resolvWritten is what ResolvConf holds, as netd last wrote it; nil
	// until the first write succeeds.
	resolvWritten []byte
}

type runningServer struct {
	srv    *DHCPServer
	cancel context.CancelFunc
	done   chan struct{} // closed when Serve has returned and closed its socket
}

// stop ends the server and waits (a bounded time: it only has to close a
// socket) until its socket is closed.
func (rs *runningServer) stop() {
	rs.cancel()
	select {
	case <-rs.done:
	case <-time.After(5 * time.Second):
		log.Printf("netd: dhcp server on %s: still not stopped after 5 s", rs.srv.Link)
	}
}

// NewDaemon returns a daemon whose DHCP clients and servers live until ctx
// ends.
func NewDaemon(ctx context.Context, b boards.Board, rec *Reconciler) *Daemon {
	return &Daemon{Board: b, Rec: rec, ctx: ctx, leases: map[string]*netdapi.Lease{},
		clients: map[string]context.CancelFunc{}, servers: map[string]*runningServer{}}
}

func (d *Daemon) inNS(f func() error) error {
	if d.InNS == nil {
		return f()
	}
	return d.InNS(f)
}

// SetConfig makes c the configuration and applies it. source says where it
// came from ("configd revision 12", "defaults: configd unreachable").
func (d *Daemon) SetConfig(c *config.Config, revision uint64, source string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg, d.revision, d.source = c, revision, source
	began := time.Now()
	err := d.reconcileLocked()
	// How long an apply takes matters at boot, when the tunnels wait for
	// it on a slow CPU.
	took := time.Since(began).Round(time.Millisecond)
	if err == nil {
		log.Printf("netd: %s applied in %v", source, took)
	} else {
		log.Printf("netd: %s not fully applied after %v (the reason is above)", source, took)
	}
	return err
}

// Reconcile applies the current configuration and leases again: the
// firewall only if it changed, the links always (a NIC that appeared late
// gets configured, an address someone removed comes back).
func (d *Daemon) Reconcile() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reconcileLocked()
}

func (d *Daemon) reconcileLocked() error {
	if d.cfg == nil {
		return errors.New("no configuration yet")
	}
	desired := FromConfig(d.cfg)
	// Leases of links that no longer run DHCP are dropped here, before
	// they could end up in the desired state.
	for link := range d.leases {
		if !slices.ContainsFunc(desired.Links, func(l Link) bool { return l.Name == link && l.DHCP && l.Up }) {
			delete(d.leases, link)
		}
	}
	for _, link := range sortedKeys(d.leases) {
		applyLease(d.leases[link], desired)
	}
	// Name resolution follows the leases whatever becomes of the rest.
	d.syncResolvConfLocked(desired)
	err := d.Rec.Apply(desired)
	// The resync repeats a lasting problem (a missing NIC) every 30 s:
	// say it once, and again when it changes.
	repeated := err != nil && d.lastErr != nil && err.Error() == d.lastErr.Error()
	d.lastErr = err
	var ve *ValidationError
	if errors.As(err, &ve) {
		if !repeated {
			log.Printf("netd: configuration refused, nothing changed: %v", err)
		}
		return err
	}
	if err != nil && !repeated {
		log.Printf("netd: %v", err)
	}
	d.syncDHCPLocked(desired)
	return err
}

// syncDHCPLocked starts the clients and servers desired calls for and stops
// the others.
func (d *Daemon) syncDHCPLocked(desired *Desired) {
	wantClient := map[string]bool{}
	for _, l := range desired.Links {
		if l.DHCP && l.Up {
			wantClient[l.Name] = true
		}
	}
	for link, cancel := range d.clients {
		if !wantClient[link] {
			cancel()
			delete(d.clients, link)
		}
	}
	for _, link := range sortedKeys(wantClient) {
		if d.clients[link] != nil {
			continue
		}
		ctx, cancel := context.WithCancel(d.ctx)
		d.clients[link] = cancel
		c := &DHCPClient{Link: link, OnLease: func(l *netdapi.Lease) { d.setLease(link, l) },
			Open: func(link string) (cl *nclient4.Client, err error) {
				err = d.inNS(func() (err error) {
					cl, err = nclient4.New(link, nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
					return err
				})
				return cl, err
			}}
		go c.Run(ctx)
	}

	// The servers the configuration calls for, on links that are up. A
	// server whose scope changed is stopped, and its replacement started
	// only once the old socket is closed (both bind port 67 on the link
	// with SO_REUSEPORT, and the kernel would share the clients between
	// them); the replacement takes over the leases that still fit.
	want := map[string]DHCPScope{}
	up := map[string]bool{}
	for _, l := range desired.Links {
		up[l.Name] = l.Up
	}
	for _, sc := range desired.DHCPServers {
		if up[sc.Link] {
			want[sc.Link] = sc
		}
	}
	carried := map[string][]netdapi.ServerLease{}
	for _, link := range sortedKeys(d.servers) {
		rs := d.servers[link]
		sc, keep := want[link]
		if keep && rs.srv.Scope().Equal(sc) {
			continue
		}
		if keep {
			carried[link] = rs.srv.Leases()
			log.Printf("netd: dhcp server on %s: settings changed, restarting it", link)
		} else {
			log.Printf("netd: dhcp server on %s: stopped", link)
		}
		rs.stop()
		delete(d.servers, link)
	}
	dns := d.dnsLocked()
	for _, link := range sortedKeys(want) {
		if d.servers[link] != nil {
			d.servers[link].srv.SetDNS(dns)
			continue
		}
		srv, err := NewScopeServer(want[link])
		if err != nil {
			log.Printf("netd: %v", err)
			continue
		}
		srv.SetDNS(dns)
		srv.Adopt(carried[link])
		ctx, cancel := context.WithCancel(d.ctx)
		rs := &runningServer{srv: srv, cancel: cancel, done: make(chan struct{})}
		d.servers[link] = rs
		go func() {
			defer close(rs.done)
			if err := d.inNS(func() error { return srv.Serve(ctx) }); err != nil {
				log.Printf("netd: %v", err)
			}
		}()
	}
}

// syncResolvConfLocked rewrites ResolvConf when the DNS servers or search
// domains of the WAN links' leases changed (a DHCP server on a LAN or opt
// network is not trusted with the box's own lookups). A failed write is
// logged and tried again at the next reconcile (the periodic resync at the
// latest).
func (d *Daemon) syncResolvConfLocked(desired *Desired) {
	if d.ResolvConf == "" {
		return
	}
	var leases []*netdapi.Lease
	for _, link := range sortedKeys(d.leases) {
		if slices.ContainsFunc(desired.Links, func(l Link) bool { return l.Name == link && l.Role == RoleWAN }) {
			leases = append(leases, d.leases[link])
		}
	}
	content := resolvConf(leases)
	if d.resolvWritten != nil && bytes.Equal(content, d.resolvWritten) {
		return
	}
	if err := atomicfile.WriteFile(d.ResolvConf, content, 0o644); err != nil {
		log.Printf("netd: DNS servers: %v", err)
		return
	}
	d.resolvWritten = content
}

// dnsLocked is the DNS servers of the WAN leases, for the LAN's clients.
func (d *Daemon) dnsLocked() []netip.Addr {
	var out []netip.Addr
	for _, link := range sortedKeys(d.leases) {
		for _, a := range d.leases[link].DNS {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

func (d *Daemon) setLease(link string, l *netdapi.Lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, running := d.clients[link]; !running {
		return // a late report from a client that was stopped
	}
	if l == nil {
		delete(d.leases, link)
	} else {
		d.leases[link] = l
	}
	if err := d.reconcileLocked(); err != nil {
		log.Printf("netd: after the lease change on %s: %v", link, err)
	}
}

// Status collects the daemon's state, the links' state and counters.
func (d *Daemon) Status() netdapi.Status {
	d.mu.Lock()
	cur, _, res := d.Rec.Current()
	st := netdapi.Status{Board: d.Board.Name, ConfigSource: d.source, Revision: d.revision, LastApply: res,
		Links: []netdapi.LinkStatus{}, Leases: []netdapi.Lease{}, DHCPServers: []netdapi.DHCPServerState{}}
	if d.lastErr != nil {
		st.Error = d.lastErr.Error()
	}
	for _, link := range sortedKeys(d.leases) {
		st.Leases = append(st.Leases, *d.leases[link])
	}
	for _, link := range sortedKeys(d.servers) {
		sc := d.servers[link].srv.Scope()
		state := netdapi.DHCPServerState{Link: link, Pool: fmt.Sprintf("%s-%s", sc.First, sc.Last),
			LeaseTime: int64(sc.LeaseTime / time.Second), StaticLeases: []netdapi.StaticLease{}, Leases: d.servers[link].srv.Leases()}
		for _, r := range sc.Reservations {
			state.StaticLeases = append(state.StaticLeases, netdapi.StaticLease(r))
		}
		st.DHCPServers = append(st.DHCPServers, state)
	}
	d.mu.Unlock()
	if cur != nil && d.Rec.Netlink != nil {
		st.Links = d.Rec.Netlink.Status(cur.Links)
	}
	if d.Time != nil {
		ts := d.Time.Status()
		st.Time = &ts
	}
	return st
}

// Links lists every link of the kernel with its state and counters; the
// configured ones carry their role.
func (d *Daemon) Links() ([]netdapi.LinkStatus, error) {
	if d.Rec.Netlink == nil {
		return nil, fmt.Errorf("netd reads no links here (no netlink handle)")
	}
	cur, _, _ := d.Rec.Current()
	roles := map[string]string{}
	if cur != nil {
		for _, l := range cur.Links {
			roles[l.Name] = l.Role
		}
	}
	return d.Rec.Netlink.Links(roles)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
