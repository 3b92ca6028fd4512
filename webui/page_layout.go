package webui

import (
	"fmt"
	"net/url"
	"slices"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/webui/markup"
)

// The layout around every page but the login page, the login page, and the
// pieces the pages share (what _partials.html was).

// layout draws the page frame: head, navigation, the commit-confirmed bar,
// the flash message, then content.
func layout(p *markup.Writer, v *view, content func(p *markup.Writer, v *view)) {
	p.HTML(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token"`)
	p.Attr("content", v.CSRF)
	p.HTML(`>
<title>`)
	p.Text(v.Title + " · " + hostnameOr(v.Hostname))
	p.HTML(`</title>
<link rel="stylesheet" href="/static/style.css">
<link rel="icon" href="/static/icon.svg" type="image/svg+xml">
<script src="/static/app.js" defer></script>
</head>
<body>
<header class="top">
  <a class="brand" href="/"><img src="/static/icon.svg" alt="" width="22" height="22"> `)
	p.Text(hostnameOr(v.Hostname))
	p.HTML(`</a>
  <nav>`)
	for _, n := range navLinks {
		p.HTML("\n    <a")
		p.Attr("href", n.href)
		current(p, n.current(v.Nav))
		p.HTML(">")
		p.Text(n.label)
		if n.href == "/changes" && v.Changed {
			p.HTML(` <span class="badge">pending</span>`)
		}
		p.HTML("</a>")
	}
	p.HTML(`
  </nav>
  <form method="post" action="/logout" class="who">
    `)
	csrfInput(p, v.CSRF)
	p.HTML(`
    <span>`)
	p.Text(v.User)
	p.HTML(`</span> <button class="link">Log out</button>
  </form>
</header>
`)
	if pe := v.Pending; pe != nil {
		p.HTML(`
<div class="confirmbar">
  Revision `)
		p.Text(fmt.Sprint(pe.Revision))
		p.HTML(` must be confirmed within <strong`)
		p.Attr("data-countdown", fmt.Sprint(pe.Deadline.Unix()))
		p.HTML(`>…</strong>, or revision `)
		p.Text(fmt.Sprint(pe.RollbackTo))
		p.HTML(` comes back by itself.
  <form method="post" action="/changes/confirm">`)
		csrfInput(p, v.CSRF)
		p.HTML(`<button class="primary">Confirm</button></form>
</div>
`)
	}
	p.HTML(`
<main>
`)
	if v.Flash.Text != "" {
		p.HTML(`<p class="flash`)
		if v.Flash.Error {
			p.HTML(` error`)
		}
		p.HTML(`" role="status">`)
		p.Text(v.Flash.Text)
		p.HTML(`</p>`)
	}
	p.HTML("\n")
	content(p, v)
	p.HTML(`
</main>
</body>
</html>
`)
}

func hostnameOr(h string) string {
	if h == "" {
		return "flashgate"
	}
	return h
}

// current marks the navigation link of the page shown.
// navLink is one link of the navigation bar (Changes also shows whether
// the candidate differs from running).
type navLink struct {
	href, label string
	navs        []string // the views (view.Nav) it is the current page of
}

func (n navLink) current(nav string) bool { return slices.Contains(n.navs, nav) }

var navLinks = []navLink{
	{"/", "Dashboard", []string{"dashboard"}},
	{"/tunnels", "Tunnels", []string{"tunnels", "tunnel"}},
	{"/firewall", "Firewall", []string{"firewall"}},
	{"/routes", "Routes", []string{"routes"}},
	{"/interfaces", "Interfaces", []string{"interfaces"}},
	{"/certificates", "Certificates", []string{"certificates"}},
	{"/system", "System", []string{"system"}},
	{"/logs", "Logs", []string{"logs"}},
	{"/changes", "Changes", []string{"changes"}},
}

func current(p *markup.Writer, is bool) {
	if is {
		p.HTML(` aria-current="page"`)
	}
}

// loginPage is the login form, alone (no layout: no session yet).
func loginPage(p *markup.Writer, v loginView) {
	p.HTML(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Log in · flashgate</title>
<link rel="stylesheet" href="/static/style.css">
<link rel="icon" href="/static/icon.svg" type="image/svg+xml">
</head>
<body class="login">
<main class="card login-card">
  <h1><img src="/static/icon.svg" alt="" width="28" height="28"> flashgate</h1>
  `)
	if v.NoAdmin {
		p.HTML(`
  <p class="flash error">No admin password is set.</p>
  <p>For safety there is no default password, and none can be set from the network.
     Connect to the serial console: it asks for the admin password on first boot.
     Then come back here and log in as <code>admin</code>.</p>
  `)
	} else {
		p.HTML("\n  ")
		if v.Error != "" {
			p.HTML(`<p class="flash error" role="alert">`)
			p.Text(v.Error)
			p.HTML(`</p>`)
		}
		p.HTML(`
  <form method="post" action="/login">
    `)
		csrfInput(p, v.Token)
		p.HTML(`
    <input type="hidden" name="next"`)
		p.Attr("value", v.Next)
		p.HTML(`>
    <div class="field"><label for="user">User name</label>
      <input id="user" name="user"`)
		p.Attr("value", v.User)
		p.HTML(` autocomplete="username" autocapitalize="none" required autofocus></div>
    <div class="field"><label for="password">Password</label>
      <input id="password" name="password" type="password" autocomplete="current-password" required></div>
    <button class="primary wide">Log in</button>
  </form>
  `)
	}
	p.HTML(`
</main>
</body>
</html>
`)
}

// csrfInput is the hidden CSRF token every POST form carries.
func csrfInput(p *markup.Writer, csrf string) {
	p.HTML(`<input type="hidden" name="csrf"`)
	p.Attr("value", csrf)
	p.HTML(`>`)
}

// tunnelState is a tunnel's state, its word always written out beside the
// color.
func tunnelState(p *markup.Writer, s ipsec.TunnelState) {
	p.HTML(`<span`)
	p.Attr("class", "state "+stateClass(s))
	p.HTML(`>`)
	p.Text(string(s))
	p.HTML(`</span>`)
}

// linkState is a link's state, colored.
func linkState(p *markup.Writer, state string) {
	switch state {
	case "up":
		p.HTML(`<span class="state ok">`)
	case "down":
		p.HTML(`<span class="state bad">`)
	default:
		p.HTML(`<span class="state off">`)
	}
	p.Text(state)
	p.HTML(`</span>`)
}

// deleteButton is a list row's delete button: a POST form, confirmed in
// the browser (app.js).
func deleteButton(p *markup.Writer, base, name, csrf string) {
	p.HTML(`<form method="post"`)
	p.Attr("action", base+"/"+url.PathEscape(name)+"/delete")
	p.Attr("data-confirm", "Delete "+name+"? (It stays until you commit.)")
	p.HTML(`>`)
	csrfInput(p, csrf)
	p.HTML(`<button class="link danger">Delete</button></form>`)
}

// formField is one field of a form: its label, input, error and help.
func formField(p *markup.Writer, fv fieldView) {
	f := fv.F
	id := fv.ID()
	p.HTML("\n" + `<div class="field`)
	if fv.Error() != "" {
		p.HTML(` invalid`)
	}
	if f.IsCheck() {
		p.HTML(` check`)
	}
	p.HTML(`">` + "\n")
	switch {
	case f.IsCheck():
		p.HTML(`  <label><input type="checkbox"`)
		p.Attr("name", f.Key)
		p.HTML(` value="true"`)
		p.Attr("id", id)
		if fv.Checked() {
			p.HTML(` checked`)
		}
		p.HTML(`> `)
		p.Text(f.Label)
		p.HTML(`</label>` + "\n")
	case f.IsProposals():
		p.HTML(`  <span class="label">`)
		p.Text(f.Label)
		p.HTML(`</span>
  <div class="choices">
  `)
		for _, c := range fv.Choices() {
			p.HTML(`
    <label class="choice"><input type="checkbox"`)
			p.Attr("name", f.Key)
			p.Attr("value", c.Proposal)
			if fv.Has(c.Proposal) {
				p.HTML(` checked`)
			}
			p.HTML(`>
      <code>`)
			p.Text(c.Proposal)
			p.HTML(`</code>`)
			if c.Accelerated {
				p.HTML(` <span class="accel"`)
				p.Attr("title", "done in hardware by "+c.Engine)
				p.HTML(`>⚡ `)
				p.Text(c.Engine)
				p.HTML(`</span>`)
			}
			p.HTML(`</label>
  `)
		}
		p.HTML(`
  </div>
  <label class="sub"`)
		p.Attr("for", id)
		p.HTML(`>Other proposals (strongSwan syntax, one per line)</label>
  <textarea`)
		p.Attr("name", f.Key+"_custom")
		p.Attr("id", id)
		p.HTML(` rows="2" spellcheck="false">`)
		p.Text(fv.Custom())
		p.HTML(`</textarea>` + "\n")
	default:
		p.HTML(`  <label`)
		p.Attr("for", id)
		p.HTML(`>`)
		p.Text(f.Label)
		p.HTML(`</label>` + "\n  ")
		switch {
		case f.IsSelect():
			p.HTML(`<select`)
			p.Attr("name", f.Key)
			p.Attr("id", id)
			p.HTML(`>` + "\n    ")
			value := fv.Value()
			for _, o := range f.Options {
				p.HTML(`<option`)
				p.Attr("value", o)
				if o == value {
					p.HTML(` selected`)
				}
				p.HTML(`>`)
				if o != "" {
					p.Text(o)
				} else {
					p.HTML(`—`)
				}
				p.HTML(`</option>`)
			}
			p.HTML("\n  </select>\n")
		case f.IsList():
			p.HTML(`<textarea`)
			p.Attr("name", f.Key)
			p.Attr("id", id)
			p.HTML(` rows="3"`)
			p.Attr("placeholder", f.Placeholder)
			p.HTML(` spellcheck="false">`)
			p.Text(fv.Value())
			p.HTML(`</textarea>` + "\n")
		case f.IsSecret():
			p.HTML(`<div class="row">
    <input type="text"`)
			p.Attr("name", f.Key)
			p.Attr("id", id)
			p.Attr("value", fv.Value())
			p.HTML(` autocomplete="off" spellcheck="false" class="mono"
      placeholder="`)
			if fv.Form.New {
				p.HTML(`required`)
			} else {
				p.HTML(`unchanged — type a new key to replace it`)
			}
			p.HTML(`">
    <button type="button"`)
			p.Attr("data-psk", id)
			p.HTML(`>Generate</button>
  </div>
`)
		default:
			if f.IsNumber() {
				p.HTML(`<input type="number"`)
			} else {
				p.HTML(`<input type="text"`)
			}
			p.Attr("name", f.Key)
			p.Attr("id", id)
			p.Attr("value", fv.Value())
			p.Attr("placeholder", f.Placeholder)
			p.HTML(` spellcheck="false">` + "\n")
		}
	}
	if e := fv.Error(); e != "" {
		p.HTML(`<p class="err"`)
		p.Attr("id", id+"-err")
		p.HTML(`>`)
		p.Text(e)
		p.HTML(`</p>`)
	}
	p.HTML("\n")
	if f.Help != "" {
		p.HTML(`<p class="help">`)
		p.Text(f.Help)
		p.HTML(`</p>`)
	}
	p.HTML("\n</div>\n")
}

// formFields are a form's fields in their fieldsets, one per section.
func formFields(p *markup.Writer, form *formState) {
	for i, f := range form.Kind.Fields {
		p.HTML("\n  ")
		switch {
		case f.Section != "":
			if i > 0 {
				p.HTML(`</fieldset>`)
			}
			p.HTML(`<fieldset><legend>`)
			p.Text(f.Section)
			p.HTML(`</legend>`)
		case i == 0:
			p.HTML(`<fieldset>`)
		}
		p.HTML("\n  ")
		formField(p, fieldOf(f, form))
	}
	p.HTML("\n</fieldset>\n")
}

// joinText writes items as text, sep between them.
func joinText[T any](p *markup.Writer, items []T, sep string) {
	for i, it := range items {
		if i > 0 {
			p.Text(sep)
		}
		p.Text(fmt.Sprint(it))
	}
}
