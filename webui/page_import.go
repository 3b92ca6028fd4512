package webui

import (
	"fmt"

	"github.com/flashgate/flashgate/webui/markup"
)

// importPage takes another gateway's configuration and previews the
// tunnels it makes before they are saved.
func importPage(p *markup.Writer, v *view, d importView) {
	csrf := v.CSRF
	p.HTML(`
<h1>Import tunnels</h1>
<p class="note">Paste or upload the configuration of another IPsec gateway: OpenBSD <span class="mono">isakmpd.conf</span>, strongSwan's <span class="mono">swanctl.conf</span>, or the <span class="mono">ipsec.conf</span> of strongSwan or libreswan (with its <span class="mono">ipsec.secrets</span> lines pasted below it). You see the tunnels it makes and every line it could not carry over before anything is saved; saving puts the tunnels into the pending changes, and nothing runs before you commit them.</p>
`)
	if d.Error != "" {
		p.HTML(`<p class="error" id="import-error">`)
		p.Text(d.Error)
		p.HTML(`</p>`)
	}
	p.HTML("\n")
	if res := d.Result; res != nil {
		p.HTML(`
<section class="card" id="import-preview">
  <h2>`)
		p.Text(fmt.Sprintf("%d tunnel(s) from this %s", len(d.Tunnels), res.Format))
		p.HTML(`</h2>
  `)
		for _, t := range d.Tunnels {
			importedTunnelPreview(p, t)
		}
		if len(d.Tunnels) == 0 {
			p.HTML(`<p class="empty">No tunnel could be made from this file; the lines below say why.</p>`)
		}
		p.HTML(`
  <h2>Lines not imported</h2>
  `)
		if len(res.Unmapped) > 0 {
			p.HTML(`
  <table id="unmapped">
    <thead><tr><th class="num">Line</th><th>Text</th><th>Why</th></tr></thead>
    <tbody>`)
			for _, u := range res.Unmapped {
				p.HTML(`<tr><td class="num">`)
				p.Text(fmt.Sprint(u.Line))
				p.HTML(`</td><td class="mono">`)
				p.Text(u.Text)
				p.HTML(`</td><td class="reason">`)
				p.Text(u.Reason)
				p.HTML(`</td></tr>`)
			}
			p.HTML(`</tbody>
  </table>
  `)
		} else {
			p.HTML(`<p class="empty" id="unmapped-none">Every line was carried over.</p>`)
		}
		p.HTML("\n  ")
		if d.CanApply {
			p.HTML(`
  <form method="post" action="/tunnels/import">
    `)
			csrfInput(p, csrf)
			p.HTML(`
    <input type="hidden" name="format"`)
			p.Attr("value", d.Format)
			p.HTML(`>
    <textarea name="text" hidden>`)
			p.Text(d.Text)
			p.HTML(`</textarea>
    <button class="primary" name="action" value="save" id="import-save">`)
			p.Text(fmt.Sprintf("Save %d tunnel(s) to the pending changes", len(d.Tunnels)))
			p.HTML(`</button>
  </form>
  `)
		}
		p.HTML(`
</section>
`)
	}
	p.HTML(`
<section class="card">
  <form method="post" action="/tunnels/import" enctype="multipart/form-data" id="import-form">
    `)
	csrfInput(p, csrf)
	p.HTML(`
    <label>Format <select name="format"><option value="">recognize it</option>`)
	for _, f := range d.Formats {
		p.HTML(`<option`)
		if fmt.Sprint(f) == d.Format {
			p.HTML(` selected`)
		}
		p.HTML(`>`)
		p.Text(fmt.Sprint(f))
		p.HTML(`</option>`)
	}
	p.HTML(`</select></label>
    <label>Paste the file<textarea name="text" rows="16" class="mono" id="import-text">`)
	p.Text(d.Text)
	p.HTML(`</textarea></label>
    <label>or upload it <input type="file" name="file"></label>
    <button name="action" value="preview" id="import-preview-button">Preview</button>
  </form>
</section>
`)
}

// importedTunnelPreview is one tunnel of the import preview.
func importedTunnelPreview(p *markup.Writer, t importedTunnel) {
	row := func(th markup.Trusted, class markup.Trusted) {
		p.HTML("\n      <tr><th>" + th + "</th><td" + class + ">")
	}
	p.HTML(`
  <div class="imported"`)
	p.Attr("data-tunnel", t.Name)
	p.HTML(`>
    <h3>`)
	p.Text(t.Name)
	if len(t.Weak) > 0 {
		p.HTML(` <span class="tag weak">weak algorithms</span>`)
	}
	p.HTML(`</h3>
    <table class="fields">`)
	row("Peer address", ` class="mono"`)
	p.Text(orText(t.Remote, "any (responds only)"))
	p.HTML(`</td></tr>`)
	row("Local address", ` class="mono"`)
	p.Text(orText(t.Local, "automatic"))
	p.HTML(`</td></tr>`)
	row("IDs", ` class="mono"`)
	p.Text(orText(t.LocalID, "local address") + " ↔ " + orText(t.RemoteID, "peer address"))
	p.HTML(`</td></tr>`)
	row("Pre-shared key", "")
	if t.HasPSK {
		p.HTML(`taken from the file (not shown)`)
	} else {
		p.HTML(`<strong>none in the file: set one before committing</strong>`)
	}
	p.HTML(`</td></tr>`)
	row("IKE version", ` class="ikever"`)
	p.Text(fmt.Sprintf("IKEv%d", t.IKEVersion))
	p.HTML(`</td></tr>`)
	row("Legacy algorithms", ` class="legacy"`)
	if t.Legacy {
		p.HTML(`allowed (needed by these proposals)`)
	} else {
		p.HTML(`no`)
	}
	p.HTML(`</td></tr>`)
	row("IKE proposals", ` class="mono ike"`)
	spaced(p, t.IKE)
	p.HTML(`</td></tr>`)
	row("ESP proposals", ` class="mono esp"`)
	spaced(p, t.ESP)
	p.HTML(`</td></tr>`)
	row("Networks", ` class="mono subnets"`)
	spaced(p, t.LocalSubnets)
	p.HTML(`↔ `)
	spaced(p, t.RemoteSubnets)
	p.HTML(`</td></tr>`)
	row("Lifetimes", ` class="mono"`)
	p.Text("IKE " + t.IKELifetime + ", ESP " + t.ChildLifetime)
	p.HTML(`</td></tr>`)
	row("Start", "")
	p.Text(t.Start)
	p.HTML(`</td></tr>
    </table>
    `)
	if len(t.Weak) > 0 {
		p.HTML(`<ul class="weak">`)
		for _, w := range t.Weak {
			p.HTML(`<li><span class="mono">`)
			p.Text(w.Proposal)
			p.HTML(`</span> is weak: `)
			weaknesses(p, w.Weaknesses)
			p.HTML(`</li>`)
		}
		p.HTML(`</ul>`)
	}
	p.HTML("\n    ")
	if len(t.Problems) > 0 {
		p.HTML(`<p>A commit would refuse:</p><ul class="problems">`)
		for _, pr := range t.Problems {
			p.HTML(`<li>`)
			p.Text(pr)
			p.HTML(`</li>`)
		}
		p.HTML(`</ul>`)
	}
	p.HTML(`
  </div>
  `)
}

// spaced writes each item followed by a space.
func spaced(p *markup.Writer, items []string) {
	for _, it := range items {
		p.Text(it + " ")
	}
}
