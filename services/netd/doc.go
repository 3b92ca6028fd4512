// Package netd owns the appliance's network plumbing: links (up/down, MTU),
// addresses, static routes and IP forwarding over netlink, the nftables
// firewall (one table, "inet flashgate", rebuilt atomically in one netlink
// batch), a DHCP client on the WAN and a small DHCP server on the LAN.
//
// The core is a set of reconcilers fed with netd's own desired-state types
// (Desired and what it holds); fromconfig.go is the one place that knows the
// configuration schema and turns a config.Config into a Desired. The
// firewall's rule builder (Build) is a pure function from Firewall to an
// ordered list of Specs, so the policy can be tested without a kernel; the
// applier (NFTables) turns Specs into nftables expressions.
package netd
