package webui

import (
	"github.com/flashgate/flashgate/webui/markup"

	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/config/importer"
)

// Tunnels → Import: paste or upload an isakmpd.conf, swanctl.conf or
// ipsec.conf, see the tunnels it would create and every line it could not
// map with the reason, then save the tunnels into the candidate. Nothing
// is saved by the preview; the save parses the same text again.

// maxImportBody bounds an import form: the file plus the form around it.
const maxImportBody = importer.MaxFileSize + 64<<10

// importView is the page's data.
type importView struct {
	Text     string
	Format   string // as chosen: "" for automatic
	Formats  []importer.Format
	Error    string
	Result   *importer.Result
	Tunnels  []importedTunnel
	CanApply bool
}

// importedTunnel is one tunnel of the preview, secrets left out.
type importedTunnel struct {
	Name, Remote, Local, LocalID, RemoteID string
	IKEVersion                             int
	Legacy                                 bool
	IKE, ESP                               []string
	LocalSubnets, RemoteSubnets            []string
	IKELifetime, ChildLifetime, Start      string
	HasPSK                                 bool
	Weak                                   []config.WeakProposal
	Problems                               []string // what a commit would refuse
}

func (s *Server) importPage(w http.ResponseWriter, r *http.Request) {
	s.renderImport(w, r, http.StatusOK, importView{Formats: importer.Formats})
}

func (s *Server) importSubmit(w http.ResponseWriter, r *http.Request) {
	v := importView{Formats: importer.Formats, Format: r.FormValue("format")}
	text, err := importText(r)
	v.Text = text
	if err != nil {
		v.Error = err.Error()
		s.renderImport(w, r, http.StatusUnprocessableEntity, v)
		return
	}
	res, err := runImport(v.Format, []byte(text))
	if err != nil {
		v.Error = err.Error()
		s.renderImport(w, r, http.StatusUnprocessableEntity, v)
		return
	}
	if r.FormValue("action") == "save" {
		err := s.editCandidate(r.Context(), func(c *config.Config) error {
			out, err := importer.Apply(c, res.Tunnels)
			if err != nil {
				return err
			}
			*c = *out
			return nil
		})
		if err == nil {
			names := make([]string, len(res.Tunnels))
			for i, t := range res.Tunnels {
				names[i] = t.Name
			}
			s.redirect(w, r, "/changes", fmt.Sprintf("Imported %d tunnel(s) into the pending changes: %s. Review them and commit to apply.", len(names), strings.Join(names, ", ")), false)
			return
		}
		v.Error = "Nothing was saved: " + err.Error()
	}
	v.Result = res
	cand, err := s.candidate(r.Context())
	problems := map[string][]string{}
	if err == nil {
		problems = importer.CheckTunnels(cand.Config, res.Tunnels)
		if _, aerr := importer.Apply(cand.Config, res.Tunnels); aerr != nil && v.Error == "" {
			v.Error = aerr.Error()
		}
	}
	for _, t := range res.Tunnels {
		v.Tunnels = append(v.Tunnels, previewTunnel(t, problems[t.Name]))
	}
	v.CanApply = len(res.Tunnels) > 0 && v.Error == ""
	s.renderImport(w, r, http.StatusOK, v)
}

// importText is the pasted text, or the uploaded file when one was chosen.
func importText(r *http.Request) (string, error) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if r.MultipartForm == nil {
			if err := r.ParseMultipartForm(1 << 20); err != nil {
				return "", fmt.Errorf("upload: %w", err)
			}
		}
		if f, _, err := r.FormFile("file"); err == nil {
			defer f.Close()
			data, err := io.ReadAll(io.LimitReader(f, importer.MaxFileSize+1))
			if err != nil {
				return "", fmt.Errorf("upload: %w", err)
			}
			if len(data) > importer.MaxFileSize {
				return "", fmt.Errorf("the file is larger than an import reads (%d KiB)", importer.MaxFileSize>>10)
			}
			if len(data) > 0 {
				return string(data), nil
			}
		}
	}
	text := r.FormValue("text")
	if strings.TrimSpace(text) == "" {
		return text, errors.New("paste a configuration file or choose one to upload")
	}
	return text, nil
}

func runImport(format string, data []byte) (*importer.Result, error) {
	if format == "" {
		return importer.Import(data)
	}
	f, err := importer.ParseFormat(format)
	if err != nil {
		return nil, err
	}
	return importer.ImportAs(f, data)
}

func previewTunnel(t config.Tunnel, problems []string) importedTunnel {
	prefixes := func(l []config.Prefix) []string {
		out := make([]string, len(l))
		for i, p := range l {
			out[i] = p.String()
		}
		return out
	}
	return importedTunnel{
		Name: t.Name, Remote: t.RemoteAddress.String(), Local: t.LocalAddress.String(),
		LocalID: t.LocalID, RemoteID: t.RemoteID,
		IKEVersion: int(t.IKEVersion.Or2()), Legacy: t.LegacyAlgorithms,
		IKE: t.IKEProposals, ESP: t.ESPProposals,
		LocalSubnets: prefixes(t.LocalSubnets), RemoteSubnets: prefixes(t.RemoteSubnets),
		IKELifetime: t.IKELifetime.String(), ChildLifetime: t.ChildLifetime.String(), Start: t.StartAction,
		HasPSK: t.PSK.Reveal() != "", Weak: t.WeakProposals(), Problems: problems,
	}
}

func (s *Server) renderImport(w http.ResponseWriter, r *http.Request, code int, d importView) {
	s.render(w, r, code, "import", "Import tunnels", func(p *markup.Writer, v *view) { importPage(p, v, d) })
}
