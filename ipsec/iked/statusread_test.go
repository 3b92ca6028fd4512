package iked

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

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
	n := memHubSize(b)
	h := newMemHub(b, ikedtest.NewPlane(), n)
	h.attachSpokes(n)
	h.bringUp(n)
	h.dropSpokes()
	api := h.d.Handler()
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
	read()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		read()
	}
	runtime.ReadMemStats(&after)
	const perHour = 3600 / 5
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*perHour/1e6, "per_idle_hour_ms")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)*perHour/1e6, "per_idle_hour_MB")
}
