package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
)

// The shared card image: the tests and the benchmark of this file set boot
// copies of one image built from the working tree, once per test binary.
var shared struct {
	once  sync.Once
	image string
	err   error
}

// cardImage builds the qemu board's image once per process into
// out/test/e2e (make clean removes it) and returns its path; callers boot
// copies of it. It works for tests and benchmarks alike.
func cardImage(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: builds an image and boots it in qemu")
	}
	shared.once.Do(func() {
		wd, _ := os.Getwd()
		root, err := images.FindRepoRoot(wd)
		if err != nil {
			shared.err = err
			return
		}
		board, err := boards.Lookup("qemu")
		if err != nil {
			shared.err = err
			return
		}
		if err := images.CheckBuildTools(); err != nil {
			shared.err = err
			return
		}
		out := filepath.Join(root, "out", "test", "e2e")
		if err := os.MkdirAll(out, 0o755); err != nil {
			shared.err = err
			return
		}
		// 45 minutes: run alone on a fresh machine (go test ./e2e), the
		// kernel is built first, some 30 minutes.
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
		defer cancel()
		bl := &images.Builder{RepoRoot: root, OutDir: out, CacheDir: filepath.Join(root, "out", "cache")}
		rep, err := bl.Build(ctx, board, "e2e")
		if err != nil {
			shared.err = err
			return
		}
		shared.image = rep.Image
	})
	if shared.err != nil {
		tb.Fatalf("build the qemu image: %v", shared.err)
	}
	return shared.image
}

// loopbackAPI is an API session through qemu's port forward on the host's
// loopback (QEMUConfig.WebUIPort), for a VM without a lab around it.
func loopbackAPI(port int) *API {
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{
		// Self-signed and new with every card, as in NewAPI.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext:     (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	return &API{base: "https://127.0.0.1:" + strconv.Itoa(port), hc: &http.Client{Jar: jar, Transport: tr, Timeout: 30 * time.Second}}
}

// freeLoopbackPort asks the kernel for a free TCP port on 127.0.0.1.
func freeLoopbackPort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
