package cli

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/config"
)

// Tab completion works on the word before the cursor. Commands and their
// fixed words come from the command table; config paths are completed by
// walking the candidate configuration with reflection over the config
// types' JSON names, so that every field the schema has is offered without
// a second list to keep in step, together with the names of the elements
// that exist (tunnels, interfaces, rules).

// pathNode is where a path prefix leads in a configuration.
type pathNode struct {
	v    reflect.Value
	name string // JSON name of the field this value is (for value hints)
}

// walkPath follows the dotted path segs through c. An element name that
// does not exist yet walks into an empty element of the list's type (set
// creates it), so that its fields still complete. ok is false when a
// segment names nothing in the schema.
func walkPath(c *config.Config, segs []string) (pathNode, bool) {
	n := pathNode{v: reflect.ValueOf(c).Elem()}
	for _, seg := range segs {
		t := n.v.Type()
		switch {
		case config.IsNamedList(t):
			i := -1
			for j := 0; j < n.v.Len(); j++ {
				if n.v.Index(j).FieldByName("Name").String() == seg {
					i = j
					break
				}
			}
			if i < 0 {
				n = pathNode{v: reflect.New(t.Elem()).Elem(), name: n.name}
				continue
			}
			n = pathNode{v: n.v.Index(i), name: n.name}
		case t.Kind() == reflect.Slice:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= n.v.Len() {
				return n, false
			}
			n = pathNode{v: n.v.Index(i), name: n.name}
		case t.Kind() == reflect.Struct && !config.IsLeaf(t):
			found := false
			for i := 0; i < t.NumField(); i++ {
				if config.FieldName(t.Field(i)) == seg {
					n = pathNode{v: n.v.Field(i), name: seg}
					found = true
					break
				}
			}
			if !found {
				return n, false
			}
		default:
			return n, false
		}
	}
	return n, true
}

// completePath returns the paths that extend partial by one segment:
// groups end in "." (there is more to type), values do not.
func completePath(c *config.Config, partial string) []string {
	var prefix, last string
	if i := strings.LastIndexByte(partial, '.'); i >= 0 {
		prefix, last = partial[:i+1], partial[i+1:]
	} else {
		last = partial
	}
	var segs []string
	if prefix != "" {
		segs = strings.Split(strings.TrimSuffix(prefix, "."), ".")
	}
	n, ok := walkPath(c, segs)
	if !ok {
		return nil
	}
	var out []string
	add := func(name string, group bool) {
		if !strings.HasPrefix(name, last) {
			return
		}
		if group {
			name += "."
		}
		out = append(out, prefix+name)
	}
	t := n.v.Type()
	switch {
	case config.IsNamedList(t):
		for i := 0; i < n.v.Len(); i++ {
			add(n.v.Index(i).FieldByName("Name").String(), true)
		}
	case t.Kind() == reflect.Slice:
		// A list of values is set as a whole; its elements (by index)
		// are for delete.
		for i := 0; i < n.v.Len(); i++ {
			add(strconv.Itoa(i), false)
		}
	case t.Kind() == reflect.Struct && !config.IsLeaf(t):
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := config.FieldName(f)
			if name == "" || f.Name == "Name" && len(segs) > 0 && isElement(c, segs) {
				continue // an element's name is its key in the path
			}
			// A list of values is set as a whole ("set ... local_subnets
			// A B"), so it completes like a value; its indexes are there
			// for delete after a typed dot.
			valueList := f.Type.Kind() == reflect.Slice && !config.IsNamedList(f.Type)
			add(name, !config.IsLeaf(f.Type) && !valueList)
		}
	}
	return out
}

// isElement reports whether segs ends at an element of a named list.
func isElement(c *config.Config, segs []string) bool {
	parent, ok := walkPath(c, segs[:len(segs)-1])
	return ok && config.IsNamedList(parent.v.Type())
}

// valueHints are the words a field takes when it is one of a few.
var valueHints = map[string][]string{
	"role":         {config.RoleWAN, config.RoleLAN, config.RoleOpt},
	"addressing":   {config.AddressingStatic, config.AddressingDHCP},
	"chain":        {config.ChainInput, config.ChainForward},
	"action":       {config.ActionAccept, config.ActionDrop, config.ActionReject},
	"protocol":     config.Protocols,
	"start_action": {config.StartInitiate, config.StartRespond, config.StartOnTraffic},
	"data_plane":   {config.DataPlaneAuto, config.DataPlaneXFRM, config.DataPlaneUserspace},
	"in":           config.Zones,
	"out":          config.Zones,
}

// completeValue offers values for the leaf at path: true/false for
// switches, the allowed words for enumerations, interface names where an
// interface is named.
func completeValue(c *config.Config, path string) []string {
	n, ok := walkPath(c, strings.Split(path, "."))
	if !ok {
		return nil
	}
	if n.v.Kind() == reflect.Bool || n.v.Type() == reflect.TypeFor[config.OptionalBool]() {
		return []string{"true", "false"}
	}
	if !config.IsLeaf(n.v.Type()) && n.v.Kind() != reflect.Slice {
		return nil // a group of fields takes no value
	}
	words := slices.Clone(valueHints[n.name])
	if n.name == "interface" || n.name == "in" || n.name == "out" {
		for _, ifc := range c.Interfaces {
			words = append(words, ifc.Name)
		}
	}
	return words
}

// commonPrefix is the longest prefix all words share.
func commonPrefix(words []string) string {
	if len(words) == 0 {
		return ""
	}
	p := words[0]
	for _, w := range words[1:] {
		for !strings.HasPrefix(w, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}

// columns lays words out in columns for a terminal width columns wide.
func columns(words []string, width int) string {
	widest := 0
	for _, w := range words {
		widest = max(widest, len(w))
	}
	per := max(1, width/(widest+2))
	var b strings.Builder
	for i, w := range words {
		b.WriteString(w)
		if (i+1)%per == 0 || i == len(words)-1 {
			b.WriteByte('\n')
		} else {
			b.WriteString(strings.Repeat(" ", widest+2-len(w)))
		}
	}
	return b.String()
}
