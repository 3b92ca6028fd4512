package iked

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// TestMemLocalAPI: the local API served on a unix socket, driven by
// ikedapi's client as the console and the web UI drive it: status, up,
// rekey and down of a tunnel on the in-memory twin, and the refusals with
// their status codes (404 no such tunnel, 409 not possible now, 400 a bad
// request).
func TestMemLocalAPI(t *testing.T) {
	n := newMemNet(t)
	b := n.gateway(memB, memTunnel(memB, memA, memLANB, memLANA, config.StartRespond))
	a := n.gateway(memA, memTunnel(memA, memB, memLANA, memLANB, config.StartRespond))
	sock := filepath.Join(t.TempDir(), "iked.sock")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx, sock, localapi.RootOnly) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	c := ikedapi.NewClient(sock)
	if !waitFor(2*time.Second, func() bool { _, err := c.Tunnels(ctx); return err == nil }) {
		t.Fatal("the API did not answer")
	}
	if err := c.Rekey(ctx, "s2s", false); !errors.Is(err, ikedapi.ErrConflict) {
		t.Errorf("rekey without an IKE SA: %v, want ErrConflict", err)
	}
	if err := c.Up(ctx, "s2s"); err != nil {
		t.Fatal(err)
	}
	n.run()
	st, err := c.Tunnel(ctx, "s2s")
	if err != nil || st.State != ipsec.StateUp || st.IKE == nil || len(st.Children) != 1 {
		t.Fatalf("after up: %+v, %v", st, err)
	}
	if err := c.Rekey(ctx, "s2s", true); err != nil {
		t.Fatal(err)
	}
	n.run()
	if st, _ := c.Tunnel(ctx, "s2s"); st.IKE == nil || st.IKE.InitiatorSPI == "" || !a.hasEvent("s2s", "IKE_SA rekeyed") {
		t.Errorf("after the API's IKE rekey: %+v", st.IKE)
	}
	if err := c.Down(ctx, "s2s"); err != nil {
		t.Fatal(err)
	}
	n.run()
	if len(b.plane.Pairs()) != 0 {
		t.Errorf("down through the API left B %d pairs", len(b.plane.Pairs()))
	}
	for name, call := range map[string]func() error{
		"up nosuch":   func() error { return c.Up(ctx, "nosuch") },
		"down nosuch": func() error { return c.Down(ctx, "nosuch") },
		"get nosuch":  func() error { _, err := c.Tunnel(ctx, "nosuch"); return err },
		"rekey":       func() error { return c.Rekey(ctx, "nosuch", false) },
	} {
		if err := call(); !errors.Is(err, ikedapi.ErrNoTunnel) {
			t.Errorf("%s: %v, want ErrNoTunnel", name, err)
		}
	}
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/tunnels/s2s/rekey?sa=both", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("rekey sa=both: %d %s, want 400", rec.Code, rec.Body)
	}
	s, err := c.Stats(ctx)
	if err != nil || s.DataPlane != "memory" || s.IKE.Received == 0 || s.ESP != nil {
		t.Errorf("stats: %+v, %v", s, err)
	}
}
