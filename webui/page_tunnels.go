package webui

import (
	"fmt"
	"net/url"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/webui/markup"
)

// tunnelsPage is the tunnel list: a filter once there are many, and the
// list's live region.
func tunnelsPage(p *markup.Writer, v *view, d tunnelList) {
	p.HTML(`
<div class="titlebar"><h1>Tunnels</h1><span><a class="button" href="/tunnels/import">Import</a> <a class="button primary" href="/tunnels/new">New tunnel</a></span></div>
`)
	if d.Total > 10 {
		p.HTML(`
<form class="filter" method="get" action="/tunnels">
  <label>Filter <input type="search" name="q"`)
		p.Attr("value", d.Query.Filter)
		p.HTML(` maxlength="64" placeholder="name, peer address or reason"></label>
  `)
		if d.Query.State != "" {
			p.HTML(`<input type="hidden" name="state"`)
			p.Attr("value", string(d.Query.State))
			p.HTML(`>`)
		}
		p.HTML(`
  <button type="submit">Show</button>
</form>
`)
	}
	p.HTML(`
<section class="card"`)
	p.Attr("data-live", d.LiveURL)
	p.HTML(` data-every="5">`)
	tunnelsLive(p, d)
	p.HTML(`</section>
`)
}

// tunnelsLive is the list's live region (also GET /live/tunnels).
func tunnelsLive(p *markup.Writer, d tunnelList) {
	p.HTML("\n")
	if d.Total == 0 {
		p.HTML(`
<p class="empty">No tunnels configured. A tunnel joins a network behind this box to a network behind another IPsec gateway.</p>
`)
		return
	}
	if d.Filtered() || d.Pages > 1 {
		p.HTML(`
<p class="pager">
  `)
		p.Text(d.Summary())
		p.HTML("\n  ")
		for _, st := range d.States {
			p.HTML(` <a`)
			p.Attr("href", st.URL)
			p.HTML(`>`)
			p.Text(fmt.Sprintf("%s %d", st.State, st.N))
			p.HTML(`</a>`)
		}
		p.HTML("\n  ")
		if d.Filtered() {
			p.HTML(` <a`)
			p.Attr("href", d.ClearURL)
			p.HTML(`>all</a>`)
		}
		p.HTML("\n  ")
		if d.Prev != "" {
			p.HTML(` <a`)
			p.Attr("href", d.Prev)
			p.HTML(` rel="prev">← previous</a>`)
		}
		p.HTML("\n  ")
		if d.Next != "" {
			p.HTML(` <a`)
			p.Attr("href", d.Next)
			p.HTML(` rel="next">next →</a>`)
		}
		p.HTML(`
</p>
`)
	}
	if len(d.Rows) == 0 {
		return
	}
	p.HTML(`
<table>
  <thead><tr><th>Name</th><th>State</th><th>Peer</th><th>Why</th><th class="num">In</th><th class="num">Out</th><th>Last minutes</th></tr></thead>
  <tbody>
  `)
	for _, r := range d.Rows {
		p.HTML(`
  <tr>
    <td><a`)
		p.Attr("href", "/tunnels/"+url.PathEscape(r.Name))
		p.HTML(`><strong>`)
		p.Text(r.Name)
		p.HTML(`</strong></a>`)
		if !r.Enabled {
			p.HTML(` <span class="tag">disabled</span>`)
		}
		if !r.Committed {
			p.HTML(` <span class="tag">pending</span>`)
		}
		if len(r.Weak) > 0 {
			var title string
			for _, w := range r.Weak {
				title += w.Proposal + ": " + w.Algorithms() + ". "
			}
			p.HTML(` <span class="tag weak"`)
			p.Attr("title", title)
			p.HTML(`>weak algorithms</span>`)
		}
		p.HTML(`</td>
    <td>`)
		tunnelState(p, r.State)
		p.HTML(`</td>
    <td class="mono">`)
		p.Text(orText(r.Remote, "any"))
		if r.Interface != "" {
			p.HTML(` <span class="tag">`)
			p.Text(r.Interface)
			p.HTML(`</span>`)
		}
		p.HTML(`</td>
    <td class="reason">`)
		p.Text(r.Reason)
		p.HTML(`</td>
    <td class="num">`)
		p.Text(formatBytes(r.BytesIn))
		p.HTML(`</td><td class="num">`)
		p.Text(formatBytes(r.BytesOut))
		p.HTML(`</td>
    <td class="spark">`)
		p.HTML(r.Graph)
		p.HTML(`</td>
  </tr>
  `)
	}
	p.HTML(`
  </tbody>
</table>
`)
}

// tunnelPage is one tunnel: its actions, its live state and its
// configuration.
func tunnelPage(p *markup.Writer, v *view, d TunnelDetail) {
	t := d.Config
	p.HTML(`
<div class="titlebar"><h1>`)
	p.Text("Tunnel " + t.Name)
	p.HTML(`</h1>
  <div class="actions">
    `)
	if d.Controlled && d.Row.Committed {
		p.HTML(`
    <form method="post"`)
		p.Attr("action", "/tunnels/"+url.PathEscape(t.Name)+"/up")
		p.HTML(`>`)
		csrfInput(p, v.CSRF)
		p.HTML(`<button>Connect now</button></form>
    <form method="post"`)
		p.Attr("action", "/tunnels/"+url.PathEscape(t.Name)+"/down")
		p.Attr("data-confirm", "Take tunnel "+t.Name+" down now? It comes back by its start action.")
		p.HTML(`>`)
		csrfInput(p, v.CSRF)
		p.HTML(`<button>Disconnect</button></form>
    `)
	}
	p.HTML(`
    <a class="button"`)
	p.Attr("href", "/tunnels/"+url.PathEscape(t.Name)+"/edit")
	p.HTML(`>Edit</a>
    <form method="post"`)
	p.Attr("action", "/tunnels/"+url.PathEscape(t.Name)+"/delete")
	p.Attr("data-confirm", "Delete tunnel "+t.Name+"? (It stays until you commit.)")
	p.HTML(`>
      `)
	csrfInput(p, v.CSRF)
	p.HTML(`<button class="danger">Delete</button></form>
  </div>
</div>
<div`)
	p.Attr("data-live", "/live/tunnels/"+url.PathEscape(t.Name))
	p.HTML(` data-every="5">`)
	tunnelLive(p, d)
	p.HTML(`</div>
<section class="card">
  <h2>Configuration</h2>
  <dl class="kv">
    <dt>Peer</dt><dd class="mono">`)
	if t.RemoteAddress.IsSet() {
		p.Text(t.RemoteAddress.String())
	} else {
		p.HTML(`any (respond only)`)
	}
	if t.RemoteID != "" {
		p.Text(" · ID " + t.RemoteID)
	}
	p.HTML(`</dd>
    <dt>Local</dt><dd class="mono">`)
	if t.LocalAddress.IsSet() {
		p.Text(t.LocalAddress.String())
	} else {
		p.HTML(`WAN address`)
	}
	if t.LocalID != "" {
		p.Text(" · ID " + t.LocalID)
	}
	p.HTML(`</dd>
    `)
	if t.IsRoute() {
		p.HTML(`
    <dt>Mode</dt><dd>route-based: interface <span class="mono">`)
		p.Text(t.Interface)
		p.HTML(`</span> `)
		p.Text(fmt.Sprintf("(if_id %d), MTU %d", t.IfID(), t.RouteMTU()))
		if t.MTU == 0 {
			p.HTML(` (sized for the ESP overhead)`)
		}
		if len(t.InnerAddresses) > 0 {
			p.HTML(` · inner address <span class="mono">`)
			joinText(p, t.InnerAddresses, ", ")
			p.HTML(`</span>`)
		}
		p.HTML(`</dd>
    <dt>Routes</dt><dd class="mono">`)
		for i, r := range d.Routes {
			if i > 0 {
				p.HTML(`, `)
			}
			p.Text(fmt.Sprintf("%s metric %d", r.Destination, r.Metric))
			if !r.Enabled {
				p.HTML(` (disabled)`)
			}
		}
		if len(d.Routes) == 0 {
			p.HTML(`<span class="err">none</span> <span class="note">(add one on the <a href="/routes">Routes</a> page with interface `)
			p.Text(t.Interface)
			p.HTML(`)</span>`)
		}
		p.HTML(`</dd>
    <dt>Selectors</dt><dd class="mono">`)
		if len(t.LocalSubnets) > 0 {
			joinText(p, t.LocalSubnets, ", ")
		} else {
			p.HTML(`0.0.0.0/0`)
		}
		p.HTML(` ⇄ `)
		if len(t.RemoteSubnets) > 0 {
			joinText(p, t.RemoteSubnets, ", ")
		} else {
			p.HTML(`0.0.0.0/0`)
		}
		p.HTML(`</dd>
    `)
	} else {
		p.HTML(`
    <dt>Networks</dt><dd class="mono">`)
		joinText(p, t.LocalSubnets, ", ")
		p.HTML(` ⇄ `)
		joinText(p, t.RemoteSubnets, ", ")
		p.HTML(`</dd>
    `)
	}
	p.HTML(`
    <dt>IKE</dt><dd class="mono">`)
	joinText(p, t.IKEProposals, ", ")
	if t.IKEVersion != 1 {
		p.HTML(` · IKEv2`)
	} else {
		p.HTML(` · IKEv1`)
	}
	p.HTML(`</dd>
    <dt>ESP</dt><dd class="mono">`)
	joinText(p, t.ESPProposals, ", ")
	p.HTML(`</dd>
    `)
	if len(d.Row.Weak) > 0 {
		p.HTML(`<dt>Weak</dt><dd class="weak" id="weak-proposals"><span class="tag weak">weak algorithms</span>`)
		if t.LegacyAlgorithms {
			p.HTML(` allowed by legacy_algorithms`)
		}
		p.HTML(`<ul>`)
		for _, w := range d.Row.Weak {
			p.HTML(`<li><span class="mono">`)
			p.Text(w.Proposal)
			p.HTML(`</span>: `)
			weaknesses(p, w.Weaknesses)
			p.HTML(`</li>`)
		}
		p.HTML(`</ul></dd>`)
	}
	p.HTML(`
    <dt>Key</dt><dd>`)
	if t.PSKSet {
		p.HTML(`pre-shared key set (not shown)`)
	} else {
		p.HTML(`<span class="err">no key</span>`)
	}
	p.HTML(`</dd>
    <dt>Start</dt><dd>`)
	p.Text(fmt.Sprintf("%s · data plane %s · rekey IKE every %s, ESP every %s · dead peer check %s, gives up after %s",
		t.StartAction, t.DataPlane, short(t.IKELifetime), short(t.ChildLifetime), short(t.DPDInterval), short(t.DPDTimeout)))
	p.HTML(`</dd>
  </dl>
</section>
`)
}

// weaknesses are a weak proposal's algorithms, why, and what to use.
func weaknesses(p *markup.Writer, ws []config.Weakness) {
	for i, w := range ws {
		if i > 0 {
			p.HTML(`; `)
		}
		p.Text(fmt.Sprintf("%s (%s; use %s)", w.Algorithm, w.Why, w.Use))
	}
}

// tunnelLive is a tunnel's live region (also GET /live/tunnels/{name}):
// its state, graph, SAs and recent events.
func tunnelLive(p *markup.Writer, d TunnelDetail) {
	r := d.Row
	p.HTML(`
<section class="card">
  <h2>State</h2>
  <p class="bigstate">`)
	tunnelState(p, r.State)
	p.HTML(` `)
	if r.Reason != "" {
		p.HTML(`<span class="reason">`)
		p.Text(r.Reason)
		p.HTML(`</span>`)
	}
	p.HTML(`</p>
  `)
	st := r.Status
	if st != nil {
		p.HTML(`<p class="note">since `)
		p.Text(clock(st.Since) + " · " + st.DataPlane)
		if st.Driver != "" {
			p.Text(" · driver " + st.Driver)
		}
		p.Text(" · " + st.LocalAddr + " ⇄ " + st.RemoteAddr)
		p.HTML(`</p>`)
	}
	p.HTML(`
  <div class="graphbox">`)
	p.HTML(rateGraph(r.Rates, 600, 90))
	p.HTML(`<div class="legend"><span class="in">in</span> <span class="out">out</span> · last 6 minutes</div></div>
</section>
`)
	if st == nil {
		return
	}
	if ike := st.IKE; ike != nil {
		p.HTML(`
<section class="card"><h2>IKE SA</h2>
  <dl class="kv">
    <dt>SPIs</dt><dd class="mono">`)
		p.Text(ike.InitiatorSPI + " / " + ike.ResponderSPI)
		if ike.Initiator {
			p.HTML(` (we initiated)`)
		} else {
			p.HTML(` (peer initiated)`)
		}
		p.HTML(`</dd>
    <dt>Proposal</dt><dd class="mono">`)
		p.Text(ike.Proposal)
		if ike.NATT {
			p.HTML(` · NAT-T`)
		}
		p.HTML(`</dd>
    <dt>Established</dt><dd>`)
		p.Text(clock(ike.Established) + " · rekey in " + dur(ike.RekeyIn))
		p.HTML(`</dd>
  </dl>
</section>
`)
	}
	if len(st.Children) > 0 {
		p.HTML(`
<section class="card"><h2>ESP SAs</h2>
<table>
  <thead><tr><th>SPI in / out</th><th>Proposal</th><th>Traffic selectors</th><th class="num">In</th><th class="num">Out</th><th class="num">Drops</th><th>Rekey in</th></tr></thead>
  <tbody>`)
		for _, c := range st.Children {
			p.HTML(`
  <tr><td class="mono">`)
			p.Text(c.InboundSPI + " / " + c.OutboundSPI)
			p.HTML(`</td><td class="mono">`)
			p.Text(c.Proposal)
			p.HTML(`</td>
    <td class="mono">`)
			joinText(p, c.LocalTS, ", ")
			p.HTML(` ⇄ `)
			joinText(p, c.RemoteTS, ", ")
			p.HTML(`</td>
    <td class="num">`)
			p.Text(fmt.Sprintf("%s · %d pk", formatBytes(c.BytesIn), c.PacketsIn))
			p.HTML(`</td><td class="num">`)
			p.Text(fmt.Sprintf("%s · %d pk", formatBytes(c.BytesOut), c.PacketsOut))
			p.HTML(`</td>
    <td class="num">`)
			p.Text(fmt.Sprint(c.Drops))
			p.HTML(`</td><td>`)
			p.Text(dur(c.RekeyIn))
			p.HTML(`</td></tr>
  `)
		}
		p.HTML(`</tbody>
</table>
</section>
`)
	}
	if len(st.Events) > 0 {
		p.HTML(`
<section class="card"><h2>Recent events`)
		if st.EventsTotal > len(st.Events) {
			p.Text(fmt.Sprintf(" (the last %d of %d)", len(st.Events), st.EventsTotal))
		}
		p.HTML(`</h2>
  <ol class="events">`)
		for _, e := range st.Events {
			p.HTML(`<li><time>`)
			p.Text(clock(e.Time))
			p.HTML(`</time> `)
			p.Text(e.Message)
			p.HTML(`</li>`)
		}
		p.HTML(`</ol>
</section>
`)
	}
}
