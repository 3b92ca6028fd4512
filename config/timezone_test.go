package config

import (
	"slices"
	"strings"
	"testing"
)

func TestTimezoneRule(t *testing.T) {
	for _, tc := range []struct {
		name, rule string
		ok         bool
	}{
		{"UTC", "UTC0", true},
		{"Europe/Berlin", "CET-1CEST,M3.5.0,M10.5.0/3", true},
		{"Asia/Kolkata", "IST-5:30", true},
		{"Etc/GMT-2", "<+02>-2", true},
		{"", "", false},
		{"Europe", "", false},
		{"Europe/Berlin ", "", false},
		{"europe/berlin", "", false},
		{"../etc/passwd", "", false},
		{"Europe/Berlin CET-1CEST,M3.5.0,M10.5.0/3", "", false},
		{"localtime", "", false},
	} {
		rule, ok := TimezoneRule(tc.name)
		if rule != tc.rule || ok != tc.ok {
			t.Errorf("TimezoneRule(%q) = %q, %v; want %q, %v", tc.name, rule, ok, tc.rule, tc.ok)
		}
	}
	names := TimezoneNames()
	if len(names) < 400 || !slices.IsSorted(names) || !slices.Contains(names, "America/New_York") {
		t.Errorf("TimezoneNames: %d names (sorted %v), want 400 or more, sorted, with America/New_York", len(names), slices.IsSorted(names))
	}
}

func TestValidateTimezone(t *testing.T) {
	for _, tc := range []struct {
		zone string
		ok   bool
	}{{"UTC", true}, {"America/Argentina/Buenos_Aires", true}, {"Etc/GMT+5", true}, {"Mars/Olympus_Mons", false}, {"UTC+2", false}} {
		c := sampleConfig(1)
		c.System.Timezone = tc.zone
		err := c.Validate()
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if got := !strings.Contains(msg, "system.timezone"); got != tc.ok {
			t.Errorf("timezone %q: validation says %q; want accepted %v", tc.zone, msg, tc.ok)
		}
		if !tc.ok && !strings.Contains(msg, "not a time zone name this firmware knows") {
			t.Errorf("timezone %q: message %q does not say the firmware does not know it", tc.zone, msg)
		}
	}
}
