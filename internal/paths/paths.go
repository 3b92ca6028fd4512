// Package paths names the files and sockets that PID 1, the getty and the
// services share on the appliance. Each is spelled here once: the process
// that serves a socket and every process that reaches it use the same
// constant, so a renamed socket cannot leave one side behind.
//
// It imports nothing, so PID 1 (firmware/init), which must stay small, can
// use it too.
package paths

// RunDir holds the local API sockets and the run-time state (tmpfs).
const RunDir = "/run/flashgate"

// The local API sockets (docs/architecture.md, "Who can reach what").
const (
	// ConfigdSocket is configd's full API: root only (0600).
	ConfigdSocket = RunDir + "/configd.sock"
	// ConfigdWebSocket is configd's restricted API for the web UI
	// (root:443, 0660).
	ConfigdWebSocket = RunDir + "/configd-web.sock"
	// NetdRunDir is netd's own directory (netd's user and group, 0755):
	// netd runs as its own user and cannot create files in RunDir. Its
	// resolver file is here too, world-readable.
	NetdRunDir = RunDir + "/netd"
	// NetdSocket is netd's status and reconcile API (netd's, 0600: root
	// and netd).
	NetdSocket = NetdRunDir + "/netd.sock"
	// NetdWebSocket is the part of netd's API the web UI may use, the
	// kernel's links (netd's user and the group of netd's API for the
	// web UI, 0660).
	NetdWebSocket = NetdRunDir + "/netd-web.sock"
	// ConfigdRedactedSocket is configd's read-only API without secrets
	// (the running configuration with every secret replaced by a mark, and
	// its watch stream): root and netd's group (0660). netd needs no key.
	ConfigdRedactedSocket = RunDir + "/configd-redacted.sock"
	// ConfigdReadSocket is configd's read-only API with secrets (the
	// running configuration and its watch stream, PSKs and keys in it):
	// root and iked's group (0660). iked runs as its own user and may not
	// change the configuration.
	ConfigdReadSocket = RunDir + "/configd-read.sock"
	// IkedRunDir is iked's own directory (iked's user, the web UI's
	// group, 0750): iked runs as its own user and cannot create files
	// in RunDir, where it could otherwise shadow another service's socket.
	IkedRunDir = RunDir + "/iked"
	// IkedSocket is iked's tunnel status, up and down API (iked:443, 0660).
	IkedSocket = IkedRunDir + "/iked.sock"
	// SupervisorSocket is PID 1's supervisor API: every op, root only.
	SupervisorSocket = RunDir + "/supervisor.sock"
	// SupervisorWebSocket is the supervisor API's part the web UI may use
	// (services, logs, reboot).
	SupervisorWebSocket = RunDir + "/supervisor-web.sock"
)

// Files under RunDir.
const (
	// RAMConfigDB is the database configd keeps in RAM when the box has
	// no config partition.
	RAMConfigDB = RunDir + "/config.db"
	// WebUIRunDir is the web UI's own directory (443:443, 0700): its
	// TLS pair when configd cannot keep it, and its fingerprint.
	WebUIRunDir = RunDir + "/webui"
	// WebUIFingerprint is the web UI's certificate fingerprint, which the
	// console's banner shows.
	WebUIFingerprint = WebUIRunDir + "/fingerprint"
	// ConsoleAccountsDir is where the getty keeps the admin password hash
	// when it cannot reach configd (RAM).
	ConsoleAccountsDir = RunDir + "/accounts"
	// NetdResolvConf is the resolver file netd keeps from the WAN's DHCP
	// lease; /etc/resolv.conf is a symbolic link to it (PID 1 makes it).
	NetdResolvConf = NetdRunDir + "/resolv.conf"
	// UpgradeStatus is PID 1's record of the last upgrade's boot, world
	// readable (firmware/bootslot).
	UpgradeStatus = RunDir + "/upgrade.json"
)

// The config partition (ext3, label fgconfig), mounted read-only between
// commits.
const (
	// ConfigDir is where PID 1 mounts the config partition.
	ConfigDir = "/cfg"
	// ConfigDB is the configuration database on it (bbolt).
	ConfigDB = ConfigDir + "/config.db"
	// WebUICertDir keeps the web UI's TLS pair when configd cannot.
	WebUICertDir = ConfigDir + "/webui"
)
