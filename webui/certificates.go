package webui

import (
	"github.com/flashgate/flashgate/webui/markup"

	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/pki"
	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/gorilla/mux"
)

// The Certificates page: the store of the candidate configuration. The web
// UI never holds a private key: configd makes CAs and keys, signs and
// revokes; a peer's bundle (its key included) passes through here only on
// its way to the admin's browser, after the admin's password.

// certRow is one store entry as the page lists it.
type certRow struct {
	Name, Kind, Subject, Issuer, Names, Key string
	NotBefore, NotAfter                     time.Time
	Expired, Revoked, CanIssue, CanRevoke   bool
	RevokedAt, Problem                      string
	HasCRL                                  bool
	Serial                                  string
}

type certsData struct {
	Rows     []certRow
	CAs      []string // CAs with a key: they issue
	KeyTypes []pki.KeyType
	Now      time.Time
}

func (s *Server) certsData(r *http.Request) (*certsData, error) {
	cand, err := s.candidate(r.Context())
	if err != nil {
		return nil, err
	}
	d := &certsData{KeyTypes: pki.KeyTypes, Now: time.Now()}
	for i := range cand.Config.Certificates {
		e := &cand.Config.Certificates[i]
		row := certRow{Name: e.Name, HasCRL: e.CRL != "", RevokedAt: e.Revoked, Revoked: e.Revoked != ""}
		// The key is redacted on this socket: a mark says the box holds one.
		hasKey := e.Key.IsSet()
		switch {
		case e.CA && hasKey:
			row.Kind, row.CanIssue = "CA (issues here)", true
			d.CAs = append(d.CAs, e.Name)
		case e.CA:
			row.Kind = "CA (imported)"
		case hasKey:
			row.Kind = "this box"
		case e.Issuer != "":
			row.Kind = "issued to a peer"
		default:
			row.Kind = "certificate"
		}
		row.CanRevoke = e.Issuer != "" && !row.Revoked
		certs, _, _, err := pki.ParsePEM([]byte(e.Cert))
		if err != nil || len(certs) == 0 {
			row.Problem = "does not parse"
			d.Rows = append(d.Rows, row)
			continue
		}
		c := certs[0]
		row.Subject, row.Issuer = c.Subject.String(), c.Issuer.String()
		row.NotBefore, row.NotAfter = c.NotBefore, c.NotAfter
		row.Expired = d.Now.After(c.NotAfter)
		row.Key = pki.Describe(c.PublicKey)
		row.Serial = c.SerialNumber.Text(16)
		row.Names = sans(c)
		d.Rows = append(d.Rows, row)
	}
	return d, nil
}

func sans(c *x509.Certificate) string {
	var n []string
	n = append(n, c.DNSNames...)
	n = append(n, c.EmailAddresses...)
	for _, ip := range c.IPAddresses {
		n = append(n, ip.String())
	}
	return strings.Join(n, ", ")
}

func (s *Server) certificatesPage(w http.ResponseWriter, r *http.Request) {
	d, err := s.certsData(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	s.render(w, r, http.StatusOK, "certificates", "Certificates", func(p *markup.Writer, v *view) { certificatesPage(p, v, d) })
}

// certDone ends a store operation: back to the page with what happened.
func (s *Server) certDone(w http.ResponseWriter, r *http.Request, ok string, err error) {
	if err != nil {
		s.redirect(w, r, "/certificates", "Refused: "+apiMessage(err), true)
		return
	}
	s.redirect(w, r, "/certificates", ok+" Commit the pending changes to use it.", false)
}

// apiMessage is configd's refusal in words, with the fields it names.
func apiMessage(err error) string {
	var ae *configdapi.APIError
	if errors.As(err, &ae) && len(ae.Fields) > 0 {
		return ae.Fields.Error()
	}
	return err.Error()
}

func formDays(r *http.Request) int {
	n, _ := strconv.Atoi(strings.TrimSpace(r.PostFormValue("days")))
	return n
}

func (s *Server) certCreateCA(w http.ResponseWriter, r *http.Request) {
	_, err := s.opts.Config.CreateCA(r.Context(), configdapi.CreateCARequest{
		Name: strings.TrimSpace(r.PostFormValue("name")), CommonName: strings.TrimSpace(r.PostFormValue("common_name")),
		Organization: strings.TrimSpace(r.PostFormValue("organization")), KeyType: pki.KeyType(r.PostFormValue("key_type")), Days: formDays(r)})
	s.certDone(w, r, "CA created.", err)
}

func formNames(r *http.Request) []string {
	var out []string
	for _, f := range strings.FieldsFunc(r.PostFormValue("names"), func(c rune) bool { return c == ',' || c == '\n' || c == ' ' || c == '\r' }) {
		out = append(out, f)
	}
	return out
}

func (s *Server) certIssue(w http.ResponseWriter, r *http.Request) {
	req := configdapi.IssueRequest{CA: r.PostFormValue("ca"), Name: strings.TrimSpace(r.PostFormValue("name")),
		CommonName: strings.TrimSpace(r.PostFormValue("common_name")), Names: formNames(r),
		KeyType: pki.KeyType(r.PostFormValue("key_type")), Days: formDays(r)}
	if r.PostFormValue("for") != "peer" {
		_, err := s.opts.Config.IssueCertificate(r.Context(), req)
		s.certDone(w, r, "Certificate "+req.Name+" issued for this box.", err)
		return
	}
	// The peer's key leaves the box: only with the admin's password, which
	// configd checks again.
	cfg, msg, _ := s.reauth(r, "download of a private key", r.PostFormValue("password"))
	if msg != "" {
		s.redirect(w, r, "/certificates", "Refused: "+msg, true)
		return
	}
	req.Format, req.Passphrase = r.PostFormValue("format"), r.PostFormValue("passphrase")
	bundle, _, err := cfg.IssuePeerBundle(r.Context(), req)
	if err != nil {
		s.certDone(w, r, "", err)
		return
	}
	ext, ctype := "pem", "application/x-pem-file"
	if req.Format == "p12" {
		ext, ctype = "p12", "application/x-pkcs12"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, req.Name, ext))
	w.Write(bundle)
}

func (s *Server) certRevoke(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["name"]
	_, err := s.opts.Config.RevokeCertificate(r.Context(), "", name)
	s.certDone(w, r, "Certificate "+name+" revoked; its CA's CRL lists it.", err)
}

func (s *Server) certDelete(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["name"]
	_, err := s.opts.Config.Delete(r.Context(), "", "certificates."+name)
	s.certDone(w, r, "Certificate "+name+" removed.", err)
}

func (s *Server) certImport(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(256 << 10); err != nil {
		s.redirect(w, r, "/certificates", "Refused: the upload: "+err.Error(), true)
		return
	}
	req := configdapi.CertImportRequest{Name: strings.TrimSpace(r.FormValue("name")), PEM: r.FormValue("pem"), Passphrase: r.FormValue("passphrase")}
	if f, _, err := r.FormFile("file"); err == nil {
		data, err := io.ReadAll(io.LimitReader(f, config.MaxCertPEM+1))
		f.Close()
		if err != nil || len(data) > config.MaxCertPEM {
			s.redirect(w, r, "/certificates", fmt.Sprintf("Refused: the file is larger than %d KiB", config.MaxCertPEM>>10), true)
			return
		}
		if strings.Contains(string(data), "-----BEGIN") {
			req.PEM = string(data)
		} else {
			req.PKCS12 = base64.StdEncoding.EncodeToString(data)
		}
	}
	_, err := s.opts.Config.ImportCertificate(r.Context(), req)
	s.certDone(w, r, "Imported "+req.Name+".", err)
}

// certDownload serves an entry's certificate (and chain) or a CA's CRL:
// public material, no password needed. A POST (a form's button) like
// every action, so that the page routes stay pages.
func (s *Server) certDownload(what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.download(w, r, what) }
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, what string) {
	name := mux.Vars(r)["name"]
	cand, err := s.candidate(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	e := cand.Config.Certificate(name)
	if e == nil {
		http.NotFound(w, r)
		return
	}
	body, file := e.Cert, name+".pem"
	if what == "crl" {
		if e.CRL == "" {
			http.NotFound(w, r)
			return
		}
		body, file = e.CRL, name+".crl.pem"
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Set("Content-Disposition", `attachment; filename="`+file+`"`)
	io.WriteString(w, body)
}

// certificateChoices lists the store's entries a tunnel can name: CAs, or
// certificates the box holds the key of.
func certificateChoices(cas bool) func(c *config.Config) []string {
	return func(c *config.Config) []string {
		out := []string{""}
		if cas {
			out = nil
		}
		for _, e := range c.Certificates {
			if e.CA == cas && (cas || e.Key.IsSet()) {
				out = append(out, e.Name)
			}
		}
		return out
	}
}
