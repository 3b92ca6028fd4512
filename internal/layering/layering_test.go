// Package layering holds the test of the tree's import rules: which
// package may link which (docs/architecture.md, "Who imports what"). It
// has no code of its own.
package layering

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/flashgate/flashgate/"

// The servers: a service's daemon or a user interface. Only the
// multi-call binary links them; everything else reaches a service through
// its contract package (configdapi, netdapi, ikedapi, the supervisor's
// protocol and client).
var servers = []string{
	module + "services/configd",
	module + "services/netd",
	module + "services/hostd",
	module + "ipsec/iked",
	module + "webui",
	module + "firmware/cli",
}

// multiCall is the appliance's multi-call binary, which runs every
// service and may therefore link them all.
const multiCall = module + "firmware/flashgate"

// An edge rule forbids the packages matching From to import a package
// matching To directly (Transitive false) or to link it at all (Transitive
// true). A pattern ending in "/" matches the packages below it, "*api"
// every contract package, "*test" every test fixture package (configdtest,
// ikedtest: twins and real servers for other packages' tests), anything
// else one package exactly.
type rule struct {
	From       string
	To         []string
	Except     []string // importers the rule does not apply to
	Transitive bool
	Why        string
}

var rules = []rule{
	{
		// The test fixtures that run a real daemon for other packages'
		// tests (configdtest, ikedns) may link it too.
		From: "*", To: servers, Except: []string{multiCall, "*test", module + "ipsec/iked/ikedns"},
		Why: "only the multi-call binary (and the test fixtures) links a daemon or a user interface; a client imports the service's contract package",
	},
	{
		From: "*api", To: append(slices.Clone(servers), "github.com/google/nftables"), Transitive: true,
		Why: "a contract package is a leaf: its clients must not link the server through it",
	},
	{
		// The console runs on the serial line of the smallest boxes: it
		// shows the firewall and the tunnels through netd's and iked's
		// APIs and must not carry their kernels' code.
		From: module + "firmware/cli", Transitive: true,
		To: []string{
			"github.com/google/nftables", "github.com/insomniacslk/dhcp/", "github.com/vishvananda/netlink",
			module + "services/netd", module + "services/configd",
			module + "ipsec/esp", module + "ipsec/xfrm", module + "ipsec/iked", module + "ipsec/ike",
		},
		Why: "the console talks to the services; it does not link their firewall, DHCP or IPsec code",
	},
	{
		// The links and their counters come from netd (netdapi), so the
		// web UI needs no netlink of its own either.
		From: module + "webui", Transitive: true,
		To: []string{
			"github.com/google/nftables", "github.com/insomniacslk/dhcp/", "github.com/vishvananda/netlink",
			module + "ipsec/esp", module + "ipsec/xfrm", module + "ipsec/ike",
		},
		Why: "the web UI faces the network as its own user: it links no service's kernel code and asks netd for the links",
	},
	{
		// PID 1 must link no HTTP or TLS stack and nothing of the
		// configuration store or the services (issue #3): one such
		// import brings megabytes into the process that must never fail
		// and onto the ALIX card.
		From: module + "firmware/init", Transitive: true,
		To: []string{
			"net/http", "crypto/tls", "html/template", "go.etcd.io/bbolt",
			module + "config", module + "services/", module + "ipsec/", module + "webui",
			module + "internal/localapi", module + "kernel", "regexp",
		},
		Why: "PID 1 stays small",
	},
	{
		// text/template's executor calls reflect.Value.MethodByName: a
		// binary that can reach it keeps every exported method of every
		// type put in an interface (1.4 MB of the 386 binary). The web
		// UI's pages are Go code writing through webui/markup instead.
		From: multiCall, Transitive: true, To: []string{"html/template", "text/template"},
		Why: "the firmware links no template engine",
	},
	{
		// The boards' table names a board's CPU class from
		// kernel/cpuclass; the builder itself (its embedded fragments,
		// .config parser and cache hashing) is the host's.
		From: multiCall, Transitive: true, To: []string{module + "kernel"},
		Why: "the firmware links no kernel builder",
	},
}

// matches reports whether pkg matches pattern (see rule).
func matches(pattern, pkg string) bool {
	switch {
	case pattern == "*":
		return strings.HasPrefix(pkg, module)
	case pattern == "*api", pattern == "*test":
		return strings.HasPrefix(pkg, module) && strings.HasSuffix(pkg, pattern[1:])
	case strings.HasSuffix(pattern, "/"):
		return strings.HasPrefix(pkg, pattern)
	}
	return pkg == pattern
}

// graph is the import graph of the module's packages and their
// dependencies, without tests.
type graph map[string][]string

func loadGraph(t *testing.T) graph {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../../...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	g := graph{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		g[f[0]] = f[1:]
	}
	if len(g) < 100 {
		t.Fatalf("go list printed %d packages", len(g))
	}
	return g
}

// path returns the import chain from pkg to a package matching pattern,
// or nil if pkg does not link one.
func (g graph) path(pkg, pattern string) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p] {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = p
			if matches(pattern, imp) {
				var chain []string
				for q := imp; q != ""; q = prev[q] {
					chain = append(chain, q)
				}
				slices.Reverse(chain)
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

// TestLayering fails for every forbidden edge, naming the import (or the
// chain of imports) that makes it.
func TestLayering(t *testing.T) {
	g := loadGraph(t)
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, r := range rules {
		from := 0
		for _, p := range pkgs {
			if !matches(r.From, p) || slices.ContainsFunc(r.Except, func(e string) bool { return matches(e, p) }) {
				continue
			}
			from++
			for _, to := range r.To {
				if matches(to, p) {
					continue // a package is not its own edge
				}
				if r.Transitive {
					if chain := g.path(p, to); chain != nil {
						t.Errorf("%s links %s: %s (%s)", p, chain[len(chain)-1], strings.Join(chain, " -> "), r.Why)
					}
					continue
				}
				for _, imp := range g[p] {
					if matches(to, imp) {
						t.Errorf("%s imports %s (%s)", p, imp, r.Why)
					}
				}
			}
		}
		if from == 0 {
			t.Errorf("rule %q matches no package: the table is out of date", r.From)
		}
	}
}

// The rules must be able to fail: a made-up graph with the edges they
// forbid trips each kind.
func TestLayeringRulesBite(t *testing.T) {
	g := graph{
		module + "firmware/cli":                {module + "services/netd/netdapi", module + "services/netd"},
		module + "services/netd":               {"github.com/google/nftables"},
		module + "services/netd/netdapi":       {module + "internal/paths"},
		module + "services/configd/configdapi": {module + "services/configd"},
		module + "firmware/init":               {module + "internal/localsock", "net/http"},
		module + "firmware/flashgate":          {module + "webui"},
		"github.com/google/nftables":           nil,
		module + "services/configd":            nil,
		module + "webui":                       nil,
		module + "internal/localsock":          nil,
		module + "internal/paths":              nil,
		"net/http":                             nil,
	}
	if chain := g.path(module+"firmware/cli", "github.com/google/nftables"); strings.Join(chain, " ") != module+"firmware/cli "+module+"services/netd github.com/google/nftables" {
		t.Errorf("chain from the console to nftables: %v", chain)
	}
	if chain := g.path(module+"services/netd/netdapi", module+"services/netd"); chain != nil {
		t.Errorf("netdapi does not link netd, got %v", chain)
	}
	if g.path(module+"services/configd/configdapi", module+"services/configd") == nil {
		t.Error("configdapi's import of configd not found")
	}
	if g.path(module+"firmware/init", "net/http") == nil {
		t.Error("PID 1's net/http not found")
	}
	if !matches("*api", module+"ipsec/iked/ikedapi") || matches("*api", "example.com/x/api") || !matches(module+"services/", module+"services/netd") {
		t.Error("pattern matching is off")
	}
}
