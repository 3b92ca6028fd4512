// Package e2e is the product as a user meets it: real card images booted in
// qemu (software emulation, the i386 qemu board), linked by bridges in a
// test-made network namespace, configured through the web UI's JSON API as
// an admin would, with kernel IPsec inside the appliances and a strongSwan
// site as a third peer.
//
//	hostA 10.10.1.2 ─ brlana ─ A (eth1 10.10.1.1, eth0 10.10.0.1) ─┐
//	                                                               brwan ─ gwC 10.10.0.3 (strongSwan) ─ hostC 10.10.3.2
//	hostB 10.10.2.2 ─ brlanb ─ B (eth1 10.10.2.1, eth0 10.10.0.2) ─┘
//
// The appliances' LAN ports also keep their first-boot address
// 192.168.1.1, which the hosts use to reach the web UI before the LAN is
// configured. A second pair of networks, 10.10.11.0/24 behind A and
// 10.10.12.0/24 behind B (hostA 10.10.11.2, hostB 10.10.12.2), reach each
// other by static routes through the appliances, without a tunnel: the
// plain routing the tunnel's throughput is compared with. Everything lives
// in namespaces the test made.
package e2e
