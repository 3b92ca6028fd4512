// Package hostd applies the box's own settings from configd: host name,
// time zone, console speed, remote syslog — the parts of the system
// section that belong to the box rather than to a network service (netd
// owns the NTP servers, configd the admins).
//
// hostd owns the kernel's host name (sethostname), the time zone file
// (/etc/localtime, a TZif file written from the zone's POSIX rule), and
// the choice of remote syslog server and console getty speed, which it
// hands to the supervisor over its API (PID 1 forwards the logs and
// restarts the getty). It follows configd's watch stream, waits for
// configd when it is down or restarting, and applies a setting only when
// its value changed, so a commit of other settings restarts no getty and
// rewrites no file.
//
// These lived in PID 1 until PID 1 became a small binary of its own: the
// config package and configd's client (bbolt, argon2, net/http) belong in
// a service, not in the process that must never fail.
//
// On the appliance hostd runs in configd's process (Beside; PID 1's
// service table puts its flags after configd's), still as a client of
// configd's socket: a Go process of its own cost the box about 1 MB.
//
// A hostd touches only what its flags name: run by hand or by a test it
// leaves the host's name, time zone and supervisor alone. PID 1's service
// table passes the appliance's paths.
package hostd
