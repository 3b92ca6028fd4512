package webui

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
)

// jsonValues is how the forms read an element's values before config.Get:
// by walking the configuration's JSON form. It stays here as the oracle
// that config.Get gives every form the same values.
func jsonValues(k *kind, c *config.Config, name string) (map[string][]string, bool) {
	var root any
	if err := json.Unmarshal(c.JSON(), &root); err != nil {
		return nil, false
	}
	walk := func(v any, segs []string) (any, bool) {
		for _, seg := range segs {
			switch x := v.(type) {
			case map[string]any:
				var ok bool
				if v, ok = x[seg]; !ok {
					return nil, false
				}
			case []any:
				found := false
				for _, e := range x {
					if m, ok := e.(map[string]any); ok && m["name"] == seg {
						v, found = e, true
						break
					}
				}
				if !found {
					return nil, false
				}
			default:
				return nil, false
			}
		}
		return v, true
	}
	var leaf func(v any) []string
	leaf = func(v any) []string {
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
				out = append(out, leaf(e)...)
			}
			return out
		}
		return []string{fmt.Sprint(v)}
	}
	elem, ok := walk(root, strings.Split(k.elementPath(name), "."))
	if !ok {
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
		v, ok := walk(elem, strings.Split(f.Key, "."))
		if !ok && f.Default != nil {
			out[f.Key] = []string{f.Default(c, name)}
			continue
		}
		if ok {
			vals := leaf(v)
			for i, s := range vals {
				vals[i] = compactDuration(s)
			}
			out[f.Key] = vals
		}
	}
	return out, true
}

// fill sets every field of element name of k to a value its type takes,
// so that the comparison sees each field set as well as unset.
func fill(t *testing.T, k *kind, c *config.Config, name string) {
	t.Helper()
	candidates := [][]string{{"3"}, {"true"}, {"10.9.0.0/24", "10.8.0.0/16"}, {"192.0.2.7"}, {"90m"}, {"1000-1010"},
		{"aes128gcm16-prfsha256-ecp256"}, {"initiate"}, {"forward"}, {"accept"}, {"tcp"}, {"opt"}, {"static"}, {"udp"},
		{"00:0d:b9:00:00:09,192.168.1.50,printer"}, {"some text"}}
	for _, f := range k.Fields {
		path := k.elementPath(name) + "." + f.Key
		for _, v := range candidates {
			if c.Set(path, v...) == nil {
				break
			}
		}
	}
}

// TestFormValuesFromConfigGet: every form's values read through config.Get
// are the ones the JSON walk gave, for new elements (mostly unset fields,
// defaults in effect) and for elements with every field set.
func TestFormValuesFromConfigGet(t *testing.T) {
	for _, k := range kinds {
		for _, filled := range []bool{false, true} {
			c := config.Default()
			name := "probe"
			if k.Single {
				name = ""
			} else if err := c.Set(k.elementPath(name)+".name", name); err != nil {
				t.Fatalf("%s: create %s: %v", k.Name, name, err)
			}
			if filled {
				fill(t, k, c, name)
			}
			got, gotOK := k.values(c, name)
			want, wantOK := jsonValues(k, c, name)
			if gotOK != wantOK || !reflect.DeepEqual(got, want) {
				t.Errorf("%s (filled %v): values %v (%v), the JSON walk gives %v (%v)", k.Name, filled, got, gotOK, want, wantOK)
			}
			if _, ok := k.values(c, "no-such"); ok && !k.Single {
				t.Errorf("%s: values of a missing element", k.Name)
			}
		}
	}
	// The existing elements of the default configuration too (eth0, eth1).
	c := config.Default()
	for _, ifc := range c.Interfaces {
		got, _ := kindInterfaces.values(c, ifc.Name)
		want, _ := jsonValues(kindInterfaces, c, ifc.Name)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("interface %s: values %v, the JSON walk gives %v", ifc.Name, got, want)
		}
	}
}
