package cli

import (
	"golang.org/x/sys/unix"

	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// show's subcommands. Each writes into a buffer that is then printed a
// screenful at a time (page): one write per screen is what a slow serial
// line likes, and a dumb terminal has no scrollback.
var showTopics = []struct {
	name, usage, help string
	run               func(ctx context.Context, s *session, b *strings.Builder, args []string) error
}{
	{"status", "show status", "services, config revision, tunnels", showStatus},
	{"interfaces", "show interfaces", "links, addresses, counters", showInterfaces},
	{"tunnels", "show tunnels [up|down|connecting|failed|TEXT]", "the tunnels' state, SAs, counters (beyond 10: one line each)", showTunnels},
	{"tunnel", "show tunnel NAME", "one tunnel, why it is down, events", showTunnel},
	{"firewall", "show firewall", "rules in force, hit counters", showFirewall},
	{"dhcp", "show dhcp [INTERFACE]", "the DHCP servers' leases (LAN and opt)", showDHCP},
	{"clock", "show clock", "the time, its zone, NTP state", showClock},
	{"config", "show config [running|candidate] [PATH]", "the configuration as set lines", showConfig},
	{"diff", "show diff", "what commit would change", showDiff},
	{"history", "show history", "the revisions, newest first", showHistory},
	{"log", "show log [SERVICE]", "recent output (default: supervisor)", showLog},
	{"crypto", "show crypto", "crypto engines and their state", showCrypto},
	{"board", "show board", "what the firmware knows of the board", showBoard},
}

func showHelp() string {
	var b strings.Builder
	for _, t := range showTopics {
		fmt.Fprintf(&b, "  %-40s %s\n", t.usage, t.help)
	}
	return b.String()
}

func runShow(ctx context.Context, s *session, args []string) error {
	if len(args) == 0 {
		return errors.New("show what? One of: " + strings.Join(showNames(), ", "))
	}
	for _, t := range showTopics {
		if t.name == args[0] {
			ctx, cancel := apiContext(ctx)
			defer cancel()
			var b strings.Builder
			err := t.run(ctx, s, &b, args[1:])
			s.page(b.String())
			return err
		}
	}
	return fmt.Errorf("show %s: unknown; one of: %s", clip(args[0], 40), strings.Join(showNames(), ", "))
}

func showNames() []string {
	var out []string
	for _, t := range showTopics {
		out = append(out, t.name)
	}
	return out
}

func completeShow(s *session, args []string, partial string) []string {
	if len(args) == 0 {
		return showNames()
	}
	switch args[0] {
	case "tunnel":
		if len(args) == 1 {
			return configTunnels(s)
		}
	case "config":
		switch len(args) {
		case 1:
			words := []string{"running", "candidate"}
			if c := s.running(); c != nil {
				words = append(words, completePath(c, partial)...)
			}
			return words
		case 2:
			if c := s.running(); c != nil {
				return completePath(c, partial)
			}
		}
	case "dhcp":
		if len(args) == 1 {
			return dhcpServerLinks(s)
		}
	case "log":
		if len(args) == 1 {
			return append(serviceNames(s), "supervisor", "kernel")
		}
	}
	return nil
}

func noArgs(args []string, usage string) error {
	if len(args) != 0 {
		return fmt.Errorf("usage: %s", usage)
	}
	return nil
}

func showStatus(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if err := noArgs(args, "show status"); err != nil {
		return err
	}
	if st, err := s.configd.Status(ctx); err != nil {
		fmt.Fprintf(b, "configuration: configd is not answering (%s)\n", reason(err))
	} else {
		fmt.Fprintf(b, "configuration: revision %d, stored on %s\n", st.Revision, st.Storage)
		if st.Pending != nil {
			fmt.Fprintf(b, "  revision %d rolls back to %d in %s unless confirmed\n",
				st.Pending.Revision, st.Pending.RollbackTo, clock(time.Until(st.Pending.Deadline)))
		}
		if st.Note != "" {
			fmt.Fprintf(b, "  %s\n", st.Note)
		}
		if st.Recovered != "" {
			fmt.Fprintf(b, "  database set aside at start: %s\n", st.Recovered)
		}
	}
	if svcs, err := s.supervisor.Services(ctx); err != nil {
		fmt.Fprintf(b, "services: the supervisor is not answering (%s)\n", reason(err))
	} else {
		fmt.Fprintf(b, "%-12s %-10s %6s %8s %10s  %s\n", "SERVICE", "STATE", "PID", "RESTARTS", "UPTIME", "LAST EXIT")
		for _, sv := range svcs {
			pid := "-"
			if sv.PID > 0 {
				pid = fmt.Sprint(sv.PID)
			}
			fmt.Fprintf(b, "%-12s %-10s %6s %8d %10s  %s\n", sv.Name, sv.State, pid, sv.Restarts,
				sv.Uptime.Std().Round(time.Second), sv.LastExit)
		}
	}
	showTunnelCounts(ctx, s, b)
	return nil
}

// notUpInStatus is how many tunnels that are not up show status names
// with their reason, per state; show tunnels STATE lists them all.
const notUpInStatus = 10

// showTunnelCounts is show status's part about the tunnels: how many are
// up, and the first few of those that are not, with their reason. It asks
// iked for counts and short pages, not for every tunnel: a head office
// has a thousand.
func showTunnelCounts(ctx context.Context, s *session, b *strings.Builder) {
	total, err := s.iked.CountTunnels(ctx, ikedapi.TunnelQuery{})
	if err != nil {
		fmt.Fprintf(b, "tunnels: iked is not answering (%s)\n", reason(err))
		return
	}
	up, err := s.iked.CountTunnels(ctx, ikedapi.TunnelQuery{State: ipsec.StateUp})
	if err != nil {
		fmt.Fprintf(b, "tunnels: iked is not answering (%s)\n", reason(err))
		return
	}
	fmt.Fprintf(b, "tunnels: %d of %d up\n", up, total)
	var notUp []ipsec.TunnelStatus
	var more []string
	for _, st := range []ipsec.TunnelState{ipsec.StateFailed, ipsec.StateConnecting, ipsec.StateDown} {
		page, matched, err := s.iked.TunnelsPage(ctx, ikedapi.TunnelQuery{State: st, Limit: notUpInStatus})
		if err != nil {
			fmt.Fprintf(b, "  tunnels %s: iked is not answering (%s)\n", st, reason(err))
			continue
		}
		for _, t := range page {
			if t.Reason != "" {
				notUp = append(notUp, t)
			}
		}
		if matched > len(page) {
			more = append(more, fmt.Sprintf("%d more %s (show tunnels %s)", matched-len(page), st, st))
		}
	}
	slices.SortFunc(notUp, func(a, b ipsec.TunnelStatus) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range notUp {
		fmt.Fprintf(b, "  %s %s: %s\n", t.Name, t.State, t.Reason)
	}
	if len(more) > 0 {
		fmt.Fprintf(b, "  and %s\n", strings.Join(more, ", "))
	}
}

func showInterfaces(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if err := noArgs(args, "show interfaces"); err != nil {
		return err
	}
	st, err := s.netd.Status(ctx)
	if err != nil {
		return unreachable("netd", err)
	}
	for _, l := range st.Links {
		state := l.Operstate
		switch {
		case !l.Present:
			state = "missing (no such NIC)"
		case !l.Up:
			state = "disabled"
		}
		fmt.Fprintf(b, "%s (%s): %s, mtu %d", l.Name, l.Role, state, l.MTU)
		if l.MAC != "" {
			fmt.Fprintf(b, ", %s", l.MAC)
		}
		b.WriteString("\n")
		if len(l.Addresses) > 0 {
			fmt.Fprintf(b, "  addresses %s\n", strings.Join(l.Addresses, " "))
		}
		fmt.Fprintf(b, "  rx %d bytes %d packets %d errors %d dropped\n", l.RxBytes, l.RxPackets, l.RxErrors, l.RxDropped)
		fmt.Fprintf(b, "  tx %d bytes %d packets %d errors %d dropped\n", l.TxBytes, l.TxPackets, l.TxErrors, l.TxDropped)
	}
	for _, l := range st.Leases {
		fmt.Fprintf(b, "%s: DHCP lease %s", l.Link, l.Address)
		if l.Router.IsValid() {
			fmt.Fprintf(b, " via %s", l.Router)
		}
		fmt.Fprintf(b, " from %s, expires in %s\n", l.Server, time.Until(l.Obtained.Add(l.Duration)).Round(time.Second))
	}
	if st.LastApply.NetworkError != "" {
		fmt.Fprintf(b, "last apply: %s\n", st.LastApply.NetworkError)
	}
	if st.Error != "" {
		fmt.Fprintf(b, "netd: %s\n", st.Error)
	}
	return nil
}

func showTunnels(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if len(args) > 1 {
		return errors.New("usage: show tunnels [up|down|connecting|failed|TEXT]")
	}
	// A state or a text narrows the list in iked, which sends what
	// matches a page at a time.
	var q ikedapi.TunnelQuery
	if len(args) == 1 {
		switch st := ipsec.TunnelState(strings.ToLower(args[0])); st {
		case ipsec.StateUp, ipsec.StateDown, ipsec.StateConnecting, ipsec.StateFailed:
			q.State = st
		default:
			q.Text = args[0]
		}
	}
	all, err := s.iked.CountTunnels(ctx, ikedapi.TunnelQuery{})
	var ts []ipsec.TunnelStatus
	if err == nil {
		ts, err = s.iked.TunnelsMatching(ctx, q)
	}
	if errors.Is(err, ikedapi.ErrBadRequest) {
		return fmt.Errorf("show tunnels %s: %w", clip(args[0], 40), err)
	}
	if err != nil {
		// Without iked the configuration still says what should be there.
		fmt.Fprintf(b, "iked is not answering (%s)\n", reason(err))
		if c := s.running(); c != nil {
			fmt.Fprintf(b, "configured tunnels: %s\n", tunnelNames(c))
			for _, t := range c.Tunnels {
				for _, w := range t.WeakProposals() {
					fmt.Fprintf(b, "  %s weak proposal: %s %s: %s\n", t.Name, w.Kind, w.Proposal, w.Algorithms())
				}
			}
		}
		return nil
	}
	if len(args) == 1 && len(ts) == 0 {
		fmt.Fprintf(b, "no tunnel of %d is %s or has it in its name, peer address or reason\n", all, args[0])
		return nil
	}
	if len(ts) <= tunnelsInFull {
		ikedapi.PrintStatus(b, ts, time.Now())
		return nil
	}
	// A head office's hundreds of tunnels: one line each, the counts
	// first; show tunnel NAME has the whole block.
	printTunnelLines(b, ts, all, time.Now())
	return nil
}

// tunnelsInFull is how many tunnels show tunnels prints in full; beyond
// it, one line each.
const tunnelsInFull = 10

// printTunnelLines is the short form of show tunnels: the counts by
// state, then NAME STATE PEER SINCE REASON, one line a tunnel.
func printTunnelLines(b *strings.Builder, ts []ipsec.TunnelStatus, all int, now time.Time) {
	counts := map[ipsec.TunnelState]int{}
	width := 4
	for _, t := range ts {
		counts[t.State]++
		width = max(width, len(t.Name))
	}
	fmt.Fprintf(b, "%d tunnels", len(ts))
	if len(ts) != all {
		fmt.Fprintf(b, " of %d", all)
	}
	for _, st := range []ipsec.TunnelState{ipsec.StateUp, ipsec.StateConnecting, ipsec.StateDown, ipsec.StateFailed} {
		if counts[st] > 0 {
			fmt.Fprintf(b, ", %d %s", counts[st], st)
		}
	}
	b.WriteString(" (show tunnels down|failed|TEXT narrows, show tunnel NAME has the details)\n")
	for _, t := range ts {
		peer := t.RemoteAddr
		if peer == "" {
			peer = "any"
		}
		fmt.Fprintf(b, "%-*s %-10s %-15s %6s", width, t.Name, t.State, peer, shortAgo(now, t.Since))
		if t.Reason != "" {
			r := t.Reason
			if len(r) > 60 {
				r = r[:57] + "..."
			}
			fmt.Fprintf(b, " %s", r)
		}
		b.WriteString("\n")
	}
}

// shortAgo is the time since t in one unit (45s, 12m, 3h, 2d).
func shortAgo(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func showTunnel(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: show tunnel NAME")
	}
	t, err := s.iked.Tunnel(ctx, args[0])
	if errors.Is(err, ikedapi.ErrNoTunnel) {
		// The names when they are a few; a hub's thousand are for
		// show tunnels TEXT to find.
		page, matched, err := s.iked.TunnelsPage(ctx, ikedapi.TunnelQuery{Limit: tunnelsInFull})
		if err != nil {
			return unreachable("iked", err)
		}
		if matched > len(page) {
			return fmt.Errorf("no tunnel named %q (%d tunnels: show tunnels TEXT finds them)", clip(args[0], 40), matched)
		}
		names := []string{"none"}
		if len(page) > 0 {
			names = names[:0]
		}
		for _, t := range page {
			names = append(names, t.Name)
		}
		return fmt.Errorf("no tunnel named %q (tunnels: %s)", clip(args[0], 40), strings.Join(names, ", "))
	}
	if err != nil {
		return unreachable("iked", err)
	}
	ikedapi.PrintStatus(b, []ipsec.TunnelStatus{t}, time.Now())
	if len(t.Events) > 0 {
		if t.EventsTotal > len(t.Events) {
			fmt.Fprintf(b, "  recent events (the last %d of %d):\n", len(t.Events), t.EventsTotal)
		} else {
			b.WriteString("  recent events:\n")
		}
		for _, e := range t.Events {
			fmt.Fprintf(b, "    %s %s\n", e.Time.UTC().Format("15:04:05"), e.Message)
		}
	}
	return nil
}

func showFirewall(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if err := noArgs(args, "show firewall"); err != nil {
		return err
	}
	fw, err := s.netd.Firewall(ctx)
	if err != nil {
		return unreachable("netd", err)
	}
	if fw.Error != "" {
		fmt.Fprintf(b, "WARNING: %s\n", fw.Error)
	}
	fmt.Fprintf(b, "table %s, %d rules\n", fw.Table, len(fw.Rules))
	fmt.Fprintf(b, "%12s %14s  %s\n", "PACKETS", "BYTES", "RULE")
	for _, h := range fw.Hits {
		fmt.Fprintf(b, "%12d %14d  %s\n", h.Packets, h.Bytes, h.Rule)
	}
	return nil
}

func showConfig(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	which := "running"
	if len(args) > 0 && (args[0] == "running" || args[0] == "candidate") {
		which, args = args[0], args[1:]
	}
	if len(args) > 1 {
		return errors.New("usage: show config [running|candidate] [PATH]")
	}
	var text string
	var err error
	if which == "running" {
		text, err = s.configd.RunningText(ctx)
	} else {
		text, err = s.configd.CandidateText(ctx)
	}
	if err != nil {
		return err
	}
	if len(args) == 0 {
		b.WriteString(text)
		return nil
	}
	// The text form separates path elements with spaces: "set tunnels
	// branch psk"; a dotted PATH selects the lines under it.
	want := "set " + strings.ReplaceAll(strings.TrimSuffix(args[0], "."), ".", " ")
	n := 0
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, want+" ") || strings.TrimSuffix(line, "\n") == want {
			b.WriteString(line)
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: nothing is set there in the %s configuration", clip(args[0], 60), which)
	}
	return nil
}

func showDiff(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if err := noArgs(args, "show diff"); err != nil {
		return err
	}
	lines, err := s.configd.Diff(ctx, "running", "candidate")
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		b.WriteString("No changes: the candidate is the running configuration.\n")
		return nil
	}
	for _, l := range lines {
		fmt.Fprintf(b, "%s %s\n", l.Op, l.Line)
	}
	return nil
}

func showHistory(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if err := noArgs(args, "show history"); err != nil {
		return err
	}
	h, err := s.configd.History(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "%5s  %-19s  %-16s  %-16s  %s\n", "REV", "WHEN (UTC)", "WHO", "REASON", "MESSAGE")
	for _, r := range h {
		fmt.Fprintf(b, "%5d  %-19s  %-16s  %-16s  %s\n", r.Revision, r.When.UTC().Format("2006-01-02 15:04:05"),
			clip(r.Who, 16), r.Reason, printable(r.Message))
	}
	return nil
}

func showLog(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	name := "supervisor"
	if len(args) == 1 {
		name = args[0]
	} else if len(args) > 1 {
		return errors.New("usage: show log [SERVICE]")
	}
	// A screenful: the serial line is slow and the terminal 24 lines.
	lines := max(10, s.opts.Height-2)
	logs, err := s.supervisor.Logs(ctx, name, lines)
	if err != nil {
		return fmt.Errorf("log %s: %w", clip(name, 40), unreachable("the supervisor", err))
	}
	for _, l := range logs.Lines {
		fmt.Fprintf(b, "%s %s\n", l.Time.UTC().Format("15:04:05"), printable(l.Text))
	}
	if len(logs.Lines) == 0 {
		fmt.Fprintf(b, "%s has logged nothing yet.\n", name)
	}
	return nil
}

func showCrypto(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if err := noArgs(args, "show crypto"); err != nil {
		return err
	}
	r, err := hwcrypto.Detect(s.opts.Root)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "cpu: %s\n", r.CPU.ModelName)
	if len(r.Engines) == 0 {
		b.WriteString("no crypto engine found: ESP uses the CPU\n")
	}
	for _, e := range r.Engines {
		fmt.Fprintf(b, "%s: %s", e.Name, e.State)
		if e.InUse {
			b.WriteString(", in use")
		}
		b.WriteString("\n")
		fmt.Fprintf(b, "  accelerates %s\n  found by %s\n", e.Accelerates, e.Evidence)
		if e.Reason != "" {
			fmt.Fprintf(b, "  %s\n", e.Reason)
		}
		if len(e.Drivers) > 0 {
			fmt.Fprintf(b, "  drivers %s\n", strings.Join(e.Drivers, " "))
		}
	}
	return nil
}

func showBoard(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if err := noArgs(args, "show board"); err != nil {
		return err
	}
	if s.opts.Board == "" {
		return errors.New("the board is not known (no flashgate.board= on the kernel command line)")
	}
	bd, err := boards.Lookup(s.opts.Board)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "%s: %s\n", bd.Name, bd.Description)
	fmt.Fprintf(b, "  console %s at %d baud; kernel %s (%s class), GOARCH %s\n", bd.Console.Device, bd.Console.Baud, kernelRelease(), bd.KernelClass, bd.GOARCH)
	for _, n := range bd.NICs {
		fmt.Fprintf(b, "  %s %-4s %-10s %s\n", n.Name, n.Role, n.Driver, n.Label)
	}
	if bd.Watchdog != "" {
		fmt.Fprintf(b, "  watchdog %s\n", bd.Watchdog)
	}
	if len(bd.Modules) > 0 {
		fmt.Fprintf(b, "  modules for optional cards %s\n", strings.Join(bd.Modules, " "))
	}
	for _, u := range bd.Unconfirmed {
		fmt.Fprintf(b, "  unconfirmed: %s\n", u)
	}
	return nil
}

// reason is the part of a failed request worth showing on an 80-column
// console: "connect: no such file or directory" rather than the URL of a
// local socket around it.
func reason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// unreachable shortens the error of a service that does not answer to
// what a console user needs; other errors pass unchanged.
func unreachable(service string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return fmt.Errorf("%s is not answering (%s)", service, op.Err)
	}
	return err
}

// kernelRelease is the running kernel's release (uname -r), which names the
// Debian source version it was built from: "6.1.192-3-flashgate".
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "?"
	}
	return unix.ByteSliceToString(u.Release[:])
}
