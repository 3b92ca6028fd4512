package hostd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
)

// TestTZifMatchesZoneinfo checks the generated /etc/localtime of every
// zone the firmware knows against the build machine's IANA database: the
// same offset and designation, as readers of the file (Go here) see them,
// at instants over the coming year, and on both sides of Europe's and
// the US's DST changes of 2027. Only future times are compared: the
// firmware keeps no history of a zone's rules.
func TestTZifMatchesZoneinfo(t *testing.T) {
	if _, err := os.Stat("/usr/share/zoneinfo/Europe/Berlin"); err != nil {
		t.Fatalf("this test compares with the IANA database in /usr/share/zoneinfo (apt-get install tzdata): %v", err)
	}
	var instants []time.Time
	for at := time.Now(); len(instants) < 60; at = at.Add(7*24*time.Hour + time.Hour) {
		instants = append(instants, at)
	}
	instants = append(instants,
		time.Date(2027, 3, 28, 0, 59, 59, 0, time.UTC), // the second before Europe's change
		time.Date(2027, 3, 28, 1, 0, 0, 0, time.UTC),
		time.Date(2027, 11, 7, 5, 59, 59, 0, time.UTC), // New York's last second of DST
		time.Date(2027, 11, 7, 6, 0, 0, 0, time.UTC))
	zones := 0
	for _, name := range config.TimezoneNames() {
		rule, ok := config.TimezoneRule(name)
		if !ok {
			t.Errorf("config.TimezoneRule(%q): not known", name)
			continue
		}
		data, err := tzif(rule)
		if err != nil {
			t.Errorf("%s: tzif(%q): %v", name, rule, err)
			continue
		}
		ours, err := time.LoadLocationFromTZData(name, data)
		if err != nil {
			t.Errorf("%s: Go cannot read our TZif for %q: %v", name, rule, err)
			continue
		}
		iana, err := time.LoadLocation(name)
		if err != nil {
			t.Fatalf("host zoneinfo: %v", err)
		}
		for _, at := range instants {
			gotName, gotOff := at.In(ours).Zone()
			wantName, wantOff := at.In(iana).Zone()
			if gotName != wantName || gotOff != wantOff {
				t.Errorf("%s at %s: ours %s %+d s, IANA's %s %+d s (rule %q; if this machine's tzdata is newer, run go generate ./config)",
					name, at.Format(time.RFC3339), gotName, gotOff, wantName, wantOff, rule)
				break
			}
		}
		zones++
	}
	if zones < 400 {
		t.Fatalf("%d zones checked, want all the firmware knows (400 or more)", zones)
	}
}

func TestStandardTime(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		name    string
		utoff   int
		wantErr string
	}{
		{"UTC0", "UTC", 0, ""},
		{"CET-1CEST,M3.5.0,M10.5.0/3", "CET", 3600, ""},
		{"EST5EDT,M3.2.0,M11.1.0", "EST", -5 * 3600, ""},
		{"IST-5:30", "IST", 5*3600 + 30*60, ""},
		{"<+0545>-5:45", "+0545", 5*3600 + 45*60, ""},
		{"<-03>3", "-03", -3 * 3600, ""},
		{"<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45", "+1245", 12*3600 + 45*60, ""},
		{"<+01", "", 0, "unterminated"},
		{"X0", "", 0, "shorter than 3"},
		{"ABC", "", 0, "not [+-]hh"},
		{"ABC1:99", "", 0, "not [+-]hh"},
	} {
		name, utoff, err := standardTime(tc.rule)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("standardTime(%q) = %q, %d, %v; want an error with %q", tc.rule, name, utoff, err, tc.wantErr)
			}
			continue
		}
		if err != nil || name != tc.name || utoff != tc.utoff {
			t.Errorf("standardTime(%q) = %q, %d, %v; want %q, %d", tc.rule, name, utoff, err, tc.name, tc.utoff)
		}
	}
}

func TestWriteLocaltime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "localtime")
	for _, zone := range []string{"Europe/Berlin", "Asia/Kolkata"} { // the second replaces the first
		rule, _ := config.TimezoneRule(zone)
		if err := writeLocaltime(path, rule); err != nil {
			t.Fatalf("writeLocaltime(%s): %v", zone, err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocationFromTZData("localtime", data)
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if name, off := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).In(loc).Zone(); name != "IST" || off != 19800 {
		t.Errorf("installed zone is %s %+d, want IST +19800", name, off)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (services do not run as root everywhere)", fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".localtime-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// FuzzTZif checks that any rule either is refused or gives a file Go
// reads, whose local time type has the offset the rule starts with.
func FuzzTZif(f *testing.F) {
	for _, r := range []string{"UTC0", "CET-1CEST,M3.5.0,M10.5.0/3", "<+0545>-5:45", "IST-5:30", "<-03>3", "EST5EDT,M3.2.0,M11.1.0", "ABC+25", "<>0"} {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, rule string) {
		data, err := tzif(rule)
		if err != nil {
			return
		}
		_, utoff, _ := standardTime(rule)
		if utoff < -25*3600 || utoff > 25*3600 {
			t.Fatalf("rule %q: offset %d s is beyond ±25 h", rule, utoff)
		}
		if strings.ContainsAny(rule, "\n\x00") {
			return // a footer cannot hold these; the table has none
		}
		if _, err := time.LoadLocationFromTZData("fuzz", data); err != nil {
			t.Fatalf("rule %q: Go cannot read the file: %v", rule, err)
		}
	})
}
