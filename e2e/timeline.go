package e2e

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Timeline says where the time from qemu start to a tunnel up went: marks
// the host saw itself (the console's prompt, the API's answers) and marks
// read back from the appliances (their services' uptimes, the daemons' log
// lines, iked's tunnel events), all in time since the appliance's qemu
// started. An appliance's clock is its emulated RTC, set from the host's
// clock with a second's resolution at boot, so its times are mapped onto
// the host's through the offset measured with GET /api/v1/system.
type Timeline struct {
	mu    sync.Mutex
	marks []timelineMark
}

type timelineMark struct {
	at        time.Duration // since the appliance's qemu started
	who, what string
}

// Add records what happened on (or was seen of) appliance a at host time t.
func (tl *Timeline) Add(a *Appliance, t time.Time, what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.marks = append(tl.marks, timelineMark{at: t.Sub(a.started), who: a.Name, what: what})
}

// String lists the marks in time order, one a line: "  12.34 s  A  what".
func (tl *Timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	sort.SliceStable(tl.marks, func(i, j int) bool { return tl.marks[i].at < tl.marks[j].at })
	var b strings.Builder
	for _, m := range tl.marks {
		fmt.Fprintf(&b, "%7.2f s  %s  %s\n", m.at.Seconds(), m.who, m.what)
	}
	return b.String()
}

// logStamp is the date and time the log package starts lines with: the
// timeline has its own.
var logStamp = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(\.\d+)? `)

// clockOffset is how far the appliance's wall clock is ahead of the
// host's, from the GET /api/v1/system answer with the shortest round trip
// (its time is taken about halfway through).
func clockOffset(api *API) (time.Duration, error) {
	best, bestRTT := time.Duration(0), time.Duration(-1)
	for range 3 {
		var sys struct {
			Time time.Time `json:"time"`
		}
		sent := time.Now()
		if err := api.Do("GET", "/api/v1/system", nil, &sys); err != nil {
			return 0, err
		}
		got := time.Now()
		if rtt := got.Sub(sent); bestRTT < 0 || rtt < bestRTT {
			best, bestRTT = sys.Time.Sub(sent.Add(rtt/2)), rtt
		}
	}
	return best, nil
}

// ReadAppliance adds what appliance a knows about its boot up to until
// (host time): when each service started, the lines netd and iked logged,
// and the events of its tunnel.
func (tl *Timeline) ReadAppliance(a *Appliance, api *API, tunnel string, until time.Time) error {
	offset, err := clockOffset(api)
	if err != nil {
		return fmt.Errorf("appliance %s: read its clock: %w", a.Name, err)
	}
	host := func(t time.Time) time.Time { return t.Add(-offset) }
	var svcs []struct {
		Name   string  `json:"name"`
		Uptime float64 `json:"uptime"`
	}
	asked := time.Now()
	if err := api.Do("GET", "/api/v1/services", nil, &svcs); err != nil {
		return fmt.Errorf("appliance %s: %w", a.Name, err)
	}
	for _, s := range svcs {
		if s.Uptime > 0 {
			tl.Add(a, asked.Add(-time.Duration(s.Uptime*float64(time.Second))), s.Name+" started")
		}
	}
	for _, svc := range []string{"configd", "netd", "iked", "webui", "kernel"} {
		var logs struct {
			Lines []struct {
				Time time.Time `json:"time"`
				Text string    `json:"text"`
			} `json:"lines"`
		}
		if err := api.Do("GET", "/api/v1/logs/"+svc, nil, &logs); err != nil {
			return fmt.Errorf("appliance %s: %w", a.Name, err)
		}
		n := 0
		for _, l := range logs.Lines {
			if svc == "kernel" && !strings.Contains(l.Text, "eth") {
				continue // of the kernel, only what its NICs say
			}
			if t := host(l.Time); t.Before(until) && !t.Before(a.started) && n < 20 {
				tl.Add(a, t, svc+" log: "+logStamp.ReplaceAllString(l.Text, ""))
				n++
			}
		}
	}
	var d struct {
		Live struct {
			Status struct {
				Events []struct {
					Time    time.Time `json:"time"`
					Message string    `json:"message"`
				} `json:"events"`
			} `json:"status"`
		} `json:"live"`
	}
	if err := api.Do("GET", "/api/v1/tunnels/"+tunnel, nil, &d); err != nil {
		return fmt.Errorf("appliance %s: %w", a.Name, err)
	}
	for _, e := range d.Live.Status.Events {
		if t := host(e.Time); t.Before(until.Add(time.Second)) && !t.Before(a.started) {
			tl.Add(a, t, "iked tunnel "+tunnel+": "+e.Message)
		}
	}
	tl.Add(a, a.started, fmt.Sprintf("(its clock runs %+.2f s from the host's; the marks read from it are mapped)", offset.Seconds()))
	return nil
}
