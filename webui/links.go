package webui

import (
	"context"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// The links and their counters are netd's answer (GET /v1/links on
// netd-web.sock): the web UI does not read /sys/class/net, so it and the
// console say the same about the box's ports.

// Link is one network interface as the web UI's API shows it
// (GET /api/v1/dashboard, /api/v1/interfaces).
type Link struct {
	Name      string   `json:"name"`
	State     string   `json:"state"` // operstate: up, down, unknown, ...
	MAC       string   `json:"mac,omitempty"`
	MTU       int      `json:"mtu"`
	Addresses []string `json:"addresses"`
	RxBytes   uint64   `json:"rx_bytes"`
	TxBytes   uint64   `json:"tx_bytes"`
	RxPackets uint64   `json:"rx_packets"`
	TxPackets uint64   `json:"tx_packets"`
	RxErrors  uint64   `json:"rx_errors"`
	TxErrors  uint64   `json:"tx_errors"`
}

// linkOf is netd's report of a link as the web UI shows it.
func linkOf(st netdapi.LinkStatus) Link {
	l := Link{Name: st.Name, State: st.Operstate, MAC: st.MAC, MTU: st.MTU, Addresses: st.Addresses,
		RxBytes: st.RxBytes, TxBytes: st.TxBytes, RxPackets: st.RxPackets, TxPackets: st.TxPackets,
		RxErrors: st.RxErrors, TxErrors: st.TxErrors}
	if l.Addresses == nil {
		l.Addresses = []string{}
	}
	return l
}

// links asks netd for the kernel's links, sorted by name.
func (s *Server) links(ctx context.Context) ([]netdapi.LinkStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	links, err := s.opts.Links.Links(ctx)
	if err != nil {
		return nil, fmt.Errorf("netd did not answer: %w", err)
	}
	return links, nil
}

// shownLinks is links as the web UI's API shows them.
func (s *Server) shownLinks(ctx context.Context) ([]Link, error) {
	links, err := s.links(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Link, 0, len(links))
	for _, l := range links {
		out = append(out, linkOf(l))
	}
	return out, nil
}

// unconfiguredPorts are the kernel names of the box's network ports that
// the configuration does not name: a third NIC the first-boot defaults
// left out, a USB NIC plugged in later. A port is a link with a device
// behind it (netd's Port: PCI, USB and virtio NICs alike); loopback,
// tunnels, bridges and veths are no ports to add. Without an answer from
// netd there are no hints, and the form still takes any name.
func (s *Server) unconfiguredPorts(ctx context.Context, c *config.Config) []string {
	links, err := s.links(ctx)
	if err != nil {
		return nil
	}
	return unconfiguredPorts(links, c)
}

func unconfiguredPorts(links []netdapi.LinkStatus, c *config.Config) []string {
	var out []string
	for _, l := range links {
		if l.Port && c.Interface(l.Name) == nil {
			out = append(out, l.Name)
		}
	}
	return out
}
