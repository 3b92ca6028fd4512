package webui

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/internal/atomicfile"
	"github.com/flashgate/flashgate/internal/gomem"

	"github.com/flashgate/flashgate/internal/paths"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/firmware/bootparam"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// FingerprintFile is where the certificate's fingerprint is written for
// the console banner.
// It is in the web UI's own directory: the UI runs as its own user
// and cannot write /run/flashgate.
const FingerprintFile = paths.WebUIFingerprint

// Main runs the web UI service: `flashgate webui [flags]`, until SIGTERM
// or SIGINT.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return run(ctx, args)
}

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("webui", flag.ContinueOnError)
	listen := fs.String("listen", ":443", "HTTPS address")
	plain := fs.String("http", ":80", "plain HTTP address that redirects to HTTPS (empty: none)")
	listenFD := fs.Int("listen-fd", 0, "serve HTTPS on this inherited listening socket instead of -listen (PID 1 binds port 443 for the UI, which runs as its own user)")
	plainFD := fs.Int("http-fd", 0, "serve the HTTP redirector on this inherited listening socket instead of -http")
	configdSock := fs.String("configd", configdapi.WebSocket, "configd's socket: its restricted API, which hands out no secrets")
	ikedSock := fs.String("iked", ikedapi.DefaultSocket, "iked's socket")
	netdSock := fs.String("netd", netdapi.WebSocket, "netd's socket for the web UI: the kernel's links")
	superSock := fs.String("supervisor", supervisor.WebSocketPath, "the supervisor's socket (its part for the web UI: services, logs, reboot)")
	certDir := fs.String("cert-dir", paths.WebUICertDir, "where the TLS certificate and key are kept when configd cannot keep them")
	certFallback := fs.String("cert-fallback-dir", paths.WebUIRunDir, "where they are kept until reboot when neither configd nor -cert-dir can keep them")
	configdWait := fs.Duration("configd-wait", 5*time.Second, "how long to wait at start for configd, which may be starting too")
	fpFile := fs.String("fingerprint-file", FingerprintFile, "where to write the certificate's SHA-256 fingerprint")
	root := fs.String("root", "/", "root of /proc and /sys (tests): uptime, CPU, memory, the kernel's release and the crypto engines")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := log.New(os.Stderr, "webui: ", 0)
	note, _ := gomem.Follow(0)
	logger.Printf("garbage collector: %s", note)
	gomem.ReportOnSignal(logger.Printf)

	params, _ := bootparam.Read()
	board := BoardInfo{Name: params.Board, Version: params.Version}
	// The release names the Debian source it was built from:
	// 6.1.192-3-flashgate is linux-source-6.1 6.1.192-3.
	if rel, err := os.ReadFile(filepath.Join(*root, "proc/sys/kernel/osrelease")); err == nil {
		board.Kernel = strings.TrimSpace(string(rel))
	}
	if board.Name != "" {
		if b, err := boards.Lookup(board.Name); err == nil {
			board.Description = b.Description
		}
	}
	cfg := configdapi.New(*configdSock)
	host := "flashgate"
	// The supervisor starts the UI once configd runs, which may be before
	// its socket is served, and a UI that gave up at once would make a
	// throw-away certificate.
	if running, _, err := configdapi.WaitRunning(ctx, cfg, *configdWait); err == nil {
		host = running.System.Hostname
	} else {
		logger.Printf("configd: %v (continuing; pages will say so)", err)
	}

	cert, err := LoadStoredCertificate(ctx, cfg, host, time.Now(), logger.Printf)
	if err != nil {
		logger.Printf("%v: falling back to %s", err, *certDir)
		dirs := []string{*certDir}
		if *certFallback != "" {
			dirs = append(dirs, *certFallback)
		}
		if cert, err = LoadOrCreateCertificate(host, time.Now(), dirs...); err != nil {
			logger.Print(err)
			return 1
		}
		switch {
		case cert.Dir == "":
			logger.Printf("could not keep the TLS certificate anywhere: it changes at every start until %s is writable", *certDir)
		case !cert.Stored:
			logger.Printf("could not keep the TLS certificate in %s: kept in %s until reboot", *certDir, cert.Dir)
		}
	} else if cert.Note != "" {
		logger.Printf("TLS certificate: %s", cert.Note)
	}
	logger.Printf("TLS certificate SHA-256 %s", cert.Fingerprint)
	if err := atomicfile.WriteFile(*fpFile, []byte(cert.Fingerprint+"\n"), 0o644); err != nil {
		logger.Printf("write fingerprint for the console: %v", err)
	}

	report, err := hwcrypto.Detect(*root)
	if err != nil {
		logger.Printf("crypto engines: %v", err)
		report = nil
	}
	srv, err := New(Options{
		Config:      cfg,
		Tunnels:     ikedapi.NewClient(*ikedSock),
		Supervisor:  supervisor.NewClient(*superSock),
		Links:       netdapi.New(*netdSock),
		Crypto:      report,
		Board:       board,
		Root:        *root,
		Fingerprint: cert.Fingerprint,
		Logf:        logger.Printf,
		// configd writes firmware upgrades: this process cannot open the card.
		Upgrade: UpgradeSource{Firmware: cfg, Status: bootslot.StatusPath},
	})
	if err != nil {
		logger.Print(err)
		return 1
	}
	ln, err := inheritedOrListen(*listenFD, *listen)
	if err != nil {
		logger.Print(err)
		return 1
	}
	var pln net.Listener
	if *plainFD != 0 || *plain != "" {
		if pln, err = inheritedOrListen(*plainFD, *plain); err != nil {
			ln.Close()
			logger.Print(err)
			return 1
		}
	}
	go srv.Run(ctx)
	if err := ServeListeners(ctx, srv, cert, ln, pln, httpsPort(ln.Addr().String()), logger.Printf); err != nil {
		logger.Print(err)
		return 1
	}
	return 0
}

// inheritedOrListen is the listening socket at descriptor fd, which PID 1
// bound and handed over, or when fd is 0 a new one on addr.
func inheritedOrListen(fd int, addr string) (net.Listener, error) {
	if fd == 0 {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w (as user %d: ports below 1024 need root; on the box PID 1 binds them and passes -listen-fd)", addr, err, os.Getuid())
		}
		return ln, nil
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("inherited listener fd %d", fd))
	if f == nil {
		return nil, fmt.Errorf("fd %d: not open", fd)
	}
	ln, err := net.FileListener(f)
	f.Close() // FileListener made its own copy
	if err != nil {
		return nil, fmt.Errorf("fd %d: not a listening socket: %w", fd, err)
	}
	return ln, nil
}

// Serve runs the HTTPS server on addr and, if plainAddr is set, the plain
// HTTP redirector, until ctx is done.
func Serve(ctx context.Context, h http.Handler, cert *Certificate, addr, plainAddr string, logf func(string, ...any)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	var pln net.Listener
	if plainAddr != "" {
		if pln, err = net.Listen("tcp", plainAddr); err != nil {
			ln.Close()
			return fmt.Errorf("listen %s: %w", plainAddr, err)
		}
	}
	return ServeListeners(ctx, h, cert, ln, pln, httpsPort(addr), logf)
}

// ServeListeners is Serve on listeners already bound (PID 1's, on the
// box); plain may be nil. port is the HTTPS port the redirector names
// ("" for 443).
func ServeListeners(ctx context.Context, h http.Handler, cert *Certificate, ln, plain net.Listener, port string, logf func(string, ...any)) error {
	tlsLn := tls.NewListener(newLimitListener(ln, MaxConns, MaxConnsPerClient, logf), TLSConfig(cert))
	srv := newHTTPServer(h, logf)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(tlsLn) }()
	var redirect *http.Server
	if plain != nil {
		redirect = newHTTPServer(RedirectToHTTPS(port), logf)
		go func() { errc <- redirect.Serve(newLimitListener(plain, MaxConns, MaxConnsPerClient, logf)) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if redirect != nil {
		redirect.Shutdown(sctx)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// IdleConnTimeout is how long a connection may wait between requests
// (the live refresh asks every few seconds, so an open page keeps its
// connection).
const IdleConnTimeout = 30 * time.Second

// newHTTPServer bounds every phase of a request: a small box must not be
// held open by slow clients.
func newHTTPServer(h http.Handler, logf func(string, ...any)) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second, // a backup upload on a slow link
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       IdleConnTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          log.New(logWriter(logf), "", 0),
	}
}

type logWriter func(string, ...any)

func (f logWriter) Write(p []byte) (int, error) {
	f("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func httpsPort(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "443" {
		return ""
	}
	return port
}

// RedirectToHTTPS answers every plain HTTP request with a permanent
// redirect to the same host and path over HTTPS (on port, when not 443).
func RedirectToHTTPS(port string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		} else {
			host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		}
		if host == "" || strings.ContainsAny(host, "/\\@") {
			http.Error(w, "use https", http.StatusBadRequest)
			return
		}
		if strings.Contains(host, ":") { // IPv6 literal
			host = "[" + host + "]"
		}
		if port != "" {
			host += ":" + port
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusMovedPermanently)
	})
}
