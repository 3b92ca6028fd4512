package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/internal/paths"
	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
)

// accessMain is `flashgate access UID:GID[:GROUP,...]`: what a user can
// reach of the box's local APIs, found out as that user. It drops to the
// user (with only the supplementary groups named, and no capabilities) and
// then tries each socket in /run/flashgate and its service directories,
// the configuration database, and, through every configd socket it
// reaches, the tunnels' pre-shared keys, the candidate and a clear-text
// export. `flashgate access 443:443` is what the web UI can reach,
// `flashgate access 501:501:502` what iked can, `flashgate access 503:503`
// what netd can (docs/architecture.md, "Who can reach what"). Only root
// can become another user.
func accessMain(args []string) int {
	fs := flag.NewFlagSet("access", flag.ContinueOnError)
	runDir := fs.String("run", paths.RunDir, "directory of the local API sockets")
	db := fs.String("db", paths.ConfigDB, "the configuration database")
	if fs.Parse(args) != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: flashgate access [-run DIR] [-db FILE] UID:GID[:GROUP,...]")
		return 2
	}
	user, extra, _ := strings.Cut(fs.Arg(0), ":")
	groupPart, suppPart, _ := strings.Cut(extra, ":")
	if groupPart != "" {
		user += ":" + groupPart
	}
	uid, gid, err := parseUser(user)
	var groups []int
	for _, g := range strings.Split(suppPart, ",") {
		if g == "" || err != nil {
			continue
		}
		n, perr := strconv.Atoi(g)
		if perr != nil || n <= 0 {
			err = fmt.Errorf("supplementary group %q in %q: want numbers above 0", g, fs.Arg(0))
		}
		groups = append(groups, n)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flashgate access: %v\n", err)
		return 2
	}
	// Go applies these to every thread of the process.
	if err := syscall.Setgroups(groups); err != nil {
		fmt.Fprintf(os.Stderr, "flashgate access: drop supplementary groups: %v (run it as root)\n", err)
		return 1
	}
	if err := syscall.Setgid(gid); err != nil {
		fmt.Fprintf(os.Stderr, "flashgate access: become group %d: %v\n", gid, err)
		return 1
	}
	if err := syscall.Setuid(uid); err != nil {
		fmt.Fprintf(os.Stderr, "flashgate access: become user %d: %v\n", uid, err)
		return 1
	}
	fmt.Printf("as uid %d gid %d groups %v:\n", os.Getuid(), os.Getgid(), groups)
	reportAccess(os.Stdout, *runDir, *db)
	return 0
}

func parseUser(s string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(s, ":")
	if uid, err = strconv.Atoi(u); err != nil || uid <= 0 {
		return 0, 0, fmt.Errorf("user %q: want UID:GID, numbers above 0", s)
	}
	gid = uid
	if ok {
		if gid, err = strconv.Atoi(g); err != nil || gid <= 0 {
			return 0, 0, fmt.Errorf("group in %q: want UID:GID, numbers above 0", s)
		}
	}
	return uid, gid, nil
}

// reportAccess writes, for the process's own user, one line per socket
// in runDir (connects, or why not), whether db can be opened, and for each
// configd socket it connects to, whether the pre-shared keys come back in
// the clear and whether an export with secrets in the clear is given.
func reportAccess(w io.Writer, runDir, db string) {
	socks, _ := filepath.Glob(filepath.Join(runDir, "*.sock"))
	inDirs, _ := filepath.Glob(filepath.Join(runDir, "*", "*.sock"))
	socks = append(socks, inDirs...)
	sort.Strings(socks)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, sock := range socks {
		name, _ := filepath.Rel(runDir, sock)
		c, err := net.DialTimeout("unix", sock, 2*time.Second)
		if err != nil {
			fmt.Fprintf(w, "  %-22s refused: %v\n", name, unwrapSyscall(err))
			continue
		}
		c.Close()
		fmt.Fprintf(w, "  %-22s connects\n", name)
		if !strings.HasPrefix(filepath.Base(name), "configd") {
			continue
		}
		cfg := configdapi.New(sock)
		running, _, err := cfg.Running(ctx)
		if err != nil {
			fmt.Fprintf(w, "    running configuration: %v\n", err)
			continue
		}
		for _, t := range running.Tunnels {
			switch psk := t.PSK.Reveal(); {
			case psk == "":
				fmt.Fprintf(w, "    psk of tunnel %s: none\n", t.Name)
			case configdapi.IsPSKMark(psk):
				fmt.Fprintf(w, "    psk of tunnel %s: redacted\n", t.Name)
			default:
				fmt.Fprintf(w, "    psk of tunnel %s: IN THE CLEAR\n", t.Name)
			}
		}
		if _, err := cfg.Candidate(ctx); err != nil {
			fmt.Fprintf(w, "    candidate (the edits): refused: %v\n", err)
		} else {
			fmt.Fprintf(w, "    candidate (the edits): readable\n")
		}
		if _, err := cfg.Export(ctx, config.SecretsIncluded, ""); err != nil {
			fmt.Fprintf(w, "    export with secrets in the clear: refused: %v\n", err)
		} else {
			fmt.Fprintf(w, "    export with secrets in the clear: GIVEN\n")
		}
	}
	if f, err := os.Open(db); err != nil {
		fmt.Fprintf(w, "  %-22s refused: %v\n", filepath.Base(db), unwrapSyscall(err))
	} else {
		f.Close()
		fmt.Fprintf(w, "  %-22s readable\n", filepath.Base(db))
	}
}

// unwrapSyscall is the errno of err when it has one ("permission
// denied"), else err.
func unwrapSyscall(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
