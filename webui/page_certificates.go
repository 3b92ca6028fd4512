package webui

import (
	"github.com/flashgate/flashgate/webui/markup"
	"net/url"
)

// certificatesPage lists the certificate store and holds the forms that
// make a CA, issue a certificate, and import one.
func certificatesPage(p *markup.Writer, v *view, d *certsData) {
	csrf := v.CSRF
	p.HTML(`
<h1>Certificates</h1>
<p class="help">Tunnels with <em>Authenticate with: cert</em> use these. Private keys stay in the configuration service: this page never sees one, except a peer's, handed to you once in its bundle. Changes here are pending until you commit them.</p>
<section class="card">
<table class="certs">
  <tr><th>Name</th><th>Kind</th><th>Subject</th><th>Names</th><th>Key</th><th>Valid</th><th>Issuer</th><th></th></tr>
  `)
	for _, r := range d.Rows {
		p.HTML(`<tr`)
		p.Attr("id", "cert-"+r.Name)
		p.HTML(`>
    <td><strong>`)
		p.Text(r.Name)
		p.HTML(`</strong></td><td>`)
		p.Text(r.Kind)
		if r.Revoked {
			p.HTML(` <span class="state failed">`)
			p.Text("revoked " + r.RevokedAt)
			p.HTML(`</span>`)
		}
		if r.Problem != "" {
			p.HTML(` <span class="state failed">`)
			p.Text(r.Problem)
			p.HTML(`</span>`)
		}
		p.HTML(`</td>
    <td class="mono">`)
		p.Text(r.Subject)
		p.HTML(`</td><td class="mono">`)
		p.Text(r.Names)
		p.HTML(`</td><td>`)
		p.Text(r.Key)
		p.HTML(`</td>
    <td>`)
		if r.Expired {
			p.HTML(`<span class="state failed">expired</span> `)
		}
		p.Text(r.NotBefore.Format("2006-01-02") + " – " + r.NotAfter.Format("2006-01-02"))
		p.HTML(`</td>
    <td class="mono">`)
		p.Text(r.Issuer)
		p.HTML(`</td>
    <td class="buttons">
      <form method="post"`)
		p.Attr("action", "/certificates/"+url.PathEscape(r.Name)+"/cert")
		p.HTML(`>`)
		csrfInput(p, csrf)
		p.HTML(`<button>Certificate</button></form>
      `)
		if r.HasCRL {
			p.HTML(`<form method="post"`)
			p.Attr("action", "/certificates/"+url.PathEscape(r.Name)+"/crl")
			p.HTML(` class="crl">`)
			csrfInput(p, csrf)
			p.HTML(`<button>CRL</button></form>`)
		}
		p.HTML("\n      ")
		if r.CanRevoke {
			p.HTML(`<form method="post"`)
			p.Attr("action", "/certificates/"+url.PathEscape(r.Name)+"/revoke")
			p.HTML(`>`)
			csrfInput(p, csrf)
			p.HTML(`<button class="danger">Revoke</button></form>`)
		}
		p.HTML(`
      <form method="post"`)
		p.Attr("action", "/certificates/"+url.PathEscape(r.Name)+"/delete")
		p.HTML(`>`)
		csrfInput(p, csrf)
		p.HTML(`<button>Remove</button></form>
    </td></tr>
  `)
	}
	if len(d.Rows) == 0 {
		p.HTML(`<tr><td colspan="8">No certificates yet: create a CA, or import one.</td></tr>`)
	}
	p.HTML(`
</table>
</section>
<div class="cols">
<form method="post" action="/certificates/ca" class="card form" id="ca-form">
  <h2>New CA</h2>
  `)
	csrfInput(p, csrf)
	p.HTML(`
  <div class="field"><label for="ca-name">Name</label><input id="ca-name" name="name" placeholder="office-ca"></div>
  <div class="field"><label for="ca-cn">Common name</label><input id="ca-cn" name="common_name" placeholder="Example Ltd VPN CA"></div>
  <div class="field"><label for="ca-org">Organisation</label><input id="ca-org" name="organization"></div>
  <div class="field"><label for="ca-key">Key</label><select id="ca-key" name="key_type">`)
	keyTypeOptions(p, d)
	p.HTML(`</select></div>
  <div class="field"><label for="ca-days">Valid for (days)</label><input id="ca-days" name="days" type="number" placeholder="3650"></div>
  <div class="buttons"><button class="primary">Create CA</button></div>
</form>

<form method="post" action="/certificates/issue" class="card form" id="issue-form">
  <h2>Issue a certificate</h2>
  `)
	csrfInput(p, csrf)
	p.HTML(`
  <div class="field"><label for="is-ca">CA</label><select id="is-ca" name="ca">`)
	for _, ca := range d.CAs {
		p.HTML(`<option>`)
		p.Text(ca)
		p.HTML(`</option>`)
	}
	p.HTML(`</select></div>
  <div class="field"><label><input type="radio" name="for" value="box" checked> For this box (the key stays here)</label>
    <label><input type="radio" name="for" value="peer"> For a peer (download it with its key)</label></div>
  <div class="field"><label for="is-name">Name</label><input id="is-name" name="name" placeholder="hq"></div>
  <div class="field"><label for="is-cn">Common name</label><input id="is-cn" name="common_name" placeholder="hq.example.net"></div>
  <div class="field"><label for="is-names">Identities</label><textarea id="is-names" name="names" rows="2" placeholder="hq.example.net&#10;198.51.100.1"></textarea>
    <p class="help">The IDs the tunnel uses (local_id / remote_id): names, user@host or addresses, one per line.</p></div>
  <div class="field"><label for="is-key">Key</label><select id="is-key" name="key_type">`)
	keyTypeOptions(p, d)
	p.HTML(`</select></div>
  <div class="field"><label for="is-days">Valid for (days)</label><input id="is-days" name="days" type="number" placeholder="1095"></div>
  <fieldset><legend>Peer's download</legend>
  <div class="field"><label for="is-format">Format</label><select id="is-format" name="format"><option value="pem">PEM (certificate, CA, key)</option><option value="p12">PKCS#12 with a passphrase</option></select></div>
  <div class="field"><label for="is-pass">PKCS#12 passphrase</label><input id="is-pass" type="password" name="passphrase" autocomplete="new-password"></div>
  <div class="field"><label for="is-cur">Your current password</label><input id="is-cur" type="password" name="password" autocomplete="current-password">
    <p class="help">A peer's private key leaves the box only with your password.</p></div>
  </fieldset>
  <div class="buttons"><button class="primary">Issue</button></div>
</form>

<form method="post" action="/certificates/import" enctype="multipart/form-data" class="card form" id="import-form">
  <h2>Import</h2>
  `)
	csrfInput(p, csrf)
	p.HTML(`
  <div class="field"><label for="im-name">Name</label><input id="im-name" name="name" placeholder="partner-ca">
    <p class="help">For a CRL: the name of its CA here.</p></div>
  <div class="field"><label for="im-pem">PEM text</label><textarea id="im-pem" name="pem" rows="4" class="mono" placeholder="-----BEGIN CERTIFICATE-----"></textarea>
    <p class="help">A CA certificate; a certificate with its key (and chain); or a CRL.</p></div>
  <div class="field"><label for="im-file">or a file</label><input id="im-file" type="file" name="file" accept=".pem,.crt,.crl,.p12,.pfx"></div>
  <div class="field"><label for="im-pass">PKCS#12 passphrase</label><input id="im-pass" type="password" name="passphrase" autocomplete="off"></div>
  <div class="buttons"><button class="primary">Import</button></div>
</form>
</div>
`)
}

func keyTypeOptions(p *markup.Writer, d *certsData) {
	for _, k := range d.KeyTypes {
		p.HTML(`<option`)
		p.Attr("value", string(k))
		p.HTML(`>`)
		p.Text(string(k))
		p.HTML(`</option>`)
	}
}
