package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/flashgate/flashgate/config"
)

// Forms are generic over the kinds of things the UI edits (tunnels,
// firewall rules, port forwards, masquerade, interfaces, system settings):
// each field of a form is a config path below its element, set with
// config.Set, which parses the value for the field's type. Validation runs
// on the whole edited candidate, and config's field paths
// ("tunnels[branch].remote_subnets[0]") are mapped back to the form field
// they belong to, so every message appears next to its field. The same
// code serves the JSON API, so pages and API validate identically.

type fieldKind int

const (
	fText      fieldKind = iota
	fNumber              // an integer; empty means 0
	fCheck               // true or false
	fSelect              // one of Options
	fList                // one value per line (or comma-separated)
	fSecret              // never sent to the browser; empty keeps the current value
	fProposals           // IKE or ESP proposals: catalog choices plus custom ones
)

type field struct {
	Key         string // path below the element: "remote_address", "remote_syslog.host"
	Label       string
	Help        string
	Placeholder string
	Kind        fieldKind
	Options     []string
	Proposals   string // "ike" or "esp" for fProposals
	Section     string // starts a new group of fields in the form
}

// IsText and friends let templates switch on the kind.
func (f field) IsText() bool      { return f.Kind == fText }
func (f field) IsNumber() bool    { return f.Kind == fNumber }
func (f field) IsCheck() bool     { return f.Kind == fCheck }
func (f field) IsSelect() bool    { return f.Kind == fSelect }
func (f field) IsList() bool      { return f.Kind == fList }
func (f field) IsSecret() bool    { return f.Kind == fSecret }
func (f field) IsProposals() bool { return f.Kind == fProposals }

// kind is one editable kind of element.
type kind struct {
	Name     string // in API paths: "tunnels", "rules"
	Singular string // in messages: "tunnel"
	Path     string // config path of the list, or of the object when Single
	Base     string // page URL of its forms
	Back     string // page listing it
	Single   bool   // one object (system settings), not a named list
	Fixed    bool   // no create or delete (interfaces are the board's ports)
	Fields   []field
}

func (k *kind) elementPath(name string) string {
	if k.Single {
		return k.Path
	}
	return k.Path + "." + name
}

// elementNameRE is config's name rule; checked here first because a name
// becomes part of a config path (no dots).
var elementNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// lookupJSON finds the value at a config path in the JSON form of c, and
// for named-list elements their index.
func lookupJSON(c *config.Config, path string) (any, int, bool) {
	var root any
	if err := json.Unmarshal(c.JSON(), &root); err != nil {
		return nil, -1, false
	}
	return walkJSON(root, strings.Split(path, "."))
}

func walkJSON(v any, segs []string) (any, int, bool) {
	idx := -1
	for _, seg := range segs {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return nil, -1, false
			}
			idx = -1
		case []any:
			found := false
			for i, e := range x {
				if m, ok := e.(map[string]any); ok && m["name"] == seg {
					v, idx, found = e, i, true
					break
				}
			}
			if !found {
				return nil, -1, false
			}
		default:
			return nil, -1, false
		}
	}
	return v, idx, true
}

// jsonStrings renders a JSON leaf as form values.
func jsonStrings(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []string{x}
	case bool:
		return []string{strconv.FormatBool(x)}
	case float64:
		if x == 0 {
			return []string{""}
		}
		return []string{strconv.FormatFloat(x, 'f', -1, 64)}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, jsonStrings(e)...)
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

// values returns the element's fields as form values; secrets stay out.
func (k *kind) values(c *config.Config, name string) (map[string][]string, bool) {
	elem, _, ok := lookupJSON(c, k.elementPath(name))
	if !ok {
		return nil, false
	}
	out := map[string][]string{}
	for _, f := range k.Fields {
		if f.Kind == fSecret {
			continue
		}
		if v, _, ok := walkJSON(elem, strings.Split(f.Key, ".")); ok {
			vals := jsonStrings(v)
			for i, s := range vals {
				vals[i] = compactDuration(s)
			}
			out[f.Key] = vals
		}
	}
	return out, true
}

// defaults returns the form values of a new element.
func (k *kind) defaults(c *config.Config) map[string][]string {
	c = c.Clone()
	const probe = "new"
	if c.Set(k.elementPath(probe)+".name", probe) != nil {
		return map[string][]string{}
	}
	v, _ := k.values(c, probe)
	return v
}

// compactDuration writes a Go duration the way people do: "4h" rather
// than "4h0m0s". Anything else is returned as it is.
func compactDuration(s string) string {
	if _, err := time.ParseDuration(s); err != nil {
		return s
	}
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2] // 10m0s -> 10m
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2] // 4h0m -> 4h
	}
	return s
}

// splitList splits list fields on newlines and commas.
func splitList(vals []string) []string {
	out := []string{}
	for _, v := range vals {
		for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
			if s := strings.TrimSpace(line); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// formErrors maps field keys to messages; "" is the element as a whole.
type formErrors map[string]string

func (e formErrors) add(key, msg string) {
	if old, ok := e[key]; ok {
		if !strings.Contains(old, msg) {
			e[key] = old + " " + msg
		}
		return
	}
	e[key] = msg
}

func (e formErrors) Error() string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		if k != "" {
			b.WriteString(k + ": ")
		}
		b.WriteString(e[k])
	}
	return b.String()
}

// apply writes form values into element name of c. creating says the
// element must not exist yet; partial (the API's PUT of some fields) leaves
// absent fields alone, where a form sets an absent checkbox to false. It
// returns every problem, by field, from parsing and from validating the
// whole configuration.
func (k *kind) apply(c *config.Config, name string, vals map[string][]string, creating, partial bool) formErrors {
	errs := formErrors{}
	exists := true
	if !k.Single {
		if !elementNameRE.MatchString(name) {
			errs.add("name", fmt.Sprintf("%q is not a valid name: letters, digits, - and _, at most 32 characters, starting with a letter or digit.", name))
			return errs
		}
		_, _, exists = lookupJSON(c, k.elementPath(name))
		switch {
		case creating && exists:
			errs.add("name", fmt.Sprintf("A %s called %q already exists.", k.Singular, name))
			return errs
		case !creating && !exists:
			errs.add("", fmt.Sprintf("There is no %s called %q.", k.Singular, name))
			return errs
		}
		if creating {
			if err := c.Set(k.elementPath(name)+".name", name); err != nil {
				errs.add("name", pathErrMessage(err))
				return errs
			}
		}
	}
	for _, f := range k.Fields {
		v, present := vals[f.Key]
		if !present {
			if partial {
				continue
			}
			if f.Kind == fCheck {
				v = []string{"false"}
			}
		}
		path := k.elementPath(name) + "." + f.Key
		var err error
		switch f.Kind {
		case fList, fProposals:
			err = c.Set(path, splitList(v)...)
		case fSecret:
			s := first(v)
			if s == "" && exists && !creating {
				continue // empty keeps the current secret
			}
			err = c.Set(path, s)
		case fCheck:
			s := first(v)
			if s == "on" {
				s = "true"
			}
			if s == "" {
				s = "false"
			}
			err = c.Set(path, s)
		case fNumber:
			s := strings.TrimSpace(first(v))
			if s == "" {
				s = "0"
			}
			err = c.Set(path, s)
		default:
			s := strings.TrimSpace(first(v))
			if f.Kind == fSelect && s != "" && len(f.Options) > 0 && !contains(f.Options, s) {
				err = fmt.Errorf("%q is not one of %s", s, strings.Join(f.Options, ", "))
			} else if s == "" {
				err = c.Delete(path) // clears the field: an empty address is "not set", not a bad address
			} else {
				err = c.Set(path, s)
			}
		}
		if err != nil {
			errs.add(f.Key, pathErrMessage(err))
		}
	}
	var ve config.ValidationErrors
	if errors.As(c.Validate(), &ve) {
		_, idx, _ := lookupJSON(c, k.elementPath(name))
		for _, fe := range ve {
			key, ok := k.fieldFor(fe.Path, name, idx)
			if !ok {
				continue
			}
			if _, parsed := errs[key]; parsed && key != "" {
				continue // the parse error already says it
			}
			errs.add(key, sentence(fe.Message))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// fieldFor maps a validation path to a field of element name (at index idx
// of its list). Problems of other elements are not this form's.
func (k *kind) fieldFor(path, name string, idx int) (string, bool) {
	var prefixes []string
	if k.Single {
		prefixes = []string{k.Path}
	} else {
		prefixes = []string{k.Path + "[" + name + "]"}
		if idx >= 0 {
			prefixes = append(prefixes, k.Path+"["+strconv.Itoa(idx)+"]")
		}
	}
	for _, p := range prefixes {
		rest, ok := strings.CutPrefix(path, p)
		if !ok || (rest != "" && rest[0] != '.') {
			continue
		}
		rest = strings.TrimPrefix(rest, ".")
		if rest == "" {
			return "", !k.Single
		}
		if rest == "name" {
			return "name", true
		}
		for _, f := range k.Fields {
			if rest == f.Key || strings.HasPrefix(rest, f.Key+"[") || strings.HasPrefix(rest, f.Key+".") {
				return f.Key, true
			}
		}
		return "", !k.Single
	}
	return "", false
}

func pathErrMessage(err error) string {
	var pe *config.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	msg := err.Error()
	// List errors come as "[2]: 10.0.0.0/33 is not a network"; the value
	// itself says which line.
	if strings.HasPrefix(msg, "[") {
		if i := strings.Index(msg, "]: "); i > 0 {
			msg = msg[i+3:]
		}
	}
	return sentence(msg)
}

func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "?") {
		s += "."
	}
	return s
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

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
}

// fieldView is one field of one form, for the field template.
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
	s.render(w, r, code, "element", title, form)
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
		s.renderForm(w, r, http.StatusOK, s.newForm(k, "", true, vals, nil))
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
		s.renderForm(w, r, http.StatusUnprocessableEntity, s.newForm(k, name, creating, vals, ferrs))
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

func (s *Server) deleteElement(ctx context.Context, k *kind, name string) error {
	return s.editCandidate(ctx, func(c *config.Config) error {
		if _, _, ok := lookupJSON(c, k.elementPath(name)); !ok {
			return fmt.Errorf("there is no %s called %q", k.Singular, name)
		}
		return c.Delete(k.elementPath(name))
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
