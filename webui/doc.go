// Package webui is flashgate's web interface: an HTTPS server (gorilla/mux)
// with server-rendered pages and a JSON API under /api/v1 that do the same
// things, for configuring tunnels, the firewall, interfaces and the system,
// and for watching tunnels work.
//
// It owns the TLS certificate of the box, admin sessions (login, logout,
// expiry, rate limiting), CSRF protection, the pages and their embedded
// static files, and the small ring of throughput samples behind the graphs.
//
// The pages are Go functions, one file per page (page_*.go), each shaped
// like the HTML it writes, writing through package markup: constant markup
// as is, every value escaped for where it goes (text, attribute, URL
// attribute). No template engine is linked: text/template's reflection
// would keep megabytes of methods in the binary (see internal/layering).
// It owns no configuration: every edit goes to configd's candidate and is
// applied by a commit through configd. Live state comes from iked (tunnels),
// netd (the links and their counters), the supervisor (services, logs,
// reboot) and the kernel (/proc for uptime, CPU and memory; the crypto
// engines' report, read at start, looks at /proc and /sys).
package webui
