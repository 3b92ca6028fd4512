package webui

import (
	"fmt"
	"net/url"

	"github.com/flashgate/flashgate/webui/markup"
)

// logsPage shows one service's log ring, refreshed every 3 s.
func logsPage(p *markup.Writer, v *view, d LogsView) {
	p.HTML(`
<h1>Logs</h1>
<div`)
	p.Attr("data-live", "/live/logs/"+url.PathEscape(d.Current))
	p.HTML(` data-every="3" data-scroll>`)
	logsLive(p, d)
	p.HTML(`</div>
`)
}

// logsLive is the logs page's live region (also GET /live/logs/{service}):
// the tabs and the lines.
func logsLive(p *markup.Writer, d LogsView) {
	p.HTML("\n")
	if d.Error != "" {
		p.HTML(`<p class="flash error">`)
		p.Text("Logs are not available: " + d.Error)
		p.HTML(`</p>`)
	}
	p.HTML("\n")
	if len(d.Services) > 0 {
		p.HTML(`<nav class="tabs">`)
		for _, svc := range d.Services {
			p.HTML(`<a`)
			p.Attr("href", "/logs/"+url.PathEscape(svc.Name))
			current(p, svc.Name == d.Current)
			p.HTML(`>`)
			p.Text(svc.Name)
			if svc.State == "running" {
				p.HTML(` <span class="state ok">`)
			} else {
				p.HTML(` <span class="state bad">`)
			}
			p.Text(string(svc.State))
			p.HTML(`</span></a>`)
		}
		p.HTML(`
  <a href="/logs/kernel"`)
		current(p, d.Current == "kernel")
		p.HTML(`>kernel</a>
  <a href="/logs/supervisor"`)
		current(p, d.Current == "supervisor")
		p.HTML(`>supervisor</a></nav>
`)
	}
	p.HTML(`
<pre class="log">`)
	for _, l := range d.Lines {
		p.HTML(`<span`)
		p.Attr("class", l.Stream)
		p.HTML(`><time>`)
		p.Text(l.Time.Format("15:04:05"))
		p.HTML(`</time> `)
		p.Text(l.Text)
		p.HTML("</span>\n")
	}
	if len(d.Lines) == 0 {
		p.HTML(`(no lines yet)`)
	}
	p.HTML(`</pre>
`)
	if d.Dropped > 0 {
		p.HTML(`<p class="note">`)
		p.Text(fmt.Sprintf("%d older lines were pushed out of the ring.", d.Dropped))
		p.HTML(`</p>`)
	}
	p.HTML("\n")
}

// systemPage holds the system settings, the password, backup and restore
// forms, the firmware slots and upgrade, and this box's facts.
func systemPage(p *markup.Writer, v *view, d systemData) {
	csrf := v.CSRF
	p.HTML(`
<h1>System</h1>
<div class="cols">
<form method="post" action="/system/settings" class="card form" novalidate>
  <h2>Settings</h2>
  `)
	csrfInput(p, csrf)
	p.HTML("\n  ")
	formError(p, d.Settings.Errors[""])
	p.HTML("\n  ")
	formFields(p, d.Settings)
	p.HTML(`
  <p class="note">`)
	p.Text("Time here: " + clock(d.Now) + " (" + d.Timezone + " configured)")
	p.HTML(`</p>
  <div class="buttons"><button class="primary">Save to pending changes</button></div>
</form>

<div>
<form method="post" action="/system/password" class="card form">
  <h2>Your password</h2>
  `)
	csrfInput(p, csrf)
	p.HTML("\n  ")
	formError(p, d.PasswordErr[""])
	p.HTML(`
  <input type="text" name="username"`)
	p.Attr("value", v.User)
	p.HTML(` autocomplete="username" hidden>
  <div class="field`)
	passwordField(p, d.PasswordErr["current"], `"><label for="pw-current">Current password</label>
    <input id="pw-current" type="password" name="current" autocomplete="current-password">`)
	p.HTML(`
  <div class="field`)
	passwordField(p, d.PasswordErr["new"], `"><label for="pw-new">New password</label>
    <input id="pw-new" type="password" name="new" autocomplete="new-password">`)
	p.HTML(`
  <div class="field`)
	passwordField(p, d.PasswordErr["repeat"], `"><label for="pw-repeat">Repeat it</label>
    <input id="pw-repeat" type="password" name="repeat" autocomplete="new-password">`)
	p.HTML(`
  <div class="buttons"><button class="primary">Change password</button></div>
</form>

<form method="post" action="/system/backup" class="card form">
  <h2>Backup</h2>
  `)
	csrfInput(p, csrf)
	p.HTML(`
  <div class="field"><label><input type="radio" name="secrets" value="encrypted" checked> With secrets, encrypted with a passphrase</label>
    <label><input type="radio" name="secrets" value="omitted"> Without secrets (keys and passwords stay on the box)</label></div>
  <div class="field"><label for="bk-pass">Passphrase</label><input id="bk-pass" type="password" name="passphrase" autocomplete="new-password" minlength="10">
    <p class="help">At least 10 characters; needed to restore the keys.</p></div>
  <div class="field"><label for="bk-cur">Your current password</label><input id="bk-cur" type="password" name="password" autocomplete="current-password">
    <p class="help">Needed for a backup with secrets.</p></div>
  <div class="buttons"><button>Download backup</button></div>
</form>

<form method="post" action="/system/restore" enctype="multipart/form-data" class="card form">
  <h2>Restore</h2>
  `)
	csrfInput(p, csrf)
	p.HTML(`
  <div class="field"><label for="rs-file">Backup file</label><input id="rs-file" type="file" name="backup" accept=".json,application/json"></div>
  <div class="field"><label for="rs-pass">Passphrase (if its secrets are encrypted)</label><input id="rs-pass" type="password" name="passphrase" autocomplete="off"></div>
  <div class="field"><label for="rs-cur">Your current password</label><input id="rs-cur" type="password" name="password" autocomplete="current-password" required></div>
  <p class="help">The backup becomes the pending configuration; nothing changes until you commit it.</p>
  <div class="buttons"><button>Restore</button></div>
</form>
</div>
</div>

<section class="card" id="firmware">
  <h2>Firmware</h2>
  `)
	up := d.Upgrade
	if up.Message != "" {
		p.HTML(`<p`)
		p.Attr("class", up.MessageClass)
		p.HTML(`>`)
		p.Text(up.Message)
		p.HTML(`</p>`)
	}
	p.HTML("\n  ")
	if up.AcceptsUnsigned {
		p.HTML(`<p class="flash error">This box accepts unsigned firmware (a developer's card).</p>`)
	}
	p.HTML("\n  ")
	formError(p, up.Error)
	p.HTML(`
  <table class="slots">
    <tr><th>Slot</th><th>Firmware</th><th>Board</th><th>Signer</th><th></th></tr>
    `)
	for _, s := range up.Slots {
		p.HTML(`<tr><td>`)
		p.Text(s.Name)
		p.HTML(`</td>
      <td>`)
		if s.Manifest != nil {
			p.Text(s.Manifest.Version)
		} else {
			p.HTML(`<span class="s">`)
			p.Text(s.Problem)
			p.HTML(`</span>`)
		}
		p.HTML(`</td>
      <td>`)
		if s.Manifest != nil {
			p.Text(s.Manifest.Board)
		}
		p.HTML(`</td><td class="mono small">`)
		p.Text(s.Signer)
		p.HTML(`</td>
      <td>`)
		if s.Name == up.Running.Slot {
			p.HTML(`running`)
		}
		if s.Name == up.DefaultSlot {
			p.HTML(` default`)
		}
		p.HTML(`</td></tr>`)
	}
	p.HTML(`
  </table>
  <div class="form" data-upgrade>
    <div class="field"><label for="up-file">Upgrade file (.fgup)</label><input id="up-file" type="file" accept=".fgup"></div>
    <p class="help" data-upgrade-plan>Choose a file: the box shows its version, board and signer before anything is written.</p>
    <div class="field"><label><input type="checkbox" data-upgrade-downgrade> Install an older build (downgrade)</label></div>
    <div class="field"><label for="up-cur">Your current password</label><input id="up-cur" type="password" autocomplete="current-password" data-upgrade-password></div>
    <progress max="100" value="0" hidden data-upgrade-progress></progress>
    <div class="buttons"><button class="primary" disabled data-upgrade-go>Install and test-boot</button></div>
    <p class="help">The new firmware goes into the other slot and boots once; it becomes the default only if its health checks pass, else the box comes back to this firmware with this configuration. Needs JavaScript (the file streams to the card, never into the box's memory).</p>
  </div>
  
</section>

<section class="card">
  <h2>This box</h2>
  <dl class="kv">
    <dt>Board</dt><dd>`)
	p.Text(d.Board.Name + " " + d.Board.Description)
	p.HTML(`</dd>
    <dt>Firmware</dt><dd>`)
	p.Text(orText(d.Board.Version, "dev"))
	p.HTML(`</dd>
    <dt>Kernel</dt><dd>`)
	if d.Board.Kernel != "" {
		p.Text("Linux " + d.Board.Kernel)
	} else {
		p.HTML(`unknown`)
	}
	p.HTML(`</dd>
    <dt>Certificate</dt><dd class="mono small">`)
	p.Text("SHA-256 " + d.Fingerprint)
	p.HTML(`</dd>
    <dt>Configuration</dt><dd>`)
	p.Text(fmt.Sprintf("revision %d on %s", d.Storage.Revision, d.Storage.Storage))
	if d.Storage.Note != "" {
		p.Text(" · " + d.Storage.Note)
	}
	p.HTML(`</dd>
  </dl>
  <div class="buttons">
    <form method="post" action="/system/reboot" data-confirm="Reboot now? Tunnels go down for a minute or two.">
      `)
	csrfInput(p, csrf)
	p.HTML(`<button>Reboot</button></form>
    <form method="post" action="/system/factory-reset" class="inline" data-confirm="Erase the whole configuration and its history? The admin password goes too: you will need the serial console.">
      `)
	csrfInput(p, csrf)
	p.HTML(`
      <input name="confirm" placeholder="type factory-reset" aria-label="type factory-reset to confirm" autocomplete="off" spellcheck="false">
      <input name="password" type="password" placeholder="your current password" aria-label="your current password" autocomplete="current-password" required>
      <button class="danger">Factory reset</button></form>
  </div>
</section>
`)
}

// passwordField ends the class of a password form's field (invalid when
// it has an error), writes its label and input, then the error and the
// field's end.
func passwordField(p *markup.Writer, errMsg string, labelAndInput markup.Trusted) {
	if errMsg != "" {
		p.HTML(` invalid`)
	}
	p.HTML(labelAndInput)
	if errMsg != "" {
		p.HTML(`<p class="err">`)
		p.Text(errMsg)
		p.HTML(`</p>`)
	}
	p.HTML(`</div>`)
}
