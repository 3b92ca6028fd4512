package config

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SyntheticConfig returns a valid configuration with n tunnels (10.1.0.0/16,
// 10.2.0.0/16, ... behind 192.0.2.1, .2, ...), a LAN, a route, two firewall
// rules and a port forward: the shape of a busy hub, for measurements and
// demonstrations. Beyond 250 the branches are 198.18.0.1, ... with
// 172.16.0.0/24, 172.16.1.0/24, ...
func SyntheticConfig(n int) *Config {
	c := Default()
	c.System.Hostname = "hub"
	c.Interfaces[1].Addresses = []Prefix{MustPrefix("10.0.0.1/16")}
	c.Routes = []Route{{Name: "mgmt", Enabled: true, Destination: MustPrefix("172.16.0.0/12"), Gateway: MustAddr("10.0.0.254"), Interface: "eth1"}}
	c.Firewall.Rules = []Rule{
		{Name: "ssh-from-lan", Enabled: true, Chain: ChainInput, In: RoleLAN, Protocol: "tcp", DestinationPorts: []PortRange{Port(22)}, Action: ActionAccept},
		{Name: "no-smb-out", Enabled: true, Chain: ChainForward, In: RoleLAN, Out: "eth0", Protocol: "tcp", DestinationPorts: []PortRange{Port(445)}, Action: ActionReject, Log: true},
	}
	c.Firewall.PortForwards = []PortForward{{Name: "web", Enabled: true, In: RoleWAN, Protocol: "tcp", ExternalPorts: Port(443), Destination: MustAddr("10.0.0.10")}}
	for i := range n {
		t := NewTunnel(fmt.Sprintf("site%02d", i))
		remote := fmt.Sprintf("10.%d.0.0/16", i+1)
		if i < 250 {
			t.RemoteAddress = MustAddr(fmt.Sprintf("192.0.2.%d", i+1))
		} else {
			// A head office's branches beyond the first 250.
			j := i - 250
			t.RemoteAddress = MustAddr(fmt.Sprintf("198.18.%d.%d", j/250, j%250+1))
			remote = fmt.Sprintf("172.%d.%d.0/24", 16+j/256, j%256)
		}
		// Real PSKs are random and do not compress: derive
		// incompressible ones so that record sizes are realistic.
		sum := sha256.Sum256([]byte(fmt.Sprintf("flashgate synthetic psk %d", i)))
		t.PSK = NewSecret(base64.RawURLEncoding.EncodeToString(sum[:24]))
		t.LocalSubnets = []Prefix{MustPrefix("10.0.0.0/16")}
		t.RemoteSubnets = []Prefix{MustPrefix(remote)}
		t.IKEProposals = []string{"aes128gcm16-prfsha256-ecp256", "aes256-sha256-modp2048"}
		c.Tunnels = append(c.Tunnels, t)
	}
	c.normalize()
	return c
}

// CommitFigures are what MeasureCommits found.
type CommitFigures struct {
	Commits       int
	MedianMs      float64 // commit latency, median
	P90Ms         float64
	WrittenBytes  float64 // per commit: /proc/self/io write_bytes (page cache pages dirtied, i.e. sent to the card)
	SyscallBytes  float64 // per commit: bytes handed to write(2)/pwrite(2)
	DatabaseBytes int64   // file size after the run
}

// MeasureCommits measures what the design targets (config.commit_ms <= 50,
// config.commit_written_bytes <= 64 KiB): n commits, each changing one
// field of one tunnel in a 50-tunnel configuration, on a new database in
// dir (use a directory on a disk-backed file system: tmpfs does not count
// written bytes). The history is filled to its limit first, so that every
// measured commit also trims the oldest revision. It is the same work as
// BenchmarkCommitSmallChange50Tunnels, callable from `flashgate bench`.
// Nothing else in the process should write files meanwhile.
func MeasureCommits(dir string, n int) (CommitFigures, error) {
	var f CommitFigures
	path := filepath.Join(dir, "measure-config.db")
	os.Remove(path)
	defer os.Remove(path)
	s, err := Open(path, Options{})
	if err != nil {
		return f, err
	}
	defer s.Close()
	if _, err := s.ReplaceCandidate("", SyntheticConfig(50)); err != nil {
		return f, err
	}
	if _, err := s.Commit("measure", "50 tunnels"); err != nil {
		return f, err
	}
	commit := func(i int) error {
		if _, err := s.SetPath("", "tunnels.site07.remote_address", fmt.Sprintf("198.51.100.%d", i%250+1)); err != nil {
			return err
		}
		_, err := s.Commit("measure", "move site07")
		return err
	}
	for i := range s.opts.HistoryLimit + 10 {
		if err := commit(i); err != nil {
			return f, err
		}
	}
	w0, c0, err := ProcessIO()
	if err != nil {
		return f, err
	}
	times := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		if err := commit(i + 1); err != nil {
			return f, err
		}
		times = append(times, time.Since(start))
	}
	w1, c1, err := ProcessIO()
	if err != nil {
		return f, err
	}
	slices.Sort(times)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	f.Commits = n
	if n > 0 {
		f.MedianMs = ms(times[n/2])
		f.P90Ms = ms(times[n*9/10])
		f.WrittenBytes = float64(w1-w0) / float64(n)
		f.SyscallBytes = float64(c1-c0) / float64(n)
	}
	if st, err := os.Stat(path); err == nil {
		f.DatabaseBytes = st.Size()
	}
	return f, nil
}

// ProcessIO returns this process's write_bytes (bytes it caused to be sent
// to storage, counted per page as it is dirtied) and wchar (bytes passed to
// write system calls) from /proc/self/io.
func ProcessIO() (writeBytes, wchar int64, err error) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, 0, fmt.Errorf("per-process I/O accounting is needed to count bytes written: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "write_bytes":
			writeBytes = n
		case "wchar":
			wchar = n
		}
	}
	return writeBytes, wchar, sc.Err()
}
