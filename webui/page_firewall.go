package webui

import (
	"fmt"
	"net/url"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/webui/markup"
)

// firewallPage lists the rules, port forwards, masquerades and NAT
// exemptions of the candidate.
func firewallPage(p *markup.Writer, v *view, fw config.Firewall) {
	csrf := v.CSRF
	p.HTML(`
<h1>Firewall</h1>
<p class="note">These rules come on top of the built-in policy: nothing from the WAN reaches the box except IKE and ESP from configured peers, the web UI answers only on the LAN, and the LAN may go out. Rules are checked from the top; the first that matches decides.</p>

<section class="card">
  <div class="titlebar"><h2>Rules</h2><a class="button" href="/firewall/rules/new">New rule</a></div>
  `)
	if len(fw.Rules) > 0 {
		p.HTML(`
  <table>
    <thead><tr><th></th><th>Name</th><th>Traffic</th><th>From</th><th>To</th><th>Protocol</th><th>Action</th><th></th></tr></thead>
    <tbody>`)
		for _, r := range fw.Rules {
			p.HTML("\n    <tr")
			disabledClass(p, r.Enabled)
			p.HTML(`>
      <td class="order">
        <form method="post"`)
			p.Attr("action", "/firewall/rules/"+url.PathEscape(r.Name)+"/move")
			p.HTML(`>`)
			csrfInput(p, csrf)
			p.HTML(`<input type="hidden" name="direction" value="up"><button class="icon" title="move up"`)
			p.Attr("aria-label", "move "+r.Name+" up")
			p.HTML(`>▲</button></form>
        <form method="post"`)
			p.Attr("action", "/firewall/rules/"+url.PathEscape(r.Name)+"/move")
			p.HTML(`>`)
			csrfInput(p, csrf)
			p.HTML(`<input type="hidden" name="direction" value="down"><button class="icon" title="move down"`)
			p.Attr("aria-label", "move "+r.Name+" down")
			p.HTML(`>▼</button></form>
      </td>
      <td>`)
			editLink(p, "/firewall/rules/"+url.PathEscape(r.Name)+"/edit", r.Name)
			if !r.Enabled {
				p.HTML(` <span class="tag">disabled</span>`)
			}
			p.HTML(`</td>
      <td>`)
			p.Text(r.Chain)
			p.HTML(`</td>
      <td class="mono">`)
			p.Text(orText(r.In, "any"))
			for _, s := range r.Sources {
				p.Text(" " + s.String())
			}
			for _, s := range r.SourcePorts {
				p.Text(" :" + s.String())
			}
			p.HTML(`</td>
      <td class="mono">`)
			p.Text(orText(r.Out, "any"))
			for _, d := range r.Destinations {
				p.Text(" " + d.String())
			}
			for _, d := range r.DestinationPorts {
				p.Text(" :" + d.String())
			}
			p.HTML(`</td>
      <td>`)
			p.Text(r.Protocol)
			p.HTML(`</td>
      <td>`)
			if r.Action == "accept" {
				p.HTML(`<span class="state ok">`)
			} else {
				p.HTML(`<span class="state bad">`)
			}
			p.Text(r.Action)
			p.HTML(`</span>`)
			if r.Log {
				p.HTML(` <span class="tag">log</span>`)
			}
			p.HTML(`</td>
      <td>`)
			deleteButton(p, "/firewall/rules", r.Name, csrf)
			p.HTML(`</td>
    </tr>`)
		}
		p.HTML(`</tbody>
  </table>
  `)
	} else {
		p.HTML(`<p class="empty">No rules of your own: the built-in policy applies.</p>`)
	}
	p.HTML(`
</section>

<section class="card">
  <div class="titlebar"><h2>Port forwards</h2><a class="button" href="/firewall/port-forwards/new">New port forward</a></div>
  `)
	if len(fw.PortForwards) > 0 {
		p.HTML(`
  <table>
    <thead><tr><th>Name</th><th>On</th><th>Ports</th><th>To</th><th>Only from</th><th></th></tr></thead>
    <tbody>`)
		for _, f := range fw.PortForwards {
			p.HTML("\n    <tr")
			disabledClass(p, f.Enabled)
			p.HTML(`>
      <td>`)
			editLink(p, "/firewall/port-forwards/"+f.Name+"/edit", f.Name)
			p.HTML(`</td>
      <td>`)
			p.Text(f.In)
			p.HTML(`</td><td class="mono">`)
			p.Text(f.Protocol + " " + f.ExternalPorts.String())
			p.HTML(`</td>
      <td class="mono">`)
			p.Text(f.Destination.String())
			if f.DestinationPort != 0 {
				p.Text(fmt.Sprintf(":%d", f.DestinationPort))
			}
			p.HTML(`</td>
      <td class="mono">`)
			prefixesOr(p, f.Sources, "anywhere")
			p.HTML(`</td>
      <td>`)
			deleteButton(p, "/firewall/port-forwards", f.Name, csrf)
			p.HTML(`</td>
    </tr>`)
		}
		p.HTML(`</tbody>
  </table>
  `)
	} else {
		p.HTML(`<p class="empty">No port forwards.</p>`)
	}
	p.HTML(`
</section>

<section class="card">
  <div class="titlebar"><h2>Masquerade (source NAT)</h2><a class="button" href="/firewall/masquerade/new">New masquerade</a></div>
  `)
	if len(fw.NAT.Masquerade) > 0 {
		p.HTML(`
  <table>
    <thead><tr><th>Name</th><th>Out of</th><th>From</th><th></th></tr></thead>
    <tbody>`)
		for _, m := range fw.NAT.Masquerade {
			p.HTML(`
    <tr><td>`)
			editLink(p, "/firewall/masquerade/"+url.PathEscape(m.Name)+"/edit", m.Name)
			p.HTML(`</td><td>`)
			p.Text(m.Interface)
			p.HTML(`</td>
      <td class="mono">`)
			prefixesOr(p, m.Sources, "any")
			p.HTML(`</td>
      <td>`)
			deleteButton(p, "/firewall/masquerade", m.Name, csrf)
			p.HTML(`</td></tr>`)
		}
		p.HTML(`</tbody>
  </table>
  `)
	} else {
		p.HTML(`<p class="empty">No masquerading: LAN hosts cannot reach the internet through this box.</p>`)
	}
	p.HTML(`
</section>

<section class="card">
  <div class="titlebar"><h2>NAT exemptions</h2><a class="button" href="/firewall/nat-exemptions/new">New exemption</a></div>
  `)
	if len(fw.NAT.Exemptions) > 0 {
		p.HTML(`
  <table>
    <thead><tr><th>Name</th><th>From</th><th>To</th><th></th></tr></thead>
    <tbody>`)
		for _, e := range fw.NAT.Exemptions {
			p.HTML(`
    <tr><td>`)
			editLink(p, "/firewall/nat-exemptions/"+e.Name+"/edit", e.Name)
			p.HTML(`</td>
      <td class="mono">`)
			prefixesOr(p, e.Sources, "any")
			p.HTML(`</td>
      <td class="mono">`)
			for _, d := range e.Destinations {
				p.Text(d.String() + " ")
			}
			p.HTML(`</td>
      <td>`)
			deleteButton(p, "/firewall/nat-exemptions", e.Name, csrf)
			p.HTML(`</td></tr>`)
		}
		p.HTML(`</tbody>
  </table>
  `)
	} else {
		p.HTML(`<p class="empty">None besides the tunnels' networks, which are never masqueraded.</p>`)
	}
	p.HTML(`
</section>
`)
}

// disabledClass marks the row of a disabled element.
func disabledClass(p *markup.Writer, enabled bool) {
	if !enabled {
		p.HTML(` class="disabled"`)
	}
}

// editLink is a list row's name, linking to its edit page.
func editLink(p *markup.Writer, href, name string) {
	p.HTML(`<a`)
	p.Attr("href", href)
	p.HTML(`><strong>`)
	p.Text(name)
	p.HTML(`</strong></a>`)
}

// prefixesOr writes each prefix followed by a space, or none when there
// are none.
func prefixesOr(p *markup.Writer, ps []config.Prefix, none string) {
	for _, x := range ps {
		p.Text(x.String() + " ")
	}
	if len(ps) == 0 {
		p.Text(none)
	}
}

// routesPage lists the static routes.
func routesPage(p *markup.Writer, v *view, d routesView) {
	p.HTML(`
<h1>Routes</h1>
<p class="note">Static routes send traffic for other networks to a router you name. The networks of the interfaces and of the tunnels need none: the box reaches those by itself. Traffic routed in from the WAN is still dropped by the firewall until a forward rule lets it through, and traffic routed out of the WAN is masqueraded unless a NAT exemption keeps its address (both on the <a href="/firewall">Firewall</a> page).</p>

<section class="card">
  <div class="titlebar"><h2>Static routes</h2><a class="button" href="/routes/new">New route</a></div>
  `)
	if len(d.Routes) == 0 {
		p.HTML(`<p class="empty">No static routes: the box reaches its interfaces' networks, the tunnels' networks, and the default route of a DHCP WAN.</p>
</section>
`)
		return
	}
	p.HTML(`
  <table>
    <thead><tr><th>Name</th><th>Destination</th><th>Gateway</th><th>Interface</th><th class="num">Metric</th><th></th></tr></thead>
    <tbody>`)
	for _, r := range d.Routes {
		p.HTML("\n    <tr")
		disabledClass(p, r.Enabled)
		p.HTML(`>
      <td>`)
		editLink(p, "/routes/"+url.PathEscape(r.Name)+"/edit", r.Name)
		if !r.Enabled {
			p.HTML(` <span class="tag">disabled</span>`)
		}
		p.HTML(`</td>
      <td class="mono">`)
		p.Text(r.Destination.String())
		p.HTML(`</td>
      <td class="mono">`)
		if r.Gateway.IsSet() {
			p.Text(r.Gateway.String())
		} else {
			p.HTML(`-`)
		}
		p.HTML(`</td>
      <td>`)
		if r.Interface != "" {
			p.Text(r.Interface)
			if t := d.TunnelOf[r.Interface]; t != "" {
				p.HTML(` <a class="tag"`)
				p.Attr("href", "/tunnels/"+url.PathEscape(t))
				p.Attr("title", "route tunnel "+t+": the route is there while the tunnel is up")
				p.HTML(`>`)
				p.Text("tunnel " + t)
				p.HTML(`</a>`)
			}
		} else {
			p.HTML(`by the gateway`)
		}
		p.HTML(`</td>
      <td class="num">`)
		p.Text(fmt.Sprint(r.Metric))
		p.HTML(`</td>
      <td>`)
		deleteButton(p, "/routes", r.Name, v.CSRF)
		p.HTML(`</td>
    </tr>`)
	}
	p.HTML(`</tbody>
  </table>
  
</section>
`)
}

// interfacesView is the Interfaces page: the configured ports with their
// links, and the box's other links.
type interfacesView struct {
	Rows  []InterfaceRow
	Other []Link
}

// interfacesPage lists the configured ports and the other links.
func interfacesPage(p *markup.Writer, v *view, d interfacesView) {
	p.HTML(`
<div class="titlebar"><h1>Interfaces</h1><a class="button" href="/interfaces/new">Add port</a></div>
<section class="card">
<table>
  <thead><tr><th>Port</th><th>Role</th><th>Addressing</th><th>Configured</th><th>Link</th><th>Live addresses</th><th class="num">Received</th><th class="num">Sent</th><th></th></tr></thead>
  <tbody>`)
	for _, row := range d.Rows {
		c := row.Config
		p.HTML("\n  <tr")
		disabledClass(p, c.Enabled)
		p.HTML(`>
    <td><strong>`)
		p.Text(c.Name)
		p.HTML(`</strong>`)
		if c.Description != "" {
			p.HTML(`<br><span class="note">`)
			p.Text(c.Description)
			p.HTML(`</span>`)
		}
		p.HTML(`</td>
    <td><span class="tag">`)
		p.Text(c.Role)
		p.HTML(`</span></td>
    <td>`)
		p.Text(c.Addressing)
		if c.MTU != 0 {
			p.Text(fmt.Sprintf(" · MTU %d", c.MTU))
		}
		if row.DHCPRange != "" {
			p.HTML(`<br><span class="note">`)
			p.Text("DHCP server " + row.DHCPRange)
			p.HTML(`</span>`)
		}
		p.HTML(`</td>
    <td class="mono">`)
		for _, a := range c.Addresses {
			p.Text(a.String() + " ")
		}
		p.HTML(`</td>
    `)
		if l := row.Link; l != nil {
			p.HTML(`
    <td>`)
			linkState(p, l.State)
			p.HTML(`</td>
    <td class="mono">`)
			joinText(p, l.Addresses, ", ")
			p.HTML(`</td><td class="num">`)
			p.Text(formatBytes(l.RxBytes))
			p.HTML(`</td><td class="num">`)
			p.Text(formatBytes(l.TxBytes))
			p.HTML(`</td>
    `)
		} else {
			p.HTML(`
    <td colspan="4"><span class="state unknown">no such device</span></td>
    `)
		}
		p.HTML(`
    <td><a class="button"`)
		p.Attr("href", "/interfaces/"+url.PathEscape(c.Name)+"/edit")
		p.HTML(`>Edit</a> `)
		deleteButton(p, "/interfaces", c.Name, v.CSRF)
		p.HTML(`</td>
  </tr>`)
	}
	p.HTML(`</tbody>
</table>
</section>
`)
	if len(d.Other) > 0 {
		p.HTML(`
<section class="card"><h2>Other links</h2>
<table><thead><tr><th>Name</th><th>State</th><th>Addresses</th><th class="num">Received</th><th class="num">Sent</th></tr></thead>
<tbody>`)
		for _, l := range d.Other {
			p.HTML(`<tr><td>`)
			p.Text(l.Name)
			p.HTML(`</td><td>`)
			p.Text(l.State)
			p.HTML(`</td><td class="mono">`)
			joinText(p, l.Addresses, ", ")
			p.HTML(`</td><td class="num">`)
			p.Text(formatBytes(l.RxBytes))
			p.HTML(`</td><td class="num">`)
			p.Text(formatBytes(l.TxBytes))
			p.HTML(`</td></tr>`)
		}
		p.HTML(`</tbody></table>
</section>
`)
	}
}
