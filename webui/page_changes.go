package webui

import (
	"fmt"
	"net/url"

	"github.com/flashgate/flashgate/webui/markup"
)

// changesPage shows the pending changes with the commit and discard forms,
// and the history of revisions with rollback buttons.
func changesPage(p *markup.Writer, v *view, d Changes) {
	p.HTML(`
<h1>Pending changes</h1>
<section class="card">
  `)
	if len(d.Diff) > 0 {
		p.HTML(`
  <pre class="diff">`)
		for _, l := range d.Diff {
			if l.Op == "+" {
				p.HTML(`<span class="add">`)
			} else {
				p.HTML(`<span class="del">`)
			}
			p.Text(l.Op + " " + l.Line)
			p.HTML("</span>\n")
		}
		p.HTML(`</pre>
  `)
		if len(d.Errors) > 0 {
			p.HTML(`
  <div class="flash error"><strong>A commit would be refused:</strong>
    <ul>`)
			for _, e := range d.Errors {
				p.HTML(`<li><code>`)
				p.Text(e.Path)
				p.HTML(`</code>: `)
				p.Text(e.Message)
				p.HTML(`</li>`)
			}
			p.HTML(`</ul></div>
  `)
		}
		p.HTML(`
  <form method="post" action="/changes/commit" class="commit">
    `)
		csrfInput(p, v.CSRF)
		p.HTML(`
    <input name="message" placeholder="What and why (optional)" aria-label="commit message" maxlength="200">
    <button class="primary" name="mode" value="plain">Commit</button>
    <span class="or">or</span>
    <select name="confirm_minutes" aria-label="confirm within" id="confirm-min">
      <option value="2">2 minutes</option><option value="5" selected>5 minutes</option><option value="10">10 minutes</option><option value="30">30 minutes</option>
    </select>
    <button name="mode" value="confirmed">Commit, roll back unless confirmed</button>
  </form>
  <form method="post" action="/changes/discard" data-confirm="Throw away every pending change?">`)
		csrfInput(p, v.CSRF)
		p.HTML(`<button class="link danger">Discard all pending changes</button></form>
  `)
	} else {
		p.HTML(`
  <p class="empty">Nothing pending: the candidate is the running configuration (revision `)
		p.Text(fmt.Sprint(d.Running))
		p.HTML(`).</p>
  `)
	}
	p.HTML(`
</section>

<section class="card">
  <h2>History</h2>
  <table>
    <thead><tr><th>Revision</th><th>When</th><th>Who</th><th>What</th><th>Sections</th><th></th></tr></thead>
    <tbody>`)
	for _, h := range d.History {
		rev := fmt.Sprint(h.Revision)
		p.HTML(`
    <tr><td>`)
		p.Text(rev)
		if h.Revision == d.Running {
			p.HTML(` <span class="tag">running</span>`)
		}
		p.HTML(`</td><td>`)
		p.Text(clock(h.When))
		p.HTML(`</td><td>`)
		p.Text(h.Who)
		p.HTML(`</td>
      <td>`)
		p.Text(h.Reason)
		if h.Message != "" {
			p.Text(": " + h.Message)
		}
		p.HTML(`</td><td>`)
		joinText(p, h.Sections, ", ")
		p.HTML(`</td>
      <td>`)
		if h.Revision != d.Running {
			p.HTML(`<form method="post"`)
			p.Attr("action", "/changes/rollback/"+url.PathEscape(rev))
			p.Attr("data-confirm", "Make revision "+rev+" running again?")
			p.HTML(`>`)
			csrfInput(p, v.CSRF)
			p.HTML(`<button class="link">Roll back to this</button></form>`)
		}
		p.HTML(`</td></tr>
    `)
	}
	p.HTML(`</tbody>
  </table>
</section>
`)
}
