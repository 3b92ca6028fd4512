package hostd

import (
	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

// host is where the settings are applied. A nil setter is a setting this
// hostd leaves alone: its flags did not name the file or socket it needs.
type host struct {
	setHostname func(name string) error
	// setTimezone installs a zone by its POSIX TZ rule
	// (config.TimezoneRule); timezoneHolds reports whether the zone in
	// force is that rule already (hostd restarted), so it is not
	// rewritten.
	setTimezone   func(name, rule string) error
	timezoneHolds func(rule string) bool
	setSyslog     func(supervisor.SyslogConfig) error
	// setConsoleBaud restarts the console getty at a speed; boardBaud is
	// the speed an unset console_baud means.
	setConsoleBaud func(baud int) error
	boardBaud      int
	logf           func(format string, args ...any)

	applied applied
	// failing holds, per setting, the error last logged for it: a
	// setting that keeps failing the same way is logged once, however
	// often it is retried.
	failing map[string]string
}

// applied is what is in force, so that a commit of other settings (NTP,
// admins) or configd's "current" notice after a restart applies nothing
// again. Zero values are unknown, and applied at the next chance.
type applied struct {
	hostname    string
	timezone    string
	consoleBaud int
	syslog      *supervisor.SyslogConfig
}

// apply brings every setting this hostd manages to what sys asks for. It
// reports whether something failed that may succeed later (the
// supervisor was restarting, say): the caller then tries again.
func (h *host) apply(sys config.System) (retry bool) {
	want := wanted(sys, h.boardBaud)
	if h.setHostname != nil && want.hostname != h.applied.hostname {
		if h.check("hostname", h.setHostname(want.hostname), "hostname %q", want.hostname) {
			h.applied.hostname = want.hostname
			h.logf("hostname %s", want.hostname)
		} else {
			retry = true
		}
	}
	if h.setTimezone != nil && want.timezone != h.applied.timezone {
		retry = !h.applyTimezone(want.timezone) || retry
	}
	if h.setConsoleBaud != nil && want.consoleBaud != h.applied.consoleBaud {
		if h.check("console", h.setConsoleBaud(want.consoleBaud), "console speed %d", want.consoleBaud) {
			// The kernel's console (its messages) and syslinux keep the
			// speed of the image's command line until the next image
			// build.
			h.applied.consoleBaud = want.consoleBaud
			h.logf("console getty at %d baud", want.consoleBaud)
		} else {
			retry = true
		}
	}
	if h.setSyslog != nil && (h.applied.syslog == nil || want.syslog != *h.applied.syslog) {
		if h.check("syslog", h.setSyslog(want.syslog), "remote syslog %s", describeSyslog(want.syslog)) {
			// Unknown and off stays quiet: at boot there is nothing to
			// turn off.
			if h.applied.syslog != nil || want.syslog.Addr != "" {
				h.logf("remote syslog %s", describeSyslog(want.syslog))
			}
			h.applied.syslog = &want.syslog
		} else {
			retry = true
		}
	}
	return retry
}

// applyTimezone installs a zone; it reports false when that failed in a
// way worth retrying.
func (h *host) applyTimezone(name string) bool {
	rule, ok := config.TimezoneRule(name)
	if !ok { // configd validates; an older firmware's database might not
		was := h.applied.timezone
		if was == "" {
			was = "the current one"
		}
		h.note("timezone", name, "time zone %q: not a zone this firmware knows; keeping %s", name, was)
		return true // no later attempt can know it better
	}
	if h.applied.timezone == "" && h.timezoneHolds != nil && h.timezoneHolds(rule) {
		h.applied.timezone = name
		delete(h.failing, "timezone")
		return true
	}
	if !h.check("timezone", h.setTimezone(name, rule), "time zone %s", name) {
		return false
	}
	h.applied.timezone = name
	h.logf("time zone %s (%s)", name, rule)
	return true
}

// check logs err (once for as long as the setting fails the same way)
// and reports whether the setting was applied.
func (h *host) check(setting string, err error, format string, args ...any) bool {
	if err == nil {
		delete(h.failing, setting)
		return true
	}
	h.note(setting, err.Error(), format+": %v", append(args, err)...)
	return false
}

// note logs a problem with a setting unless the same one was the last
// logged for it.
func (h *host) note(setting, problem, format string, args ...any) {
	if h.failing == nil {
		h.failing = map[string]string{}
	}
	if last, ok := h.failing[setting]; ok && last == problem {
		return
	}
	h.failing[setting] = problem
	h.logf(format, args...)
}
