// Package configdtest holds configd for other packages' tests, the way
// wireguard-go ships tun/tuntest: Start runs the real configd (its API
// handlers over a real config.Store) on unix sockets in a temporary
// directory, and Twin is a small in-memory configd that plays the changes
// a test commits, for a service's follow logic without a database.
package configdtest

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// Options shape a Server.
type Options struct {
	// Dir holds the database, the file store and the sockets; default
	// t.TempDir() (a unix socket path must stay under 108 bytes: pass a
	// short one for deep test names).
	Dir string
	// Store are the store's options; Logf defaults to t.Logf.
	Store config.Options
	// Storage and Note are what configd's status reports ("ram", and
	// why); default "ram".
	Storage, Note string
	// Web also serves the restricted API the web UI gets
	// (configd-web.sock), with WebOptions.
	Web        bool
	WebOptions []configd.ServerOption
	// Read also serves the read-only API iked gets (configd-read.sock).
	Read bool
	// WebGroup and ReadGroup give the restricted and the read-only API's
	// sockets to that group (0660), as configd's -web-group and
	// -read-group do; 0 leaves them root's (0600), as the full API's.
	WebGroup, ReadGroup int
}

// Server is a real configd on unix sockets.
type Server struct {
	Store      *config.Store
	Dir        string
	Socket     string             // the full API: configd.sock
	Client     *configdapi.Client // on Socket
	WebSocket  string             // the restricted API, with Options.Web
	WebClient  *configdapi.Client // on WebSocket
	ReadSocket string             // the read-only API, with Options.Read
	ReadClient *configdapi.Client // on ReadSocket

	t       testing.TB
	o       Options
	cancel  context.CancelFunc
	done    sync.WaitGroup
	stopped bool
}

// Start runs configd's APIs over a fresh store in o.Dir until the test
// ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Store.Logf == nil {
		o.Store.Logf = t.Logf
	}
	if o.Storage == "" {
		o.Storage = "ram"
	}
	s := &Server{t: t, o: o, Dir: o.Dir, Socket: filepath.Join(o.Dir, "configd.sock")}
	s.Client = configdapi.New(s.Socket)
	if o.Web {
		s.WebSocket = filepath.Join(o.Dir, "configd-web.sock")
		s.WebClient = configdapi.New(s.WebSocket)
	}
	if o.Read {
		s.ReadSocket = filepath.Join(o.Dir, "configd-read.sock")
		s.ReadClient = configdapi.New(s.ReadSocket)
	}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	store, err := config.Open(filepath.Join(s.Dir, "config.db"), s.o.Store)
	if err != nil {
		s.t.Fatalf("configdtest: open the store: %v", err)
	}
	s.Store = store
	files := configd.NewFileStore(filepath.Join(s.Dir, configd.DefaultFilesDir), nil, s.t.Logf)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.stopped = cancel, false
	serve := func(sock string, gid int, opts ...configd.ServerOption) {
		access := localapi.RootOnly
		if gid != 0 {
			access = localapi.Group(gid)
		}
		ln, err := localapi.Listen(sock, access)
		if err != nil {
			s.t.Fatalf("configdtest: %v", err)
		}
		api := configd.NewServer(store, s.o.Storage, s.o.Note, s.t.Logf, append([]configd.ServerOption{configd.WithFiles(files)}, opts...)...)
		srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
		srv.RegisterOnShutdown(api.StopWatches)
		s.done.Add(2)
		go func() { defer s.done.Done(); srv.Serve(ln) }()
		go func() {
			defer s.done.Done()
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		}()
	}
	serve(s.Socket, 0)
	if s.o.Web {
		serve(s.WebSocket, s.o.WebGroup, append([]configd.ServerOption{configd.Restricted()}, s.o.WebOptions...)...)
	}
	if s.o.Read {
		serve(s.ReadSocket, s.o.ReadGroup, configd.ReadOnly())
	}
}

// Stop stops serving and closes the store, as a configd that exits: its
// watch streams end, and its clients reconnect once it is started again.
func (s *Server) Stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	s.done.Wait()
	s.Store.Close()
}

// Restart stops configd and starts it again on the same database and
// sockets.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Twin is an in-memory configd for a service's follow logic: Running
// answers with the configuration last committed (or the error set with
// Fail), and Watch delivers, to each watcher, a "current" change first and
// then every Commit's, in order, as configd's watch stream does.
type Twin struct {
	mu       sync.Mutex
	cfg      *config.Config
	rev      uint64
	err      error
	reads    int
	watchers []*watcher
}

type watcher struct {
	queue []config.Change
	wake  chan struct{}
}

// NewTwin returns a twin running cfg (config.Default when nil) at
// revision 1.
func NewTwin(cfg *config.Config) *Twin {
	if cfg == nil {
		cfg = config.Default()
	}
	return &Twin{cfg: cfg.Clone(), rev: 1}
}

// String names the twin in a service's logs.
func (tw *Twin) String() string { return "configd twin" }

// Running returns a copy of the running configuration, or the error set
// with Fail.
func (tw *Twin) Running(ctx context.Context) (*config.Config, uint64, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.reads++
	if tw.err != nil {
		return nil, 0, tw.err
	}
	return tw.cfg.Clone(), tw.rev, nil
}

// Reads is how often Running was called.
func (tw *Twin) Reads() int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.reads
}

// Fail makes Running answer err until Fail(nil).
func (tw *Twin) Fail(err error) {
	tw.mu.Lock()
	tw.err = err
	tw.mu.Unlock()
}

// Watch delivers the changes from now on, after a "current" one, until
// ctx ends.
func (tw *Twin) Watch(ctx context.Context) <-chan config.Change {
	w := &watcher{wake: make(chan struct{}, 1)}
	tw.mu.Lock()
	w.queue = append(w.queue, config.Change{Revision: tw.rev, Sections: slices.Clone(config.Sections), Reason: "current", When: time.Now().UTC()})
	tw.watchers = append(tw.watchers, w)
	tw.mu.Unlock()
	w.wake <- struct{}{}
	out := make(chan config.Change)
	go func() {
		defer close(out)
		defer tw.drop(w)
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
			}
			for {
				tw.mu.Lock()
				if len(w.queue) == 0 {
					tw.mu.Unlock()
					break
				}
				ch := w.queue[0]
				w.queue = w.queue[1:]
				tw.mu.Unlock()
				select {
				case out <- ch:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

func (tw *Twin) drop(w *watcher) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.watchers = slices.DeleteFunc(tw.watchers, func(x *watcher) bool { return x == w })
}

// Commit makes cfg the running configuration at the next revision and
// delivers the change (the sections that differ) to every watcher. It
// returns the change.
func (tw *Twin) Commit(cfg *config.Config, who string) config.Change {
	tw.mu.Lock()
	ch := config.Change{Revision: tw.rev + 1, Sections: config.ChangedSections(tw.cfg, cfg), Reason: "commit", Who: who, When: time.Now().UTC()}
	tw.cfg, tw.rev = cfg.Clone(), ch.Revision
	tw.mu.Unlock()
	tw.Notify(ch)
	return ch
}

// Notify delivers ch to every watcher as it is, without changing the
// running configuration: a change the test scripts itself.
func (tw *Twin) Notify(ch config.Change) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	for _, w := range tw.watchers {
		w.queue = append(w.queue, ch)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Set changes the running configuration without a change notice: what a
// reader sees while the notice is still on its way.
func (tw *Twin) Set(cfg *config.Config) {
	tw.mu.Lock()
	tw.cfg = cfg.Clone()
	tw.mu.Unlock()
}

var _ configdapi.Source = (*Twin)(nil)
