// Package configd is the configuration daemon: it owns the config database
// on the card (through config.Store), serves the local API on
// /run/flashgate/configd.sock (HTTP+JSON) and tells subscribers which
// sections each commit changed. Everything that reads or changes the
// configuration (web UI, console, iked, netd) goes through it, using the
// client package.
package configd

import (
	"context"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/bootparam"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/firmware/upgrade"
	"github.com/flashgate/flashgate/internal/gomem"
	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/internal/paths"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// Default locations on the appliance.
const (
	DefaultCfgDir = paths.ConfigDir
	DefaultDBName = "config.db"
	// DefaultFilesDir, next to the database, holds the file store (see
	// FileStore).
	DefaultFilesDir = "files"
	// ramDB is where the database lives when there is no config partition:
	// the box runs, and says that changes will not survive a reboot.
	ramDB = paths.RAMConfigDB
)

// Main runs configd; args are the arguments after the subcommand name.
func Main(args []string) int {
	fs := flag.NewFlagSet("configd", flag.ContinueOnError)
	dbPath := fs.String("db", "", "database file (default: "+DefaultCfgDir+"/"+DefaultDBName+", or "+ramDB+" without a config partition)")
	socket := fs.String("socket", configdapi.Socket, "unix socket of the local API")
	webSocket := fs.String("web-socket", "next-to-socket", "unix socket of the restricted API for the web UI, which hands out no secrets (default: "+filepath.Base(configdapi.WebSocket)+" in -socket's directory; empty: none)")
	webGroup := fs.Int("web-group", -1, "group of the restricted API's socket, whose members (the web UI's user) may use it besides root; -1: root only")
	readSocket := fs.String("read-socket", "next-to-socket", "unix socket of the read-only API for iked: the running configuration with its secrets, its watch stream and the status, nothing that changes anything (default: "+filepath.Base(configdapi.ReadSocket)+" in -socket's directory; empty: none)")
	readGroup := fs.Int("read-group", -1, "group of the read-only API's socket, whose members (iked's user) may use it besides root; -1: root only")
	redactedSocket := fs.String("redacted-socket", "next-to-socket", "unix socket of the read-only API without secrets for netd: the running configuration with every secret redacted, its watch stream and the status (default: "+filepath.Base(configdapi.RedactedSocket)+" in -socket's directory; empty: none)")
	redactedGroup := fs.Int("redacted-group", -1, "group of the redacted read-only API's socket, whose members (netd's user) may use it besides root; -1: root only")
	cfgDir := fs.String("cfg", DefaultCfgDir, "config partition mount point, remounted read-write only to commit; empty: never remount")
	board := fs.String("board", "", "board whose ports the defaults of a fresh database or a factory reset name (boards.Lookup); empty or unknown: eth0 and eth1")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *webSocket == "next-to-socket" {
		*webSocket = filepath.Join(filepath.Dir(*socket), filepath.Base(configdapi.WebSocket))
	}
	if *readSocket == "next-to-socket" {
		*readSocket = filepath.Join(filepath.Dir(*socket), filepath.Base(configdapi.ReadSocket))
	}
	if *redactedSocket == "next-to-socket" {
		*redactedSocket = filepath.Join(filepath.Dir(*socket), filepath.Base(configdapi.RedactedSocket))
	}
	logger := log.New(os.Stderr, "", 0)
	logf := logger.Printf
	note, _ := gomem.Follow(0)
	logf("configd: garbage collector: %s", note)
	gomem.ReportOnSignal(func(f string, a ...any) { logf("configd: "+f, a...) })

	// The database and the file store share the card: the partition is
	// read-write while either of them writes, and only then.
	card := &sharedCard{card: config.NoCard{}}
	storage, note, filesDir := "card", "", ""
	switch {
	case *cfgDir != "" && isMountPoint(*cfgDir):
		card.card = RemountCard{Dir: *cfgDir}
		filesDir = filepath.Join(*cfgDir, DefaultFilesDir)
		if *dbPath == "" {
			*dbPath = filepath.Join(*cfgDir, DefaultDBName)
		}
	case *dbPath == "":
		*dbPath = ramDB
		storage = "ram"
		note = "no config partition is mounted at " + *cfgDir + ": the configuration is kept in RAM and lost on reboot"
		logf("configd: %s", note)
	}
	if err := os.MkdirAll(filepath.Dir(*socket), 0o755); err != nil {
		logf("configd: %v", err)
		return 1
	}
	if storage == "ram" {
		if err := os.MkdirAll(filepath.Dir(*dbPath), 0o700); err != nil {
			logf("configd: %v", err)
			return 1
		}
	}

	// Root only: the API hands out PSKs and changes the firewall.
	ln, err := localapi.Listen(*socket, localapi.RootOnly)
	if err != nil {
		logf("configd: %v", err)
		return 1
	}
	var webLn net.Listener
	if *webSocket != "" {
		if webLn, err = localapi.Listen(*webSocket, webAccess(*webGroup)); err != nil {
			ln.Close()
			logf("configd: %v", err)
			return 1
		}
	}
	closeAll := func(ls ...net.Listener) {
		for _, l := range ls {
			if l != nil {
				l.Close()
			}
		}
	}
	var readLn net.Listener
	if *readSocket != "" {
		if readLn, err = localapi.Listen(*readSocket, webAccess(*readGroup)); err != nil {
			closeAll(ln, webLn)
			logf("configd: %v", err)
			return 1
		}
	}
	var redactedLn net.Listener
	if *redactedSocket != "" {
		if redactedLn, err = localapi.Listen(*redactedSocket, webAccess(*redactedGroup)); err != nil {
			closeAll(ln, webLn, readLn)
			logf("configd: %v", err)
			return 1
		}
	}
	store, err := config.Open(*dbPath, config.Options{Card: card, Logf: logf, Defaults: defaultsFor(*board, logf)})
	if err != nil {
		closeAll(ln, webLn, readLn, redactedLn)
		logf("configd: %v", err)
		return 1
	}
	defer store.Close()
	if r := store.Recovered(); r != "" {
		logf("configd: WARNING: %s", r)
	}
	_, rev := store.Running()
	logf("configd: %s revision %d, serving %s", *dbPath, rev, *socket)

	if filesDir == "" {
		filesDir = filepath.Join(filepath.Dir(*dbPath), DefaultFilesDir)
	}
	files := NewFileStore(filesDir, card, logf)
	api := NewServer(store, storage, note, logf, WithFiles(files))
	srv := &http.Server{
		Handler:           api,
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 4)
	go func() { errc <- srv.Serve(ln) }()
	var webSrv *http.Server
	if webLn != nil {
		// The web UI runs as its own user and cannot write the card's
		// boot partition: configd writes firmware upgrades for it.
		params, _ := bootparam.Read()
		fw := FirmwareSource{Open: bootslot.OpenBox, Status: bootslot.StatusPath, WaitFor: AddressedInterfaces,
			Running: upgrade.Running{Slot: params.Slot, Version: params.Version, Board: params.Board}}
		webAPI := NewServer(store, storage, note, logf, WithFiles(files), Restricted(), WithFirmware(fw))
		webSrv = &http.Server{Handler: webAPI, ConnContext: connContext, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: log.New(io.Discard, "", 0)}
		webSrv.RegisterOnShutdown(webAPI.StopWatches)
		go func() { errc <- webSrv.Serve(webLn) }()
		logf("configd: serving the web UI's restricted API on %s", *webSocket)
	}
	var readSrv *http.Server
	if readLn != nil {
		readAPI := NewServer(store, storage, note, logf, WithFiles(files), ReadOnly())
		readSrv = &http.Server{Handler: readAPI, ConnContext: connContext, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: log.New(io.Discard, "", 0)}
		readSrv.RegisterOnShutdown(readAPI.StopWatches)
		go func() { errc <- readSrv.Serve(readLn) }()
		logf("configd: serving the read-only API on %s", *readSocket)
	}
	var redactedSrv *http.Server
	if redactedLn != nil {
		// netd's: read-only, and with every secret redacted as on the
		// web UI's socket (restricted.go).
		redactedAPI := NewServer(store, storage, note, logf, WithFiles(files), ReadOnly(), Restricted())
		redactedSrv = &http.Server{Handler: redactedAPI, ConnContext: connContext, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: log.New(io.Discard, "", 0)}
		redactedSrv.RegisterOnShutdown(redactedAPI.StopWatches)
		go func() { errc <- redactedSrv.Serve(redactedLn) }()
		logf("configd: serving the read-only API without secrets on %s", *redactedSocket)
	}
	// The database is open and every socket served: the services that
	// wait for configd (the console first) start now.
	if err := supervisor.NotifyReady(); err != nil {
		logf("configd: %v", err)
	}
	select {
	case err := <-errc:
		logf("configd: serve: %v", err)
		return 1
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.RegisterOnShutdown(api.StopWatches)
	srv.Shutdown(shutdown)
	os.Remove(*socket)
	if webSrv != nil {
		webSrv.Shutdown(shutdown)
		os.Remove(*webSocket)
	}
	if readSrv != nil {
		readSrv.Shutdown(shutdown)
		os.Remove(*readSocket)
	}
	if redactedSrv != nil {
		redactedSrv.Shutdown(shutdown)
		os.Remove(*redactedSocket)
	}
	logf("configd: stopped")
	return 0
}

// webAccess is who may use the restricted or a read-only API's socket:
// with gid >= 0 root and gid (0660), so that the web UI, iked or netd, which run
// as their own users in that group, can connect and nobody else but root
// can; else root only.
func webAccess(gid int) localapi.Access {
	if gid < 0 {
		return localapi.RootOnly
	}
	return localapi.Group(gid)
}
