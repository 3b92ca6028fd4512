package netd

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"strings"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
)

// applyLease adds the lease's address and default route to d, as if the
// configuration had named them.
func applyLease(l *netdapi.Lease, d *Desired) {
	path := fmt.Sprintf("interfaces[%s].dhcp", l.Link)
	d.Addresses = append(d.Addresses, Address{Link: l.Link, Prefix: l.Address, Path: path})
	if l.Router.IsValid() {
		d.Routes = append(d.Routes, Route{Destination: netip.PrefixFrom(netip.IPv4Unspecified(), 0),
			Gateway: l.Router, Link: l.Link, Path: path + ".router"})
	}
}

func leaseFrom(link string, nl *nclient4.Lease) (*netdapi.Lease, error) {
	ack := nl.ACK
	ip, ok := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if !ok || ip.IsUnspecified() {
		return nil, fmt.Errorf("dhcp on %s: the server acknowledged no address", link)
	}
	bits := 24
	if m := ack.SubnetMask(); m != nil {
		bits, _ = m.Size()
	}
	dur := ack.IPAddressLeaseTime(time.Hour)
	l := &netdapi.Lease{Link: link, Address: netip.PrefixFrom(ip, bits), Obtained: nl.CreationTime, Duration: dur,
		Renew: ack.IPAddressRenewalTime(dur / 2), Rebind: ack.IPAddressRebindingTime(dur * 7 / 8)}
	if r := ack.Router(); len(r) > 0 {
		l.Router, _ = netip.AddrFromSlice(r[0].To4())
	}
	for _, d := range ack.DNS() {
		if a, ok := netip.AddrFromSlice(d.To4()); ok {
			l.DNS = append(l.DNS, a)
		}
	}
	var domains []string
	if ds := ack.DomainSearch(); ds != nil && len(ds.Labels) > 0 {
		domains = ds.Labels
	} else if dn := ack.DomainName(); dn != "" {
		domains = []string{dn}
	}
	for _, d := range domains {
		d = strings.TrimSuffix(d, ".")
		if !validDomain(d) {
			log.Printf("netd: dhcp on %s: ignoring the search domain %q: not a DNS name", link, d)
			continue
		}
		l.Search = append(l.Search, d)
	}
	l.Server, _ = netip.AddrFromSlice(ack.ServerIdentifier().To4())
	if l.Renew <= 0 || l.Renew > l.Duration {
		l.Renew = l.Duration / 2
	}
	if l.Rebind <= l.Renew || l.Rebind > l.Duration {
		l.Rebind = l.Duration * 7 / 8
	}
	return l, nil
}

// DHCPClient keeps a lease on one link: it discovers, renews at T1,
// rebinds by broadcast until the lease ends, and starts over when it is
// lost. Every change is reported through OnLease (nil: no lease).
type DHCPClient struct {
	Link    string
	OnLease func(*netdapi.Lease)
	// Open creates the nclient4 client; it defaults to nclient4.New on
	// Link in the current network namespace (tests open it elsewhere).
	Open func(link string) (*nclient4.Client, error)
}

// Run keeps the lease until ctx ends.
func (c *DHCPClient) Run(ctx context.Context) error {
	open := c.Open
	if open == nil {
		open = func(link string) (*nclient4.Client, error) {
			return nclient4.New(link, nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
		}
	}
	backoff := time.Second
	for ctx.Err() == nil {
		err := c.session(ctx, open)
		if ctx.Err() != nil {
			return nil
		}
		log.Printf("netd: dhcp on %s: %v (retrying in %s)", c.Link, err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
	return nil
}

// session obtains one lease and keeps it as long as the server renews it.
func (c *DHCPClient) session(ctx context.Context, open func(string) (*nclient4.Client, error)) error {
	cl, err := open(c.Link)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer cl.Close()
	nl, err := cl.Request(ctx)
	if err != nil {
		return fmt.Errorf("discover: %w", err)
	}
	lease, err := leaseFrom(c.Link, nl)
	if err != nil {
		return err
	}
	log.Printf("netd: dhcp on %s: lease %s router %s from %s for %s", c.Link, lease.Address, lease.Router, lease.Server, lease.Duration)
	c.OnLease(lease)
	for {
		// Renew at T1. nclient4 sends the renewal to its server address,
		// broadcast by default, so renewing and rebinding are one step:
		// keep trying, ever closer together, until the lease ends.
		next := lease.Obtained.Add(lease.Renew)
		for {
			wait := time.Until(next)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(wait, 0)):
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			renewed, err := cl.Renew(rctx, nl)
			cancel()
			if err == nil {
				nl = renewed
				if lease, err = leaseFrom(c.Link, nl); err != nil {
					c.OnLease(nil)
					return err
				}
				c.OnLease(lease)
				break
			}
			var nak *nclient4.ErrNak
			if errors.As(err, &nak) || time.Now().After(lease.Expires()) {
				c.OnLease(nil)
				return fmt.Errorf("lease %s lost: %w", lease.Address, err)
			}
			// Try again halfway to the end of the lease, at least 10 s on.
			next = time.Now().Add(max(time.Until(lease.Expires())/2, 10*time.Second))
			if next.After(lease.Expires()) {
				next = lease.Expires()
			}
		}
	}
}
