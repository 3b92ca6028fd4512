package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// encoded is a configuration's JSON: one document per section (Sections,
// in order) and the whole document assembled from them, byte for byte what
// json.Marshal writes for the Config. A commit encodes the candidate once
// and uses it three times: the size check, which sections changed (against
// the running configuration's, kept from its commit) and the stored
// document.
type encoded struct {
	sections [][]byte
	doc      []byte
}

var configFields = func() (fields []struct {
	name      string
	omitEmpty bool
}) {
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name != string(Sections[i]) {
			panic(fmt.Sprintf("config: field %d of Config is %q, Sections says %q", i, name, Sections[i]))
		}
		fields = append(fields, struct {
			name      string
			omitEmpty bool
		}{name, strings.Contains(","+opts+",", ",omitempty,")})
	}
	return fields
}()

func encodeConfig(c *Config) (encoded, error) {
	var e encoded
	v := reflect.ValueOf(c).Elem()
	var doc bytes.Buffer
	doc.WriteByte('{')
	first := true
	for i, f := range configFields {
		fv := v.Field(i)
		// Through a pointer, as json.Marshal(c) reaches the field.
		js, err := json.Marshal(fv.Addr().Interface())
		if err != nil {
			return e, fmt.Errorf("encode the configuration's %s: %w", f.name, err)
		}
		e.sections = append(e.sections, js)
		if f.omitEmpty && fv.Kind() == reflect.Slice && fv.Len() == 0 {
			continue
		}
		if !first {
			doc.WriteByte(',')
		}
		first = false
		doc.WriteString(`"` + f.name + `":`)
		doc.Write(js)
	}
	doc.WriteByte('}')
	e.doc = doc.Bytes()
	return e, nil
}

// changedSections lists the sections whose JSON differs between a and b.
func changedSections(a, b encoded) []Section {
	var out []Section
	for i := range Sections {
		if !bytes.Equal(a.sections[i], b.sections[i]) {
			out = append(out, Sections[i])
		}
	}
	return out
}
