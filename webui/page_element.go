package webui

import (
	"strings"

	"github.com/flashgate/flashgate/webui/markup"
)

// elementPage is the form that creates or edits one element of any kind
// (a tunnel, a rule, a route ...).
func elementPage(p *markup.Writer, v *view, form *formState) {
	p.HTML(`
<div class="titlebar"><h1>`)
	p.Text(v.Title)
	p.HTML(`</h1><a class="button"`)
	p.Attr("href", form.Kind.Back)
	p.HTML(`>Back</a></div>
<form method="post"`)
	p.Attr("action", form.Action)
	p.HTML(` class="card form" novalidate>
  `)
	csrfInput(p, v.CSRF)
	p.HTML("\n  ")
	formError(p, form.Errors[""])
	p.HTML("\n  ")
	if form.New {
		nameErr := form.Errors["name"]
		p.HTML(`
  <div class="field name`)
		if nameErr != "" {
			p.HTML(` invalid`)
		}
		p.HTML(`">
    <label for="f-name">Name</label>
    <input id="f-name" name="name"`)
		p.Attr("value", form.Name)
		p.HTML(` required spellcheck="false" autocomplete="off"`)
		p.Attr("placeholder", orText(form.Kind.NameExample, "branch-office"))
		if len(form.Ports) > 0 {
			p.HTML(` list="f-name-ports"`)
		}
		p.HTML(`>
    `)
		if nameErr != "" {
			p.HTML(`<p class="err" id="f-name-err">`)
			p.Text(nameErr)
			p.HTML(`</p>`)
		}
		p.HTML("\n    ")
		if len(form.Ports) > 0 {
			p.HTML(`<datalist id="f-name-ports">`)
			for _, port := range form.Ports {
				p.HTML(`<option`)
				p.Attr("value", port)
				p.HTML(`>`)
			}
			p.HTML(`</datalist>
    <p class="help" id="f-name-ports-help">`)
			p.Text("Ports of this box not in the configuration: " + strings.Join(form.Ports, ", ") + ".")
			p.HTML(`</p>`)
		}
		p.HTML(`
    <p class="help">`)
		p.Text(orText(form.Kind.NameHelp, "Letters, digits, - and _; it cannot be changed later."))
		p.HTML(`</p>
  </div>
  `)
	}
	p.HTML("\n  ")
	formFields(p, form)
	p.HTML(`
  <div class="buttons"><button class="primary">Save to pending changes</button> <a`)
	p.Attr("href", form.Kind.Back)
	p.HTML(`>Cancel</a></div>
</form>
`)
}

// formError is a form's error that belongs to no field, if any.
func formError(p *markup.Writer, msg string) {
	if msg != "" {
		p.HTML(`<p class="flash error">`)
		p.Text(msg)
		p.HTML(`</p>`)
	}
}
