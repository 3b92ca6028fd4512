package webui

import (
	"github.com/flashgate/flashgate/webui/markup"

	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/flashgate/flashgate/config"
)

// The pages that create, edit and delete elements of any kind (see
// forms.go for the form model), and the candidate edit they all go
// through.

// editCandidate reads the candidate, lets fn change it and writes it back
// naming the etag it read, so that a concurrent edit by someone else is
// never overwritten; on such a conflict it starts over (fn sees their
// change).
func (s *Server) editCandidate(ctx context.Context, fn func(*config.Config) error) error {
	for range 3 {
		cand, err := s.opts.Config.Candidate(ctx)
		if err != nil {
			return fmt.Errorf("read candidate: %w", err)
		}
		if err := fn(cand.Config); err != nil {
			return err
		}
		_, err = s.opts.Config.ReplaceCandidate(ctx, cand.Etag, cand.Config)
		if errors.Is(err, config.ErrCandidateChanged) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write candidate: %w", err)
		}
		return nil
	}
	return errors.New("the candidate kept changing under this edit; try again")
}

// formState is a form being shown: its values (as submitted, on errors)
// and the errors by field.
type formState struct {
	Kind    *kind
	Name    string
	New     bool
	Values  map[string][]string
	Errors  formErrors
	Action  string
	Catalog *proposalCatalog
	// Ports, on a new interface's form, are the kernel names of the
	// box's NICs that the configuration lacks: hints for the name.
	Ports []string
	// Config is the candidate the form is shown against (fields' Choices).
	Config *config.Config
}

// fieldView is one field of one form, as formField draws it.
type fieldView struct {
	F    field
	Form *formState
}

func (v fieldView) ID() string { return "f-" + strings.ReplaceAll(v.F.Key, ".", "-") }
func (v fieldView) Value() string {
	if v.F.Kind == fList {
		return strings.Join(v.Form.Values[v.F.Key], "\n")
	}
	return first(v.Form.Values[v.F.Key])
}
func (v fieldView) Error() string { return v.Form.Errors[v.F.Key] }
func (v fieldView) Checked() bool { return first(v.Form.Values[v.F.Key]) == "true" }
func (v fieldView) Has(opt string) bool {
	return contains(splitList(v.Form.Values[v.F.Key]), opt)
}

// Choices are the catalog proposals for a proposals field.
func (v fieldView) Choices() []proposalChoice {
	if v.Form.Catalog == nil {
		return nil
	}
	if v.F.Proposals == "ike" {
		return v.Form.Catalog.IKE
	}
	return v.Form.Catalog.ESP
}

// Custom are the chosen proposals the catalog does not list.
func (v fieldView) Custom() string {
	var out []string
	for _, p := range splitList(v.Form.Values[v.F.Key]) {
		known := false
		for _, c := range v.Choices() {
			known = known || c.Proposal == p
		}
		if !known {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n")
}

// formValues reads a submitted form for k. Proposal fields arrive as the
// checked catalog entries plus a custom text area.
func formValues(r *http.Request, k *kind) map[string][]string {
	out := map[string][]string{}
	for _, f := range k.Fields {
		vals, ok := r.PostForm[f.Key]
		if f.Kind == fProposals {
			custom := r.PostForm[f.Key+"_custom"]
			if !ok && custom == nil {
				continue
			}
			vals = append(append([]string{}, vals...), custom...)
			ok = true
		}
		if ok {
			out[f.Key] = vals
		}
	}
	return out
}

func (s *Server) newForm(k *kind, name string, isNew bool, vals map[string][]string, errs formErrors) *formState {
	f := &formState{Kind: k, Name: name, New: isNew, Values: vals, Errors: errs, Catalog: &s.proposals}
	if isNew {
		f.Action = k.Base + "/new"
	} else {
		f.Action = k.Base + "/" + name + "/edit"
	}
	if k.Single {
		f.Action = k.Base
	}
	return f
}

func (s *Server) renderForm(w http.ResponseWriter, r *http.Request, code int, form *formState) {
	title := "New " + form.Kind.Singular
	if !form.New {
		title = strings.ToUpper(form.Kind.Singular[:1]) + form.Kind.Singular[1:] + " " + form.Name
	}
	if form.Config == nil {
		if cand, err := s.candidate(r.Context()); err == nil {
			form.Config = cand.Config
		}
	}
	s.render(w, r, code, "element", title, func(p *markup.Writer, v *view) { elementPage(p, v, form) })
}

func (s *Server) elementNewPage(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cand, err := s.candidate(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		vals := k.defaults(cand.Config)
		if k == kindTunnels {
			vals["psk"] = []string{generatePSK()}
		}
		form := s.newForm(k, "", true, vals, nil)
		if k == kindInterfaces {
			form.Ports = s.unconfiguredPorts(r.Context(), cand.Config)
		}
		s.renderForm(w, r, http.StatusOK, form)
	}
}

func (s *Server) elementEditPage(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := mux.Vars(r)["name"]
		cand, err := s.candidate(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		vals, ok := k.values(cand.Config, name)
		if !ok {
			http.Error(w, fmt.Sprintf("no %s called %q", k.Singular, name), http.StatusNotFound)
			return
		}
		s.renderForm(w, r, http.StatusOK, s.newForm(k, name, false, vals, nil))
	}
}

// saveElement applies values to the candidate; on problems nothing is
// written and the errors are returned by field.
func (s *Server) saveElement(ctx context.Context, k *kind, name string, vals map[string][]string, creating, partial bool) (formErrors, error) {
	var ferrs formErrors
	err := s.editCandidate(ctx, func(c *config.Config) error {
		ferrs = k.apply(c, name, vals, creating, partial)
		if ferrs != nil {
			return ferrs
		}
		return nil
	})
	if ferrs != nil {
		return ferrs, nil
	}
	return nil, err
}

func (s *Server) elementSubmit(w http.ResponseWriter, r *http.Request, k *kind, name string, creating bool) {
	vals := formValues(r, k)
	ferrs, err := s.saveElement(r.Context(), k, name, vals, creating, false)
	if err != nil {
		ferrs = formErrors{"": err.Error()}
	}
	if ferrs != nil {
		form := s.newForm(k, name, creating, vals, ferrs)
		if creating && k == kindInterfaces {
			if cand, err := s.candidate(r.Context()); err == nil {
				form.Ports = s.unconfiguredPorts(r.Context(), cand.Config)
			}
		}
		s.renderForm(w, r, http.StatusUnprocessableEntity, form)
		return
	}
	what := k.Singular + " " + name
	if k.Single {
		what = k.Singular
	}
	s.redirect(w, r, k.Back, sentence(what)+" saved to the pending changes. Commit them to apply.", false)
}

func (s *Server) elementCreate(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.elementSubmit(w, r, k, strings.TrimSpace(r.PostFormValue("name")), true)
	}
}

func (s *Server) elementUpdate(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.elementSubmit(w, r, k, mux.Vars(r)["name"], false)
	}
}

// inUseError refuses a delete that would leave other elements naming the
// deleted one (a route or a rule naming an interface): the candidate
// would no longer commit, and the admin would learn why only then.
type inUseError struct {
	what string                  // "interface eth2"
	uses config.ValidationErrors // the problems the delete would add
}

func (e *inUseError) Error() string {
	uses := make([]string, len(e.uses))
	for i, fe := range e.uses {
		uses[i] = fe.Error()
	}
	return fmt.Sprintf("%s is still in use (%s); change or delete that first", e.what, strings.Join(uses, "; "))
}

// validationProblems is every problem config's validator finds in c.
func validationProblems(c *config.Config) config.ValidationErrors {
	var ve config.ValidationErrors
	errors.As(c.Validate(), &ve)
	return ve
}

// deleteElement removes element name of kind k from the candidate. The
// validator, run before and after, tells what still refers to it: a delete
// that adds problems is refused with them, each naming its element. The
// problems the candidate already had are not this delete's.
func (s *Server) deleteElement(ctx context.Context, k *kind, name string) error {
	return s.editCandidate(ctx, func(c *config.Config) error {
		if !k.exists(c, name) {
			return fmt.Errorf("there is no %s called %q", k.Singular, name)
		}
		had := map[config.FieldError]bool{}
		for _, fe := range validationProblems(c) {
			had[fe] = true
		}
		if err := c.Delete(k.elementPath(name)); err != nil {
			return err
		}
		refused := &inUseError{what: k.Singular + " " + name}
		for _, fe := range validationProblems(c) {
			if !had[fe] {
				refused.uses = append(refused.uses, fe)
			}
		}
		if len(refused.uses) > 0 {
			return refused
		}
		return nil
	})
}

func (s *Server) elementDelete(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := mux.Vars(r)["name"]
		if err := s.deleteElement(r.Context(), k, name); err != nil {
			s.redirect(w, r, k.Back, sentence(err.Error()), true)
			return
		}
		s.redirect(w, r, k.Back, sentence(k.Singular+" "+name+" deleted in the pending changes. Commit them to apply."), false)
	}
}
