package config

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// The text form lists a configuration as one "set" line per value, in the
// style of VyOS and JunOS:
//
//	set tunnels branch remote_address 192.0.2.1
//	set tunnels branch remote_subnets 10.2.0.0/16
//	set tunnels branch psk <redacted>
//
// Lines follow the schema order and list order (firewall rules are ordered,
// so order is meaning), which makes the form deterministic: the same config
// always gives the same text. Named elements get a line of their own
// ("set tunnels branch") so that an element that exists is visible even
// with every field empty. Secrets always show as <redacted>; Diff still
// notices when one changes.

// Line is one line of the text form.
type Line struct {
	Path  []string // field names and element names
	Value string   // as shown (quoted when needed, secrets redacted)

	// key is what Diff compares: the value itself for secrets, so that a
	// changed PSK shows up as a changed (still redacted) line. It never
	// leaves this package.
	key string
}

// String is the line as the text form shows it.
func (l Line) String() string {
	s := "set " + strings.Join(l.Path, " ")
	if l.Value != "" {
		s += " " + l.Value
	}
	return s
}

// Lines returns c in the text form.
func (c *Config) Lines() []Line {
	var out []Line
	walkText(reflect.ValueOf(c).Elem(), nil, &out)
	return out
}

// Text returns c in the text form, one line per value.
func (c *Config) Text() string {
	var b strings.Builder
	for _, l := range c.Lines() {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	return b.String()
}

var (
	secretType    = reflect.TypeFor[Secret]()
	textMarshaler = reflect.TypeFor[interface{ MarshalText() ([]byte, error) }]()
)

// jsonName is the JSON name of a struct field, or "" if it has none.
func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// isNamedList reports whether t is a slice of structs keyed by a Name field.
func isNamedList(t reflect.Type) bool {
	if t.Kind() != reflect.Slice || t.Elem().Kind() != reflect.Struct || t.Elem().Implements(textMarshaler) {
		return false
	}
	f, ok := t.Elem().FieldByName("Name")
	return ok && f.Type.Kind() == reflect.String
}

// isLeaf reports whether t is a single value in the text form.
func isLeaf(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Uint16:
		return true
	}
	return t.Implements(textMarshaler)
}

// quote returns s as a single token: plain when it is one, Go-quoted when
// it has spaces, quotes or control characters, or is empty.
func quote(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r == 0x7f }) {
		return strconv.Quote(s)
	}
	return s
}

// leafText is the text of a leaf value and whether it is set at all.
func leafText(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		return v.String(), v.String() != ""
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), true
	case reflect.Int:
		return strconv.FormatInt(v.Int(), 10), v.Int() != 0
	case reflect.Uint16:
		return strconv.FormatUint(v.Uint(), 10), v.Uint() != 0
	}
	b, _ := v.Interface().(interface{ MarshalText() ([]byte, error) }).MarshalText()
	return string(b), len(b) > 0
}

func walkText(v reflect.Value, path []string, out *[]Line) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := jsonName(f)
		if name == "" {
			continue
		}
		fv := v.Field(i)
		if omittedWhenZero(f, fv) {
			continue // the text form leaves out what the JSON leaves out
		}
		p := append(path[:len(path):len(path)], name)
		switch {
		case isLeaf(f.Type):
			if name == "name" && len(path) > 0 && isNamedElem(v) {
				continue // the element's own line carries it
			}
			emitLeaf(fv, p, out)
		case isNamedList(f.Type):
			for j := 0; j < fv.Len(); j++ {
				elem := fv.Index(j)
				ep := append(p[:len(p):len(p)], quote(elem.FieldByName("Name").String()))
				*out = append(*out, Line{Path: ep})
				walkText(elem, ep, out)
			}
		case f.Type.Kind() == reflect.Slice:
			for j := 0; j < fv.Len(); j++ {
				emitLeaf(fv.Index(j), p, out)
			}
		case f.Type.Kind() == reflect.Struct:
			walkText(fv, p, out)
		}
	}
}

// omittedWhenZero reports whether the JSON form leaves the field out: it
// is tagged omitempty or omitzero and holds its zero value (by its IsZero
// method when it has one, as encoding/json's omitzero does). An unset
// lease_time thus shows as nothing rather than as "0s".
func omittedWhenZero(f reflect.StructField, v reflect.Value) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	if !strings.Contains(","+opts+",", ",omitzero,") && !strings.Contains(","+opts+",", ",omitempty,") {
		return false
	}
	if z, ok := v.Interface().(interface{ IsZero() bool }); ok {
		return z.IsZero()
	}
	if v.Kind() == reflect.Slice {
		return v.Len() == 0
	}
	return v.IsZero()
}

func isNamedElem(v reflect.Value) bool {
	f, ok := v.Type().FieldByName("Name")
	return ok && f.Type.Kind() == reflect.String
}

func emitLeaf(v reflect.Value, path []string, out *[]Line) {
	s, set := leafText(v)
	if !set {
		return
	}
	if v.Type() == secretType {
		*out = append(*out, Line{Path: path, Value: Redacted, key: s})
		return
	}
	q := quote(s)
	*out = append(*out, Line{Path: path, Value: q, key: q})
}

// DiffLine is one line of a diff: Op is '+' (only in the new config), '-'
// (only in the old) or ' ' (context, not produced by Diff).
type DiffLine struct {
	Op   byte
	Line Line
}

func (d DiffLine) String() string { return string(d.Op) + " " + d.Line.String() }

// Diff returns the lines that differ between a and b in the text form, in
// order: a removed line before the line that replaces it. Secrets are
// compared but shown redacted.
func Diff(a, b *Config) []DiffLine {
	x, y := a.Lines(), b.Lines()
	eq := func(i, j int) bool {
		return x[i].key == y[j].key && strings.Join(x[i].Path, " ") == strings.Join(y[j].Path, " ")
	}
	// Trim the common head and tail, then LCS on the rest; configs differ
	// in a few lines, so the table stays small even for 50 tunnels.
	lo := 0
	for lo < len(x) && lo < len(y) && eq(lo, lo) {
		lo++
	}
	hx, hy := len(x), len(y)
	for hx > lo && hy > lo && eq(hx-1, hy-1) {
		hx--
		hy--
	}
	n, m := hx-lo, hy-lo
	if n*m > maxDiffCells {
		return diffBySet(x[lo:hx], y[lo:hy])
	}
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if eq(lo+i, lo+j) {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []DiffLine
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && eq(lo+i, lo+j):
			i++
			j++
		case j == m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, DiffLine{'-', x[lo+i]})
			i++
		default:
			out = append(out, DiffLine{'+', y[lo+j]})
			j++
		}
	}
	return out
}

// maxDiffCells bounds the LCS table (4 bytes a cell): 16 MiB at most, on
// boards with 128 MB. Diffs that big are whole-config replacements.
const maxDiffCells = 1 << 22

// diffBySet is the fallback for very different configs: the lines only in
// x, then the lines only in y, each in order. It does not show moves.
func diffBySet(x, y []Line) []DiffLine {
	id := func(l Line) string { return strings.Join(l.Path, " ") + "\x00" + l.key }
	inX := make(map[string]int, len(x))
	inY := make(map[string]int, len(y))
	for _, l := range x {
		inX[id(l)]++
	}
	for _, l := range y {
		inY[id(l)]++
	}
	var out []DiffLine
	for _, l := range x {
		if k := id(l); inY[k] > 0 {
			inY[k]--
		} else {
			out = append(out, DiffLine{'-', l})
		}
	}
	for _, l := range y {
		if k := id(l); inX[k] > 0 {
			inX[k]--
		} else {
			out = append(out, DiffLine{'+', l})
		}
	}
	return out
}

// DiffText is Diff as text, one line per difference.
func DiffText(a, b *Config) string {
	var s strings.Builder
	for _, d := range Diff(a, b) {
		s.WriteString(d.String())
		s.WriteByte('\n')
	}
	return s.String()
}

// ChangedSections returns the top-level sections (see Sections) in which a
// and b differ. A nil a counts as different everywhere.
func ChangedSections(a, b *Config) []Section {
	if a == nil {
		return append([]Section(nil), Sections...)
	}
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	var out []Section
	for i := 0; i < av.NumField(); i++ {
		x, _ := json.Marshal(av.Field(i).Interface())
		y, _ := json.Marshal(bv.Field(i).Interface())
		if string(x) != string(y) {
			out = append(out, Section(jsonName(av.Type().Field(i))))
		}
	}
	return out
}
