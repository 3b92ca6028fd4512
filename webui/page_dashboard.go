package webui

import (
	"fmt"
	"net/url"

	"github.com/flashgate/flashgate/webui/markup"
)

// dashboardPage is the dashboard: its live region, refreshed every 5 s.
func dashboardPage(p *markup.Writer, v *view, d Dashboard) {
	p.HTML(`
<h1>Dashboard</h1>
<div data-live="/live/dashboard" data-every="5">`)
	dashboardLive(p, d)
	p.HTML(`</div>
`)
}

// dashboardLive is the dashboard's live region (also GET /live/dashboard).
func dashboardLive(p *markup.Writer, d Dashboard) {
	p.HTML("\n")
	for _, note := range d.Firmware {
		p.HTML(`<p class="flash error">`)
		p.Text(note)
		p.HTML(` <a href="/system#firmware">System</a></p>`)
	}
	p.HTML(`
<section class="grid4">
  <div class="card stat"><span class="k">Board</span><span class="v">`)
	p.Text(orText(d.Board.Name, "unknown"))
	p.HTML(`</span><span class="s">`)
	p.Text(d.Board.Description)
	p.HTML(`</span></div>
  <div class="card stat"><span class="k">Firmware</span><span class="v">`)
	p.Text(orText(d.Board.Version, "dev"))
	p.HTML(`</span><span class="s">up `)
	p.Text(d.Uptime)
	p.HTML(`</span></div>
  <div class="card stat"><span class="k">CPU</span><span class="v">`)
	if c := d.CPUPercent; c != nil {
		p.Text(pct(*c))
	} else {
		p.HTML(`…`)
	}
	p.HTML(`</span>
    `)
	if c := d.CPUPercent; c != nil {
		p.HTML(`<meter min="0" max="100"`)
		p.Attr("value", fmt.Sprint(*c))
		p.HTML(` high="80"></meter>`)
	} else {
		p.HTML(`<span class="s">measuring</span>`)
	}
	p.HTML(`</div>
  <div class="card stat"><span class="k">Memory</span><span class="v">`)
	p.Text(pct(d.MemPercent))
	p.HTML(`</span>
    <meter min="0" max="100"`)
	p.Attr("value", fmt.Sprint(d.MemPercent))
	p.HTML(` high="85"></meter>
    <span class="s">`)
	p.Text(formatBytes(kib(d.Memory.AvailableKiB)) + " free of " + formatBytes(kib(d.Memory.TotalKiB)))
	p.HTML(`</span></div>
</section>

<section class="card">
  <h2>Tunnels <a class="more" href="/tunnels">all tunnels →</a></h2>
  `)
	if d.TunnelsTotal > len(d.Tunnels) {
		p.HTML(`<p class="note">`)
		p.Text(fmt.Sprintf("%d of %d up; shown: the ones not up, then the busiest.", d.TunnelsUp, d.TunnelsTotal))
		p.HTML(` <a href="/tunnels?state=down">Down</a> · <a href="/tunnels?state=failed">failed</a></p>`)
	}
	p.HTML("\n  ")
	if len(d.Tunnels) > 0 {
		p.HTML(`
  <div class="tunnels">
  `)
		for _, t := range d.Tunnels {
			p.HTML(`
    <a class="tunnel"`)
			p.Attr("href", "/tunnels/"+url.PathEscape(t.Name))
			p.HTML(`>
      <div class="head"><strong>`)
			p.Text(t.Name)
			p.HTML(`</strong> `)
			tunnelState(p, t.State)
			p.HTML(`</div>
      <div class="peer">`)
			p.Text(orText(t.Remote, "any peer"))
			if t.Interface != "" {
				p.Text(" · via " + t.Interface)
			}
			p.HTML(`</div>
      `)
			if t.Reason != "" {
				p.HTML(`<div class="reason">`)
				p.Text(t.Reason)
				p.HTML(`</div>`)
			}
			p.HTML("\n      ")
			p.HTML(t.Graph)
			p.HTML(`
      <div class="legend"><span class="in">in</span> `)
			p.Text(formatBytes(t.BytesIn))
			p.HTML(` · <span class="out">out</span> `)
			p.Text(formatBytes(t.BytesOut))
			p.HTML(`</div>
    </a>
  `)
		}
		p.HTML(`
  </div>
  `)
	} else {
		p.HTML(`
  <p class="empty">No tunnels yet. <a href="/tunnels/new">Create the first one</a>.</p>
  `)
	}
	p.HTML(`
  <p class="note">Crypto engine: `)
	p.Text(d.Crypto)
	p.HTML(`</p>
</section>

<section class="card">
  <h2>Interfaces <a class="more" href="/interfaces">configure →</a></h2>
  <table>
    <thead><tr><th>Name</th><th>State</th><th>Addresses</th><th class="num">Received</th><th class="num">Sent</th><th class="num">Errors</th></tr></thead>
    <tbody>
    `)
	for _, l := range d.Links {
		p.HTML(`
      <tr><td><strong>`)
		p.Text(l.Name)
		p.HTML(`</strong></td>
        <td>`)
		linkState(p, l.State)
		p.HTML(`</td>
        <td class="mono">`)
		joinText(p, l.Addresses, ", ")
		p.HTML(`</td>
        <td class="num">`)
		p.Text(formatBytes(l.RxBytes))
		p.HTML(`</td><td class="num">`)
		p.Text(formatBytes(l.TxBytes))
		p.HTML(`</td><td class="num">`)
		p.Text(fmt.Sprintf("%d/%d", l.RxErrors, l.TxErrors))
		p.HTML(`</td></tr>
    `)
	}
	p.HTML(`
    </tbody>
  </table>
</section>
`)
	for _, problem := range d.Problems {
		p.HTML(`<p class="flash error">`)
		p.Text(problem)
		p.HTML(`</p>`)
	}
	p.HTML("\n")
}

// orText is s, or instead when s is empty.
func orText(s, instead string) string {
	if s == "" {
		return instead
	}
	return s
}
