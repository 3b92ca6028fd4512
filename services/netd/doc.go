// Package netd owns the appliance's network plumbing: links (up/down, MTU),
// addresses, static routes and IP forwarding over netlink, the nftables
// firewall (one table, "inet flashgate", rebuilt atomically in one netlink
// batch), a DHCP client on the WAN and a small DHCP server on the LAN (and
// on opt networks that turn one on), and the system clock: an SNTP client
// (RFC 4330) keeps it in step with the configured NTP servers. The clock
// is here, not in a service of its own, because netd owns what NTP needs
// (the WAN, its lease, resolv.conf) and already follows configd, and
// another process would cost the smallest boards megabytes of RAM for one
// datagram every few minutes.
//
// The core is a set of reconcilers fed with netd's own desired-state types
// (Desired and what it holds); fromconfig.go is the one place that knows the
// configuration schema and turns a config.Config into a Desired. The
// firewall's rule builder (Build) is a pure function from Firewall to an
// ordered list of Specs, so the policy can be tested without a kernel; the
// applier (NFTables) turns Specs into nftables expressions.
package netd
