package config

import "strings"

//go:generate go run tzrules_gen.go

// The time zone is applied by hostd as /etc/localtime, a TZif file it
// writes from the zone's POSIX TZ rule (services/hostd), so that every
// service's time.Local follows it. The firmware carries only these rules,
// taken from the IANA database of the build machine by tzrules_gen.go:
// about 18 KiB of text, against 400 KiB (54 KiB compressed) for Go's
// time/tzdata. The price: times before a zone's current rule took effect
// (history, such as a country's change of offset) are shown with today's
// rule. For an appliance that shows the current time and recent logs that
// is right; for old timestamps it is not.

// TimezoneRule returns the POSIX TZ rule (as in the TZ variable, e.g.
// "CET-1CEST,M3.5.0,M10.5.0/3") of an IANA time zone name the firmware
// knows, such as "UTC", "Europe/Berlin" or "Etc/GMT-2" (UTC+2: IANA's Etc
// names invert the sign).
func TimezoneRule(name string) (string, bool) {
	if name == "" || strings.ContainsAny(name, " \n") {
		return "", false
	}
	rules := tzRules
	for rules != "" {
		line, rest, _ := strings.Cut(rules, "\n")
		rules = rest
		if zone, rule, ok := strings.Cut(line, " "); ok && zone == name {
			return rule, true
		}
	}
	return "", false
}

// TimezoneNames lists the zones TimezoneRule knows, sorted.
func TimezoneNames() []string {
	var names []string
	for line := range strings.Lines(tzRules) {
		if zone, _, ok := strings.Cut(line, " "); ok {
			names = append(names, zone)
		}
	}
	return names
}
