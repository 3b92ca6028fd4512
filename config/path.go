package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Paths address one value of a Config with the JSON field names, element
// names for named lists and indexes for lists of values:
//
//	system.hostname
//	tunnels.branch.remote_address
//	tunnels.branch.remote_subnets      (the whole list)
//	tunnels.branch.remote_subnets.0    (one element; index len appends)
//	firewall.rules.ssh-in.action
//
// Set parses the value for the field's type at once, so "mtu abc" or
// "remote_address 1.2.3" fail at the edit, with the path in the error;
// cross-field checks wait for Validate (a tunnel is built field by field and
// is incomplete in between).

// PathError is an edit that could not be made.
type PathError struct {
	Path string
	Err  error
}

func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// maxPathLen bounds what Set and Delete parse.
const maxPathLen = 256

// Set sets the value at path. A scalar takes exactly one value; a list
// takes any number and is replaced by them. Naming an element that does not
// exist creates it with its defaults (NewTunnel for tunnels).
func (c *Config) Set(path string, values ...string) error {
	v, err := c.resolve(path, true)
	if err != nil {
		return err
	}
	if err := setValue(v, values); err != nil {
		return &PathError{path, err}
	}
	return nil
}

// Get returns the value at path as the strings Set takes back: one for a
// value, one per entry for a list of values (a secret in the clear: the
// caller decides what to show). present says whether the configuration's
// JSON form holds it: false for a field left out when it is zero
// (omitempty, omitzero) or that lies under one, as a form that shows the
// value in effect must know. An error says path names nothing (no such
// field, no entry of that name) or a group of fields.
func (c *Config) Get(path string) (values []string, present bool, err error) {
	segs, err := splitPath(path)
	if err != nil {
		return nil, false, err
	}
	v := reflect.ValueOf(c).Elem()
	present = true
	for n, seg := range segs {
		here := strings.Join(segs[:n+1], ".")
		switch {
		case isNamedList(v.Type()):
			i := findNamed(v, seg)
			if i < 0 {
				return nil, false, &PathError{here, fmt.Errorf("no entry named %q", seg)}
			}
			v = v.Index(i)
		case v.Kind() == reflect.Slice:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= v.Len() {
				return nil, false, &PathError{here, fmt.Errorf("%q is not an index of this list (0-%d)", seg, v.Len()-1)}
			}
			v = v.Index(i)
		case v.Kind() == reflect.Struct && !isLeaf(v.Type()):
			sf, ok := structFieldByJSON(v.Type(), seg)
			if !ok {
				return nil, false, &PathError{here, unknownField(v, seg)}
			}
			v = v.FieldByIndex(sf.Index)
			if omittedWhenZero(sf, v) {
				present = false
			}
		default:
			return nil, false, &PathError{here, fmt.Errorf("%s is a value and has no fields", strings.Join(segs[:n], "."))}
		}
	}
	switch {
	case isLeaf(v.Type()):
		s, _ := leafText(v)
		return []string{s}, present, nil
	case v.Kind() == reflect.Slice && !isNamedList(v.Type()) && isLeaf(v.Type().Elem()):
		values = make([]string, v.Len())
		for i := range values {
			values[i], _ = leafText(v.Index(i))
		}
		return values, present, nil
	}
	return nil, present, &PathError{path, fmt.Errorf("names a group of fields, not a value")}
}

// Index is the position of the named entry path names in its list
// ("tunnels.branch": 0 for the first tunnel), as validation's field paths
// ("tunnels[0]") count it; false when there is no such entry.
func (c *Config) Index(path string) (int, bool) {
	segs, err := splitPath(path)
	if err != nil || len(segs) < 2 {
		return -1, false
	}
	list, err := c.resolve(strings.Join(segs[:len(segs)-1], "."), false)
	if err != nil || !isNamedList(list.Type()) {
		return -1, false
	}
	i := findNamed(list, segs[len(segs)-1])
	return i, i >= 0
}

// structFieldByJSON is the field of t with JSON name name.
func structFieldByJSON(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if jsonName(t.Field(i)) == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// Delete removes the element or list entry at path, or clears a field to
// its zero value. The top-level sections cannot be deleted.
func (c *Config) Delete(path string) error {
	segs, err := splitPath(path)
	if err != nil {
		return err
	}
	if len(segs) == 1 {
		return &PathError{path, fmt.Errorf("a whole section cannot be deleted; delete its entries")}
	}
	parentPath := strings.Join(segs[:len(segs)-1], ".")
	parent, err := c.resolve(parentPath, false)
	if err != nil {
		return err
	}
	last := segs[len(segs)-1]
	switch {
	case isNamedList(parent.Type()):
		i := findNamed(parent, last)
		if i < 0 {
			return &PathError{path, fmt.Errorf("no entry named %q", last)}
		}
		parent.Set(reflect.AppendSlice(parent.Slice(0, i), parent.Slice(i+1, parent.Len())))
		return nil
	case parent.Kind() == reflect.Slice:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= parent.Len() {
			return &PathError{path, fmt.Errorf("%q is not an index of this list (0-%d)", last, parent.Len()-1)}
		}
		parent.Set(reflect.AppendSlice(parent.Slice(0, i), parent.Slice(i+1, parent.Len())))
		return nil
	case parent.Kind() == reflect.Struct:
		f, ok := fieldByJSON(parent, last)
		if !ok {
			return &PathError{path, unknownField(parent, last)}
		}
		f.Set(reflect.Zero(f.Type()))
		if f.Kind() == reflect.Slice {
			f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		}
		return nil
	}
	return &PathError{path, fmt.Errorf("%q is a value, not a field", parentPath)}
}

func splitPath(path string) ([]string, error) {
	if len(path) > maxPathLen {
		return nil, &PathError{path[:32] + "...", fmt.Errorf("path longer than %d characters", maxPathLen)}
	}
	if !utf8.ValidString(path) {
		return nil, &PathError{strings.ToValidUTF8(path, "?"), fmt.Errorf("path is not valid UTF-8")}
	}
	segs := strings.Split(path, ".")
	for _, s := range segs {
		if s == "" {
			return nil, &PathError{path, fmt.Errorf("empty path element")}
		}
	}
	return segs, nil
}

// resolve walks path and returns the addressed value, settable. With create,
// named elements and the one-past-the-end index are created on the way.
func (c *Config) resolve(path string, create bool) (reflect.Value, error) {
	segs, err := splitPath(path)
	if err != nil {
		return reflect.Value{}, err
	}
	v := reflect.ValueOf(c).Elem()
	listName := ""
	for n, seg := range segs {
		here := strings.Join(segs[:n+1], ".")
		switch {
		case isNamedList(v.Type()):
			i := findNamed(v, seg)
			if i < 0 {
				if !create {
					return reflect.Value{}, &PathError{here, fmt.Errorf("no entry named %q", seg)}
				}
				elem, ok := newElement(listName, seg)
				if !ok {
					return reflect.Value{}, &PathError{here, fmt.Errorf("cannot create entries in %s", listName)}
				}
				v.Set(reflect.Append(v, reflect.ValueOf(elem).Elem()))
				i = v.Len() - 1
			}
			v = v.Index(i)
		case v.Kind() == reflect.Slice:
			i, err := strconv.Atoi(seg)
			limit := v.Len() - 1
			if create {
				limit = v.Len()
			}
			if err != nil || i < 0 || i > limit {
				return reflect.Value{}, &PathError{here, fmt.Errorf("%q is not an index of this list (0-%d)", seg, limit)}
			}
			if i == v.Len() {
				v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
			}
			v = v.Index(i)
		case v.Kind() == reflect.Struct && !isLeaf(v.Type()):
			f, ok := fieldByJSON(v, seg)
			if !ok {
				return reflect.Value{}, &PathError{here, unknownField(v, seg)}
			}
			listName = seg
			v = f
		default:
			return reflect.Value{}, &PathError{here, fmt.Errorf("%s is a value and has no fields", strings.Join(segs[:n], "."))}
		}
	}
	return v, nil
}

func findNamed(list reflect.Value, name string) int {
	for i := 0; i < list.Len(); i++ {
		if list.Index(i).FieldByName("Name").String() == name {
			return i
		}
	}
	return -1
}

func fieldByJSON(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if jsonName(t.Field(i)) == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func unknownField(v reflect.Value, name string) error {
	var known []string
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if n := jsonName(t.Field(i)); n != "" {
			known = append(known, n)
		}
	}
	return fmt.Errorf("unknown field %q (fields here: %s)", name, strings.Join(known, ", "))
}

func setValue(v reflect.Value, values []string) error {
	if isNamedList(v.Type()) || (v.Kind() == reflect.Struct && !isLeaf(v.Type())) {
		return fmt.Errorf("names a group of fields, not a value; set its fields one by one")
	}
	if v.Kind() == reflect.Slice {
		out := reflect.MakeSlice(v.Type(), len(values), len(values))
		for i, s := range values {
			if err := parseLeaf(out.Index(i), s); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		v.Set(out)
		return nil
	}
	if len(values) != 1 {
		return fmt.Errorf("takes one value, got %d", len(values))
	}
	return parseLeaf(v, values[0])
}

// parseLeaf parses s into the leaf v strictly.
func parseLeaf(v reflect.Value, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("value is not valid UTF-8")
	}
	switch p := v.Addr().Interface().(type) {
	case *string:
		*p = s
	case *bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		*p = b
	case *int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		*p = n
	case *IKEVersion:
		switch s {
		case "1", "2":
			*p = IKEVersion(s[0] - '0')
		default:
			return fmt.Errorf("%q is not an IKE version: 1 or 2", s)
		}
	case *uint16:
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return fmt.Errorf("%q is not a number from 0 to 65535", s)
		}
		*p = uint16(n)
	case *Prefix:
		x, err := ParsePrefix(s)
		if err != nil {
			return err
		}
		*p = x
	case *Addr:
		x, err := ParseAddr(s)
		if err != nil {
			return err
		}
		*p = x
	case *Duration:
		x, err := ParseDuration(s)
		if err != nil {
			return err
		}
		*p = x
	case *PortRange:
		x, err := ParsePortRange(s)
		if err != nil {
			return err
		}
		*p = x
	case *Secret:
		*p = NewSecret(s)
	case *OptionalBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		*p = Bool(b)
	case *StaticLease:
		x, err := ParseStaticLease(s)
		if err != nil {
			return err
		}
		*p = x
	default:
		return fmt.Errorf("cannot set a %s", v.Type())
	}
	return nil
}
