// Package ikedns starts a real iked (iked.Open: UDP sockets, the userspace
// data plane's TUN) inside a test's network namespace: the one fixture
// that the benchmarks, the web UI's browser test and other packages'
// namespace tests share. iked's own tests use its in-memory twins
// (ipsec/iked/ikedtest) where they can, and a copy of this where they need
// the real edges (they cannot import a package that imports iked).
package ikedns

import (
	"testing"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec/iked"
)

// Start opens a daemon in ns with opts (data plane "userspace" unless
// set: this machine's kernel has no ESP; no log unless Logf is set), runs
// it and applies cfg (nil: no tunnels yet). The daemon is closed when the
// test ends.
func Start(tb testing.TB, ns *testnet.NS, opts iked.Options, cfg *config.Config) *iked.Daemon {
	tb.Helper()
	if opts.DataPlane == "" {
		opts.DataPlane = "userspace"
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if cfg == nil {
		cfg = &config.Config{}
	}
	var d *iked.Daemon
	err := ns.Do(func() error {
		var err error
		if d, err = iked.Open(opts); err != nil {
			return err
		}
		d.Run()
		return d.Apply(cfg)
	})
	if err != nil {
		if d != nil {
			d.Close()
		}
		tb.Fatalf("start iked in %s: %v", ns.Name, err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}
