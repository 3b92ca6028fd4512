package webui

import (
	"context"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// LinkSource reports the kernel's links, configured or not (netd's
// GET /v1/links). *netdapi.Client implements it. The web UI asks netd
// rather than reading /sys/class/net: the console and the UI give one
// answer about the box's ports.
type LinkSource interface {
	Links(ctx context.Context) ([]netdapi.LinkStatus, error)
}

// TunnelSource reports the live state of the tunnels (iked).
// *ikedapi.Client implements it.
type TunnelSource interface {
	Tunnels(ctx context.Context) ([]ipsec.TunnelStatus, error)
	// Counters is every tunnel's CHILD_SA byte counters and nothing
	// else: what the throughput sampler reads every 5 s.
	Counters(ctx context.Context) ([]ikedapi.TunnelCounters, error)
}

// TunnelControl starts and stops tunnels now, without a configuration
// change (iked's up and down). *ikedapi.Client implements it; a TunnelSource
// that does not hides the buttons.
type TunnelControl interface {
	Up(ctx context.Context, name string) error
	Down(ctx context.Context, name string) error
}

// Supervisor is the part of the supervisor API the web UI uses: the
// service list, their logs, and reboot. *supervisor.Client implements it.
type Supervisor interface {
	Services(ctx context.Context) ([]supervisor.ServiceStatus, error)
	Logs(ctx context.Context, name string, n int) (supervisor.LogsReply, error)
	Power(ctx context.Context, a supervisor.PowerAction) error
}
