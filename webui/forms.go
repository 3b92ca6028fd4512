package webui

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/config"
)

// Forms are generic over the kinds of things the UI edits (tunnels,
// firewall rules, port forwards, masquerade, NAT exemptions, interfaces,
// system settings): each field of a form is a config path below its
// element, set with config.Set, which parses the value for the field's
// type. Validation runs
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
	// Choices, when set, lists the options from the configuration (a
	// select's options, a list's suggestions) instead of Options.
	Choices   func(c *config.Config) []string
	Proposals string // "ike" or "esp" for fProposals
	Section   string // starts a new group of fields in the form
	// Lines makes a list field one value per line only: its values
	// contain commas (a static lease is MAC,ADDRESS,HOSTNAME).
	Lines bool
	// Default, for a field the configuration may leave out, is the value
	// it then has in effect (a LAN's DHCP server is on unless turned
	// off): the form shows it, and submitting it unchanged leaves the
	// field out, so that saving a form does not pin today's default.
	Default func(c *config.Config, name string) string
	// Get reads the field's form values from the configuration when its
	// JSON form is not a plain value or list of values.
	Get func(c *config.Config, name string) []string
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
	Fields   []field
	// NameExample and NameHelp, when set, replace the new form's generic
	// placeholder and help for the name: an interface's name is its
	// kernel name, not one the admin makes up.
	NameExample string
	NameHelp    string
}

func (k *kind) elementPath(name string) string {
	if k.Single {
		return k.Path
	}
	return k.Path + "." + name
}

// exists says whether element name of k is in c (a single object always
// is).
func (k *kind) exists(c *config.Config, name string) bool {
	if k.Single {
		return true
	}
	_, ok := c.Index(k.elementPath(name))
	return ok
}

// index is element name's position in its list, as validation's field
// paths count it; -1 for a single object or a missing element.
func (k *kind) index(c *config.Config, name string) int {
	if k.Single {
		return -1
	}
	i, _ := c.Index(k.elementPath(name))
	return i
}

// values returns the element's fields as form values; secrets stay out.
func (k *kind) values(c *config.Config, name string) (map[string][]string, bool) {
	if !k.exists(c, name) {
		return nil, false
	}
	out := map[string][]string{}
	for _, f := range k.Fields {
		if f.Kind == fSecret {
			continue
		}
		if f.Get != nil {
			out[f.Key] = f.Get(c, name)
			continue
		}
		vals, present, err := c.Get(k.elementPath(name) + "." + f.Key)
		if err != nil || !present {
			if f.Default != nil {
				out[f.Key] = []string{f.Default(c, name)}
			}
			continue
		}
		for i, s := range vals {
			vals[i] = compactDuration(s)
		}
		out[f.Key] = vals
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

// splitLines splits list fields on newlines only.
func splitLines(vals []string) []string {
	out := []string{}
	for _, v := range vals {
		for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if s := strings.TrimSpace(line); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// normalCheck is a submitted checkbox value as true or false ("on" is
// what a browser sends for a box without a value); other kinds as given.
func normalCheck(f field, s string) string {
	if f.Kind != fCheck {
		return s
	}
	if s == "on" || s == "true" {
		return "true"
	}
	return "false"
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
		if !config.ValidName(name) { // first: a name becomes part of a config path
			errs.add("name", fmt.Sprintf("%q is not a valid name: letters, digits, - and _, at most 32 characters, starting with a letter or digit.", name))
			return errs
		}
		exists = k.exists(c, name)
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
		if f.Default != nil && len(v) > 0 {
			if _, set, _ := c.Get(path); !set && normalCheck(f, first(v)) == f.Default(c, name) {
				continue // the default, left unsaid
			}
		}
		var err error
		switch f.Kind {
		case fList, fProposals:
			if f.Lines {
				err = c.Set(path, splitLines(v)...)
			} else {
				err = c.Set(path, splitList(v)...)
			}
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
		idx := k.index(c, name)
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
