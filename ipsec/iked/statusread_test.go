package iked

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/localapi"

	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
	"github.com/flashgate/flashgate/ipsec/iked/ikedtest"
)

// BenchmarkStatusRead is what one read of every tunnel's status costs a
// hub with 1000 branches up (ikedtest's plane, the branches one engine in
// this process), on iked's side alone: the pages of ikedapi.TunnelsPageSize
// that ikedapi.Client.Tunnels asks for, answered by the API's handler. The
// web UI's throughput sampler made such a read every 5 s from its start,
// whether anyone was logged in or not, 720 an hour (issue 22); it now
// samples only while a session is live. per_idle_hour_ms and
// per_idle_hour_MB are what that cost an hour of nobody looking.
func BenchmarkStatusRead(b *testing.B) {
	api, n := upHubAPI(b)
	read := func() {
		for offset := 0; ; offset += ikedapi.TunnelsPageSize {
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/v1/tunnels?offset=%d&limit=%d", offset, ikedapi.TunnelsPageSize), nil))
			if rec.Code != http.StatusOK {
				b.Fatalf("GET /v1/tunnels at %d: %d %s", offset, rec.Code, rec.Body)
			}
			matched, _ := strconv.Atoi(rec.Header().Get(ikedapi.HeaderMatched))
			if offset+ikedapi.TunnelsPageSize >= matched {
				if matched != n {
					b.Fatalf("%d tunnels matched, want %d", matched, n)
				}
				return
			}
		}
	}
	everyFiveSeconds(b, read, "per_idle_hour")
}

// upHubAPI is iked's API handler over a hub of memHubSize tunnels, every
// one up, the spokes gone.
func upHubAPI(b *testing.B) (http.Handler, int) {
	n := memHubSize(b)
	h := newMemHub(b, ikedtest.NewPlane(), n)
	h.attachSpokes(n)
	h.bringUp(n)
	h.dropSpokes()
	return h.d.Handler(), n
}

// everyFiveSeconds runs read once to warm it, then measures it, and
// reports what reading every 5 s for an hour costs: <unit>_ms of time and
// <unit>_MB of allocations.
func everyFiveSeconds(b *testing.B, read func(), unit string) {
	read()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		read()
	}
	runtime.ReadMemStats(&after)
	const perHour = 3600 / 5
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*perHour/1e6, unit+"_ms")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)*perHour/1e6, unit+"_MB")
}

// BenchmarkCountersRead is BenchmarkStatusRead for GET /v1/counters, what
// the web UI's throughput sampler reads every 5 s while someone is logged
// in: the byte counters of every CHILD_SA, in one answer. per_hour_ms and
// per_hour_MB are what an hour of someone looking costs iked.
func BenchmarkCountersRead(b *testing.B) {
	api, _ := upHubAPI(b)
	var size int
	read := func() {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/counters", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /v1/counters: %d %s", rec.Code, rec.Body)
		}
		size = rec.Body.Len()
	}
	everyFiveSeconds(b, read, "per_hour")
	b.ReportMetric(float64(size), "answer_bytes")
}

// TestCountersAreTheStatusCounters: GET /v1/counters answers, for every
// tunnel in name order, the same CHILD_SAs and byte counters as the full
// status, traffic counted included, through the real client.
func TestCountersAreTheStatusCounters(t *testing.T) {
	const n = 4
	plane := ikedtest.NewPlane()
	h := newMemHub(t, plane, n+1) // the last tunnel never comes up
	h.attachSpokes(n)
	h.bringUp(n)
	for i := range n {
		_, _, lan := memHubSpoke(i)
		for range i + 1 {
			if !plane.Send(lan.Addr(), 1000) {
				t.Fatalf("no SA carried a packet to branch %d's LAN", i)
			}
		}
	}
	sock := filepath.Join(t.TempDir(), "iked.sock")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.d.Serve(ctx, sock, localapi.RootOnly) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	client := ikedapi.NewClient(sock)
	var got []ikedapi.TunnelCounters
	var err error
	if !waitFor(10*time.Second, func() bool { got, err = client.Counters(ctx); return err == nil }) {
		t.Fatalf("GET /v1/counters: %v", err)
	}
	want := ikedapi.CountersOf(h.d.Status())
	if len(got) != n+1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("counters\n%+v\nwant (from the status)\n%+v", got, want)
	}
	var sent uint64
	for i, tc := range got {
		if i < n && len(tc.Children) != 1 {
			t.Errorf("%s: %d CHILD_SAs counted, want 1", tc.Name, len(tc.Children))
		}
		for _, c := range tc.Children {
			sent += c.BytesOut
		}
	}
	if sent != 1000*n*(n+1)/2 {
		t.Errorf("%d bytes out counted, want %d", sent, 1000*n*(n+1)/2)
	}
	if len(got[n].Children) != 0 {
		t.Errorf("the tunnel that is down has counters: %+v", got[n])
	}
}
